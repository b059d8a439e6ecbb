// The kafka section: the brokers or the embedded cluster, the group, and the librdkafka
// properties, judged one by one (kafka/property_policy.h) and, once the pipelines are
// known, together for each client sketchd creates.
#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <system_error>
#include <utility>

#include "sketchd/config/sections.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/property_policy.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/kafka/source.h"

namespace sketchd::config_detail {
namespace {

using std::chrono::milliseconds;

// What is wrong with the host and port of one broker entry (`shown` as the file has it,
// `entry` without its protocol), or nullopt. In brackets an IPv6 address; digits and dots
// an IPv4 address (as in http.listen); anything else a host name.
std::optional<std::string> broker_address_problem(std::string_view entry,
                                                  const std::string& shown) {
  std::string_view host = entry;
  std::string_view port;
  if (entry.front() == '[') {
    const std::size_t close = entry.find(']');
    if (close == std::string_view::npos)
      return fmt::format("\"{}\": an IPv6 address needs its closing \"]\"", shown);
    host = entry.substr(1, close - 1);
    const std::string_view rest = entry.substr(close + 1);
    if (!rest.empty() && rest.front() != ':')
      return fmt::format("\"{}\": expected \":PORT\" after \"]\"", shown);
    if (!rest.empty()) port = rest.substr(1);
  } else if (const std::size_t colon = entry.rfind(':'); colon != std::string_view::npos) {
    host = entry.substr(0, colon);
    port = entry.substr(colon + 1);
    if (port.empty()) return fmt::format("\"{}\": no port after \":\"", shown);
  }
  const bool bracketed = entry.front() == '[';
  const std::string host_z(host);
  in6_addr address{};
  if (bracketed) {
    if (::inet_pton(AF_INET6, host_z.c_str(), &address) != 1) {
      return fmt::format("\"{}\": not an IPv6 address{}", shown,
                         host.find('%') != std::string_view::npos
                             ? " (a zone such as %eth0 is not supported)"
                             : "");
    }
  } else if (!host.empty() && std::all_of(host.begin(), host.end(), [](char ch) {
               return ch == '.' || (ch >= '0' && ch <= '9');
             })) {
    if (::inet_pton(AF_INET, host_z.c_str(), &address) != 1)
      return fmt::format("\"{}\": not an IPv4 address", shown);
  } else if (host.empty() || !std::all_of(host.begin(), host.end(), [](char ch) {
               return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ||
                      ch == '_';
             })) {
    const bool ipv6 = host.find(':') != std::string_view::npos;
    return fmt::format("\"{}\": not a host name or address{}", shown,
                       ipv6 ? " (an IPv6 address goes in brackets: [::1]:9092)" : "");
  }
  if (!port.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
      return fmt::format("\"{}\": the port must be a number in [1, 65535]", shown);
    }
  }
  return std::nullopt;
}

// What is wrong with one broker entry of kafka.brokers, or nullopt.
std::optional<std::string> broker_entry_problem(std::string_view entry) {
  while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
  while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
  const std::string shown(entry);
  if (entry.empty()) return "an empty entry (HOST[:PORT],HOST[:PORT]…)";
  if (const std::size_t scheme = entry.find("://"); scheme != std::string_view::npos) {
    std::string protocol(entry.substr(0, scheme));
    for (char& ch : protocol) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (protocol != "PLAINTEXT" && protocol != "SSL" && protocol != "SASL_PLAINTEXT" &&
        protocol != "SASL_SSL") {
      return fmt::format("\"{}\": unknown protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)",
                         shown);
    }
    entry.remove_prefix(scheme + 3);
    if (entry.empty()) return fmt::format("\"{}\": no host after the protocol", shown);
  }
  return broker_address_problem(entry, shown);
}

// kafka.brokers or kafka.embedded (one of the two), into `k`.
void read_brokers(checker& c, const mapping& m, kafka_config& k) {
  const auto brokers = m.get("brokers");
  bool brokers_ok = true;
  if (brokers) {
    auto value = c.text(*brokers);
    brokers_ok = value.has_value();
    if (value) k.brokers = std::move(*value);
  }
  if (const field* e = m.find("embedded")) {
    const mapping em(c, *e, {"brokers", "partitions"});
    embedded_kafka_config embedded;
    em.read("brokers", embedded.brokers, counts(c, 1, embedded_kafka_config::kMaxBrokers));
    em.read("partitions", embedded.partitions, counts(c, 1, kafka::mock_cluster::kMaxPartitions));
    if (em.valid()) k.embedded = embedded;
    if (!k.brokers.empty()) {
      c.error(e->key_mark, "kafka: give either brokers or embedded, not both");
    }
  } else if (!brokers) {
    c.error(m.mark(),
            "kafka: missing required key \"brokers\" (or \"embedded\" for an in-process cluster)");
  } else if (brokers_ok && k.brokers.empty()) {
    c.error(*brokers, "must not be empty (or give embedded for an in-process cluster)");
  } else if (brokers_ok) {
    if (const auto problem = broker_list_problem(k.brokers)) c.error(*brokers, *problem);
  }
}

// One entry of kafka.properties: its value if sketchd takes it, after reporting why not.
std::optional<std::string> read_property(checker& c, const std::string& key,
                                         const field& value_field) {
  if (const auto reserved = kafka::reserved_property(key)) {
    c.error(value_field.key_mark, fmt::format("{}: {}", value_field.path, *reserved));
    return std::nullopt;
  }
  if (value_field.node.IsNull()) {
    c.error(value_field, "needs a value");
    return std::nullopt;
  }
  auto value = c.text(value_field);
  if (!value) return std::nullopt;
  const bool substituted = value_field.node.Scalar().find("${") != std::string::npos;
  const kafka::property_verdict verdict = kafka::judge_property(key, *value, substituted);
  switch (verdict.result) {
    case kafka::property_verdict::outcome::accepted:
      return value;
    case kafka::property_verdict::outcome::unknown:
      c.error(value_field.key_mark, fmt::format("{}: {}", value_field.path, verdict.reason));
      return std::nullopt;
    case kafka::property_verdict::outcome::refused:
      c.error(value_field, verdict.reason);
      return std::nullopt;
  }
  return std::nullopt;
}

// kafka.properties (`p`), into `k` and `where`.
void read_properties(checker& c, const field& p, kafka_config& k, property_positions& where) {
  where.section = p;
  const mapping pm(c, p, {}, /*any_key=*/true);
  for (const auto& [key, value_field] : pm.entries()) {
    auto value = read_property(c, key, value_field);
    if (!value) continue;
    where.entries.emplace(key, value_field);
    k.properties.emplace(key, std::move(*value));
  }
  where.all_accepted = pm.valid() && where.entries.size() == pm.entries().size();
}

}  // namespace

// librdkafka takes anything and retries forever.
std::optional<std::string> broker_list_problem(std::string_view list) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = list.find(',', start);
    const std::string_view entry = list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (auto problem = broker_entry_problem(entry)) return problem;
    if (comma == std::string_view::npos) return std::nullopt;
    start = comma + 1;
  }
}

kafka_config read_kafka(checker& c, const field& f, property_positions& where) {
  kafka_config k;
  const mapping m(c, f,
                  {"brokers", "embedded", "group_id", "properties", "batch_size", "poll_timeout"});
  if (!m.valid()) return k;
  read_brokers(c, m, k);
  if (const auto g = m.get("group_id")) {
    if (auto value = c.text(*g); value && !value->empty()) k.group_id = std::move(*value);
  }
  if (const field* p = m.find("properties")) read_properties(c, *p, k, where);
  m.read("batch_size", k.batch_size, counts(c, 1, 100000));
  // At most 1 s: the run loop notices a stop, and writes the summary lines and snapshots,
  // between two polls.
  m.read("poll_timeout", k.poll_timeout, durations(c, milliseconds(1), std::chrono::seconds(1)));
  return k;
}

// What would otherwise only fail when `run` creates the clients. Reported at the first
// property the reason names (librdkafka quotes names in backticks), else at
// kafka.properties.
void check_kafka_properties(checker& c, const property_positions& where, const kafka_config& k,
                            bool produces) {
  if (!where.section || !where.all_accepted || k.properties.empty()) return;
  const auto report = [&](std::string_view client, const std::string& reason) {
    const std::string message =
        fmt::format("librdkafka refuses these properties for {}: {}", client, reason);
    for (std::size_t open = reason.find('`'); open != std::string::npos;) {
      const std::size_t close = reason.find('`', open + 1);
      if (close == std::string::npos) break;
      const auto named =
          where.entries.find(std::string_view(reason).substr(open + 1, close - open - 1));
      if (named != where.entries.end()) {
        c.error(named->second.key_mark, fmt::format("{}: {}", named->second.path, message));
        return;
      }
      open = reason.find('`', close + 1);
    }
    c.error(where.section->key_mark, fmt::format("{}: {}", where.section->path, message));
  };
  if (auto reason = kafka::consumer_refusal(k.properties)) report("the consumer", *reason);
  if (!produces) return;
  if (auto reason = kafka::producer_refusal(k.properties)) {
    report("the producer, which is idempotent (forwarding loses and repeats nothing)", *reason);
  }
}

}  // namespace sketchd::config_detail
