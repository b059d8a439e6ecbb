// The daemon's configuration: typed sections with their defaults, and the loader that
// turns a YAML file into them.
//
// The loader reports every problem it finds, not only the first: unknown keys (with a
// "did you mean" suggestion), wrong types, missing required keys, out-of-range values,
// bad durations and counts, unset environment variables and YAML syntax errors, each as
// `FILE:LINE:COL: message` naming the full key path (`pipelines[0].dedup.fpr: …`).
// `sketchd check-config FILE` prints exactly these lines.
//
// Values:
//   - `${VAR}` and `${VAR:-default}` are replaced inside any scalar value by the
//     environment variable (the default when VAR is unset or empty); `$$` is a literal
//     `$`, and a `$` followed by anything else is kept as it is. A default is plain text
//     up to the first `}`, where `$$` is a literal `$` too; a `${` in it (nesting, as in
//     `${A:-${B}}`) is an error. An unset VAR without a default, and a malformed `${…}`,
//     are errors at the line and column of their `${`;
//   - durations are an integer and a unit: `500ms 30s 5m 1h 7d` (a bare `0` is zero);
//   - counts are whole numbers, optionally with a decimal suffix `k M G`
//     (`10M` = 10,000,000, `1.5k` = 1,500);
//   - real numbers take decimal or scientific notation (`0.001`, `1e-3`).
//
// A section given with no body (`embedded:` alone) is present with its defaults; an
// optional key given with no value, or whose value is empty after substitution (`""`, or
// `dir: "${STATE_DIR:-}"` with STATE_DIR unset or empty), keeps its default, as if it were
// left out. A required key (kafka.brokers, a pipeline's name, dedup.capacity, …) that is
// empty is an error. The entries of kafka.properties are librdkafka's, not sketchd's: an
// empty one is passed to librdkafka as it is (and one with no value is an error).
//
// The values of secret properties (is_secret_property) never appear in an error message.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sketchd {

// ---------------------------------------------------------------------------------------
// The typed configuration. Plain values: copy them freely, read them from any thread.

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
  // through redact_property().
  std::map<std::string, std::string> properties;
  std::uint32_t batch_size = 5000;              // 1..100000 messages
  std::chrono::milliseconds poll_timeout{100};  // 1ms..1s
};

struct http_config {
  std::string listen = "127.0.0.1:9464";  // as written
  std::string host = "127.0.0.1";         // without the brackets of an IPv6 address
  std::uint16_t port = 9464;              // 0: any free port
};

// Where a value is in the configuration file, 1-based (0: unknown), for what is found
// wrong with it later, when the file is checked against the disk (check-config).
struct source_position {
  int line = 0;
  int column = 0;
};

struct state_config {
  std::optional<std::string> dir;                                         // no snapshots when unset
  source_position dir_at;
  std::chrono::milliseconds snapshot_interval{std::chrono::seconds(30)};  // 1ms..1d
  // A snapshot of another format or other parameters is skipped (and logged) instead of
  // stopping the daemon.
  bool discard_incompatible_snapshot = false;
};

enum class item_source { key, value, json, header };

struct item_config {
  item_source from = item_source::key;
  std::string path;    // JSON pointer (RFC 6901), from: json only; "" is the whole document
  std::string header;  // header name, from: header only (YAML key `name`)
};

// Which clock slides the windows: the message timestamp (event) or the daemon's (wall).
enum class clock_kind { event, wall };

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

// The generations' Bloom filters (sketch::rolling_bloom) take at most
// blocked_bloom_filter::kMaxBits bits in all, which bounds capacity for a given fpr.
struct dedup_config {
  std::chrono::milliseconds window{std::chrono::hours(1)};  // 1ms per generation..365d
  std::uint64_t capacity = 0;     // distinct items expected per window, ≥ 1 (required)
  double fpr = 0.001;             // (0, 0.5): target false-positive rate over the window
  std::uint32_t generations = 4;  // 2..64
  std::optional<std::string> output_topic;
  std::optional<std::string> duplicates_topic;
};

struct pipeline_config {
  std::string name;  // unique, [A-Za-z0-9_.-]+
  source_position at;  // of its entry in pipelines
  std::vector<std::string> topics;
  item_config item;
  clock_kind clock = clock_kind::event;
  std::uint32_t max_item_bytes = 1024;  // 1..1 MiB; longer items are an extract failure
  std::optional<heavy_hitters_config> heavy_hitters;
  std::optional<dedup_config> dedup;  // at least one of the two is set
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
[[nodiscard]] std::string_view to_string(generator_format v) noexcept;
[[nodiscard]] std::string_view to_string(log_level v) noexcept;  // spdlog's short names
[[nodiscard]] std::string_view to_string(log_format v) noexcept;

// ---------------------------------------------------------------------------------------
// Loading.

// One problem of a configuration file. line and column are 1-based; 0 when the problem
// has no position (a file that cannot be read).
struct config_error {
  std::string file;
  int line = 0;
  int column = 0;
  std::string message;

  // "FILE:LINE:COL: message", or "FILE: message" without a position.
  [[nodiscard]] std::string to_string() const;
};

// Either a valid configuration (errors empty) or every error found (value empty). Errors
// are sorted by position.
struct load_result {
  std::optional<config> value;
  std::vector<config_error> errors;
};

// The memory the pipeline's sketches take at least, as the library sizes them: the Count-Min
// counters of its buckets + 1 sketches (4 bytes each) and the bits of its Bloom filter
// generations. For a valid configuration.
[[nodiscard]] std::uint64_t sketch_bytes_at_least(const pipeline_config& p);

// Looks an environment variable up; nullopt when it is unset.
using getenv_function = std::function<std::optional<std::string>(std::string_view)>;

// The process environment. Thread-safe as long as nothing modifies the environment.
[[nodiscard]] std::optional<std::string> process_getenv(std::string_view name);

// Reads and checks the file at `path` with the process environment. A file that cannot
// be read is one error. Thread-safe.
[[nodiscard]] load_result load_config_file(const std::string& path);

// Checks `yaml`; `file_name` only names it in errors. Thread-safe if `getenv` is.
[[nodiscard]] load_result load_config_string(std::string_view yaml, const std::string& file_name,
                                             const getenv_function& getenv);

// ---------------------------------------------------------------------------------------
// Value syntax, exposed for tests and for other commands. Each throws
// std::invalid_argument with a message such as "duration needs a unit (ms, s, m, h, d)".

// "500ms", "30s", "5m", "1h", "7d" or "0": an integer and one unit.
[[nodiscard]] std::chrono::milliseconds parse_duration(std::string_view text);

// "1000", "10k", "1.5M", "2G": a whole number after the decimal suffix (k = 10^3,
// M = 10^6, G = 10^9).
[[nodiscard]] std::uint64_t parse_count(std::string_view text);

// A finite real number in decimal or scientific notation: "0.001", "1e-3", "-2.5".
[[nodiscard]] double parse_real(std::string_view text);

// One problem of a text's `${…}`: the message, and where in the text the `${` that it is
// about starts (the one without a variable, or the nested one of a default).
struct substitution_problem {
  enum class kind {
    unset_variable,  // the message names the variable
    invalid_name,    // the message quotes the text between the braces
    unterminated,    // the message quotes nothing of the text
    nested_default,  // the message names the outer variable
  };

  std::string message;
  std::size_t offset = 0;
  kind what = kind::invalid_name;  // by default the kind whose message shows the most
};

// What substitute_variables throws: every problem of the text, in order (at least one).
// what() and offset() are the first one's.
class substitution_error : public std::invalid_argument {
 public:
  explicit substitution_error(std::vector<substitution_problem> problems)
      : std::invalid_argument(problems.front().message), problems_(std::move(problems)) {}

  [[nodiscard]] std::size_t offset() const noexcept { return problems_.front().offset; }
  [[nodiscard]] const std::vector<substitution_problem>& problems() const noexcept {
    return problems_;
  }

 private:
  std::vector<substitution_problem> problems_;
};

// Replaces `${VAR}`, `${VAR:-default}` and `$$` in `text` (rules in the file comment).
// Throws substitution_error for an unset VAR without a default, an unterminated `${`, an
// invalid variable name or a `${` inside a default: all of them, with their offsets.
[[nodiscard]] std::string substitute_variables(std::string_view text,
                                               const getenv_function& getenv);

// The shortest exact spelling: 90000ms → "90s", 5400000ms → "90m", 1500ms → "1500ms".
[[nodiscard]] std::string format_duration(std::chrono::milliseconds d);

// Kafka's legal topic names: 1..249 of [A-Za-z0-9._-], not "." or "..".
[[nodiscard]] bool is_valid_topic_name(std::string_view name) noexcept;

// Whether a librdkafka property may hold a secret: its name contains "password",
// "secret", "sasl.jaas", "ssl.key", "ssl_key", "sasl.oauthbearer.config" or "token"
// (case-insensitive): every property librdkafka itself treats as sensitive, and more.
[[nodiscard]] bool is_secret_property(std::string_view key) noexcept;

// The value to log for a property: "<redacted>" for secrets, the value otherwise.
[[nodiscard]] std::string redact_property(std::string_view key, std::string_view value);

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
struct fmt::formatter<sketchd::generator_format>
    : sketchd::detail::enum_formatter<sketchd::generator_format> {};
template <>
struct fmt::formatter<sketchd::log_level> : sketchd::detail::enum_formatter<sketchd::log_level> {};
template <>
struct fmt::formatter<sketchd::log_format> : sketchd::detail::enum_formatter<sketchd::log_format> {
};
template <>
struct fmt::formatter<sketchd::config_error> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const sketchd::config_error& e, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(e.to_string(), ctx);
  }
};
