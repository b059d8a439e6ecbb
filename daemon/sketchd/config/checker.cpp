#include "sketchd/config/checker.h"

#include <algorithm>
#include <stdexcept>

#include "sketchd/kafka/property_policy.h"

namespace sketchd::config_detail {
namespace {

using std::chrono::milliseconds;

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

}  // namespace

YAML::Mark mark_of(const field& f) {
  if (f.node.IsNull() || f.node.Mark().is_null()) return f.key_mark;
  return f.node.Mark();
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

std::string prefix(std::string_view path) {
  return path.empty() ? std::string() : fmt::format("{}: ", path);
}

std::string shown_key(std::string_view key) {
  constexpr std::size_t kMaxShown = 64;
  if (key.size() <= kMaxShown) return std::string(key);
  std::size_t cut = kMaxShown;
  while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}…", key.substr(0, cut));
}

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

std::string grouped(std::uint64_t n) {
  const std::string digits = fmt::format("{}", n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string real_range::describe() const {
  if (high == std::numeric_limits<double>::infinity()) {
    return fmt::format("must be {} {}", low_open ? "greater than" : "at least", low);
  }
  return fmt::format("must be in {}{}, {}{}", low_open ? '(' : '[', low, high,
                     high_open ? ')' : ']');
}

// ---------------------------------------------------------------------------------------
// checker

checker::checker(std::string file, std::string_view source, const getenv_function& getenv)
    : file_(std::move(file)), positions_(source), getenv_(getenv) {}

void checker::error(const YAML::Mark& mark, std::string message) {
  const bool known = !mark.is_null();
  errors_.push_back(config_error{file_, known ? mark.line + 1 : 0, known ? mark.column + 1 : 0,
                                 std::move(message)});
}

void checker::error(const field& f, std::string_view message) {
  error(mark_of(f), prefix(f.path) + std::string(message));
}

std::vector<config_error> checker::take_errors() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const auto& a, const auto& b) {
    return std::pair(a.line, a.column) < std::pair(b.line, b.column);
  });
  return std::move(errors_);
}

std::optional<std::string> checker::text(const field& f, std::string_view what) {
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
      error(positions_.mark_in_scalar(f.node.Mark(), f.node.Scalar(), p.offset),
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

bool checker::empty_after_substitution(const field& f) const {
  if (!f.node.IsScalar()) return false;
  try {
    return substitute_variables(f.node.Scalar(), getenv_).empty();
  } catch (const substitution_error&) {
    return false;
  }
}

std::optional<std::string> checker::nonempty_text(const field& f) {
  auto value = text(f);
  if (value && value->empty()) {
    error(f, "must not be empty");
    return std::nullopt;
  }
  return value;
}

std::optional<std::uint64_t> checker::count(const field& f, std::uint64_t low, std::uint64_t high) {
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

std::optional<milliseconds> checker::duration(const field& f, milliseconds low, milliseconds high) {
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

std::optional<double> checker::real(const field& f, const real_range& range) {
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

std::optional<bool> checker::boolean(const field& f) {
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

std::optional<std::string> checker::topic(const field& f, bool empty_ok) {
  auto value = text(f, "a topic name");
  if (!value || (empty_ok && value->empty()) || is_valid_topic_name(*value)) return value;
  error(f, fmt::format(
               "not a valid Kafka topic name (1 to 249 letters, digits, \".\", \"_\" or \"-\"), "
               "got \"{}\"",
               *value));
  return std::nullopt;
}

std::optional<std::vector<field>> checker::list(const field& f) {
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
      mark = positions_.null_entry_mark(mark);
    }
    elements.push_back(field{element, mark, fmt::format("{}[{}]", f.path, elements.size())});
  }
  return elements;
}

// ---------------------------------------------------------------------------------------
// mapping

mapping::mapping(checker& c, const field& self, std::vector<std::string_view> known, bool any_key)
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
  for (auto it = self.node.begin(); it != self.node.end(); ++it)
    add(it->first, it->second, any_key);
}

void mapping::add(const YAML::Node& key_node, const YAML::Node& value_node, bool any_key) {
  checker& c = *checker_;
  if (!key_node.IsScalar()) {
    c.error(key_node.Mark(), prefix(self_.path) + "keys must be strings");
    return;
  }
  const std::string& key = key_node.Scalar();
  const std::string where = self_.path.empty() ? "at the top level" : "in " + self_.path;
  if (!any_key && std::find(known_.begin(), known_.end(), key) == known_.end()) {
    if (const auto close = suggest(key, known_)) {
      c.error(key_node.Mark(), fmt::format("unknown key \"{}\" {} (did you mean \"{}\"?)",
                                           shown_key(key), where, *close));
    } else {
      c.error(key_node.Mark(), fmt::format("unknown key \"{}\" {} (known keys: {})", shown_key(key),
                                           where, fmt::join(known_, ", ")));
    }
    return;
  }
  if (const auto [at, fresh] = index_.try_emplace(key, entries_.size()); !fresh) {
    c.error(key_node.Mark(),
            fmt::format("duplicate key \"{}\" {} (first at line {})", shown_key(key), where,
                        entries_[at->second].second.key_mark.line + 1));
    return;
  }
  entries_.emplace_back(key, field{value_node, key_node.Mark(), child_path(key, any_key),
                                   any_key && kafka::is_secret_property(key)});
}

const field* mapping::find(std::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

std::optional<field> mapping::get(std::string_view key) const {
  const field* f = find(key);
  if (f == nullptr || f->node.IsNull()) return std::nullopt;
  return *f;
}

std::optional<field> mapping::require(std::string_view key) const {
  if (!valid_) return std::nullopt;
  const field* f = find(key);
  if (f == nullptr) {
    checker_->error(mark(), fmt::format("{}missing required key \"{}\"", prefix(self_.path), key));
    return std::nullopt;
  }
  if (f->node.IsNull()) {
    checker_->error(*f, "needs a value");
    return std::nullopt;
  }
  return *f;
}

std::string mapping::child_path(std::string_view key, bool any_key) const {
  if (any_key) return fmt::format("{}[\"{}\"]", self_.path, shown_key(key));
  return self_.path.empty() ? std::string(key) : fmt::format("{}.{}", self_.path, key);
}

// ---------------------------------------------------------------------------------------
// Reading helpers

void read_optional_text(checker& c, const mapping& m, std::string_view key,
                        std::optional<std::string>& out) {
  if (const auto f = m.get(key)) {
    if (auto value = c.text(*f); value && !value->empty()) out = std::move(value);
  }
}

bool is_internal_topic(std::string_view topic) {
  return topic == "__consumer_offsets" || topic == "__transaction_state";
}

void refuse_internal_topic(checker& c, const field& f, std::string_view topic) {
  c.error(f,
          fmt::format("{} is one of Kafka's internal topics: sketchd does not write to it", topic));
}

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

}  // namespace sketchd::config_detail
