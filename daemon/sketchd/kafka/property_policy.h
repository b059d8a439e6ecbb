// Which librdkafka properties sketchd lets a configuration set, and how their values are
// shown: the properties sketchd sets itself, the settings librdkafka accepts that would
// quietly undo what sketchd relies on, and the properties that may hold a secret.
// librdkafka's own reading of a property is kafka/properties.h; this is sketchd's policy on
// top of it, without librdkafka's types.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sketchd::kafka {

// Whether a librdkafka property may hold a secret: its name contains "password",
// "secret", "sasl.jaas", "ssl.key", "ssl_key", "sasl.oauthbearer.config" or "token"
// (case-insensitive): every property librdkafka itself treats as sensitive, and more.
[[nodiscard]] bool is_secret_property(std::string_view key) noexcept;

// The value to log for a property: "<redacted>" for secrets, the value otherwise.
[[nodiscard]] std::string redact_property(std::string_view key, std::string_view value);

// Why a property cannot be set in kafka.properties whatever its value (sketchd sets it
// from its own keys, or relies on it being left alone), as the message after the
// property's path; nullopt for every other property.
[[nodiscard]] std::optional<std::string_view> reserved_property(std::string_view key) noexcept;

// What sketchd makes of one property of kafka.properties: librdkafka's check of its name
// and value (check_property), then sketchd's refusals of values librdkafka accepts.
struct property_verdict {
  enum class outcome {
    accepted,
    unknown,  // librdkafka has no property of this name; reason says so
    refused,  // librdkafka or sketchd refuses the value; reason says why
  };
  outcome result = outcome::accepted;
  std::string reason;  // the message after the property's path; empty when accepted
};

// Judges `key` = `value` (a property that reserved_property lets through). librdkafka's
// message shows the value only when it is written in the file as it is (`substituted`
// false) and is not a secret's: one from the environment may be a secret put in the wrong
// key. Thread-safe.
[[nodiscard]] property_verdict judge_property(const std::string& key, const std::string& value,
                                              bool substituted);

}  // namespace sketchd::kafka
