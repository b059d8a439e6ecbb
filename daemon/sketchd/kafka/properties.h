// librdkafka's properties as the configuration checks them, without librdkafka's types:
// one property at a time, as librdkafka reads it, and the removal of secret values from
// its messages. What sketchd allows on top of librdkafka is kafka/property_policy.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sketchd::kafka {

// What librdkafka makes of one property, set on a configuration of its own that creates
// no client and reads no file.
struct property_check {
  enum class outcome {
    accepted,  // read_back holds the value as librdkafka reads it ("true" for "t" or "1")
    unknown,   // librdkafka has no property of this name
    invalid,   // librdkafka refuses the value; reason is its message, which may quote it
  };
  outcome result = outcome::accepted;
  std::string reason;
  // At most 63 bytes; empty when longer (the settings sketchd judges are short).
  std::string read_back;
};
// Thread-safe.
[[nodiscard]] property_check check_property(const std::string& name, const std::string& value);

// The version of librdkafka this build runs with ("2.0.2").
[[nodiscard]] std::string_view librdkafka_version() noexcept;

// `text` with the occurrences of each non-empty string of `secrets` replaced by
// "<redacted>", longest first so that a value containing another is hidden whole. An
// occurrence is kept only when it is part of a longer run of letters and digits (librdkafka
// quotes or spaces the values it echoes, and "1" must not spoil "1000..1000000000").
// Thread-safe.
[[nodiscard]] std::string redact(std::string_view text, const std::vector<std::string>& secrets);

}  // namespace sketchd::kafka
