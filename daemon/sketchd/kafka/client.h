// Small RAII helpers around librdkafka for the code inside kafka/: owning pointers for
// its objects, a configuration built from the user's properties, and the conversion of
// librdkafka's error codes into `kafka_error` (sketchd/kafka/error.h).
//
// Only kafka/ includes this header; the rest of the daemon sees `kafka_error`.
//
// Property values may be secrets (sasl.password, ssl.key.password…): nothing here puts a
// value into an exception message or a log line. librdkafka's own error strings sometimes
// quote the value; such strings are cleaned before they are used.
//
// librdkafka's log lines go to the spdlog logger named "kafka" when one is registered,
// and to stderr otherwise (librdkafka_log).
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/error.h"
#include "sketchd/kafka/properties.h"
#include "sketchd/pipeline/extractor.h"
#include "sketchd/util/rate_limit.h"

namespace sketchd::kafka {

struct conf_deleter {
  void operator()(rd_kafka_conf_t* conf) const noexcept { rd_kafka_conf_destroy(conf); }
};
// Destroying a consumer handle without rd_kafka_consumer_close() first leaves the group
// only when the session times out: close consumers before they are destroyed.
struct handle_deleter {
  void operator()(rd_kafka_t* handle) const noexcept { rd_kafka_destroy(handle); }
};
struct topic_partition_list_deleter {
  void operator()(rd_kafka_topic_partition_list_t* list) const noexcept {
    rd_kafka_topic_partition_list_destroy(list);
  }
};
struct message_deleter {
  void operator()(rd_kafka_message_t* message) const noexcept { rd_kafka_message_destroy(message); }
};

struct queue_deleter {
  void operator()(rd_kafka_queue_t* queue) const noexcept { rd_kafka_queue_destroy(queue); }
};
struct event_deleter {
  void operator()(rd_kafka_event_t* event) const noexcept { rd_kafka_event_destroy(event); }
};
struct error_deleter {
  void operator()(rd_kafka_error_t* error) const noexcept { rd_kafka_error_destroy(error); }
};

using conf_ptr = std::unique_ptr<rd_kafka_conf_t, conf_deleter>;
using handle_ptr = std::unique_ptr<rd_kafka_t, handle_deleter>;
using topic_partition_list_ptr =
    std::unique_ptr<rd_kafka_topic_partition_list_t, topic_partition_list_deleter>;
using message_ptr = std::unique_ptr<rd_kafka_message_t, message_deleter>;
using queue_ptr = std::unique_ptr<rd_kafka_queue_t, queue_deleter>;
using event_ptr = std::unique_ptr<rd_kafka_event_t, event_deleter>;
using error_ptr = std::unique_ptr<rd_kafka_error_t, error_deleter>;

// librdkafka properties by name, as the configuration passes them.
using property_map = std::map<std::string, std::string>;

// The configuration of one librdkafka client, and the values that must stay out of its
// error messages. Not thread-safe; one owner.
class client_config {
 public:
  // librdkafka's defaults, with log lines routed as the file comment says.
  client_config();
  // The defaults, then every property of `properties` in order. Throws kafka_error
  // (code invalid_arg) naming the first property librdkafka rejects, never its value.
  explicit client_config(const property_map& properties);

  // Sets one property. Throws kafka_error (code invalid_arg) naming the property when
  // librdkafka does not know it or rejects the value; the value is not in the message.
  void set(std::string_view name, std::string_view value);
  // The same for one of sketchd's own settings: its value is no secret and is not removed
  // from messages (an "is true" in librdkafka's reason stays readable).
  void set_own(std::string_view name, std::string_view value);

  // The configuration, to install callbacks (rd_kafka_conf_set_dr_msg_cb, …) or an opaque.
  // Valid until create() is called.
  [[nodiscard]] rd_kafka_conf_t* get() const noexcept { return conf_.get(); }

  // Creates the client; librdkafka takes the configuration over, so this object is spent.
  // Throws kafka_error (code invalid_arg) with librdkafka's reason, property values
  // removed from it.
  [[nodiscard]] handle_ptr create(rd_kafka_type_t type) &&;

  // Why librdkafka refuses to create a client of `type` with this configuration as a whole
  // (its checks across properties, such as `acks` against `enable.idempotence`), property
  // values removed from the reason; or nothing when it accepts it. Creates the client with
  // its log lines dropped and destroys it at once: call it on a configuration without
  // bootstrap.servers, so that it connects nowhere. This object is spent.
  [[nodiscard]] std::optional<std::string> refusal(rd_kafka_type_t type) &&;

 private:
  conf_ptr conf_;
  std::vector<std::string> values_;  // every value set so far: hidden from messages
};

// `properties` without the security settings (security.protocol, ssl.*, sasl.*): those
// read this machine's files (certificates, keytabs) or call servers (OAUTHBEARER/OIDC
// token endpoints, kinit) when a client is created, which a check of the configuration
// must not depend on or do.
[[nodiscard]] property_map without_security(const property_map& properties);

// The partition count of each of `topics` (counts[i] of topics[i]) from the cluster's
// metadata, one request per topic within `timeout_each`: 0 for a topic the metadata does not
// list, or when it does not answer in time. Never throws.
[[nodiscard]] std::vector<std::uint32_t> partition_counts(rd_kafka_t* rk,
                                                          const std::vector<std::string>& topics,
                                                          std::chrono::milliseconds timeout_each);

// The daemon's error code for librdkafka's: the same number.
[[nodiscard]] constexpr error_code to_error_code(rd_kafka_resp_err_t err) noexcept {
  return static_cast<error_code>(err);
}
[[nodiscard]] constexpr rd_kafka_resp_err_t to_rd_kafka(error_code code) noexcept {
  return static_cast<rd_kafka_resp_err_t>(code);
}

// Throws kafka_error(operation, err, context) unless err is RD_KAFKA_RESP_ERR_NO_ERROR.
void throw_if_error(rd_kafka_resp_err_t err, std::string_view operation,
                    error_context context = {});

// Throws kafka_error for an rd_kafka_error_t (as transactional and some consumer calls
// return), taking ownership of it; does nothing when `error` is null.
void throw_if_error(rd_kafka_error_t* error, std::string_view operation,
                    error_context context = {});

// The first offset (`low`) and the next offset to be written (`high`) of a partition, as
// rd_kafka_query_watermark_offsets() gives them, but within `timeout_ms`: that call, in
// librdkafka 2.0, retries without end while the partition's leader is down and its
// connection keeps changing state; this one asks ListOffsets for the earliest and the latest
// offsets through rd_kafka_offsets_for_times(), which keeps to its timeout (the two requests
// share it). An error of the request or of the partition is returned as it is.
[[nodiscard]] rd_kafka_resp_err_t query_watermarks(rd_kafka_t* rk, const char* topic,
                                                   std::int32_t partition, std::int64_t* low,
                                                   std::int64_t* high, int timeout_ms);

// librdkafka's log lines, written to the spdlog logger named "kafka" (stderr when none is
// registered); its warnings and errors at most one line per facility and broker every
// `interval`: a broker that fails each connection attempt in one of two ways in turn (a
// SASL or TLS mismatch) defeats librdkafka's own suppression of identical lines, and would
// log every attempt. The key is the facility and the text up to its first ": " (the
// broker's name, in librdkafka's lines about a broker). The lines held back are told by the
// next line shown, or, should none come (the broker recovered), by tell_held() once the
// interval has passed. Thread-safe.
class librdkafka_log {
 public:
  explicit librdkafka_log(std::chrono::steady_clock::duration interval)
      : interval_(interval), limit_(interval) {}

  // Writes librdkafka's line `text` of syslog `level` (0 emergency … 7 debug) from `kind`,
  // its facility and client ("FAIL (consumer)"), unless the limit holds it back. Never
  // throws.
  void write(int level, std::string_view kind, std::string_view text,
             std::chrono::steady_clock::time_point now) noexcept;

  // Writes the last line held back of each key whose interval has passed, with how many
  // were held back. Never throws.
  void tell_held(std::chrono::steady_clock::time_point now) noexcept;

 private:
  std::chrono::steady_clock::duration interval_;
  keyed_rate_limit limit_;
};

// message_view::find_header for a native message (`context`): the first header `name`, of
// any length.
bool find_native_header(const void* context, std::string_view name, std::string_view* out);

// The extractor's view of a consumed message: its key, its value and its headers, valid
// while the message lives. Inline: the source makes one per message. No allocation.
[[nodiscard]] inline message_view view_of(const rd_kafka_message_t* m) noexcept {
  message_view v;
  v.has_key = m->key != nullptr;
  v.key = std::string_view(static_cast<const char*>(m->key), m->key ? m->key_len : 0);
  v.has_value = m->payload != nullptr;
  v.value = std::string_view(static_cast<const char*>(m->payload), m->payload ? m->len : 0);
  v.find_header = &find_native_header;
  v.header_context = m;
  return v;
}

// Tells what the log lines of every librdkafka client of the process hold back
// (librdkafka_log::tell_held). Cheap when nothing is held; the consumer's poller calls it.
void log_held_back_lines();

// Errors that librdkafka reports twice: a broker connection that failed (cannot resolve,
// refused, dropped, TLS or SASL refused) is a "FAIL" line of its own log (the "kafka"
// logger) and then an error callback with the same text. The callback need not log it.
[[nodiscard]] constexpr bool logged_by_librdkafka(int err) noexcept {
  return err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__RESOLVE ||
         err == RD_KAFKA_RESP_ERR__AUTHENTICATION || err == RD_KAFKA_RESP_ERR__SSL;
}

}  // namespace sketchd::kafka
