// `sketch`: the sketch library on files and pipes. The interface is the contract of
// DESIGN.md ("sketch command"): size, fpr, dedup, topk. Bad arguments: one line naming
// the argument on stderr, exit status 2.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/line_reader.h"
#include "sketch/blocked_bloom.h"
#include "sketch/bloom.h"
#include "sketch/bloom_math.h"
#include "sketch/count_min.h"
#include "sketch/memory.h"
#include "sketch/text.h"
#include "sketch/top_k.h"

namespace sketch::cli {
namespace {

// A usage error: printed as one line, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "1000", "10k", "1.5M", "2G": digits, an optional decimal fraction, an optional decimal
// suffix (k or K, M, G). Read digit by digit, not with std::stod, which would also take
// "0x10", " 10" or "1e3", and which makes 1.001M 1000999.9999999999, not a whole number.
[[nodiscard]] std::uint64_t parse_count(const std::string& option, const std::string& text) {
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

[[nodiscard]] double parse_probability(const std::string& option, double p, double max = 1.0) {
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
void check_fits(std::string_view options, double bytes, std::string_view what = "filter") {
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

// Writes TEXT to stderr, never throwing: when stderr cannot be written (closed, a full
// disk), the exit status still says what happened.
void print_stderr(std::string_view text) noexcept {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
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

// ---------------------------------------------------------------------------------------

struct size_options {
  std::string items;
  double fpr = 0;
  std::string layout = "blocked";
};

int run_size(const size_options& o) {
  const std::uint64_t n = parse_count("--items", o.items);
  const double p = parse_probability("--fpr", o.fpr);
  std::uint64_t bits = 0;
  std::uint32_t hashes = 0;
  double fpr = 0;
  sized_by("--items, --fpr", [&] {
    if (o.layout == "classic") {
      const auto s = bloom_math::suggest_classic(n, p);
      // The most a filter takes, as for the blocked layout: `dedup` would refuse it.
      if (s.bits > bloom_filter::kMaxBits) {
        throw std::invalid_argument(
            fmt::format("bloom_filter: {} items at fpr {} need more than 2^40 bits", n, p));
      }
      bits = s.bits;
      hashes = s.hashes;
      fpr = s.fpr;
    } else {
      bits = blocked_bloom_filter::suggest_bits(n, p);
      hashes = blocked_bloom_filter::kHashes;
      fpr = blocked_bloom_filter::fpr(static_cast<double>(bits), static_cast<double>(n));
    }
  });
  write_out(fmt::format("bits: {}\nbytes: {}\nhashes: {}\nbits_per_item: {:.4f}\nfpr: {}\n", bits,
                        (bits + 7) / 8, hashes, static_cast<double>(bits) / static_cast<double>(n),
                        decimal(fpr)));
  return 0;
}

struct fpr_options {
  std::string bits;
  std::string items;
  std::optional<std::uint32_t> hashes;
  std::string layout = "classic";
};

int run_fpr(const fpr_options& o) {
  const double m = static_cast<double>(parse_count("--bits", o.bits));
  const double n = static_cast<double>(parse_count("--items", o.items));
  if (o.layout == "blocked") {
    if (o.hashes && *o.hashes != blocked_bloom_filter::kHashes) {
      throw usage_error(fmt::format("--hashes: a blocked filter always uses {} hashes, got {}",
                                    blocked_bloom_filter::kHashes, *o.hashes));
    }
    write_out(fmt::format("{}\n", decimal(blocked_bloom_filter::fpr(m, n))));
    return 0;
  }
  if (!o.hashes) throw usage_error(fmt::format("--hashes: required for the {} layout", o.layout));
  if (*o.hashes < 1 || *o.hashes > bloom_filter::kMaxHashes) {
    throw usage_error(
        fmt::format("--hashes: must be in 1..{}, got {}", bloom_filter::kMaxHashes, *o.hashes));
  }
  const double k = *o.hashes;
  write_out(
      fmt::format("{}\n", decimal(o.layout == "partitioned" ? bloom_math::fpr_partitioned(m, n, k)
                                                            : bloom_math::fpr_exact(m, n, k))));
  return 0;
}

struct dedup_options {
  std::string items = "10M";
  std::optional<double> fpr;
  std::optional<double> bits_per_item;
  std::optional<std::uint32_t> hashes;
  std::optional<std::string> layout;  // blocked, or classic when --hashes is given
  std::vector<std::string> files;
};

template <class Filter>
int dedup_with(Filter& filter, const dedup_options& o, std::uint64_t capacity, double target) {
  line_reader reader(o.files);
  progress bar("sketch dedup", /*quiet_on_output_terminal=*/true);
  std::uint64_t lines = 0;
  std::uint64_t unique = 0;
  reader.for_each_line(
      [&](std::string_view line) {
        ++lines;
        if (!filter.test_and_insert(line)) {
          ++unique;
          // What write_out does, inline: through write_out (two calls a line), dedup of 5M lines
          // took 1.7 times as long (GCC 12, -O3).
          if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() ||
              std::fputc('\n', stdout) == EOF) {
            throw std::runtime_error(cannot_write());
          }
        }
        bar.tick(lines, [&] {
          return fmt::format("{} lines, {} unique, {:.0f} MiB read", lines, unique,
                             static_cast<double>(reader.bytes_read()) / (1 << 20));
        });
      },
      [] {
        // The input has nothing more for now: the lines first seen so far go out.
        if (std::fflush(stdout) != 0) throw std::runtime_error(cannot_write());
      });
  bar.done();
  if (std::fflush(stdout) != 0) throw std::runtime_error(cannot_write());
  if (unique > capacity) {
    // Past its capacity the filter takes more and more new lines for seen ones, so `unique`
    // undercounts: the fill tells the distinct lines better (infinite when every bit is set).
    const double estimate = filter.estimated_items();
    const auto distinct =
        std::isfinite(estimate)
            ? std::max(unique, static_cast<std::uint64_t>(std::min(estimate, 1e18)))
            : unique;
    const std::string how_many =
        std::isfinite(estimate)
            ? fmt::format("about {} distinct lines (estimated from the filter's fill)", distinct)
            : fmt::format(
                  "more than {} distinct lines (the filter is full: every line after it "
                  "filled up was taken as seen)",
                  distinct);
    print_stderr(fmt::format(
        "sketch dedup: {}, more than --items {}: the false-positive rate grew from {} to about "
        "{}; rerun with {}\n",
        how_many, capacity, decimal(target), decimal(filter.estimated_fpr()),
        std::isfinite(estimate) ? fmt::format("--items {} or more", distinct + distinct / 4)
                                : std::string("a much larger --items")));
  }
  return 0;
}

int run_dedup(const dedup_options& o) {
  const std::uint64_t n = parse_count("--items", o.items);
  if (o.fpr && o.bits_per_item)
    throw usage_error("--bits-per-item: give either --fpr or --bits-per-item, not both");
  if (o.hashes && !o.bits_per_item) throw usage_error("--hashes: only with --bits-per-item");
  if (o.bits_per_item && !(*o.bits_per_item >= 1 && *o.bits_per_item <= 1024)) {
    throw usage_error(
        fmt::format("--bits-per-item: must be in [1, 1024], got {}", *o.bits_per_item));
  }
  const double p = o.fpr ? parse_probability("--fpr", *o.fpr) : 0.001;
  // --hashes asks for a number of hash functions, which only the classic layout takes.
  const std::string layout = o.layout.value_or(o.hashes ? "classic" : "blocked");
  const std::string_view sizing = o.bits_per_item ? "--items, --bits-per-item" : "--items, --fpr";
  check_readable(o.files);
  // A line out per line in: a large buffer saves write calls. Static, because stdout uses it
  // until exit() flushes it, after every local is gone when an exception ends the command.
  // On a terminal, each line shows as soon as it is first seen; into a pipe or a file, the
  // lines so far go out whenever the input has nothing more for now (`tail -f log | sketch
  // dedup | …`).
  static char out_buffer[1 << 20];
  if (isatty(STDOUT_FILENO) == 0) std::setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
  // The bits the filter of this layout takes (within a block of 256 bits), for the memory
  // check before it is allocated: a blocked filter needs more than a classic one at a low
  // --fpr (3 times at 1e-7).
  double bits = 0;
  if (o.bits_per_item) {
    bits = *o.bits_per_item * static_cast<double>(n);
  } else if (layout == "classic") {
    sized_by(sizing, [&] { bits = static_cast<double>(bloom_math::suggest_classic(n, p).bits); });
  } else {
    sized_by(sizing, [&] { bits = static_cast<double>(blocked_bloom_filter::suggest_bits(n, p)); });
  }
  check_fits(sizing, bits / 8);
  if (layout == "classic") {
    std::optional<bloom_filter> f;
    if (o.bits_per_item) {
      const auto bits =
          static_cast<std::uint64_t>(std::ceil(*o.bits_per_item * static_cast<double>(n)));
      const std::uint32_t k = o.hashes ? *o.hashes : bloom_math::optimal_hashes(*o.bits_per_item);
      if (k < 1 || k > bloom_filter::kMaxHashes) {
        throw usage_error(
            fmt::format("--hashes: must be in 1..{}, got {}", bloom_filter::kMaxHashes, k));
      }
      sized_by(sizing, [&] { f.emplace(bits, k); });
    } else {
      sized_by(sizing, [&] { f.emplace(bloom_filter::for_capacity(n, p)); });
    }
    return dedup_with(
        *f, o, n,
        bloom_math::fpr_exact(static_cast<double>(f->bits()), static_cast<double>(n), f->hashes()));
  }
  if (o.hashes && *o.hashes != blocked_bloom_filter::kHashes) {
    throw usage_error(fmt::format(
        "--hashes: a blocked filter always uses {} hashes, got {} (leave out --layout blocked)",
        blocked_bloom_filter::kHashes, *o.hashes));
  }
  std::optional<blocked_bloom_filter> f;
  if (o.bits_per_item) {
    sized_by(sizing, [&] {
      f.emplace(static_cast<std::uint64_t>(std::ceil(*o.bits_per_item * static_cast<double>(n))));
    });
  } else {
    sized_by(sizing, [&] { f.emplace(blocked_bloom_filter::for_capacity(n, p)); });
  }
  return dedup_with(
      *f, o, n, blocked_bloom_filter::fpr(static_cast<double>(f->bits()), static_cast<double>(n)));
}

struct topk_options {
  std::uint32_t k = 10;
  double epsilon = 0.0001;
  double delta = 0.001;
  std::vector<std::string> files;
};

int run_topk(const topk_options& o) {
  if (o.k < 1 || o.k > 1000) throw usage_error(fmt::format("-k: must be in 1..1000, got {}", o.k));
  const double epsilon = parse_probability("--epsilon", o.epsilon);
  const double delta = parse_probability("--delta", o.delta);
  check_readable(o.files);
  // count_min_sketch::from_error in steps, so that a limit names the option that reaches it.
  std::uint32_t width = 0;
  std::uint32_t depth = 0;
  std::optional<count_min_sketch> cms;
  sized_by("--epsilon", [&] { width = count_min_sketch::suggest_width(epsilon); });
  sized_by("--delta", [&] { depth = count_min_sketch::suggest_depth(delta); });
  check_fits("--epsilon, --delta",
             static_cast<double>(width) * static_cast<double>(depth) * sizeof(std::uint32_t),
             "sketch");
  sized_by("--epsilon, --delta",
           [&] { cms.emplace(width, depth, kDefaultSeed, /*conservative=*/true); });
  // Candidates: a few times k, so that items near the k-th do not push each other out.
  top_k_tracker tracker(o.k, epsilon,
                        std::clamp<std::uint32_t>(4 * o.k, 64, top_k_tracker::kMaxCapacity));
  line_reader reader(o.files);
  progress bar("sketch topk");
  std::uint64_t lines = 0;
  reader.for_each_line([&](std::string_view line) {
    ++lines;
    const hash128 h = hash_item(line, kDefaultSeed);
    const std::uint64_t estimate = cms->update(h);
    tracker.offer(h, line, estimate, cms->total());
    bar.tick(lines, [&] {
      return fmt::format("{} lines, {:.0f} MiB read", lines,
                         static_cast<double>(reader.bytes_read()) / (1 << 20));
    });
  });
  bar.done();
  tracker.refresh([&](const hash128& h) { return cms->estimate(h); }, cms->total());
  for (const auto& e : tracker.top()) write_out(fmt::format("{}\t{}\n", e.estimate, e.item));
  return 0;
}

}  // namespace
}  // namespace sketch::cli

namespace sketch::cli {
namespace {

int run_main(int argc, char** argv) {
  CLI::App app{
      "sketch: probabilistic sketches on files and pipes (Bloom filters, Count-Min).\n"
      "Items are lines, compared byte for byte (a CRLF line keeps its \\r: convert with\n"
      "`tr -d '\\r'` first); FILE arguments are read in order, stdin when there are none.",
      "sketch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("sketch {}", SKETCH_VERSION),
                       "Print the version and exit");
  app.set_help_all_flag("--help-all", "Show the help of every command");

  size_options size;
  auto* size_cmd =
      app.add_subcommand("size", "Size a Bloom filter for N items at a target false-positive rate");
  size_cmd->add_option("--items", size.items, "Expected distinct items (k, M, G suffixes allowed)")
      ->required();
  size_cmd->add_option("--fpr", size.fpr, "Target false-positive probability, in (0, 1)")
      ->required();
  size_cmd
      ->add_option("--layout", size.layout,
                   "classic, or blocked (split-block, 8 hashes; the default)")
      ->check(CLI::IsMember({"classic", "blocked"}));

  fpr_options fpr;
  auto* fpr_cmd = app.add_subcommand(
      "fpr", "False-positive probability of a filter with M bits, N items, K hashes");
  fpr_cmd
      ->add_option("--bits", fpr.bits,
                   "Bits (per hash function for the partitioned layout; blocked rounds up to whole "
                   "256-bit blocks)")
      ->required();
  fpr_cmd->add_option("--items", fpr.items, "Items inserted")->required();
  fpr_cmd->add_option("--hashes", fpr.hashes,
                      "Hash functions (classic, partitioned; blocked uses 8)");
  fpr_cmd
      ->add_option("--layout", fpr.layout,
                   "classic (one vector, the default), partitioned (K vectors of M bits), blocked")
      ->check(CLI::IsMember({"classic", "partitioned", "blocked"}));

  dedup_options dedup;
  auto* dedup_cmd = app.add_subcommand("dedup",
                                       "Print each line the first time it is seen (bounded memory; "
                                       "rare false positives drop a new line)");
  dedup_cmd->add_option("--items", dedup.items,
                        "Distinct lines expected (default 10M); sizes the filter");
  dedup_cmd->add_option("--fpr", dedup.fpr, "Target false-positive probability (default 0.001)");
  dedup_cmd->add_option("--bits-per-item", dedup.bits_per_item,
                        "Bits per expected item, instead of --fpr");
  dedup_cmd->add_option("--hashes", dedup.hashes,
                        "Hash functions with --bits-per-item (then the layout is classic unless "
                        "--layout says blocked)");
  dedup_cmd
      ->add_option(
          "--layout", dedup.layout,
          "blocked (the default, fastest; 8 hashes) or classic (the default with --hashes)")
      ->check(CLI::IsMember({"classic", "blocked"}));
  dedup_cmd->add_option("FILE", dedup.files, "Input files (stdin when none, or -)");

  topk_options topk;
  auto* topk_cmd = app.add_subcommand(
      "topk", "Print the K most frequent lines as ESTIMATE<TAB>ITEM, highest first");
  topk_cmd->add_option("-k", topk.k, "How many items, 1 to 1000 (default 10)");
  topk_cmd->add_option("--epsilon", topk.epsilon,
                       "Count-Min error, in (0, 1): estimate <= true + epsilon*N (default 0.0001)");
  topk_cmd->add_option("--delta", topk.delta,
                       "Probability that the error bound fails, in (0, 1) (default 0.001)");
  topk_cmd->add_option("FILE", topk.files, "Input files (stdin when none, or -)");

  int status = 2;
  try {
    // A first word that is no command would otherwise be reported as a missing command.
    const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
    if (argc > 1 && argv[1][0] != '-' &&
        std::none_of(commands.begin(), commands.end(),
                     [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
      throw usage_error(
          fmt::format("{}: not a command (size, fpr, dedup or topk; see sketch --help)", argv[1]));
    }
    // And an option before the command as a missing command, or as a missing option.
    if (argc > 1 && argv[1][0] == '-' && argv[1][1] != '\0') {
      const std::string_view first = argv[1];
      if (first != "-h" && first != "--help" && first != "--help-all" && first != "--version" &&
          first != "--") {
        throw usage_error(fmt::format(
            "{}: not an option of sketch itself; a command's options go after it (sketch COMMAND "
            "[OPTIONS]; see sketch --help)",
            first.substr(0, first.find('='))));
      }
    }
    app.parse(argc, argv);
    if (*size_cmd) status = run_size(size);
    if (*fpr_cmd) status = run_fpr(fpr);
    if (*dedup_cmd) status = run_dedup(dedup);
    if (*topk_cmd) status = run_topk(topk);
  } catch (const CLI::CallForHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    status = app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    return 2;
  } catch (const usage_error& e) {
    print_error(e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);  // the output so far, before the error
    print_error(e.what());
    return 1;
  }
  // exit() would flush the rest of the output too, but ignore a write error.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    print_error(cannot_write());
    return 1;
  }
  return status;
}

}  // namespace
}  // namespace sketch::cli

int main(int argc, char** argv) {
  int status = 1;
  try {
    status = sketch::cli::run_main(argc, argv);
  } catch (const std::exception& e) {  // --help or --version to a stdout that fails, memory…
    sketch::cli::print_error(e.what());
  }
  std::cout.flush();
  if ((std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) && status == 0) {
    sketch::cli::print_error(sketch::cli::cannot_write());
    status = 1;
  }
  return status;
}
