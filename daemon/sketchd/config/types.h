// The daemon's configuration as plain types: the sections with their defaults and the
// limits the loader (config.h) holds them to. Plain values: copy them freely, read them
// from any thread.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sketchd {

// librdkafka's mock cluster, in-process on loopback, instead of external brokers.
struct embedded_kafka_config {
  // The most brokers: a demo's or a test's cluster, on purpose below what the mock cluster
  // takes (kafka::mock_cluster::kMaxBrokers). `sketchd mock-kafka --brokers` has the same.
  static constexpr int kMaxBrokers = 8;
  int brokers = 1;     // 1..kMaxBrokers
  int partitions = 4;  // 1..kafka::mock_cluster::kMaxPartitions, of each topic the daemon
                       // needs (created at start)
};

// The most outputs (dedup.output_topic, dedup.duplicates_topic, heavy_hitters.alerts_topic)
// over all pipelines: the processor keeps an output's index in the top 8 bits of each
// delivery's tag.
inline constexpr std::size_t kMaxOutputs = 256;

struct kafka_config {
  std::string brokers;  // bootstrap servers "HOST:PORT[,…]"; empty when embedded
  std::optional<embedded_kafka_config> embedded;
  std::string group_id = "sketchd";
  // librdkafka properties, passed as they are. Values may be secrets: log them only
  // through kafka::redact_property() (kafka/property_policy.h).
  std::map<std::string, std::string> properties;
  std::uint32_t batch_size = 5000;              // 1..100000 messages
  std::chrono::milliseconds poll_timeout{100};  // 1ms..1s
};

// Where a value is in the configuration file, 1-based (0: unknown), for what is found
// wrong with it later, when the file is checked against the disk (check-config).
struct source_position {
  int line = 0;
  int column = 0;
};

// http.tls: HTTPS, as Prometheus' web configuration has it (exporter-toolkit's tls_server_config):
// a certificate chain and its key in PEM files, and optionally the CAs whose client
// certificates are required (mutual TLS). The paths are as written (relative ones from the
// working directory); the files are read when the configuration is, and again when they
// change.
struct tls_config {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // empty: no client certificate asked for
};

struct http_config {
  std::string listen = "127.0.0.1:9464";  // as written
  std::string host = "127.0.0.1";         // without the brackets of an IPv6 address
  std::uint16_t port = 9464;              // 0: any free port
  // Basic authentication, as Prometheus' web configuration has it: user name → bcrypt hash
  // of the password. Empty: every endpoint is open.
  std::map<std::string, std::string> basic_auth_users;
  std::optional<tls_config> tls;  // none: plain HTTP
  // Connections open at once; beyond them the longest-waiting one is closed, or, when
  // every one is being served, the new one refused at once.
  std::size_t max_connections = 512;
};

// How snapshots and shard records write the dedup windows' bit arrays: Golomb-coded where
// that is smaller (auto: the empty and sparse generations, the compressed Bloom filter of
// seed 002, sketch/serialize.h), or plain, which builds before the coded format read.
enum class state_compression { automatic, none };

struct state_config {
  std::optional<std::string> dir;  // no snapshots when unset
  source_position dir_at;
  std::chrono::milliseconds snapshot_interval{std::chrono::seconds(30)};  // 1ms..1d
  // A snapshot of another format or other parameters is skipped (and logged) instead of
  // stopping the daemon.
  bool discard_incompatible_snapshot = false;
  // A partition assigned without a snapshot's position has its windows filled from its log:
  // the messages since the longest window of the pipelines reading it, up to the group's
  // committed offset, go into the windows without being forwarded.
  bool fill_from_log = true;
  // The compacted Kafka topic of per-partition shard snapshots (docs/STATE-TOPIC.md); none
  // when unset. With it, every pipeline's scope is partition.
  std::optional<std::string> topic;
  // The partitions the state topic is created with when missing; 0: as many as the input
  // topic with the most partitions.
  int topic_partitions = 0;
  state_compression compression = state_compression::automatic;
};

enum class item_source { key, value, json, header };

struct item_config {
  item_source from = item_source::key;
  std::string path;    // JSON pointer (RFC 6901), from: json only; "" is the whole document
  std::string header;  // header name, from: header only (YAML key `name`)
};

// Which clock slides the windows: the message timestamp (event) or the daemon's (wall).
enum class clock_kind { event, wall };

// What the pipeline's windows are kept over: one rolling Bloom filter and one rolling
// Count-Min sketch for all the partitions this instance reads (instance), or one of each per
// input partition (partition: they are sized from the topics' partition counts, dropped when
// the partition is revoked, and combined for the readers; duplicates must share a partition).
enum class state_scope { instance, partition };

// The sizes stay within the sketch library's limits: a Count-Min width ⌈e/ε⌉ of at most
// count_min_sketch::kMaxWidth, a depth ⌈ln(1/δ)⌉ of at most kMaxDepth, and
// (buckets + 1)·width·depth counters of at most kMaxCounters in the whole window.
struct heavy_hitters_config {
  std::chrono::milliseconds window{std::chrono::minutes(5)};  // 1ms per bucket..365d
  std::uint32_t buckets = 10;  // 1..1000; the window slides in steps of window / buckets
  double epsilon = 0.0001;     // [e/2^28, 1): estimate ≤ true + ε·N
  double delta = 0.001;        // [e^-32, 1): … with probability ≥ 1 − δ
  std::uint32_t top_k = 20;    // 1..1000
  double threshold = 0.01;     // φ in (0, 1], greater than epsilon
  bool conservative = true;    // conservative update
  std::optional<std::string> alerts_topic;
};

// What a pipeline's dedup generations are sized for: the least memory at `fpr` (memory), or
// the least rate whose full generations, Golomb-coded, take the bytes the memory sizing's
// arrays take (transmission: sketch::rolling_bloom::transmission_fpr).
enum class dedup_sizing { memory, transmission };

// The generations' Bloom filters (sketch::rolling_bloom) take at most
// blocked_bloom_filter::kMaxBits bits in all, which bounds capacity for a given fpr.
struct dedup_config {
  std::chrono::milliseconds window{std::chrono::hours(1)};  // 1ms per generation..365d
  std::uint64_t capacity = 0;     // distinct items expected per window, ≥ 1 (required)
  double fpr = 0.001;             // (0, 0.5): target false-positive rate over the window
  std::uint32_t generations = 4;  // 2..64
  dedup_sizing sizing = dedup_sizing::memory;
  std::optional<std::string> output_topic;
  std::optional<std::string> duplicates_topic;
};

struct pipeline_config {
  std::string name;    // unique, [A-Za-z0-9_.-]+
  source_position at;  // of its entry in pipelines
  std::vector<std::string> topics;
  item_config item;
  clock_kind clock = clock_kind::event;
  state_scope scope = state_scope::instance;
  std::uint32_t max_item_bytes = 1024;  // 1..1 MiB; longer items are an extract failure
  std::optional<heavy_hitters_config> heavy_hitters;
  std::optional<dedup_config> dedup;  // at least one of the two is set
  // Messages skipped for an extract failure other than a tombstone go here, unchanged, with
  // the sketchd-error-reason, sketchd-pipeline and provenance headers.
  std::optional<std::string> dead_letter_topic;
};

enum class generator_format { json, text };

// Synthetic Zipf-distributed events, for demos and tests.
struct generator_config {
  std::string topic;
  std::uint64_t rate = 1000;        // events per second, 1..100M
  std::uint64_t distinct = 100000;  // distinct items, 1..1G (8 bytes each in memory)
  double zipf = 1.1;                // exponent, > 0
  bool key = true;                  // the item is the message key too
  // json: {"user":{"id":"u123"},"seq":N} (item at /user/id); text: the item alone
  generator_format format = generator_format::json;
};

enum class log_level { trace, debug, info, warn, error, critical, off };
enum class log_format { text, json };

struct log_config {
  log_level level = log_level::info;
  log_format format = log_format::text;
  std::chrono::milliseconds summary_interval{std::chrono::seconds(10)};  // 0..1d; 0: none
};

struct config {
  kafka_config kafka;
  http_config http;
  state_config state;
  std::vector<pipeline_config> pipelines;  // at least one
  std::optional<generator_config> generator;
  log_config log;
};

[[nodiscard]] std::string_view to_string(item_source v) noexcept;
[[nodiscard]] std::string_view to_string(clock_kind v) noexcept;
[[nodiscard]] std::string_view to_string(state_scope v) noexcept;
[[nodiscard]] std::string_view to_string(state_compression v) noexcept;  // auto, none
[[nodiscard]] std::string_view to_string(dedup_sizing v) noexcept;       // memory, transmission
[[nodiscard]] std::string_view to_string(generator_format v) noexcept;
[[nodiscard]] std::string_view to_string(log_level v) noexcept;  // spdlog's short names
[[nodiscard]] std::string_view to_string(log_format v) noexcept;

namespace detail {
template <typename Enum>
struct enum_formatter : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(Enum v, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(sketchd::to_string(v), ctx);
  }
};
}  // namespace detail

}  // namespace sketchd

template <>
struct fmt::formatter<sketchd::item_source>
    : sketchd::detail::enum_formatter<sketchd::item_source> {};
template <>
struct fmt::formatter<sketchd::clock_kind> : sketchd::detail::enum_formatter<sketchd::clock_kind> {
};
template <>
struct fmt::formatter<sketchd::state_scope>
    : sketchd::detail::enum_formatter<sketchd::state_scope> {};
template <>
struct fmt::formatter<sketchd::state_compression>
    : sketchd::detail::enum_formatter<sketchd::state_compression> {};
template <>
struct fmt::formatter<sketchd::dedup_sizing>
    : sketchd::detail::enum_formatter<sketchd::dedup_sizing> {};
template <>
struct fmt::formatter<sketchd::generator_format>
    : sketchd::detail::enum_formatter<sketchd::generator_format> {};
template <>
struct fmt::formatter<sketchd::log_level> : sketchd::detail::enum_formatter<sketchd::log_level> {};
template <>
struct fmt::formatter<sketchd::log_format> : sketchd::detail::enum_formatter<sketchd::log_format> {
};
