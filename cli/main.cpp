// `sketch`: the sketch library on files and pipes. The interface is the contract of
// DESIGN.md ("sketch command"): size, fpr, dedup, topk. Bad arguments: one line naming
// the argument on stderr, exit status 2.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "line_reader.h"
#include "sketch/blocked_bloom.h"
#include "sketch/bloom.h"
#include "sketch/bloom_math.h"
#include "sketch/count_min.h"
#include "sketch/top_k.h"

namespace sketch::cli {
namespace {

// A usage error: printed as one line, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "1000", "10k", "10M", "2G" (decimal suffixes).
std::uint64_t parse_count(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw usage_error(fmt::format("{}: \"{}\" is not a number", option, text));
  }
  const std::string suffix = text.substr(used);
  if (suffix == "k" || suffix == "K") {
    v *= 1e3;
  } else if (suffix == "M") {
    v *= 1e6;
  } else if (suffix == "G") {
    v *= 1e9;
  } else if (!suffix.empty()) {
    throw usage_error(fmt::format("{}: \"{}\" is not a count (use digits with k, M or G)", option, text));
  }
  if (!(v >= 1) || v > 1e15 || v != std::floor(v)) {
    throw usage_error(fmt::format("{}: \"{}\" must be a whole number of at least 1", option, text));
  }
  return static_cast<std::uint64_t>(v);
}

double parse_probability(const std::string& option, double p, double max = 1.0) {
  if (!(p > 0 && p < max)) throw usage_error(fmt::format("{}: must be in (0, {}), got {}", option, max, p));
  return p;
}

// A probability as a plain decimal number with six significant digits (no exponent).
std::string decimal(double p) {
  if (p <= 0) return "0";
  if (p >= 1) return "1";
  const int digits = std::max(0, 5 - static_cast<int>(std::floor(std::log10(p))));
  return fmt::format("{:.{}f}", p, digits);
}

// Runs `size`, which sizes or builds a filter from the options named by `options`: a size
// the library refuses (more than 2^40 bits) is a usage error naming them.
template <class F>
void sized_by(std::string_view options, F&& size) {
  try {
    size();
  } catch (const std::invalid_argument& e) {
    throw usage_error(fmt::format("{}: {}", options, e.what()));
  } catch (const std::bad_alloc&) {
    throw usage_error(fmt::format("{}: not enough memory for a filter of this size", options));
  }
}

// Every FILE must be readable before any output: a missing one is a bad argument.
void check_readable(const std::vector<std::string>& files) {
  for (const std::string& name : files) {
    if (name != "-" && ::access(name.c_str(), R_OK) != 0) {
      throw usage_error(fmt::format("FILE: cannot read {}: {}", name, std::strerror(errno)));
    }
  }
}

// Progress on stderr, only when it is a terminal, at most twice a second.
class progress {
 public:
  explicit progress(const char* command) : command_(command), enabled_(isatty(STDERR_FILENO) == 1) {}
  template <class F>
  void tick(std::uint64_t lines, F&& describe) {
    if (!enabled_ || (lines & 0xFFFF) != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    std::fprintf(stderr, "\r%s: %s\033[K", command_, describe().c_str());
  }
  void done() const {
    if (enabled_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  const char* command_;
  bool enabled_;
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
      bits = s.bits;
      hashes = s.hashes;
      fpr = s.fpr;
    } else {
      bits = blocked_bloom_filter::bits_for(n, p);
      hashes = blocked_bloom_filter::kHashes;
      fpr = blocked_bloom_filter::fpr(static_cast<double>(bits), static_cast<double>(n));
    }
  });
  fmt::print("bits: {}\nbytes: {}\nhashes: {}\nbits_per_item: {:.4f}\nfpr: {}\n", bits, (bits + 7) / 8, hashes,
             static_cast<double>(bits) / static_cast<double>(n), decimal(fpr));
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
    fmt::print("{}\n", decimal(blocked_bloom_filter::fpr(m, n)));
    return 0;
  }
  if (!o.hashes) throw usage_error(fmt::format("--hashes: required for the {} layout", o.layout));
  if (*o.hashes < 1 || *o.hashes > 64) throw usage_error(fmt::format("--hashes: must be in 1..64, got {}", *o.hashes));
  const double k = *o.hashes;
  fmt::print("{}\n", decimal(o.layout == "partitioned" ? bloom_math::fpr_partitioned(m, n, k)
                                                      : bloom_math::fpr_exact(m, n, k)));
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
  progress bar("sketch dedup");
  std::vector<char> out_buffer(1 << 20);
  std::setvbuf(stdout, out_buffer.data(), _IOFBF, out_buffer.size());
  std::uint64_t lines = 0;
  std::uint64_t unique = 0;
  reader.for_each_line([&](std::string_view line) {
    ++lines;
    if (!filter.test_and_insert(line)) {
      ++unique;
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fputc('\n', stdout);
    }
    bar.tick(lines, [&] {
      return fmt::format("{} lines, {} unique, {:.0f} MiB read", lines, unique,
                         static_cast<double>(reader.bytes_read()) / (1 << 20));
    });
  });
  bar.done();
  std::fflush(stdout);
  if (unique > capacity) {
    fmt::print(stderr,
               "sketch dedup: {} distinct lines, more than --items {}: the false-positive rate grew from "
               "{} to about {}; rerun with --items {}\n",
               unique, capacity, decimal(target), decimal(filter.estimated_fpr()), unique);
  }
  std::setvbuf(stdout, nullptr, _IOFBF, BUFSIZ);
  return 0;
}

int run_dedup(const dedup_options& o) {
  const std::uint64_t n = parse_count("--items", o.items);
  if (o.fpr && o.bits_per_item) throw usage_error("--bits-per-item: give either --fpr or --bits-per-item, not both");
  if (o.hashes && !o.bits_per_item) throw usage_error("--hashes: only with --bits-per-item");
  if (o.bits_per_item && !(*o.bits_per_item >= 1 && *o.bits_per_item <= 1024)) {
    throw usage_error(fmt::format("--bits-per-item: must be in [1, 1024], got {}", *o.bits_per_item));
  }
  const double p = o.fpr ? parse_probability("--fpr", *o.fpr) : 0.001;
  // --hashes asks for a number of hash functions, which only the classic layout takes.
  const std::string layout = o.layout.value_or(o.hashes ? "classic" : "blocked");
  const std::string_view sizing = o.bits_per_item ? "--items, --bits-per-item" : "--items, --fpr";
  check_readable(o.files);
  if (layout == "classic") {
    std::optional<bloom_filter> f;
    if (o.bits_per_item) {
      const auto bits = static_cast<std::uint64_t>(std::ceil(*o.bits_per_item * static_cast<double>(n)));
      const std::uint32_t k = o.hashes ? *o.hashes : bloom_math::optimal_hashes(*o.bits_per_item);
      if (k < 1 || k > 64) throw usage_error(fmt::format("--hashes: must be in 1..64, got {}", k));
      sized_by(sizing, [&] { f.emplace(bits, k); });
    } else {
      sized_by(sizing, [&] { f.emplace(bloom_filter::for_capacity(n, p)); });
    }
    return dedup_with(*f, o, n, bloom_math::fpr_exact(static_cast<double>(f->bits()), static_cast<double>(n), f->hashes()));
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
  return dedup_with(*f, o, n, blocked_bloom_filter::fpr(static_cast<double>(f->bits()), static_cast<double>(n)));
}

struct topk_options {
  std::uint32_t k = 10;
  double epsilon = 0.0001;
  double delta = 0.001;
  std::vector<std::string> files;
};

int run_topk(const topk_options& o) {
  if (o.k < 1 || o.k > 1000) throw usage_error(fmt::format("-k: must be in 1..1000, got {}", o.k));
  parse_probability("--epsilon", o.epsilon);
  parse_probability("--delta", o.delta);
  check_readable(o.files);
  count_min_sketch cms = count_min_sketch::from_error(o.epsilon, o.delta, kDefaultSeed, /*conservative=*/true);
  // Candidates: a few times k, so that items near the k-th do not push each other out.
  top_k_tracker tracker(o.k, o.epsilon, std::clamp<std::uint32_t>(4 * o.k, 64, top_k_tracker::kMaxCapacity));
  line_reader reader(o.files);
  progress bar("sketch topk");
  std::uint64_t lines = 0;
  reader.for_each_line([&](std::string_view line) {
    ++lines;
    const hash128 h = hash_item(line, kDefaultSeed);
    const std::uint64_t estimate = cms.update(h);
    tracker.offer(h, line, estimate, cms.total());
    bar.tick(lines, [&] {
      return fmt::format("{} lines, {:.0f} MiB read", lines, static_cast<double>(reader.bytes_read()) / (1 << 20));
    });
  });
  bar.done();
  tracker.refresh([&](const hash128& h) { return cms.estimate(h); }, cms.total());
  for (const auto& e : tracker.top()) fmt::print("{}\t{}\n", e.estimate, e.item);
  return 0;
}

}  // namespace
}  // namespace sketch::cli

int main(int argc, char** argv) {
  using namespace sketch::cli;
  CLI::App app{
      "sketch: probabilistic sketches on files and pipes (Bloom filters, Count-Min).\n"
      "Items are lines; FILE arguments are read in order, stdin when there are none.",
      "sketch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("sketch {}", SKETCH_VERSION),
                       "Print the version and exit");
  app.set_help_all_flag("--help-all", "Show the help of every command");

  size_options size;
  auto* size_cmd = app.add_subcommand("size", "Size a Bloom filter for N items at a target false-positive rate");
  size_cmd->add_option("--items", size.items, "Expected distinct items (k, M, G suffixes allowed)")->required();
  size_cmd->add_option("--fpr", size.fpr, "Target false-positive probability, in (0, 1)")->required();
  size_cmd->add_option("--layout", size.layout, "classic, or blocked (split-block, 8 hashes; the default)")
      ->check(CLI::IsMember({"classic", "blocked"}));

  fpr_options fpr;
  auto* fpr_cmd = app.add_subcommand("fpr", "False-positive probability of a filter with M bits, N items, K hashes");
  fpr_cmd->add_option("--bits", fpr.bits, "Bits (per hash function for the partitioned layout)")->required();
  fpr_cmd->add_option("--items", fpr.items, "Items inserted")->required();
  fpr_cmd->add_option("--hashes", fpr.hashes, "Hash functions (classic, partitioned; blocked uses 8)");
  fpr_cmd->add_option("--layout", fpr.layout,
                      "classic (one vector, the default), partitioned (K vectors of M bits), blocked")
      ->check(CLI::IsMember({"classic", "partitioned", "blocked"}));

  dedup_options dedup;
  auto* dedup_cmd = app.add_subcommand(
      "dedup", "Print each line the first time it is seen (bounded memory; rare false positives drop a new line)");
  dedup_cmd->add_option("--items", dedup.items, "Distinct lines expected (default 10M); sizes the filter");
  dedup_cmd->add_option("--fpr", dedup.fpr, "Target false-positive probability (default 0.001)");
  dedup_cmd->add_option("--bits-per-item", dedup.bits_per_item, "Bits per expected item, instead of --fpr");
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
  auto* topk_cmd = app.add_subcommand("topk", "Print the K most frequent lines as ESTIMATE<TAB>ITEM, highest first");
  topk_cmd->add_option("-k", topk.k, "How many items (default 10)");
  topk_cmd->add_option("--epsilon", topk.epsilon, "Count-Min error: estimate <= true + epsilon*N (default 0.0001)");
  topk_cmd->add_option("--delta", topk.delta, "Probability that the error bound fails (default 0.001)");
  topk_cmd->add_option("FILE", topk.files, "Input files (stdin when none, or -)");

  try {
    // A first word that is no command would otherwise be reported as a missing command.
    const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
    if (argc > 1 && argv[1][0] != '-' &&
        std::none_of(commands.begin(), commands.end(),
                     [&](const CLI::App* c) { return c->check_name(argv[1]); })) {
      throw usage_error(
          fmt::format("{}: not a command (size, fpr, dedup or topk; see sketch --help)", argv[1]));
    }
    app.parse(argc, argv);
    if (*size_cmd) return run_size(size);
    if (*fpr_cmd) return run_fpr(fpr);
    if (*dedup_cmd) return run_dedup(dedup);
    if (*topk_cmd) return run_topk(topk);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "sketch: {}\n", e.what());
    return 2;
  } catch (const usage_error& e) {
    fmt::print(stderr, "sketch: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sketch: {}\n", e.what());
    return 1;
  }
  return 2;
}
