// What the `sketch` commands share: their arguments' parsing, their output and errors,
// and the progress line.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sketch::cli {

// A usage error: printed as one line, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "1000", "10k", "1.5M", "2G": digits, an optional decimal fraction, an optional decimal
// suffix (k or K, M, G); at least 1, at most 1000000G. A usage error naming `option`
// otherwise.
[[nodiscard]] std::uint64_t parse_count(const std::string& option, const std::string& text);

// `p` when it is in (0, max), else a usage error naming `option`.
[[nodiscard]] double parse_probability(const std::string& option, double p, double max = 1.0);

// A probability with six significant digits: a plain decimal number, or below a millionth
// the same digits with an exponent (2.05891e-226).
[[nodiscard]] std::string decimal(double p);

// Runs `size`, which sizes or builds a filter or sketch from the options named by `options`:
// a size the library refuses (a filter over 2^40 bits, a Count-Min width or depth over its
// maximum) or that memory cannot hold is a usage error naming them.
template <class F>
void sized_by(std::string_view options, F&& size) {
  try {
    size();
  } catch (const std::invalid_argument& e) {
    throw usage_error(fmt::format("{}: {}", options, e.what()));
  } catch (const std::bad_alloc&) {
    throw usage_error(fmt::format("{}: not enough memory for this size", options));
  }
}

// A filter of `bytes` must fit in the memory this process may use: zeroing one that does
// not would end in the OOM killer, after a long wait. A bad argument, named.
void check_fits(std::string_view options, double bytes, std::string_view what = "filter");

// Every FILE must be readable before any output: a missing one is a bad argument.
void check_readable(const std::vector<std::string>& files);

// The output goes through stdio's buffer, so a write error (a full disk, a closed stdout)
// shows in the result of fwrite or, at the latest, of the last fflush: an I/O error, exit
// status 1, never a silent loss. (A closed pipe ends the process by SIGPIPE, as for cat.)
[[nodiscard]] std::string cannot_write();

// Writes to stdout; a write error ends the command at once, not after the rest of the input.
void write_out(std::string_view text);

// Writes TEXT to stderr, never throwing.
void print_stderr(std::string_view text) noexcept;

// An error on one line of stderr, "sketch: MESSAGE", whatever the arguments quoted in the
// message hold (a newline, an escape sequence). Never throws: when stderr cannot be
// written (closed, a full disk), the exit status still says what happened.
void print_error(std::string_view message) noexcept;

// Progress on stderr, only when it is a terminal, at most twice a second. Not thread-safe:
// one owner, the thread that reads the input.
class progress {
 public:
  // `quiet_on_output_terminal`: no progress when the output goes to a terminal as well (the
  // output lines would run into the progress line).
  explicit progress(const char* command, bool quiet_on_output_terminal = false)
      : command_(command),
        enabled_(isatty(STDERR_FILENO) == 1 &&
                 !(quiet_on_output_terminal && isatty(STDOUT_FILENO) == 1)) {}
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;
  // Also when an error ends the command: its message then starts on a clean line.
  ~progress() { done(); }
  template <class F>
  void tick(std::uint64_t lines, F&& describe) {
    if (!enabled_ || (lines & 0x3FF) != 0) return;  // the clock every 1024 lines: ~20 ns
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    std::fprintf(stderr, "\r%s: %s\033[K", command_, describe().c_str());
    shown_ = true;
  }
  // Clears the progress line, if one was shown.
  void done() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  const char* command_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace sketch::cli
