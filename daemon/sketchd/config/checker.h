// The checker of the configuration loader: converts the values of the YAML tree to their
// types and checks their ranges, and collects every problem with its FILE:LINE:COL instead
// of stopping at the first; and the view of a mapping that checks its keys. The readers of
// the sections (sections.h) are written with these. Internal to the configuration loader.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/config/yaml_positions.h"

namespace sketchd::config_detail {

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();
inline constexpr std::chrono::milliseconds kNoDurationLimit = std::chrono::milliseconds::max();

// A value of the document: its node, where its key is (a null value has no useful
// position of its own), and its key path such as "pipelines[0].dedup.fpr". `secret`: the
// value of a secret property (kafka::is_secret_property), which no message may show.
struct field {
  YAML::Node node;
  YAML::Mark key_mark;
  std::string path;
  bool secret = false;
};

// Where a field's problems are reported: its value, or its key when the value is null.
[[nodiscard]] YAML::Mark mark_of(const field& f);

// "a mapping", "a list", "a scalar" or "nothing", for "expected …, got …".
[[nodiscard]] std::string_view kind_of(const YAML::Node& node);

// "path: " before a message, or nothing at the top level.
[[nodiscard]] std::string prefix(std::string_view path);

// A key as messages and paths quote it: its first 64 bytes (cut before a UTF-8 character,
// not inside one) and "…" when it is longer, so that a key of megabytes makes a line of
// the usual length.
[[nodiscard]] std::string shown_key(std::string_view key);

// The known key closest to `key`, if it is close enough to be a typo: at an optimal string
// alignment distance (Levenshtein plus adjacent transpositions) of at most |key| / 3,
// clamped to [1, 2].
[[nodiscard]] std::optional<std::string_view> suggest(std::string_view key,
                                                      const std::vector<std::string_view>& known);

// n with a comma every three digits: 27,182,818,285.
[[nodiscard]] std::string grouped(std::uint64_t n);

// A range of reals, each end open or closed, as a message states it.
struct real_range {
  double low;
  bool low_open;
  double high;  // infinity: no upper bound
  bool high_open;

  [[nodiscard]] bool contains(double v) const {
    return (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
  }
  // "must be at least 0", "must be in (0, 1)".
  [[nodiscard]] std::string describe() const;
};

inline constexpr real_range kOpenUnit{0, true, 1, true};

// Converts values and collects errors. Every converter returns nullopt after reporting.
// Not thread-safe; one per load.
class checker {
 public:
  // `source` is the text of the file, to place errors inside a scalar; it and `getenv` must
  // outlive the checker.
  checker(std::string file, std::string_view source, const getenv_function& getenv);

  // Positions in the file that the marks do not give (the loader tells it where the nodes
  // start).
  [[nodiscard]] yaml_positions& positions() { return positions_; }

  // Reports `message` at `mark` (no position for a null mark).
  void error(const YAML::Mark& mark, std::string message);
  // Reports `message` at the field, after its path.
  void error(const field& f, std::string_view message);

  [[nodiscard]] bool ok() const { return errors_.empty(); }
  // Every error reported, sorted by position (stable: the order of reporting within one).
  [[nodiscard]] std::vector<config_error> take_errors();

  // A scalar, after ${VAR} substitution; `what` names what was expected if it is none.
  [[nodiscard]] std::optional<std::string> text(const field& f, std::string_view what = "a string");

  // Whether the value is a scalar that is empty after substitution (`""`, or `${VAR:-}`
  // with VAR unset or empty): an optional key with such a value keeps its default. A
  // value that cannot be substituted is not empty: reading it reports why.
  [[nodiscard]] bool empty_after_substitution(const field& f) const;

  [[nodiscard]] std::optional<std::string> nonempty_text(const field& f);
  // A count (parse_count) in [low, high].
  [[nodiscard]] std::optional<std::uint64_t> count(const field& f, std::uint64_t low,
                                                   std::uint64_t high);
  // A duration (parse_duration) in [low, high].
  [[nodiscard]] std::optional<std::chrono::milliseconds> duration(const field& f,
                                                                  std::chrono::milliseconds low,
                                                                  std::chrono::milliseconds high);
  // A real (parse_real) in `range`.
  [[nodiscard]] std::optional<double> real(const field& f, const real_range& range);
  // true, yes, on, false, no or off, in any case.
  [[nodiscard]] std::optional<bool> boolean(const field& f);

  // One of `choices`, by name, or by one of the other names of `aliases`.
  template <typename Enum>
  [[nodiscard]] std::optional<Enum> choice(
      const field& f, const std::vector<Enum>& choices,
      const std::vector<std::pair<std::string_view, Enum>>& aliases = {}) {
    const auto value = text(f);
    if (!value) return std::nullopt;
    for (Enum c : choices) {
      if (to_string(c) == *value) return c;
    }
    for (const auto& [name, c] : aliases) {
      if (name == *value) return c;
    }
    std::string names;
    for (Enum c : choices) names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(c));
    error(f, fmt::format("expected one of {}, got \"{}\"", names, *value));
    return std::nullopt;
  }

  // A topic name; with `empty_ok`, an empty value is returned as it is.
  [[nodiscard]] std::optional<std::string> topic(const field& f, bool empty_ok = false);

  // The elements of a list, each with its path "path[i]".
  [[nodiscard]] std::optional<std::vector<field>> list(const field& f);

 private:
  std::string file_;
  yaml_positions positions_;
  const getenv_function& getenv_;
  std::vector<config_error> errors_;
};

// A mapping whose keys are checked against the known ones: unknown and duplicate keys
// are reported at construction. A null node (a section given with no body) is an empty
// mapping. With `any_key`, every key is accepted (kafka.properties). Not thread-safe; a
// view of one node during one load.
class mapping {
 public:
  mapping(checker& c, const field& self, std::vector<std::string_view> known, bool any_key = false);

  [[nodiscard]] bool valid() const { return valid_; }
  [[nodiscard]] const std::string& path() const { return self_.path; }
  [[nodiscard]] YAML::Mark mark() const { return mark_of(self_); }
  [[nodiscard]] const std::vector<std::pair<std::string, field>>& entries() const {
    return entries_;
  }

  // The key's field if the key is present, even with a null value.
  [[nodiscard]] const field* find(std::string_view key) const;

  // The key's field if it has a value; a null value counts as absent.
  [[nodiscard]] std::optional<field> get(std::string_view key) const;

  // Like get(), but a missing key or value is an error.
  [[nodiscard]] std::optional<field> require(std::string_view key) const;

  // Reads an optional key with `convert` (a checker member bound to its limits) into
  // `out`; false if the value was present and wrong. A value that is empty after
  // substitution leaves `out` as it is, as a missing key or value does.
  template <typename T, typename Convert>
  bool read(std::string_view key, T& out, Convert convert) const {
    const auto f = get(key);
    if (!f || checker_->empty_after_substitution(*f)) return true;
    const auto value = convert(*f);
    if (!value) return false;
    out = static_cast<T>(*value);
    return true;
  }

  // Like read(), but the key is required.
  template <typename T, typename Convert>
  bool read_required(std::string_view key, T& out, Convert convert) const {
    const auto f = require(key);
    if (!f) return false;
    const auto value = convert(*f);
    if (!value) return false;
    out = static_cast<T>(*value);
    return true;
  }

 private:
  // Checks one key of the node and adds it to entries_, or reports why not.
  void add(const YAML::Node& key_node, const YAML::Node& value_node, bool any_key);
  [[nodiscard]] std::string child_path(std::string_view key, bool any_key) const;

  checker* checker_;
  field self_;
  std::vector<std::string_view> known_;
  bool valid_ = false;
  std::vector<std::pair<std::string, field>> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;  // key → its place in entries_
};

// Adapters that bind a checker and limits into a one-argument converter for read().
inline auto counts(checker& c, std::uint64_t low, std::uint64_t high = kNoLimit) {
  return [&c, low, high](const field& f) { return c.count(f, low, high); };
}
inline auto durations(checker& c, std::chrono::milliseconds low,
                      std::chrono::milliseconds high = kNoDurationLimit) {
  return [&c, low, high](const field& f) { return c.duration(f, low, high); };
}
inline auto reals(checker& c, real_range range) {
  return [&c, range](const field& f) { return c.real(f, range); };
}
inline auto booleans(checker& c) {
  return [&c](const field& f) { return c.boolean(f); };
}
inline auto topics(checker& c) {
  return [&c](const field& f) { return c.topic(f); };
}
template <typename Enum>
auto choices(checker& c, std::initializer_list<Enum> values) {
  return [&c, list = std::vector<Enum>(values)](const field& f) { return c.choice(f, list); };
}

// An optional string: empty (after substitution) is the same as absent.
void read_optional_text(checker& c, const mapping& m, std::string_view key,
                        std::optional<std::string>& out);

// Kafka's own topics: the group offsets and the transactions' state.
[[nodiscard]] bool is_internal_topic(std::string_view topic);

// Reports that sketchd does not write to Kafka's internal `topic`, at `f`.
void refuse_internal_topic(checker& c, const field& f, std::string_view topic);

// An optional topic name that sketchd writes to: empty (after substitution) is the same as
// absent; an internal topic is refused.
void read_optional_topic(checker& c, const mapping& m, std::string_view key,
                         std::optional<std::string>& out);

}  // namespace sketchd::config_detail
