// Value syntax of the configuration: durations, counts, reals, ${VAR} substitution, and
// the small helpers around them. See values.h for the rules.
#include "sketchd/config/values.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace sketchd {
namespace {

constexpr std::uint64_t kMaxU64 = std::numeric_limits<std::uint64_t>::max();

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Parses [0-9]+ at the start of `text` into `value`; returns the number of digits, or
// throws when the number does not fit in 64 bits.
std::size_t leading_digits(std::string_view text, std::uint64_t& value, const char* too_large) {
  value = 0;
  std::size_t i = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (kMaxU64 - digit) / 10) throw std::invalid_argument(too_large);
    value = value * 10 + digit;
  }
  return i;
}

bool is_variable_name(std::string_view name) noexcept {
  if (name.empty() || is_digit(name.front())) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return c == '_' || is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  });
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text) {
  constexpr const char* kExpected = "expected a duration such as 500ms, 30s, 5m, 1h or 7d";
  constexpr const char* kTooLarge = "duration is too large";
  if (text.empty()) throw std::invalid_argument(kExpected);
  if (text.front() == '-') throw std::invalid_argument("a duration cannot be negative");
  std::uint64_t amount = 0;
  const std::size_t digits = leading_digits(text, amount, kTooLarge);
  if (digits == 0) throw std::invalid_argument(kExpected);
  const std::string_view unit = text.substr(digits);
  if (unit.empty()) {
    if (amount == 0) return std::chrono::milliseconds(0);
    throw std::invalid_argument("duration needs a unit (ms, s, m, h, d)");
  }
  if (unit.front() == '.' || unit.front() == ',') {
    throw std::invalid_argument("a duration is a whole number of its unit (write 90m, not 1.5h)");
  }
  std::uint64_t unit_ms = 0;
  if (unit == "ms") {
    unit_ms = 1;
  } else if (unit == "s") {
    unit_ms = 1000;
  } else if (unit == "m") {
    unit_ms = 60'000;
  } else if (unit == "h") {
    unit_ms = 3'600'000;
  } else if (unit == "d") {
    unit_ms = 86'400'000;
  } else {
    throw std::invalid_argument(
        fmt::format("unknown duration unit \"{}\" (use ms, s, m, h, d)", unit));
  }
  constexpr auto kMaxMs = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (amount > kMaxMs / unit_ms) throw std::invalid_argument(kTooLarge);
  return std::chrono::milliseconds(static_cast<std::int64_t>(amount * unit_ms));
}

std::uint64_t parse_count(std::string_view text) {
  constexpr const char* kExpected = "expected a count (a whole number, optionally with k, M or G)";
  constexpr const char* kTooLarge = "count is too large";
  constexpr const char* kNotWhole = "a count must be a whole number";
  if (text.empty()) throw std::invalid_argument(kExpected);
  if (text.front() == '-') throw std::invalid_argument("a count cannot be negative");
  std::uint64_t whole = 0;
  std::size_t i = leading_digits(text, whole, kTooLarge);
  if (i == 0) throw std::invalid_argument(kExpected);

  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(start, i - start);
    if (fraction.empty()) throw std::invalid_argument(kExpected);
  }
  const std::string_view suffix = text.substr(i);
  std::uint64_t multiplier = 1;
  std::size_t multiplier_digits = 0;
  if (suffix == "k") {
    multiplier = 1'000;
    multiplier_digits = 3;
  } else if (suffix == "M") {
    multiplier = 1'000'000;
    multiplier_digits = 6;
  } else if (suffix == "G") {
    multiplier = 1'000'000'000;
    multiplier_digits = 9;
  } else if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E') &&
             std::all_of(suffix.begin() + 1, suffix.end(), is_digit)) {
    throw std::invalid_argument("a count has no exponent: 1000000 or 1M, not 1e6");
  } else if (!suffix.empty()) {
    throw std::invalid_argument(fmt::format("unknown count suffix \"{}\" (use k, M or G)", suffix));
  }

  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (fraction.size() > multiplier_digits) throw std::invalid_argument(kNotWhole);
  std::uint64_t fraction_value = 0;
  (void)leading_digits(fraction, fraction_value, kTooLarge);
  for (std::size_t k = fraction.size(); k < multiplier_digits; ++k) fraction_value *= 10;

  if (whole > (kMaxU64 - fraction_value) / multiplier) throw std::invalid_argument(kTooLarge);
  return whole * multiplier + fraction_value;
}

double parse_real(std::string_view text) {
  constexpr const char* kExpected = "expected a number such as 0.001 or 1e-3";
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  if (digits.empty() || (digits.size() < text.size() && digits.front() == '-'))
    throw std::invalid_argument(kExpected);
  double value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) throw std::invalid_argument("number is out of range");
  if (ec != std::errc() || ptr != end || !std::isfinite(value)) {
    throw std::invalid_argument(kExpected);
  }
  return value;
}

std::string substitute_variables(std::string_view text, const getenv_function& getenv) {
  std::string out;
  out.reserve(text.size());
  std::vector<substitution_problem> problems;  // every one, then thrown together
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '$' || i + 1 == text.size() || (text[i + 1] != '$' && text[i + 1] != '{')) {
      out += c;
      ++i;
      continue;
    }
    if (text[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    const std::size_t close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      problems.push_back({"unterminated \"${\" (write \"$$\" for a literal \"$\")", i,
                          substitution_problem::kind::unterminated});
      break;  // the rest of the text is inside it
    }
    const std::string_view inside = text.substr(i + 2, close - i - 2);
    const std::size_t sep = inside.find(":-");
    const std::string_view name = inside.substr(0, sep);
    const std::size_t start = i;
    i = close + 1;
    if (!is_variable_name(name)) {
      problems.push_back({fmt::format("invalid variable name \"{}\" in \"${{{}}}\" (letters, "
                                      "digits and _, not starting with a digit)",
                                      name, inside),
                          start, substitution_problem::kind::invalid_name});
      continue;
    }
    // The default, with `$$` read as `$`: checked even when the variable is set, so that
    // whether a file is valid does not depend on the environment.
    std::optional<std::string> fallback;
    if (sep != std::string_view::npos) {
      const std::size_t from = start + 2 + sep + 2;
      fallback.emplace();
      for (std::size_t j = from; j < close; ++j) {
        if (text[j] == '$' && j + 1 < close && text[j + 1] == '$') {
          *fallback += '$';
          ++j;
        } else if (text[j] == '$' && text[j + 1] == '{') {
          problems.push_back(
              {fmt::format("nested \"${{…}}\" in the default of ${{{}}} is not supported (a "
                           "default is plain text; \"$$\" in it is a literal \"$\")",
                           name),
               j, substitution_problem::kind::nested_default});
          fallback.reset();
          break;
        } else {
          *fallback += text[j];
        }
      }
      if (!fallback) continue;
    }
    std::optional<std::string> value = getenv ? getenv(name) : std::nullopt;
    if (fallback) {
      if (!value || value->empty()) value = std::move(fallback);
    } else if (!value) {
      problems.push_back(
          {fmt::format(
               "environment variable {0} is not set (write ${{{0}:-default}} to give a default)",
               name),
           start, substitution_problem::kind::unset_variable});
      continue;
    }
    out += *value;
  }
  if (!problems.empty()) throw substitution_error(std::move(problems));
  return out;
}

std::string format_duration(std::chrono::milliseconds d) {
  const std::int64_t ms = d.count();
  if (ms == 0) return "0s";
  struct unit {
    std::int64_t ms;
    const char* name;
  };
  constexpr unit kUnits[] = {{86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}};
  for (const unit& u : kUnits) {
    if (ms % u.ms == 0) return fmt::format("{}{}", ms / u.ms, u.name);
  }
  return fmt::format("{}ms", ms);
}

bool is_valid_topic_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 249 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return c == '.' || c == '_' || c == '-' || is_digit(c) || (c >= 'A' && c <= 'Z') ||
           (c >= 'a' && c <= 'z');
  });
}

std::optional<std::string> process_getenv(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace sketchd
