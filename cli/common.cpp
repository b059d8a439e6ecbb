#include "cli/common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "sketch/memory.h"
#include "sketch/text.h"

namespace sketch::cli {

void print_stderr(std::string_view text) noexcept {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

// "1000", "10k", "1.5M", "2G": digits, an optional decimal fraction, an optional decimal
// suffix (k or K, M, G). Read digit by digit, not with std::stod, which would also take
// "0x10", " 10" or "1e3", and which makes 1.001M 1000999.9999999999, not a whole number.
std::uint64_t parse_count(const std::string& option, const std::string& text) {
  constexpr std::uint64_t kMax = 1'000'000'000'000'000;  // 1000000G, far beyond 2^40 bits
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::string digits;  // the number is digits × 10^exponent
  int exponent = 0;
  std::size_t i = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) digits += text[i];
  if (!digits.empty() && i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && is_digit(text[i]); ++i, --exponent) digits += text[i];
  }
  const std::string_view suffix = std::string_view(text).substr(i);
  if (suffix == "k" || suffix == "K") {
    exponent += 3;
  } else if (suffix == "M") {
    exponent += 6;
  } else if (suffix == "G") {
    exponent += 9;
  } else if (!suffix.empty() || digits.empty()) {
    throw usage_error(fmt::format(
        "{}: \"{}\" is not a count (digits, with a k, M or G suffix if you like: 1000, 10k, 1.5M)",
        option, text));
  }
  // The digits past the point that the suffix does not cover must be zeros.
  for (; exponent < 0; ++exponent) {
    if (digits.back() != '0') {
      throw usage_error(fmt::format("{}: \"{}\" is not a whole number", option, text));
    }
    digits.pop_back();
  }
  digits.append(static_cast<std::size_t>(exponent), '0');
  digits.erase(0, digits.find_first_not_of('0'));
  if (digits.empty()) throw usage_error(fmt::format("{}: \"{}\" must be at least 1", option, text));
  if (digits.size() > 16 || std::stoull(digits) > kMax) {
    throw usage_error(fmt::format("{}: \"{}\" is too large (at most 1000000G)", option, text));
  }
  return std::stoull(digits);
}

double parse_probability(const std::string& option, double p, double max) {
  if (!(p > 0 && p < max))
    throw usage_error(fmt::format("{}: must be in (0, {}), got {}", option, max, p));
  return p;
}

// A probability with six significant digits: a plain decimal number, or below a millionth
// the same digits with an exponent (2.05891e-226).
std::string decimal(double p) {
  if (p <= 0) return "0";
  // Rounded to six significant digits first, so that the number of decimals follows the
  // rounded value (0.000999999996 is 0.00100000, not 0.001000000).
  // strtod, not stod: stod throws on a subnormal result (1e-310), which is a fine answer.
  const double rounded = std::strtod(fmt::format("{:.5e}", p).c_str(), nullptr);
  if (rounded >= 1) return "1";
  // Below a millionth, fixed point would be mostly zeros (230 of them at 1e-229): the
  // same six digits with an exponent, as awk and Python read them.
  if (rounded < 1e-6) return fmt::format("{:.5e}", rounded);
  const int digits = std::max(0, 5 - static_cast<int>(std::floor(std::log10(rounded))));
  return fmt::format("{:.{}f}", rounded, digits);
}

// A filter of `bytes` must fit in the memory this process may use: zeroing one that does
// not would end in the OOM killer, after a long wait. A bad argument, named.
void check_fits(std::string_view options, double bytes, std::string_view what) {
  const double usable = static_cast<double>(sketch::usable_memory_bytes());
  if (bytes <= usable) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  throw usage_error(
      fmt::format("{}: the {} needs at least {:.3g} GiB, more than the {:.3g} GiB of memory "
                  "this process may use",
                  options, what, bytes / kGiB, usable / kGiB));
}

// Every FILE must be readable before any output: a missing one is a bad argument.
void check_readable(const std::vector<std::string>& files) {
  for (const std::string& name : files) {
    if (name == "-") continue;
    int error = 0;
    struct stat st {};
    if (::access(name.c_str(), R_OK) != 0) {
      error = errno;
    } else if (::stat(name.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      error = EISDIR;  // access() grants a directory, and its first read fails
    }
    if (error != 0) {
      throw usage_error(fmt::format("FILE: cannot read {}: {}", name, std::strerror(error)));
    }
  }
}

// The output goes through stdio's buffer, so a write error (a full disk, a closed stdout)
// shows in the result of fwrite or, at the latest, of the last fflush: an I/O error, exit
// status 1, never a silent loss. (A closed pipe ends the process by SIGPIPE, as for cat.)
std::string cannot_write() {
  return fmt::format("cannot write the output: {}", std::strerror(errno));
}

// Writes to stdout; a write error ends the command at once, not after the rest of the input.
void write_out(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
    throw std::runtime_error(cannot_write());
  }
}

// An error on one line of stderr, "sketch: MESSAGE", whatever the arguments quoted in the
// message hold (a newline, an escape sequence). Never throws, like print_stderr.
void print_error(std::string_view message) noexcept {
  try {
    print_stderr(fmt::format("sketch: {}\n", escape_controls(message)));
  } catch (...) {  // out of memory: the message as it is
    print_stderr("sketch: ");
    print_stderr(message);
    print_stderr("\n");
  }
}

}  // namespace sketch::cli
