// The daemon's configuration: the typed sections with their defaults (config/types.h), the
// value syntax (config/values.h), and the loader that turns a YAML file into them.
//
// The loader reports every problem it finds, not only the first: unknown keys (with a
// "did you mean" suggestion), wrong types, missing required keys, out-of-range values,
// bad durations and counts, unset environment variables and YAML syntax errors, each as
// `FILE:LINE:COL: message` naming the full key path (`pipelines[0].dedup.fpr: …`).
// `sketchd check-config FILE` prints exactly these lines.
//
// Each scalar value goes through `${VAR}` substitution first (config/values.h). A section
// given with no body (`embedded:` alone) is present with its defaults; an optional key
// given with no value, or whose value is empty after substitution (`""`, or
// `dir: "${STATE_DIR:-}"` with STATE_DIR unset or empty), keeps its default, as if it were
// left out. A required key (kafka.brokers, a pipeline's name, dedup.capacity, …) that is
// empty is an error. The entries of kafka.properties are librdkafka's, not sketchd's: an
// empty one is passed to librdkafka as it is (and one with no value is an error).
//
// The values of secret properties (kafka::is_secret_property) never appear in an error
// message.
//
// The loader's pieces, one file each in this folder: the checker that converts values and
// collects the problems (checker.h), the positions yaml-cpp's marks do not give
// (yaml_positions.h), the parse of the one YAML document (document.h), and a reader per
// section (sections.h).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/config/types.h"
#include "sketchd/config/values.h"

namespace sketchd {

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

// The window rate a pipeline's dedup generations are sized for: `fpr` with sizing memory,
// sketch::rolling_bloom::transmission_fpr (at most `fpr`) with sizing transmission. For a
// valid configuration; the same on every build for the same keys.
[[nodiscard]] double sized_fpr(const dedup_config& d);

// The topics pipeline `p` writes to, in this order when set: dedup.output_topic,
// dedup.duplicates_topic, heavy_hitters.alerts_topic, dead_letter_topic.
[[nodiscard]] std::vector<std::string_view> output_topics_of(const pipeline_config& p);

// Reads and checks the file at `path` with the process environment. A file that cannot
// be read is one error. Thread-safe.
[[nodiscard]] load_result load_config_file(const std::string& path);

// Checks `yaml`; `file_name` only names it in errors. Thread-safe if `getenv` is.
[[nodiscard]] load_result load_config_string(std::string_view yaml, const std::string& file_name,
                                             const getenv_function& getenv);

}  // namespace sketchd

template <>
struct fmt::formatter<sketchd::config_error> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const sketchd::config_error& e, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(e.to_string(), ctx);
  }
};
