#include "sketchd/kafka/client.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <utility>

#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {
namespace {

// librdkafka logs with syslog levels (0 emergency … 7 debug).
spdlog::level::level_enum to_spdlog_level(int syslog_level) noexcept {
  if (syslog_level <= 2) return spdlog::level::critical;
  if (syslog_level == 3) return spdlog::level::err;
  if (syslog_level == 4) return spdlog::level::warn;
  if (syslog_level <= 6) return spdlog::level::info;
  return spdlog::level::debug;
}

// KIND is librdkafka's facility and the client, as "FAIL (consumer)": in the JSON log,
// fields of their own.
void write_line(int level, std::string_view kind, std::string_view text, std::string_view note) {
  if (const auto logger = spdlog::get("kafka")) {
    const std::size_t open = kind.find(" (");
    nlohmann::ordered_json fields{{"facility", kind.substr(0, open)}};  // before "client", as ever
    if (open != std::string_view::npos && kind.ends_with(')'))
      fields["client"] = kind.substr(open + 2, kind.size() - open - 3);
    const log_fields in_json(json::members(fields));
    logger->log(to_spdlog_level(level), "{}: {}{}", kind, text, note);
  } else {
    fmt::print(stderr, "%{}|{}| {}{}\n", level, kind, text, note);
  }
}

// The limit's key of a line: its kind, then (after a NUL, which a C string as librdkafka's
// facility cannot hold) the text up to its first ": ".
std::string line_key(std::string_view kind, std::string_view text) {
  const std::string_view about = text.substr(0, std::min(text.find(": "), text.size()));
  std::string key;
  key.reserve(kind.size() + 1 + about.size());
  key.append(kind).append(1, '\0').append(about);
  return key;
}

constexpr std::chrono::seconds kLogInterval{10};

librdkafka_log& process_log() {
  static librdkafka_log log(kLogInterval);
  return log;
}

// Called from librdkafka's threads; must not let anything escape, and calls nothing of
// librdkafka's but rd_kafka_type, which reads a field set before the handle logs.
void log_line(const rd_kafka_t* handle, int level, const char* facility, const char* text) {
  try {
    // Which client: the consumer's failures stop the input, the producer's the outputs
    // (the same broker may fail for one and not the other). Limited apart.
    const std::string kind =
        handle == nullptr
            ? std::string(facility)
            : fmt::format("{} ({})", facility,
                          rd_kafka_type(handle) == RD_KAFKA_CONSUMER ? "consumer" : "producer");
    process_log().write(level, kind, text, std::chrono::steady_clock::now());
  } catch (...) {  // NOLINT(bugprone-empty-catch): a log line is not worth a crash
  }
}

bool is_alnum(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string_view trim_right(std::string_view s) noexcept {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.remove_suffix(1);
  return s;
}

}  // namespace

void librdkafka_log::write(int level, std::string_view kind, std::string_view text,
                           std::chrono::steady_clock::time_point now) noexcept {
  try {
    std::string note;
    if (level <= 4) {  // warnings and errors; info and debug lines are asked for
      // The level goes with the text kept of a line held back (its first character): the
      // line that tells it is written at that level.
      std::string kept(1, static_cast<char>('0' + std::clamp(level, 0, 9)));
      kept.append(text);
      const auto held = limit_.admit(line_key(kind, text), now, kept);
      if (!held) return;
      if (*held > 0) {
        note = fmt::format(" ({} more such line(s) held back in the last {} s)", *held,
                           std::chrono::duration_cast<std::chrono::seconds>(interval_).count());
      }
    }
    write_line(level, kind, text, note);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a log line is not worth a crash
  }
}

void librdkafka_log::tell_held(std::chrono::steady_clock::time_point now) noexcept {
  try {
    limit_.take_overdue(now, [](const std::string& key, const log_rate_limit::held_back& held) {
      const std::string_view kind(key.data(), key.find('\0'));
      const std::string_view kept = held.last.empty() ? "4" : std::string_view(held.last);
      write_line(kept.front() - '0', kind, kept.substr(1),
                 fmt::format(" (said {} s ago and held back, the last of {} such line(s) in the "
                             "last {} s)",
                             std::chrono::duration_cast<std::chrono::seconds>(held.ago).count(),
                             held.count,
                             std::chrono::duration_cast<std::chrono::seconds>(held.over).count()));
    });
  } catch (...) {  // NOLINT(bugprone-empty-catch): a log line is not worth a crash
  }
}

void log_held_back_lines() { process_log().tell_held(std::chrono::steady_clock::now()); }

client_config::client_config() : conf_(rd_kafka_conf_new()) {
  rd_kafka_conf_set_log_cb(conf_.get(), &log_line);
}

client_config::client_config(const property_map& properties) : client_config() {
  for (const auto& [name, value] : properties) set(name, value);
}

void client_config::set(std::string_view name, std::string_view value) {
  const std::string name_z(name);
  values_.emplace_back(value);
  std::array<char, 512> errstr{};
  if (rd_kafka_conf_set(conf_.get(), name_z.c_str(), values_.back().c_str(), errstr.data(),
                        errstr.size()) != RD_KAFKA_CONF_OK) {
    throw kafka_error(fmt::format("set Kafka property \"{}\"", name), error_code::invalid_arg, {},
                      redact(trim_right(errstr.data()), values_));
  }
}

void client_config::set_own(std::string_view name, std::string_view value) {
  const std::string name_z(name);
  const std::string value_z(value);
  std::array<char, 512> errstr{};
  if (rd_kafka_conf_set(conf_.get(), name_z.c_str(), value_z.c_str(), errstr.data(),
                        errstr.size()) != RD_KAFKA_CONF_OK) {
    throw kafka_error(fmt::format("set Kafka property \"{}\"", name), error_code::invalid_arg, {},
                      trim_right(errstr.data()));
  }
}

handle_ptr client_config::create(rd_kafka_type_t type) && {
  std::array<char, 512> errstr{};
  handle_ptr handle(rd_kafka_new(type, conf_.get(), errstr.data(), errstr.size()));
  if (!handle) {
    std::string reason = redact(trim_right(errstr.data()), values_);
    // A SASL protocol without sasl.mechanisms is Kerberos to librdkafka, whose refusal
    // names a Kerberos property: say why, for the many who meant a user and a password.
    std::array<char, 64> mechanism{};
    std::size_t size = mechanism.size();
    if (reason.find("sasl.kerberos") != std::string::npos &&
        rd_kafka_conf_get(conf_.get(), "sasl.mechanisms", mechanism.data(), &size) ==
            RD_KAFKA_CONF_OK &&
        std::string_view(mechanism.data()) == "GSSAPI") {
      reason +=
          "; sasl.mechanisms is GSSAPI (Kerberos, librdkafka's default), which needs "
          "sasl.kerberos.keytab or sasl.kerberos.kinit.cmd: for a user name and password, set "
          "sasl.mechanisms to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (and sasl.username, "
          "sasl.password)";
    }
    throw kafka_error(type == RD_KAFKA_PRODUCER ? "create Kafka producer" : "create Kafka consumer",
                      error_code::invalid_arg, {}, reason);
  }
  static_cast<void>(conf_.release());  // rd_kafka_new() owns it now
  return handle;
}

rd_kafka_resp_err_t query_watermarks(rd_kafka_t* rk, const char* topic, std::int32_t partition,
                                     std::int64_t* low, std::int64_t* high, int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  const auto ask = [&](std::int64_t which, std::int64_t* out) {
    // Rounded up: librdkafka's own deadline is then never before the caller's.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
            .count();
    topic_partition_list_ptr list(rd_kafka_topic_partition_list_new(1));
    // ListOffsets' "timestamps" for the first offset and the next one.
    rd_kafka_topic_partition_list_add(list.get(), topic, partition)->offset = which;
    const rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(
        rk, list.get(), static_cast<int>(std::max<std::int64_t>(left, 1)));
    if (err) return err;
    if (list->elems[0].err) return list->elems[0].err;
    *out = list->elems[0].offset;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  };
  std::int64_t first = -1;
  std::int64_t next = -1;
  if (const rd_kafka_resp_err_t err = ask(RD_KAFKA_OFFSET_BEGINNING, &first)) return err;
  if (const rd_kafka_resp_err_t err = ask(RD_KAFKA_OFFSET_END, &next)) return err;
  if (next < 0) return RD_KAFKA_RESP_ERR__FAIL;
  *low = first < 0 ? next : first;  // as librdkafka: an empty log's first offset is its end
  *high = next;
  return RD_KAFKA_RESP_ERR_NO_ERROR;
}

std::optional<std::string> client_config::refusal(rd_kafka_type_t type) && {
  rd_kafka_conf_set_log_cb(conf_.get(), [](const rd_kafka_t*, int, const char*, const char*) {});
  std::array<char, 512> errstr{};
  rd_kafka_t* handle = rd_kafka_new(type, conf_.get(), errstr.data(), errstr.size());
  if (handle == nullptr) return redact(trim_right(errstr.data()), values_);
  static_cast<void>(conf_.release());  // rd_kafka_new() owns it now
  // A consumer that never subscribed has nothing to close.
  rd_kafka_destroy_flags(handle, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  return std::nullopt;
}

property_map without_security(const property_map& properties) {
  property_map out;
  for (const auto& [name, value] : properties) {
    const std::string_view n(name);
    if (n == "security.protocol" || n.starts_with("ssl.") || n.starts_with("ssl_") ||
        n.starts_with("sasl.") || n.starts_with("enable.ssl.") || n.starts_with("enable.sasl.")) {
      continue;
    }
    out.emplace(name, value);
  }
  return out;
}

void throw_if_error(rd_kafka_resp_err_t err, std::string_view operation, error_context context) {
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw kafka_error(operation, to_error_code(err), std::move(context));
}

void throw_if_error(rd_kafka_error_t* error, std::string_view operation, error_context context) {
  if (error == nullptr) return;
  const error_ptr owned(error);
  throw kafka_error(operation, to_error_code(rd_kafka_error_code(error)), std::move(context),
                    rd_kafka_error_string(error));
}

std::string redact(std::string_view text, const std::vector<std::string>& secrets) {
  std::vector<std::string_view> sorted(secrets.begin(), secrets.end());
  std::sort(sorted.begin(), sorted.end(),
            [](std::string_view a, std::string_view b) { return a.size() > b.size(); });
  std::string out(text);
  for (const std::string_view secret : sorted) {
    if (secret.empty()) continue;
    for (std::size_t at = out.find(secret); at != std::string::npos; at = out.find(secret, at)) {
      const bool glued_before = at > 0 && is_alnum(out[at - 1]) && is_alnum(secret.front());
      const std::size_t end = at + secret.size();
      const bool glued_after = end < out.size() && is_alnum(out[end]) && is_alnum(secret.back());
      if (glued_before || glued_after) {
        ++at;
        continue;
      }
      constexpr std::string_view kRedacted = "<redacted>";
      out.replace(at, secret.size(), kRedacted);
      at += kRedacted.size();
    }
  }
  return out;
}

bool find_native_header(const void* context, std::string_view name, std::string_view* out) {
  auto* m = static_cast<rd_kafka_message_t*>(const_cast<void*>(context));
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR || headers == nullptr)
    return false;
  const char* header = nullptr;
  const void* value = nullptr;
  std::size_t size = 0;
  for (std::size_t i = 0;
       rd_kafka_header_get_all(headers, i, &header, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
       ++i) {
    if (name != header) continue;
    *out = value ? std::string_view(static_cast<const char*>(value), size) : std::string_view();
    return true;
  }
  return false;
}

std::vector<std::uint32_t> partition_counts(rd_kafka_t* rk, const std::vector<std::string>& topics,
                                            std::chrono::milliseconds timeout_each) {
  std::vector<std::uint32_t> out(topics.size(), 0);
  for (std::size_t i = 0; i < topics.size(); ++i) {
    const std::unique_ptr<rd_kafka_topic_t, void (*)(rd_kafka_topic_t*)> topic(
        rd_kafka_topic_new(rk, topics[i].c_str(), nullptr), rd_kafka_topic_destroy);
    if (!topic) continue;
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(rk, 0, topic.get(), &md, static_cast<int>(timeout_each.count())) !=
        RD_KAFKA_RESP_ERR_NO_ERROR)
      continue;
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
      out[i] = static_cast<std::uint32_t>(std::max(md->topics[0].partition_cnt, 0));
    rd_kafka_metadata_destroy(md);
  }
  return out;
}

}  // namespace sketchd::kafka
