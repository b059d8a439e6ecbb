#include "sketchd/kafka/property_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "sketchd/kafka/properties.h"

namespace sketchd::kafka {
namespace {

// A setting librdkafka accepts that sketchd refuses: `key` read back by librdkafka as
// `value`.
struct refusal {
  std::string_view key;
  std::string_view value;  // as librdkafka reads it back
  std::string_view why;
};

// Settings librdkafka accepts that would quietly undo what sketchd relies on, judged by
// librdkafka's own reading of the value.
// (The enable.idempotence and delivery.report.only.error ones are the forwarding
// producer's: an input offset is stored once its outputs are acknowledged, each once.)
constexpr refusal kRefusals[] = {
    {"auto.commit.interval.ms", "0",
     "must be above 0: 0 turns off the background commits of the offsets sketchd has "
     "stored (a restart would read everything since the start again)"},
    {"statistics.interval.ms", "0",
     "must be above 0: librdkafka's statistics feed sketchd_kafka_consumer_lag_messages "
     "and sketchd_kafka_brokers_up, and with them the alerts SketchdKafkaUnreachable and "
     "SketchdConsumerLagGrowing"},
    {"enable.idempotence", "false",
     "must stay true: sketchd's producer is idempotent, so that a delivery retried after "
     "a lost acknowledgement is not written twice to an output topic"},
    {"delivery.report.only.error", "true",
     "must stay false: sketchd stores an input offset once every output of its message "
     "is acknowledged, which takes a report of every delivery"},
    {"auto.offset.reset", "error",
     "error is not supported: a partition without a committed offset would stop being "
     "consumed, with nothing to show it; use earliest (sketchd's default) or latest"}};

// Why sketchd refuses `key` as librdkafka reads its value back, or nullopt.
std::optional<std::string_view> refused_setting(std::string_view key, std::string_view read_back) {
  // Without it, offsets are committed only at a rebalance and at exit: a crash would
  // read everything since the start again. Judged by librdkafka's own reading of the
  // value (it takes true, t and 1 in any case).
  if (key == "enable.auto.commit" && read_back != "true") {
    return "must stay true: sketchd commits the offsets it has stored in the background "
           "(every auto.commit.interval.ms)";
  }
  for (const refusal& r : kRefusals) {
    if (key == r.key && read_back == r.value) return r.why;
  }
  return std::nullopt;
}

}  // namespace

bool is_secret_property(std::string_view key) noexcept {
  const auto lower = [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  for (std::string_view marker : {"password", "secret", "sasl.jaas", "ssl.key", "ssl_key",
                                  "sasl.oauthbearer.config", "token"}) {
    const auto it = std::search(key.begin(), key.end(), marker.begin(), marker.end(),
                                [&](char a, char b) { return lower(a) == b; });
    if (it != key.end()) return true;
  }
  return false;
}

std::string redact_property(std::string_view key, std::string_view value) {
  return is_secret_property(key) ? std::string("<redacted>") : std::string(value);
}

std::optional<std::string_view> reserved_property(std::string_view key) noexcept {
  // metadata.broker.list is librdkafka's other name of bootstrap.servers.
  if (key == "bootstrap.servers" || key == "metadata.broker.list") {
    return "set kafka.brokers instead";
  }
  if (key == "group.id") return "set kafka.group_id instead";
  if (key == "enable.auto.offset.store") {
    return "sketchd stores offsets itself, once a message's outputs are delivered";
  }
  if (key == "transactional.id") {
    return "sketchd's producer is idempotent, not transactional (a transactional producer "
           "refuses every message sent outside a transaction)";
  }
  return std::nullopt;
}

property_verdict judge_property(const std::string& key, const std::string& value,
                                bool substituted) {
  using outcome = property_verdict::outcome;
  // librdkafka checks the name and the value now, so that a bad property is reported with
  // its line, not when the clients are created.
  const property_check check = check_property(key, value);
  switch (check.result) {
    case property_check::outcome::accepted:
      break;
    case property_check::outcome::unknown:
      return {outcome::unknown,
              fmt::format("librdkafka {} has no such property", librdkafka_version())};
    case property_check::outcome::invalid:
      // Java's "none" is librdkafka's "error", which sketchd refuses (kRefusals).
      if (key == "auto.offset.reset") {
        return {outcome::refused,
                fmt::format("invalid value \"{}\": librdkafka takes earliest (smallest, "
                            "beginning) or latest (largest, end); Java's none is librdkafka's "
                            "error, which sketchd does not support",
                            value)};
      }
      return {outcome::refused, is_secret_property(key) || substituted
                                    ? redact(check.reason, {value})
                                    : check.reason};
  }
  if (const auto why = refused_setting(key, check.read_back)) {
    return {outcome::refused, std::string(*why)};
  }
  return {};
}

}  // namespace sketchd::kafka
