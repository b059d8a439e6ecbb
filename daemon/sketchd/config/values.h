// Value syntax of the configuration, exposed for the loader, for tests and for other
// commands:
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
// The parsers throw std::invalid_argument with a message such as "duration needs a unit
// (ms, s, m, h, d)". All are thread-safe (substitute_variables if its getenv is).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sketchd {

// Looks an environment variable up; nullopt when it is unset.
using getenv_function = std::function<std::optional<std::string>(std::string_view)>;

// The process environment. Thread-safe as long as nothing modifies the environment.
[[nodiscard]] std::optional<std::string> process_getenv(std::string_view name);

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

}  // namespace sketchd
