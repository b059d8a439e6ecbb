// The configuration loader: walks the YAML tree section by section, converts each value
// to its type and checks its range, and collects every problem with its position instead
// of stopping at the first.
#include "sketchd/config/config.h"

#include <arpa/inet.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "sketch/blocked_bloom.h"
#include "sketch/count_min.h"
#include "sketch/rolling_bloom.h"
#include "sketch/rolling_count_min.h"
#include "sketch/text.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/properties.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/kafka/source.h"

namespace sketchd {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();
constexpr milliseconds kNoDurationLimit = milliseconds::max();
// The longest window, a year: far from any overflow of the sketches' millisecond arithmetic
// (rolling_bloom refuses a window whose G slices overflow int64, as 106751991166d does).
constexpr milliseconds kMaxWindow = std::chrono::days(365);
// The longest snapshot and summary intervals.
constexpr milliseconds kMaxInterval = std::chrono::days(1);
// The most distinct items of the generator: its Zipf table takes 8 bytes per item.
constexpr std::uint64_t kMaxGeneratorDistinct = 1'000'000'000;
// The generator's highest rate, events per second: far above what one producer sends, and
// far from overflowing its count of events due (elapsed seconds · rate).
constexpr std::uint64_t kMaxGeneratorRate = 100'000'000;

// A value of the document: its node, where its key is (a null value has no useful
// position of its own), and its key path such as "pipelines[0].dedup.fpr". `secret`: the
// value of a secret property (is_secret_property), which no message may show.
struct field {
  YAML::Node node;
  YAML::Mark key_mark;
  std::string path;
  bool secret = false;
};

YAML::Mark mark_of(const field& f) {
  if (f.node.IsNull() || f.node.Mark().is_null()) return f.key_mark;
  return f.node.Mark();
}

source_position position_of(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return {mark.line + 1, mark.column + 1};
}

std::string_view kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "nothing";
  }
}

// "path: " before a message, or nothing at the top level.
std::string prefix(std::string_view path) {
  return path.empty() ? std::string() : fmt::format("{}: ", path);
}

// A key as messages and paths quote it: its first 64 bytes (cut before a UTF-8 character,
// not inside one) and "…" when it is longer, so that a key of megabytes makes a line of
// the usual length.
std::string shown_key(std::string_view key) {
  constexpr std::size_t kMaxShown = 64;
  if (key.size() <= kMaxShown) return std::string(key);
  std::size_t cut = kMaxShown;
  while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}…", key.substr(0, cut));
}

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), in
// O(|b|) memory: the rows of a, a − 1 and a − 2 (a transposition looks two rows back).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> before(b.size() + 1);  // row i − 2
  std::vector<std::size_t> last(b.size() + 1);    // row i − 1
  std::vector<std::size_t> row(b.size() + 1);     // row i
  for (std::size_t j = 0; j <= b.size(); ++j) last[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    std::swap(before, last);
    std::swap(last, row);
  }
  return last[b.size()];
}

// The known key closest to `key`, if it is close enough to be a typo.
std::optional<std::string_view> suggest(std::string_view key,
                                        const std::vector<std::string_view>& known) {
  const std::size_t limit = std::clamp<std::size_t>(key.size() / 3, 1, 2);
  std::optional<std::string_view> best;
  std::size_t best_distance = limit + 1;
  for (std::string_view candidate : known) {
    // The distance is at least the difference of the lengths: a key of another length (a
    // very long one, say) is not compared at all.
    const std::size_t longer = std::max(key.size(), candidate.size());
    const std::size_t shorter = std::min(key.size(), candidate.size());
    if (longer - shorter > limit) continue;
    const std::size_t distance = edit_distance(key, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

struct real_range {
  double low;
  bool low_open;
  double high;  // infinity: no upper bound
  bool high_open;

  [[nodiscard]] bool contains(double v) const {
    return (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
  }
  [[nodiscard]] std::string describe() const {
    if (high == std::numeric_limits<double>::infinity()) {
      return fmt::format("must be {} {}", low_open ? "greater than" : "at least", low);
    }
    return fmt::format("must be in {}{}, {}{}", low_open ? '(' : '[', low, high,
                       high_open ? ')' : ']');
  }
};

constexpr real_range kOpenUnit{0, true, 1, true};

// Converts values and collects errors. Every converter returns nullopt after reporting.
// Not thread-safe; one per load.
class checker {
 public:
  // `source` is the text of the file, to place errors inside a scalar; it must outlive the
  // checker.
  checker(std::string file, std::string_view source, const getenv_function& getenv)
      : file_(std::move(file)),
        source_(source),
        bom_(source.starts_with("\xEF\xBB\xBF") ? 3 : 0),
        getenv_(getenv) {}

  // Where the nodes of the document start (YAML::Mark::pos of each, in any order): the
  // search of a `${` in a scalar stops at the next one (mark_in_scalar).
  void set_node_starts(std::vector<int> starts) {
    node_starts_ = std::move(starts);
    std::sort(node_starts_.begin(), node_starts_.end());
  }

  void error(const YAML::Mark& mark, std::string message) {
    const bool known = !mark.is_null();
    errors_.push_back(config_error{file_, known ? mark.line + 1 : 0, known ? mark.column + 1 : 0,
                                   std::move(message)});
  }
  void error(const field& f, std::string_view message) {
    error(mark_of(f), prefix(f.path) + std::string(message));
  }

  [[nodiscard]] bool ok() const { return errors_.empty(); }
  [[nodiscard]] std::vector<config_error> take_errors() {
    std::stable_sort(errors_.begin(), errors_.end(), [](const auto& a, const auto& b) {
      return std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    return std::move(errors_);
  }

  // A scalar, after ${VAR} substitution.
  std::optional<std::string> text(const field& f, std::string_view what = "a string") {
    if (!f.node.IsScalar()) {
      error(f, fmt::format("expected {}, got {}", what, kind_of(f.node)));
      return std::nullopt;
    }
    try {
      return substitute_variables(f.node.Scalar(), getenv_);
    } catch (const substitution_error& e) {
      for (const substitution_problem& p : e.problems()) {
        // A secret's text stays out of the message, except the name of a variable it
        // refers to (`${SASL_PASSWORD}` unset): a reference, by the syntax, not the value.
        using kind = substitution_problem::kind;
        const bool shows_text = p.what != kind::unset_variable && p.what != kind::unterminated &&
                                p.what != kind::nested_default;
        error(mark_in_scalar(f.node.Mark(), f.node.Scalar(), p.offset),
              prefix(f.path) + (f.secret && shows_text
                                    ? std::string("invalid \"${…}\" in the value (not shown: a "
                                                  "secret): a variable name is letters, digits "
                                                  "and _, not starting with a digit; \"$$\" is "
                                                  "a literal \"$\"")
                                    : p.message));
      }
      return std::nullopt;
    }
  }

  // Whether the value is a scalar that is empty after substitution (`""`, or `${VAR:-}`
  // with VAR unset or empty): an optional key with such a value keeps its default. A
  // value that cannot be substituted is not empty: reading it reports why.
  [[nodiscard]] bool empty_after_substitution(const field& f) const {
    if (!f.node.IsScalar()) return false;
    try {
      return substitute_variables(f.node.Scalar(), getenv_).empty();
    } catch (const substitution_error&) {
      return false;
    }
  }

  std::optional<std::string> nonempty_text(const field& f) {
    auto value = text(f);
    if (value && value->empty()) {
      error(f, "must not be empty");
      return std::nullopt;
    }
    return value;
  }

  std::optional<std::uint64_t> count(const field& f, std::uint64_t low, std::uint64_t high) {
    const auto value = text(f, "a count");
    if (!value) return std::nullopt;
    std::uint64_t n = 0;
    try {
      n = parse_count(*value);
    } catch (const std::invalid_argument& e) {
      error(f, fmt::format("{}, got \"{}\"", e.what(), *value));
      return std::nullopt;
    }
    if (n < low || n > high) {
      error(f, high == kNoLimit ? fmt::format("must be at least {}, got {}", low, *value)
                                : fmt::format("must be in [{}, {}], got {}", low, high, *value));
      return std::nullopt;
    }
    return n;
  }

  std::optional<milliseconds> duration(const field& f, milliseconds low, milliseconds high) {
    const auto value = text(f, "a duration");
    if (!value) return std::nullopt;
    milliseconds d{};
    try {
      d = parse_duration(*value);
    } catch (const std::invalid_argument& e) {
      error(f, fmt::format("{}, got \"{}\"", e.what(), *value));
      return std::nullopt;
    }
    if (d < low || d > high) {
      error(f, high == kNoDurationLimit
                   ? fmt::format("must be at least {}, got {}", format_duration(low), *value)
                   : fmt::format("must be in [{}, {}], got {}", format_duration(low),
                                 format_duration(high), *value));
      return std::nullopt;
    }
    return d;
  }

  std::optional<double> real(const field& f, const real_range& range) {
    const auto value = text(f, "a number");
    if (!value) return std::nullopt;
    double x = 0;
    try {
      x = parse_real(*value);
    } catch (const std::invalid_argument& e) {
      error(f, fmt::format("{}, got \"{}\"", e.what(), *value));
      return std::nullopt;
    }
    if (!range.contains(x)) {
      error(f, fmt::format("{}, got {}", range.describe(), *value));
      return std::nullopt;
    }
    return x;
  }

  std::optional<bool> boolean(const field& f) {
    const auto value = text(f, "true or false");
    if (!value) return std::nullopt;
    std::string lower(*value);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    });
    if (lower == "true" || lower == "yes" || lower == "on") return true;
    if (lower == "false" || lower == "no" || lower == "off") return false;
    error(f, fmt::format("expected true or false, got \"{}\"", *value));
    return std::nullopt;
  }

  // One of `choices`, by name, or by one of the other names of `aliases`.
  template <typename Enum>
  std::optional<Enum> choice(const field& f, const std::vector<Enum>& choices,
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
  std::optional<std::string> topic(const field& f, bool empty_ok = false) {
    auto value = text(f, "a topic name");
    if (!value || (empty_ok && value->empty()) || is_valid_topic_name(*value)) return value;
    error(f, fmt::format(
                 "not a valid Kafka topic name (1 to 249 letters, digits, \".\", \"_\" or \"-\"), "
                 "got \"{}\"",
                 *value));
    return std::nullopt;
  }

  // The elements of a list, each with its path "path[i]".
  std::optional<std::vector<field>> list(const field& f) {
    if (!f.node.IsSequence()) {
      error(f, fmt::format("expected a list, got {}", kind_of(f.node)));
      return std::nullopt;
    }
    std::vector<field> elements;
    for (auto it = f.node.begin(); it != f.node.end(); ++it) {
      const YAML::Node element = *it;
      YAML::Mark mark = element.Mark();
      if (mark.is_null()) {
        mark = mark_of(f);
      } else if (element.IsNull()) {
        mark = null_entry_mark(mark);
      }
      elements.push_back(field{element, mark, fmt::format("{}[{}]", f.path, elements.size())});
    }
    return elements;
  }

 private:
  // The offset in source_ of a mark's pos: yaml-cpp counts bytes (a '\r' too) from the
  // start of the text, a UTF-8 byte order mark left out.
  [[nodiscard]] std::size_t offset_of(int pos) const {
    return std::min(source_.size(), bom_ + static_cast<std::size_t>(std::max(pos, 0)));
  }

  // Where the `-` of a list entry without a value is. yaml-cpp gives such a null the mark
  // of the token after it: the next entry, the next key (another key's line), or the end
  // of the file (a line past it). The `-` is found by going back from there over blank
  // lines, comments and white space; if what comes before is not a lone `-` (an explicit
  // `~` or `null` has its own mark; an entry of a flow list has no `-`), the mark stays.
  [[nodiscard]] YAML::Mark null_entry_mark(const YAML::Mark& next) {
    if (next.pos < 0) return next;
    if (const auto known = null_entry_marks_.find(next.pos); known != null_entry_marks_.end()) {
      return known->second;  // the same entry again, through an alias
    }
    YAML::Mark mark = next;
    const std::size_t at = offset_of(next.pos);
    const std::string_view rest = source_.substr(at);
    const auto explicit_null = [&rest](std::string_view word) {
      return rest.starts_with(word) &&
             (rest.size() == word.size() ||
              std::string_view(" \t\r\n,]}#").find(rest[word.size()]) != std::string_view::npos);
    };
    const bool explicit_entry = explicit_null("~") || explicit_null("null") ||
                                explicit_null("Null") || explicit_null("NULL");
    int line = next.line;
    std::size_t end = at;  // the current line is looked at up to here
    while (!explicit_entry) {
      const std::size_t newline = end == 0 ? std::string_view::npos : source_.rfind('\n', end - 1);
      const std::size_t line_start = newline == std::string_view::npos ? bom_ : newline + 1;
      std::string_view content = source_.substr(line_start, end - std::min(end, line_start));
      for (std::size_t i = 0; i < content.size(); ++i) {
        if (content[i] == '#' && (i == 0 || content[i - 1] == ' ' || content[i - 1] == '\t')) {
          content = content.substr(0, i);  // a comment
          break;
        }
      }
      const std::size_t last = content.find_last_not_of(" \t\r");
      if (last != std::string_view::npos) {
        if (content[last] == '-' &&
            (last == 0 || content[last - 1] == ' ' || content[last - 1] == '\t')) {
          mark.line = line;
          mark.column = static_cast<int>(last);
          mark.pos = static_cast<int>(line_start + last - bom_);
        }
        break;
      }
      if (newline == std::string_view::npos) break;
      end = newline;
      --line;
    }
    null_entry_marks_.emplace(next.pos, mark);
    return mark;
  }

  // Where the `${` at `offset` of a scalar's value is in the file. The value is the
  // scalar after YAML's quoting, escapes and line folding, none of which makes or removes
  // a "${" (short of an escape such as "\x24{", or an escaped line break between "$" and
  // "{"), so the n-th "${" of the value is the n-th of the file from the scalar's start
  // on. It is searched for only up to the scalar's end (its closing quote, else the start
  // of the next node: not in another key's value, nor in a comment after the last), and
  // taken only when the variable's name after it is the same too; otherwise the error stays
  // at the scalar's start.
  [[nodiscard]] YAML::Mark mark_in_scalar(const YAML::Mark& scalar, std::string_view value,
                                          std::size_t offset) const {
    if (scalar.is_null() || scalar.pos < 0 || offset + 1 >= value.size() ||
        value.substr(offset, 2) != "${") {
      return scalar;
    }
    const std::size_t start = offset_of(scalar.pos);
    const auto next = std::upper_bound(node_starts_.begin(), node_starts_.end(), scalar.pos);
    std::size_t limit = next == node_starts_.end() ? source_.size() : offset_of(*next);
    limit = std::max(start, limit);
    if (start < limit && (source_[start] == '"' || source_[start] == '\'')) {
      // The closing quote: a '"' after an even number of backslashes, a '\'' not doubled.
      const char quote = source_[start];
      for (std::size_t i = start + 1; i < limit; ++i) {
        if (quote == '"' && source_[i] == '\\') {
          ++i;
        } else if (source_[i] == quote) {
          if (quote == '\'' && i + 1 < limit && source_[i + 1] == '\'') {
            ++i;
            continue;
          }
          limit = i + 1;
          break;
        }
      }
    }
    const std::string_view extent = source_.substr(0, limit);

    std::size_t before = 0;  // "${" of the value before offset
    for (std::size_t p = value.find("${"); p < offset; p = value.find("${", p + 2)) ++before;
    std::size_t at = extent.find("${", start);
    for (; before > 0 && at != std::string_view::npos; --before) at = extent.find("${", at + 2);
    if (at == std::string_view::npos) return scalar;

    const auto is_name_char = [](char ch) {
      return ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') ||
             (ch >= 'a' && ch <= 'z');
    };
    std::size_t token = offset + 2;
    while (token < value.size() && is_name_char(value[token])) ++token;
    if (extent.substr(at, token - offset) != value.substr(offset, token - offset)) return scalar;

    YAML::Mark mark = scalar;
    const std::size_t line_start = source_.rfind('\n', at);
    for (std::size_t p = start; (p = source_.find('\n', p)) < at; ++p) ++mark.line;
    mark.column =
        static_cast<int>(line_start == std::string_view::npos ? at - bom_ : at - line_start - 1);
    mark.pos = scalar.pos + static_cast<int>(at - start);
    return mark;
  }

  std::string file_;
  std::string_view source_;
  std::size_t bom_;  // the bytes of a UTF-8 byte order mark at the start, which marks leave out
  const getenv_function& getenv_;
  std::vector<int> node_starts_;                // sorted
  std::map<int, YAML::Mark> null_entry_marks_;  // null_entry_mark's, by the mark it was given
  std::vector<config_error> errors_;
};

// A mapping whose keys are checked against the known ones: unknown and duplicate keys
// are reported at construction. A null node (a section given with no body) is an empty
// mapping. With `any_key`, every key is accepted (kafka.properties). Not thread-safe; a
// view of one node during one load.
class mapping {
 public:
  mapping(checker& c, const field& self, std::vector<std::string_view> known, bool any_key = false)
      : checker_(&c), self_(self), known_(std::move(known)) {
    if (self.node.IsNull()) {
      valid_ = true;
      return;
    }
    if (!self.node.IsMap()) {
      c.error(self, fmt::format("expected a mapping, got {}", kind_of(self.node)));
      return;
    }
    valid_ = true;
    for (auto it = self.node.begin(); it != self.node.end(); ++it) {
      const YAML::Node key_node = it->first;
      const YAML::Node value_node = it->second;
      if (!key_node.IsScalar()) {
        c.error(key_node.Mark(), prefix(self.path) + "keys must be strings");
        continue;
      }
      const std::string& key = key_node.Scalar();
      const std::string where = self.path.empty() ? "at the top level" : "in " + self.path;
      if (!any_key && std::find(known_.begin(), known_.end(), key) == known_.end()) {
        if (const auto close = suggest(key, known_)) {
          c.error(key_node.Mark(), fmt::format("unknown key \"{}\" {} (did you mean \"{}\"?)",
                                               shown_key(key), where, *close));
        } else {
          c.error(key_node.Mark(), fmt::format("unknown key \"{}\" {} (known keys: {})",
                                               shown_key(key), where, fmt::join(known_, ", ")));
        }
        continue;
      }
      if (const auto [at, fresh] = index_.try_emplace(key, entries_.size()); !fresh) {
        c.error(key_node.Mark(),
                fmt::format("duplicate key \"{}\" {} (first at line {})", shown_key(key), where,
                            entries_[at->second].second.key_mark.line + 1));
        continue;
      }
      entries_.emplace_back(key, field{value_node, key_node.Mark(), child_path(key, any_key),
                                       any_key && is_secret_property(key)});
    }
  }

  [[nodiscard]] bool valid() const { return valid_; }
  [[nodiscard]] const std::string& path() const { return self_.path; }
  [[nodiscard]] YAML::Mark mark() const { return mark_of(self_); }
  [[nodiscard]] const std::vector<std::pair<std::string, field>>& entries() const {
    return entries_;
  }

  // The key's field if the key is present, even with a null value.
  [[nodiscard]] const field* find(std::string_view key) const {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }

  // The key's field if it has a value; a null value counts as absent.
  [[nodiscard]] std::optional<field> get(std::string_view key) const {
    const field* f = find(key);
    if (f == nullptr || f->node.IsNull()) return std::nullopt;
    return *f;
  }

  // Like get(), but a missing key or value is an error.
  [[nodiscard]] std::optional<field> require(std::string_view key) const {
    if (!valid_) return std::nullopt;
    const field* f = find(key);
    if (f == nullptr) {
      checker_->error(mark(),
                      fmt::format("{}missing required key \"{}\"", prefix(self_.path), key));
      return std::nullopt;
    }
    if (f->node.IsNull()) {
      checker_->error(*f, "needs a value");
      return std::nullopt;
    }
    return *f;
  }

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
  [[nodiscard]] std::string child_path(std::string_view key, bool any_key) const {
    if (any_key) return fmt::format("{}[\"{}\"]", self_.path, shown_key(key));
    return self_.path.empty() ? std::string(key) : fmt::format("{}.{}", self_.path, key);
  }

  checker* checker_;
  field self_;
  std::vector<std::string_view> known_;
  bool valid_ = false;
  std::vector<std::pair<std::string, field>> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;  // key → its place in entries_
};

// Adapters that bind a checker and limits into a one-argument converter for read().
auto counts(checker& c, std::uint64_t low, std::uint64_t high = kNoLimit) {
  return [&c, low, high](const field& f) { return c.count(f, low, high); };
}
auto durations(checker& c, milliseconds low, milliseconds high = kNoDurationLimit) {
  return [&c, low, high](const field& f) { return c.duration(f, low, high); };
}
auto reals(checker& c, real_range range) {
  return [&c, range](const field& f) { return c.real(f, range); };
}
auto booleans(checker& c) {
  return [&c](const field& f) { return c.boolean(f); };
}
auto topics(checker& c) {
  return [&c](const field& f) { return c.topic(f); };
}
template <typename Enum>
auto choices(checker& c, std::initializer_list<Enum> values) {
  return [&c, list = std::vector<Enum>(values)](const field& f) { return c.choice(f, list); };
}

// An optional string: empty (after substitution) is the same as absent.
void read_optional_text(checker& c, const mapping& m, std::string_view key,
                        std::optional<std::string>& out) {
  if (const auto f = m.get(key)) {
    if (auto value = c.text(*f); value && !value->empty()) out = std::move(value);
  }
}

// Kafka's own topics: the group offsets and the transactions' state.
bool is_internal_topic(std::string_view topic) {
  return topic == "__consumer_offsets" || topic == "__transaction_state";
}

void refuse_internal_topic(checker& c, const field& f, std::string_view topic) {
  c.error(f,
          fmt::format("{} is one of Kafka's internal topics: sketchd does not write to it", topic));
}

// An optional topic name: empty (after substitution) is the same as absent.
void read_optional_topic(checker& c, const mapping& m, std::string_view key,
                         std::optional<std::string>& out) {
  if (const auto f = m.get(key)) {
    if (auto value = c.topic(*f, /*empty_ok=*/true); value && !value->empty()) {
      if (is_internal_topic(*value)) {
        refuse_internal_topic(c, *f, *value);
        return;
      }
      out = std::move(value);
    }
  }
}

// Not "." nor "..": a URL's path cannot carry them (/api/v1/pipelines/../topk).
bool is_pipeline_name(std::string_view name) {
  if (name == "." || name == "..") return false;
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char ch) {
    return ch == '_' || ch == '.' || ch == '-' || (ch >= '0' && ch <= '9') ||
           (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
  });
}

// RFC 6901: "" or "/" followed by reference tokens where "~" is escaped as "~0" or "~1".
bool is_json_pointer(std::string_view p) {
  if (p.empty()) return true;
  if (p.front() != '/') return false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '~' && (i + 1 == p.size() || (p[i + 1] != '0' && p[i + 1] != '1'))) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Sizes of the sketches, checked against the limits of the sketch library so that a file
// that passes here builds its pipelines without an error.

// n with a comma every three digits: 27,182,818,285.
std::string grouped(std::uint64_t n) {
  const std::string digits = fmt::format("{}", n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A count computed in floating point, grouped; in scientific notation when too large.
std::string grouped(double n) {
  if (n >= 1e18) return fmt::format("{:.3g}", n);
  return grouped(static_cast<std::uint64_t>(n));
}

// The least number of five significant digits that `accepted` takes, searched upwards from
// `limit` (the exact bound): what a message can print as "at least …" such that the printed
// value itself passes.
double smallest_accepted(double limit, const std::function<bool(double)>& accepted) {
  const int exponent = static_cast<int>(std::floor(std::log10(limit))) - 4;
  auto mantissa = static_cast<std::uint64_t>(std::floor(limit / std::pow(10.0, exponent)));
  for (int tries = 0; tries < 1000; ++tries, ++mantissa) {
    const double v = parse_real(fmt::format("{}e{}", mantissa, exponent));
    if (accepted(v)) return v;
  }
  return limit;
}

// Reports `message` at the first of `keys` given in `m`, else at the mapping itself (the
// keys all have their defaults).
void error_at_first(checker& c, const mapping& m, std::initializer_list<std::string_view> keys,
                    std::string_view message) {
  for (std::string_view key : keys) {
    if (const auto f = m.get(key)) {
      c.error(*f, message);
      return;
    }
  }
  c.error(m.mark(), prefix(m.path()) + std::string(message));
}

// The rolling Count-Min sketch of `hh` (sketch::rolling_count_min) within the library's
// limits: its width ⌈e/ε⌉ (count_min_sketch::suggest_width), its depth ⌈ln(1/δ)⌉
// (suggest_depth), and the buckets + 1 sketches of the window (one per slice and their
// sum) at most count_min_sketch::kMaxCounters counters in all, as rolling_count_min
// requires.
void check_count_min_size(checker& c, const mapping& m, const heavy_hitters_config& hh,
                          bool epsilon_ok, bool delta_ok, bool buckets_ok) {
  using sketch::count_min_sketch;
  const auto width_of = [](double epsilon) -> std::optional<std::uint32_t> {
    try {
      return count_min_sketch::suggest_width(epsilon);
    } catch (const std::invalid_argument&) {
      return std::nullopt;
    }
  };
  const auto depth_of = [](double delta) -> std::optional<std::uint32_t> {
    try {
      return count_min_sketch::suggest_depth(delta);
    } catch (const std::invalid_argument&) {
      return std::nullopt;
    }
  };
  std::optional<std::uint32_t> width;
  std::optional<std::uint32_t> depth;
  if (epsilon_ok) {
    width = width_of(hh.epsilon);
    if (!width) {
      const double least = smallest_accepted(std::numbers::e / count_min_sketch::kMaxWidth,
                                             [&](double e) { return width_of(e).has_value(); });
      error_at_first(c, m, {"epsilon"},
                     fmt::format("{} needs a Count-Min width of {} counters (⌈e/ε⌉), over the "
                                 "maximum of {}: use an epsilon of at least {}",
                                 hh.epsilon, grouped(std::ceil(std::numbers::e / hh.epsilon)),
                                 grouped(std::uint64_t{count_min_sketch::kMaxWidth}), least));
    }
  }
  if (delta_ok) {
    depth = depth_of(hh.delta);
    if (!depth) {
      const double least =
          smallest_accepted(std::exp(-static_cast<double>(count_min_sketch::kMaxDepth)),
                            [&](double d) { return depth_of(d).has_value(); });
      error_at_first(c, m, {"delta"},
                     fmt::format("{} needs a Count-Min depth of {} rows (⌈ln(1/δ)⌉), over the "
                                 "maximum of {}: use a delta of at least {}",
                                 hh.delta, grouped(std::ceil(std::log(1 / hh.delta))),
                                 count_min_sketch::kMaxDepth, least));
    }
  }
  if (!width || !depth || !buckets_ok) return;
  const std::uint64_t sketches = std::uint64_t{hh.buckets} + 1;
  const std::uint64_t counters = std::uint64_t{*width} * *depth * sketches;
  if (counters <= count_min_sketch::kMaxCounters) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  error_at_first(
      c, m, {"epsilon", "delta", "buckets"},
      fmt::format("epsilon {}, delta {} and {} buckets need {} Count-Min sketches of {} × {} "
                  "counters, {} in all ({:.3g} GiB), over the maximum of {} ({:.0f} GiB): use a "
                  "larger epsilon or delta, or fewer buckets",
                  hh.epsilon, hh.delta, hh.buckets, sketches, grouped(std::uint64_t{*width}),
                  *depth, grouped(counters), static_cast<double>(counters) * 4 / kGiB,
                  grouped(count_min_sketch::kMaxCounters),
                  static_cast<double>(count_min_sketch::kMaxCounters) * 4 / kGiB));
}

}  // namespace

std::uint64_t sketch_bytes_at_least(const pipeline_config& p) {
  std::uint64_t bytes = 0;
  if (p.heavy_hitters) {
    const auto& hh = *p.heavy_hitters;
    bytes += std::uint64_t{sketch::count_min_sketch::suggest_width(hh.epsilon)} *
             sketch::count_min_sketch::suggest_depth(hh.delta) * (std::uint64_t{hh.buckets} + 1) *
             sizeof(std::uint32_t);
  }
  if (p.dedup) {
    sketch::rolling_bloom_options options;
    options.capacity = p.dedup->capacity;
    options.fpr = p.dedup->fpr;
    options.generations = p.dedup->generations;
    bytes += sketch::blocked_bloom_filter::suggest_bits(
                 sketch::rolling_bloom::generation_capacity(options),
                 sketch::rolling_bloom::generation_fpr(options)) /
             8 * p.dedup->generations;
  }
  return bytes;
}

namespace {

// The rolling Bloom filter of `d` (sketch::rolling_bloom) within the library's limits, and
// its G generations at most blocked_bloom_filter::kMaxBits bits in all (the library takes
// up to that much per generation; 2^40 bits, 128 GiB, is already more than a pipeline
// should hold). Each generation holds c = rolling_bloom::generation_capacity items at
// fpr_g = rolling_bloom::generation_fpr, in blocked_bloom_filter::suggest_bits(c, fpr_g) bits.
void check_bloom_size(checker& c, const mapping& m, const dedup_config& d) {
  using sketch::blocked_bloom_filter;
  using sketch::rolling_bloom;
  const std::uint64_t g = d.generations;
  const std::uint64_t parts = g - 1;
  sketch::rolling_bloom_options options;
  options.capacity = d.capacity;
  options.fpr = d.fpr;
  options.generations = d.generations;
  const std::uint64_t share = rolling_bloom::generation_capacity(options);
  const auto generation_fpr = [&options](double fpr) {
    sketch::rolling_bloom_options o = options;
    o.fpr = fpr;
    return rolling_bloom::generation_fpr(o);
  };
  const std::uint64_t max_bits = blocked_bloom_filter::kMaxBits / g /
                                 blocked_bloom_filter::kBlockBits *
                                 blocked_bloom_filter::kBlockBits;
  const auto fits = [max_bits](std::uint64_t items, double fpr_g) {
    if (!(fpr_g > 0)) return false;  // a rate that underflows to 0 in fpr_g
    try {
      return blocked_bloom_filter::suggest_bits(items, fpr_g) <= max_bits;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  const double fpr_g = generation_fpr(d.fpr);
  if (fits(share, fpr_g)) return;

  const std::string too_large = fmt::format(
      "need Bloom filters of more than the maximum of 2^40 bits (128 GiB) in all, over {} "
      "generations",
      g);
  if (fits(1, fpr_g)) {
    // The capacity is too large at this rate: the largest share that fits, by bisection
    // (fits(lo), !fits(hi)).
    std::uint64_t lo = 1;
    std::uint64_t hi = share;
    while (hi - lo > 1) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      (fits(mid, fpr_g) ? lo : hi) = mid;
    }
    error_at_first(c, m, {"capacity"},
                   fmt::format("{} items at fpr {} {}: at this fpr capacity can be at most {} "
                               "(or use a larger fpr)",
                               grouped(d.capacity), d.fpr, too_large, grouped(lo * parts)));
    return;
  }
  // The rate is too small even for one item per generation.
  const auto least_fpr = [&](std::uint64_t items) -> std::optional<double> {
    const double best_g =
        blocked_bloom_filter::fpr(static_cast<double>(max_bits), static_cast<double>(items));
    const double limit = -std::expm1(static_cast<double>(g) * std::log1p(-best_g));
    const auto accepted = [&](double fpr) { return fpr < 0.5 && fits(items, generation_fpr(fpr)); };
    if (!(limit < 0.5)) return std::nullopt;
    const double least = smallest_accepted(limit, accepted);
    if (!accepted(least)) return std::nullopt;
    return least;
  };
  if (const auto least = least_fpr(share)) {
    error_at_first(c, m, {"fpr"},
                   fmt::format("{} is too small: {} items at this fpr {}; use an fpr of at least "
                               "{}",
                               d.fpr, grouped(d.capacity), too_large, *least));
    return;
  }
  error_at_first(c, m, {"fpr"},
                 fmt::format("{} is too small: even one item per generation at this fpr would {}; "
                             "use an fpr of at least {}",
                             d.fpr, too_large, least_fpr(1).value_or(0.5)));
  error_at_first(c, m, {"capacity"},
                 fmt::format("{} items {} at any fpr below 0.5", grouped(d.capacity), too_large));
}

// ---------------------------------------------------------------------------------------
// Sections.

// Where kafka.properties and each of its entries are, for the checks of the properties as
// a whole once the pipelines are known (check_kafka_properties).
struct property_positions {
  bool all_accepted = true;  // librdkafka accepted every property on its own
  std::optional<field> section;
  std::map<std::string, field, std::less<>> entries;
};

// kafka.brokers: HOST[:PORT] entries separated by commas, each optionally prefixed with a
// protocol (SSL://host:9093), the host a name, an IPv4 address or an IPv6 address in
// brackets, the port in [1, 65535]. librdkafka takes anything and retries forever.
std::optional<std::string> broker_list_problem(std::string_view list) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = list.find(',', start);
    std::string_view entry = list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    const std::string shown(entry);
    if (entry.empty()) return "an empty entry (HOST[:PORT],HOST[:PORT]…)";
    if (const std::size_t scheme = entry.find("://"); scheme != std::string_view::npos) {
      std::string protocol(entry.substr(0, scheme));
      for (char& ch : protocol)
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      if (protocol != "PLAINTEXT" && protocol != "SSL" && protocol != "SASL_PLAINTEXT" &&
          protocol != "SASL_SSL") {
        return fmt::format("\"{}\": unknown protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)",
                           shown);
      }
      entry.remove_prefix(scheme + 3);
      if (entry.empty()) return fmt::format("\"{}\": no host after the protocol", shown);
    }
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
    // In brackets an IPv6 address; digits and dots an IPv4 address (as in http.listen);
    // anything else a host name.
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
    if (comma == std::string_view::npos) return std::nullopt;
    start = comma + 1;
  }
}

kafka_config read_kafka(checker& c, const field& f, property_positions& where) {
  kafka_config k;
  const mapping m(c, f,
                  {"brokers", "embedded", "group_id", "properties", "batch_size", "poll_timeout"});
  if (!m.valid()) return k;

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

  if (const auto g = m.get("group_id")) {
    if (auto value = c.text(*g); value && !value->empty()) k.group_id = std::move(*value);
  }
  if (const field* p = m.find("properties")) {
    where.section = *p;
    const mapping pm(c, *p, {}, /*any_key=*/true);
    for (const auto& [key, value_field] : pm.entries()) {
      std::string_view instead;
      // metadata.broker.list is librdkafka's other name of bootstrap.servers.
      if (key == "bootstrap.servers" || key == "metadata.broker.list") {
        instead = "set kafka.brokers instead";
      }
      if (key == "group.id") instead = "set kafka.group_id instead";
      if (key == "enable.auto.offset.store") {
        instead = "sketchd stores offsets itself, once a message's outputs are delivered";
      }
      if (key == "transactional.id") {
        instead =
            "sketchd's producer is idempotent, not transactional (a transactional producer "
            "refuses every message sent outside a transaction)";
      }
      if (!instead.empty()) {
        c.error(value_field.key_mark, fmt::format("{}: {}", value_field.path, instead));
        continue;
      }
      if (value_field.node.IsNull()) {
        c.error(value_field, "needs a value");
        continue;
      }
      auto value = c.text(value_field);
      if (!value) continue;
      // librdkafka checks the name and the value now, so that a bad property is reported
      // here with its line, not when the clients are created. librdkafka's message shows
      // the value only when it is written in the file as it is, and not a secret's: one
      // from the environment may be a secret put in the wrong key.
      const kafka::property_check check = kafka::check_property(key, *value);
      switch (check.result) {
        case kafka::property_check::outcome::accepted:
          break;
        case kafka::property_check::outcome::unknown:
          c.error(value_field.key_mark, fmt::format("{}: librdkafka {} has no such property",
                                                    value_field.path, kafka::librdkafka_version()));
          continue;
        case kafka::property_check::outcome::invalid:
          // Java's "none" is librdkafka's "error", which sketchd refuses (below).
          c.error(value_field,
                  key == "auto.offset.reset"
                      ? fmt::format("invalid value \"{}\": librdkafka takes "
                                    "earliest (smallest, beginning) or latest "
                                    "(largest, end); Java's none is librdkafka's "
                                    "error, which sketchd does not support",
                                    *value)
                  : value_field.secret || value_field.node.Scalar().find("${") != std::string::npos
                      ? kafka::redact(check.reason, {*value})
                      : check.reason);
          continue;
      }
      // Without it, offsets are committed only at a rebalance and at exit: a crash would
      // read everything since the start again. Judged by librdkafka's own reading of the
      // value (it takes true, t and 1 in any case).
      const std::string_view read_back = check.read_back;
      if (key == "enable.auto.commit") {
        if (read_back != "true") {
          c.error(value_field,
                  "must stay true: sketchd commits the offsets it has stored in the background "
                  "(every auto.commit.interval.ms)");
          continue;
        }
      }
      // Settings librdkafka accepts that would quietly undo what sketchd relies on, judged
      // by librdkafka's own reading of the value.
      // (The enable.idempotence and delivery.report.only.error ones are the forwarding
      // producer's: an input offset is stored once its outputs are acknowledged, each once.)
      struct refusal {
        std::string_view key;
        std::string_view value;  // as librdkafka reads it back
        std::string_view why;
      };
      static constexpr refusal kRefusals[] = {
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
      std::string_view refused;
      for (const refusal& r : kRefusals) {
        if (key == r.key && read_back == r.value) refused = r.why;
      }
      if (!refused.empty()) {
        c.error(value_field, std::string(refused));
        continue;
      }
      where.entries.emplace(key, value_field);
      k.properties.emplace(key, std::move(*value));
    }
    where.all_accepted = pm.valid() && where.entries.size() == pm.entries().size();
  }
  m.read("batch_size", k.batch_size, counts(c, 1, 100000));
  // At most 1 s: the run loop notices a stop, and writes the summary lines and snapshots,
  // between two polls.
  m.read("poll_timeout", k.poll_timeout, durations(c, milliseconds(1), std::chrono::seconds(1)));
  return k;
}

// librdkafka's checks of kafka.properties as a whole, on top of sketchd's own settings, for
// the consumer and, when some pipeline writes to a topic, the producer: what would
// otherwise only fail when `run` creates the clients. Reported at the first property the
// reason names (librdkafka quotes names in backticks), else at kafka.properties.
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

http_config read_http(checker& c, const field& f) {
  http_config h;
  const mapping m(c, f, {"listen"});
  const auto listen = m.get("listen");
  if (!listen) return h;
  const auto value = c.text(*listen);
  if (!value || value->empty()) return h;  // empty after substitution: the default
  const auto bad = [&](std::string_view why) {
    c.error(*listen, fmt::format("{}, got \"{}\"", why, *value));
    return h;
  };
  if (value->find("://") != std::string::npos) {
    return bad("expected HOST:PORT such as 127.0.0.1:9464, not a URL");
  }
  const std::size_t colon = value->rfind(':');
  if (colon == std::string::npos) {
    return bad("expected HOST:PORT such as 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464");
  }
  std::string host = value->substr(0, colon);
  const std::string port = value->substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find_first_of(":[]") != std::string::npos) {
    return bad("an IPv6 address needs brackets, as in [::1]:9464");
  }
  if (host.empty()) return bad("needs a host (0.0.0.0 listens on every interface)");
  // A host of digits and dots is meant as an IPv4 address, one in brackets as an IPv6
  // address: either must be one. Other hosts are names, resolved when the daemon starts.
  const bool dotted = std::all_of(host.begin(), host.end(),
                                  [](char ch) { return ch == '.' || (ch >= '0' && ch <= '9'); });
  const bool bracketed = value->front() == '[';
  in6_addr address{};
  if ((dotted || bracketed) &&
      ::inet_pton(bracketed ? AF_INET6 : AF_INET, host.c_str(), &address) != 1) {
    return bad(bracketed ? "not an IPv6 address" : "not an IPv4 address");
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
      std::stoul(port) > 65535) {
    return bad("the port must be a number in [0, 65535] (0: any free port)");
  }
  h.listen = *value;
  h.host = std::move(host);
  h.port = static_cast<std::uint16_t>(std::stoul(port));
  return h;
}

state_config read_state(checker& c, const field& f) {
  state_config s;
  const mapping m(c, f, {"dir", "snapshot_interval", "discard_incompatible_snapshot"});
  read_optional_text(c, m, "dir", s.dir);
  if (s.dir) s.dir_at = position_of(mark_of(*m.get("dir")));
  m.read("snapshot_interval", s.snapshot_interval, durations(c, milliseconds(1), kMaxInterval));
  m.read("discard_incompatible_snapshot", s.discard_incompatible_snapshot, booleans(c));
  return s;
}

item_config read_item(checker& c, const field& f) {
  item_config item;
  const mapping m(c, f, {"from", "path", "name"});
  if (!m.read_required("from", item.from,
                       choices(c, {item_source::key, item_source::value, item_source::json,
                                   item_source::header}))) {
    return item;
  }
  const auto only_with = [&](std::string_view key, item_source source) {
    if (const field* k = m.find(key); k != nullptr && item.from != source) {
      c.error(k->key_mark, fmt::format("{}: only used with from: {}", k->path, to_string(source)));
    }
  };
  only_with("path", item_source::json);
  only_with("name", item_source::header);
  if (item.from == item_source::json) {
    if (const auto p = m.require("path")) {
      if (auto value = c.text(*p)) {
        if (is_json_pointer(*value)) {
          item.path = std::move(*value);
        } else {
          c.error(*p, fmt::format("expected a JSON pointer such as /user/id (RFC 6901), got \"{}\"",
                                  *value));
        }
      }
    }
  }
  if (item.from == item_source::header) {
    if (const auto n = m.require("name")) {
      if (auto value = c.nonempty_text(*n)) item.header = std::move(*value);
    }
  }
  return item;
}

heavy_hitters_config read_heavy_hitters(checker& c, const field& f,
                                        const std::vector<std::string>& inputs) {
  heavy_hitters_config hh;
  const mapping m(c, f,
                  {"window", "buckets", "epsilon", "delta", "top_k", "threshold", "conservative",
                   "alerts_topic"});
  const bool window_ok = m.read("window", hh.window, durations(c, milliseconds(1), kMaxWindow));
  const bool buckets_ok =
      m.read("buckets", hh.buckets, counts(c, 1, sketch::rolling_count_min::kMaxBuckets));
  const bool epsilon_ok = m.read("epsilon", hh.epsilon, reals(c, kOpenUnit));
  const bool delta_ok = m.read("delta", hh.delta, reals(c, kOpenUnit));
  m.read("top_k", hh.top_k, counts(c, 1, 1000));
  const bool threshold_ok = m.read("threshold", hh.threshold, reals(c, {0, true, 1, false}));
  m.read("conservative", hh.conservative, booleans(c));
  read_optional_topic(c, m, "alerts_topic", hh.alerts_topic);

  if (window_ok && buckets_ok && hh.window.count() < static_cast<std::int64_t>(hh.buckets)) {
    const auto w = m.get("window");
    c.error(w ? mark_of(*w) : m.mark(),
            fmt::format("{}.window: must be at least 1ms per bucket ({} buckets), got {}", m.path(),
                        hh.buckets, format_duration(hh.window)));
  }
  if (epsilon_ok && threshold_ok && hh.threshold <= hh.epsilon) {
    // Said of the key that is written: the other may be its default.
    constexpr std::string_view why =
        "since an estimate may exceed the true count by epsilon times the window's items";
    if (const auto t = m.get("threshold")) {
      c.error(mark_of(*t),
              fmt::format("{}.threshold: must be greater than epsilon ({}{}), {}, got {}", m.path(),
                          hh.epsilon, m.get("epsilon") ? "" : ", its default", why, hh.threshold));
    } else {
      const auto e = m.get("epsilon");
      c.error(e ? mark_of(*e) : m.mark(),
              fmt::format("{}.epsilon: must be less than threshold ({}, its default), {}, got {}",
                          m.path(), hh.threshold, why, hh.epsilon));
    }
  }
  check_count_min_size(c, m, hh, epsilon_ok, delta_ok, buckets_ok);
  if (hh.alerts_topic &&
      std::find(inputs.begin(), inputs.end(), *hh.alerts_topic) != inputs.end()) {
    c.error(*m.get("alerts_topic"),
            "must not be one of the pipeline's topics (the pipeline would read its own alerts)");
  }
  return hh;
}

dedup_config read_dedup(checker& c, const field& f, const std::vector<std::string>& inputs) {
  dedup_config d;
  const mapping m(c, f,
                  {"window", "capacity", "fpr", "generations", "output_topic", "duplicates_topic"});
  const bool window_ok = m.read("window", d.window, durations(c, milliseconds(1), kMaxWindow));
  const bool capacity_ok = m.read_required("capacity", d.capacity, counts(c, 1));
  const bool fpr_ok = m.read("fpr", d.fpr, reals(c, {0, true, 0.5, true}));
  const bool generations_ok =
      m.read("generations", d.generations, counts(c, 2, sketch::rolling_bloom::kMaxGenerations));
  read_optional_topic(c, m, "output_topic", d.output_topic);
  read_optional_topic(c, m, "duplicates_topic", d.duplicates_topic);

  if (window_ok && generations_ok && d.window.count() < static_cast<std::int64_t>(d.generations)) {
    const auto w = m.get("window");
    c.error(w ? mark_of(*w) : m.mark(),
            fmt::format("{}.window: must be at least 1ms per generation ({} generations), got {}",
                        m.path(), d.generations, format_duration(d.window)));
  }
  if (capacity_ok && fpr_ok && generations_ok) check_bloom_size(c, m, d);
  const auto check_not_input = [&](std::string_view key, const std::optional<std::string>& topic) {
    if (topic && std::find(inputs.begin(), inputs.end(), *topic) != inputs.end()) {
      c.error(*m.get(key),
              "must not be one of the pipeline's topics (the pipeline would read its own output)");
    }
  };
  check_not_input("output_topic", d.output_topic);
  check_not_input("duplicates_topic", d.duplicates_topic);
  return d;
}

pipeline_config read_pipeline(checker& c, const field& f,
                              std::map<std::string, int, std::less<>>& names) {
  pipeline_config p;
  p.at = position_of(mark_of(f));
  if (f.node.IsNull()) {  // a bare "-": one problem, not one per required key
    c.error(f,
            "an empty entry: a pipeline needs name, topics, item, and heavy_hitters, dedup or "
            "both");
    return p;
  }
  const mapping m(c, f,
                  {"name", "topics", "item", "clock", "max_item_bytes", "heavy_hitters", "dedup"});
  if (!m.valid()) return p;

  if (const auto n = m.require("name")) {
    if (auto value = c.text(*n)) {
      if (!is_pipeline_name(*value)) {
        c.error(*n, *value == "." || *value == ".."
                        ? fmt::format("\"{}\" cannot name a pipeline: a URL cannot carry it "
                                      "(/api/v1/pipelines/{}/…)",
                                      *value, *value)
                        : fmt::format(
                              "must be 1 to 128 letters, digits, \"_\", \".\" or \"-\", got \"{}\"",
                              *value));
      } else if (const auto it = names.find(*value); it != names.end()) {
        c.error(*n, fmt::format("duplicate pipeline name \"{}\" (first at line {})", *value,
                                it->second));
      } else {
        names.emplace(*value, mark_of(*n).line + 1);
        p.name = std::move(*value);
      }
    }
  }
  if (const auto t = m.require("topics")) {
    if (const auto elements = c.list(*t)) {
      if (elements->empty()) c.error(*t, "needs at least one topic");
      std::map<std::string, int, std::less<>> seen;  // topic → its line, for a repeat
      for (const field& e : *elements) {
        auto topic = c.topic(e);
        if (!topic) continue;
        if (const auto [at, fresh] = seen.try_emplace(*topic, mark_of(e).line + 1); !fresh) {
          c.error(e, fmt::format("topic \"{}\" is listed twice (first at line {})", *topic,
                                 at->second));
          continue;
        }
        p.topics.push_back(std::move(*topic));
      }
    }
  }
  if (const auto i = m.require("item")) p.item = read_item(c, *i);
  m.read("clock", p.clock, choices(c, {clock_kind::event, clock_kind::wall}));
  m.read("max_item_bytes", p.max_item_bytes, counts(c, 1, 1 << 20));
  if (const field* hh = m.find("heavy_hitters"))
    p.heavy_hitters = read_heavy_hitters(c, *hh, p.topics);
  if (const field* d = m.find("dedup")) p.dedup = read_dedup(c, *d, p.topics);
  if (!m.find("heavy_hitters") && !m.find("dedup")) {
    c.error(m.mark(), fmt::format("{}: needs heavy_hitters, dedup or both", m.path()));
  }
  return p;
}

generator_config read_generator(checker& c, const field& f) {
  generator_config g;
  const mapping m(c, f, {"topic", "rate", "distinct", "zipf", "key", "format"});
  if (!m.valid()) return g;
  if (m.read_required("topic", g.topic, topics(c)) && is_internal_topic(g.topic)) {
    refuse_internal_topic(c, *m.get("topic"), g.topic);
  }
  m.read("rate", g.rate, counts(c, 1, kMaxGeneratorRate));
  m.read("distinct", g.distinct, counts(c, 1, kMaxGeneratorDistinct));
  m.read("zipf", g.zipf, reals(c, {0, true, std::numeric_limits<double>::infinity(), false}));
  m.read("key", g.key, booleans(c));
  m.read("format", g.format, choices(c, {generator_format::json, generator_format::text}));
  return g;
}

log_config read_log(checker& c, const field& f) {
  log_config l;
  const mapping m(c, f, {"level", "format", "summary_interval"});
  m.read("level", l.level, [&c](const field& level) {
    // "warning": the name the log lines themselves show for the level.
    return c.choice<log_level>(
        level,
        {log_level::trace, log_level::debug, log_level::info, log_level::warn, log_level::error,
         log_level::critical, log_level::off},
        {{"warning", log_level::warn}});
  });
  m.read("format", l.format, choices(c, {log_format::text, log_format::json}));
  m.read("summary_interval", l.summary_interval, durations(c, milliseconds(0), kMaxInterval));
  return l;
}

// Pipelines that feed each other in a circle: one's output topic (output_topic,
// duplicates_topic or alerts_topic) read by the next, back to the first. Each event would
// go round again and again (a pipeline reading its own output is checked with its section).
void check_pipeline_loops(checker& c, const std::vector<field>& elements,
                          const std::vector<pipeline_config>& pipelines) {
  const std::size_t n = std::min(elements.size(), pipelines.size());
  std::map<std::string_view, std::vector<std::size_t>> readers;
  for (std::size_t i = 0; i < n; ++i) {
    for (const std::string& t : pipelines[i].topics) readers[t].push_back(i);
  }
  const auto outputs = [&](std::size_t i) {
    std::vector<std::string_view> out;
    const pipeline_config& p = pipelines[i];
    if (p.heavy_hitters && p.heavy_hitters->alerts_topic)
      out.emplace_back(*p.heavy_hitters->alerts_topic);
    if (p.dedup && p.dedup->output_topic) out.emplace_back(*p.dedup->output_topic);
    if (p.dedup && p.dedup->duplicates_topic) out.emplace_back(*p.dedup->duplicates_topic);
    return out;
  };
  // Depth-first, iterative; a pipeline met again while on the path closes a loop.
  enum class mark : std::uint8_t { unseen, on_path, done };
  std::vector<mark> marks(n, mark::unseen);
  struct step {
    std::size_t pipeline;
    std::vector<std::pair<std::string_view, std::size_t>> next;  // (topic, reader)
    std::size_t taken = 0;
  };
  for (std::size_t root = 0; root < n; ++root) {
    if (marks[root] != mark::unseen) continue;
    std::vector<step> path;
    const auto enter = [&](std::size_t i) {
      marks[i] = mark::on_path;
      step s{i, {}, 0};
      for (const std::string_view t : outputs(i)) {
        if (const auto it = readers.find(t); it != readers.end()) {
          for (const std::size_t j : it->second)
            if (j != i) s.next.emplace_back(t, j);
        }
      }
      path.push_back(std::move(s));
    };
    enter(root);
    while (!path.empty()) {
      step& top = path.back();
      if (top.taken == top.next.size()) {
        marks[top.pipeline] = mark::done;
        path.pop_back();
        continue;
      }
      const std::size_t j = top.next[top.taken++].second;
      if (marks[j] == mark::unseen) {
        enter(j);
      } else if (marks[j] == mark::on_path) {
        std::string loop;
        std::size_t k = 0;
        while (path[k].pipeline != j) ++k;
        for (std::size_t a = k; a < path.size(); ++a) {
          // The edge each pipeline of the loop took last (the one just taken, for the last).
          loop += fmt::format("{} → topic {} → ", pipelines[path[a].pipeline].name,
                              path[a].next[path[a].taken - 1].first);
        }
        loop += pipelines[j].name;
        c.error(elements[j],
                fmt::format("pipelines feed each other in a loop ({}): every event would go round "
                            "again and again",
                            loop));
      }
    }
  }
}

// A topic sketchd writes to holds one kind of event, whichever pipelines write it:
// first-seen events, duplicates, heavy-hitter alerts or the generator's stream. A sink
// reading first-seen events must not meet duplicates or alerts among them. (Several
// pipelines may write the same kind to one topic: their first-seen events, say.)
void check_output_kinds(checker& c, const std::vector<field>& elements,
                        const std::vector<pipeline_config>& pipelines, const field* generator_field,
                        const std::optional<generator_config>& generator) {
  struct writer {
    std::string_view kind;
    std::string what;  // "pipeline NAME (PATH)" or "the generator (generator.topic)"
  };
  std::map<std::string_view, writer, std::less<>> first;
  // The value at KEY of a mapping, or a null node: found by iterating, since yaml-cpp's
  // lookup of a missing key gives a node that throws when used.
  const auto find = [](const YAML::Node& node, std::string_view key) {
    if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
      }
    }
    return YAML::Node();
  };
  // The field of a topic at PARENT[section][key] (there: its value was read).
  const auto at = [&](const field& parent, std::string_view section, std::string_view key) {
    const YAML::Node value =
        section.empty() ? find(parent.node, key) : find(find(parent.node, section), key);
    return field{value, parent.node.Mark(),
                 section.empty() ? fmt::format("{}.{}", parent.path, key)
                                 : fmt::format("{}.{}.{}", parent.path, section, key)};
  };
  const auto add = [&](const std::string& topic, std::string_view kind, const field& where,
                       std::string what) {
    const auto [it, inserted] = first.emplace(topic, writer{kind, std::move(what)});
    if (inserted || it->second.kind == kind) return;
    c.error(where, fmt::format("topic {} already receives the {} of {}: a topic sketchd writes to "
                               "holds one kind of event (first-seen events, duplicates, "
                               "heavy-hitter alerts or the generator's stream)",
                               topic, it->second.kind, it->second.what));
  };
  const std::size_t n = std::min(elements.size(), pipelines.size());
  std::size_t outputs = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const pipeline_config& p = pipelines[i];
    const auto each = [&](const std::optional<std::string>& topic, std::string_view kind,
                          std::string_view section, std::string_view key) {
      if (!topic) return;
      const field f = at(elements[i], section, key);
      add(*topic, kind, f, fmt::format("pipeline {} ({})", p.name, f.path));
      if (++outputs == kMaxOutputs + 1) {
        c.error(f, fmt::format("at most {} outputs (output_topic, duplicates_topic and "
                               "alerts_topic) over all pipelines; this is output {}",
                               kMaxOutputs, outputs));
      }
    };
    if (p.dedup) {
      each(p.dedup->output_topic, "first-seen events", "dedup", "output_topic");
      each(p.dedup->duplicates_topic, "duplicates", "dedup", "duplicates_topic");
    }
    if (p.heavy_hitters)
      each(p.heavy_hitters->alerts_topic, "heavy-hitter alerts", "heavy_hitters", "alerts_topic");
  }
  if (generator && generator_field != nullptr && !generator->topic.empty()) {
    add(generator->topic, "generated events", at(*generator_field, "", "topic"),
        "the generator (generator.topic)");
  }
}

config read_config(checker& c, const YAML::Node& root) {
  config cfg;
  const field self{root, YAML::Mark(), ""};
  if (!root.IsMap()) {
    c.error(self, fmt::format("expected a mapping of sections (kafka, pipelines, …), got {}",
                              kind_of(root)));
    return cfg;
  }
  const mapping m(c, self, {"kafka", "http", "state", "pipelines", "generator", "log"});
  property_positions kafka_properties;
  if (const field* k = m.find("kafka")) {
    cfg.kafka = read_kafka(c, *k, kafka_properties);
  } else {
    c.error(m.mark(), "missing required key \"kafka\"");
  }
  if (const field* h = m.find("http")) cfg.http = read_http(c, *h);
  if (const field* s = m.find("state")) cfg.state = read_state(c, *s);
  std::optional<std::vector<field>> elements;
  if (const auto p = m.require("pipelines")) {
    if ((elements = c.list(*p))) {
      if (elements->empty()) c.error(*p, "needs at least one pipeline");
      std::map<std::string, int, std::less<>> names;
      for (const field& e : *elements) cfg.pipelines.push_back(read_pipeline(c, e, names));
      check_pipeline_loops(c, *elements, cfg.pipelines);
    }
  }
  const field* g = m.find("generator");
  if (g != nullptr) cfg.generator = read_generator(c, *g);
  if (elements) check_output_kinds(c, *elements, cfg.pipelines, g, cfg.generator);
  if (const field* l = m.find("log")) cfg.log = read_log(c, *l);
  const bool produces =
      std::any_of(cfg.pipelines.begin(), cfg.pipelines.end(), [](const pipeline_config& p) {
        return (p.dedup && (p.dedup->output_topic || p.dedup->duplicates_topic)) ||
               (p.heavy_hitters && p.heavy_hitters->alerts_topic);
      });
  check_kafka_properties(c, kafka_properties, cfg.kafka, produces);
  return cfg;
}

}  // namespace

std::string_view to_string(item_source v) noexcept {
  switch (v) {
    case item_source::key:
      return "key";
    case item_source::value:
      return "value";
    case item_source::json:
      return "json";
    case item_source::header:
      return "header";
  }
  return "?";
}

std::string_view to_string(clock_kind v) noexcept {
  return v == clock_kind::event ? "event" : "wall";
}

std::string_view to_string(generator_format v) noexcept {
  return v == generator_format::json ? "json" : "text";
}

std::string_view to_string(log_level v) noexcept {
  switch (v) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
    case log_level::critical:
      return "critical";
    case log_level::off:
      return "off";
  }
  return "?";
}

std::string_view to_string(log_format v) noexcept {
  return v == log_format::text ? "text" : "json";
}

std::string config_error::to_string() const {
  const std::string text = line <= 0 ? fmt::format("{}: {}", file, message)
                                     : fmt::format("{}:{}:{}: {}", file, line, column, message);
  // One line whatever the values quoted in it hold: control characters escaped (a newline
  // would start a line without a location; an escape sequence would reach the terminal),
  // trailing white space dropped (librdkafka's reasons end in a newline).
  return sketch::escape_controls(
      std::string_view(text).substr(0, text.find_last_not_of(" \t\r\n") + 1));
}

namespace {

// The most nodes, and bytes of scalars, that the aliases of a document may repeat of their
// anchors. The checker visits a node once per path to it, so aliases of aliases multiply
// its work (a few kilobytes can stand for billions of nodes); no configuration comes near.
constexpr std::uint64_t kMaxAliasedNodes = 1'000'000;
constexpr std::uint64_t kMaxAliasedBytes = std::uint64_t{64} << 20;

// What the parser's events tell of a YAML stream: where each document starts and its root
// node (the mark YAML::Node::Mark() gives), where every node of the first document starts,
// and the first alias by which the first document's aliases repeat more than
// kMaxAliasedNodes nodes or kMaxAliasedBytes bytes (counted without expanding anything).
class document_marks : public YAML::EventHandler {
 public:
  struct document {
    YAML::Mark start;
    YAML::Mark root = YAML::Mark::null_mark();
    bool empty = false;  // the root is a null with nothing written: its mark is the next token's
  };
  std::vector<document> documents;
  std::vector<int> node_starts;  // Mark::pos of every node of the first document, in order
  std::optional<YAML::Mark> too_many_aliased;
  bool aliased_cycle = false;  // that alias is inside its own anchor: it repeats forever

  void OnDocumentStart(const YAML::Mark& mark) override {
    documents.push_back({mark});
    // Anchors are the document's own.
    anchors_.clear();
    open_.clear();
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const bool root = node(mark);
    if (root) documents.back().empty = true;
    leaf(anchor, 0);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    node(mark);
    if (documents.size() != 1) return;
    size repeated{kMaxAliasedNodes + 1, 0};
    bool cycle = true;
    if (anchor < anchors_.size() && !anchors_[anchor].open) {
      repeated = anchors_[anchor].expanded;
      cycle = false;
    }
    aliased_.nodes = saturated(aliased_.nodes + repeated.nodes);
    aliased_.bytes = saturated(aliased_.bytes + repeated.bytes);
    if (!too_many_aliased &&
        (aliased_.nodes > kMaxAliasedNodes || aliased_.bytes > kMaxAliasedBytes)) {
      too_many_aliased = mark;
      aliased_cycle = cycle;
    }
    add(repeated);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    node(mark);
    leaf(anchor, value.size());
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    node(mark);
    open(anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    node(mark);
    open(anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  // A node and what it holds, with its aliases expanded; saturated at a bound past both
  // limits, since nested aliases grow exponentially.
  struct size {
    std::uint64_t nodes = 0;
    std::uint64_t bytes = 0;
  };
  struct anchor_state {
    size expanded;
    bool open = false;  // its collection is still being read
  };
  struct collection {
    YAML::anchor_t anchor;
    size expanded;
  };

  static std::uint64_t saturated(std::uint64_t n) {
    return std::min(n, kMaxAliasedBytes + kMaxAliasedNodes + 1);
  }

  // Whether the node is the document's root.
  bool node(const YAML::Mark& mark) {
    if (documents.size() == 1) node_starts.push_back(mark.pos);
    if (documents.empty() || !documents.back().root.is_null()) return false;
    documents.back().root = mark;
    return true;
  }
  void add(const size& s) {
    if (open_.empty()) return;
    open_.back().expanded.nodes = saturated(open_.back().expanded.nodes + s.nodes);
    open_.back().expanded.bytes = saturated(open_.back().expanded.bytes + s.bytes);
  }
  void anchored(YAML::anchor_t anchor, const size& s, bool still_open) {
    if (anchor == YAML::NullAnchor) return;
    if (anchors_.size() <= anchor) anchors_.resize(anchor + 1);
    anchors_[anchor] = {s, still_open};
  }
  void leaf(YAML::anchor_t anchor, std::size_t bytes) {
    const size s{1, bytes};
    anchored(anchor, s, false);
    add(s);
  }
  void open(YAML::anchor_t anchor) {
    anchored(anchor, {}, true);
    open_.push_back({anchor, {1, 0}});
  }
  void close() {
    if (open_.empty()) return;
    const collection done = open_.back();
    open_.pop_back();
    anchored(done.anchor, done.expanded, false);
    add(done.expanded);
  }

  std::vector<anchor_state> anchors_;  // by anchor number (yaml-cpp counts them from 1)
  std::vector<collection> open_;       // the collections being read, outermost first
  size aliased_;                       // what the aliases repeated so far
};

// The byte at a mark's line and column (yaml-cpp counts them after a UTF-8 byte order mark,
// and its columns in characters: right for a line of ASCII before the mark), or 0.
char byte_at(std::string_view text, const YAML::Mark& mark) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  for (int line = 0; line < mark.line; ++line) {
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) return 0;
    text.remove_prefix(end + 1);
  }
  const auto column = static_cast<std::size_t>(std::max(mark.column, 0));
  return column < text.size() ? text[column] : '\0';
}

}  // namespace

load_result load_config_string(std::string_view yaml, const std::string& file_name,
                               const getenv_function& getenv) {
  load_result result;
  checker c(file_name, yaml, getenv);
  const std::string text(yaml);
  // The documents are counted from the parser's events before the first is loaded, not
  // with YAML::LoadAll: on some invalid input (a stray ',' outside any [] or {}) the parser
  // of yaml-cpp 0.7 returns empty documents forever without reading on, and LoadAll fills
  // memory with them (jbeder/yaml-cpp#1040). Here, a document that starts where the one
  // before it started is that input's error. Three documents are enough to tell.
  document_marks marks;
  YAML::Node root;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (marks.documents.size() < 3 && parser.HandleNextDocument(marks)) {
      const auto& d = marks.documents;
      if (d.size() >= 2 && d[d.size() - 1].start.pos == d[d.size() - 2].start.pos &&
          d[d.size() - 1].root.pos == d[d.size() - 2].root.pos) {
        const YAML::Mark at = d.back().root.is_null() ? d.back().start : d.back().root;
        c.error(at, byte_at(text, at) == ',' ? "invalid YAML: unexpected ','"
                                             : "invalid YAML: unexpected token");
        result.errors = c.take_errors();
        return result;
      }
    }
    if (marks.too_many_aliased) {
      c.error(*marks.too_many_aliased,
              marks.aliased_cycle
                  ? "this alias is inside the node its anchor names: it would repeat it forever"
                  : fmt::format("with this alias, the aliases of the file repeat more than {} "
                                "nodes or {} MiB of values of their anchors: no configuration "
                                "is that large (is an alias repeated by mistake?)",
                                grouped(kMaxAliasedNodes), kMaxAliasedBytes >> 20));
      result.errors = c.take_errors();
      return result;
    }
    c.set_node_starts(std::move(marks.node_starts));
    root = YAML::Load(text);  // the first document
  } catch (const YAML::DeepRecursion& e) {
    c.error(e.mark, "invalid YAML: nested too deeply");
    result.errors = c.take_errors();
    return result;
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message for a tab in an indentation ("illegal map value", "end of map
    // not found"…) does not say so: the first such line is named.
    std::string hint;
    std::size_t line = 1;
    for (std::size_t at = 0; at < text.size(); ++line) {
      const std::size_t indent_end = text.find_first_not_of(' ', at);
      if (indent_end < text.size() && text[indent_end] == '\t') {
        hint =
            fmt::format(" (line {} is indented with a tab: YAML indents with spaces only)", line);
        break;
      }
      const std::size_t eol = text.find('\n', at);
      if (eol == std::string::npos) break;
      at = eol + 1;
    }
    c.error(e.mark, fmt::format("invalid YAML: {}{}", e.msg, hint));
    result.errors = c.take_errors();
    return result;
  }
  const std::size_t documents = marks.documents.size();
  // Several documents: that is the error, even when the first is empty (say, a file that
  // starts with "---" twice).
  // At its root, or where it starts (its "---") when it is empty: the mark of a null
  // with nothing written is the next token's, maybe past the end of the file.
  if (documents > 1) {
    const auto& second = marks.documents[1];
    c.error(second.root.is_null() || second.empty ? second.start : second.root,
            "only one YAML document is allowed (remove the \"---\")");
  }
  if (documents == 0 || root.IsNull()) {
    if (documents <= 1) {
      c.error(YAML::Mark(), "the configuration is empty: it needs at least kafka and pipelines");
    }
  } else {
    config cfg = read_config(c, root);
    if (c.ok()) result.value = std::move(cfg);
  }
  result.errors = c.take_errors();
  return result;
}

load_result load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return load_result{std::nullopt, {config_error{path, 0, 0, "is a directory, not a file"}}};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::string reason = std::error_code(errno, std::generic_category()).message();
    return load_result{std::nullopt,
                       {config_error{path, 0, 0, fmt::format("cannot read the file: {}", reason)}}};
  }
  // Bounded: a device or a runaway file (/dev/zero) is an error, not all of memory.
  constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
  std::string text;
  std::array<char, 65536> chunk{};
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes) {
      return load_result{
          std::nullopt,
          {config_error{path, 0, 0, "is larger than 16 MiB: not a configuration file"}}};
    }
  }
  if (in.bad()) {
    const std::string reason = std::error_code(errno, std::generic_category()).message();
    return load_result{std::nullopt,
                       {config_error{path, 0, 0, fmt::format("cannot read the file: {}", reason)}}};
  }
  return load_config_string(text, path, process_getenv);
}

}  // namespace sketchd
