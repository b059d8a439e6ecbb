#include "cli/commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "cli/common.h"
#include "cli/line_reader.h"
#include "sketch/blocked_bloom.h"
#include "sketch/bloom.h"
#include "sketch/bloom_math.h"
#include "sketch/count_min.h"
#include "sketch/golomb.h"
#include "sketch/memory.h"
#include "sketch/text.h"
#include "sketch/top_k.h"

namespace sketch::cli {

namespace {

// `sketch size --layout compressed`: the shape of the lowest FPR within the transmitted
// budget, or of the smallest transmitted size at the FPR, with at most --max-bits-per-item
// array bits per item.
int size_compressed(const size_options& o, std::uint64_t n) {
  if (!(o.max_bits_per_item >= 1 && o.max_bits_per_item <= 1e6)) {
    throw usage_error(
        fmt::format("--max-bits-per-item: must be in [1, 1000000], got {}", o.max_bits_per_item));
  }
  bloom_math::compressed_shape shape;
  if (o.transmitted_bits_per_item) {
    sized_by("--transmitted-bits-per-item, --max-bits-per-item", [&] {
      shape = bloom_math::shape_for_transmission(*o.transmitted_bits_per_item, o.max_bits_per_item);
    });
  } else {
    const double p = parse_probability("--fpr", *o.fpr);
    sized_by("--fpr, --max-bits-per-item",
             [&] { shape = bloom_math::shape_for_fpr(p, o.max_bits_per_item); });
  }
  const double bits = std::ceil(shape.bits_per_item * static_cast<double>(n));
  if (bits > static_cast<double>(bloom_filter::kMaxBits)) {
    throw usage_error(fmt::format("--items: {} bits, more than 2^40", bits));
  }
  const auto m = static_cast<std::uint64_t>(bits);
  const double b = bits / static_cast<double>(n);
  const double z = bloom_math::entropy_bits_per_item(b, shape.hashes);
  write_out(
      fmt::format("bits: {}\nbytes: {}\nhashes: {}\nbits_per_item: {:.4f}\nfpr: {}\n"
                  "transmitted_bits_per_item: {:.4f}\ntransmitted_bytes: {:.0f}\n",
                  m, (m + 7) / 8, shape.hashes, b, decimal(bloom_math::fpr(b, 1, shape.hashes)), z,
                  std::ceil(z * static_cast<double>(n) / 8)));
  return 0;
}

}  // namespace

int run_size(const size_options& o) {
  const std::uint64_t n = parse_count("--items", o.items);
  if (o.fpr && o.transmitted_bits_per_item) {
    throw usage_error("--transmitted-bits-per-item: give either --fpr or it, not both");
  }
  if (o.transmitted_bits_per_item && o.layout != "compressed") {
    throw usage_error("--transmitted-bits-per-item: only with --layout compressed");
  }
  if (!o.fpr && !o.transmitted_bits_per_item) {
    throw usage_error(o.layout == "compressed" ? "--fpr: required (or --transmitted-bits-per-item)"
                                               : "--fpr: required");
  }
  if (o.layout == "compressed") return size_compressed(o, n);
  const double p = parse_probability("--fpr", *o.fpr);
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

namespace {

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

}  // namespace

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

int run_compressed(const compressed_options& o) {
  const double b = o.bits_per_item;
  if (!(b > 0 && b <= 1e6)) {
    throw usage_error(fmt::format("--bits-per-item: must be in (0, 1000000], got {}", b));
  }
  if (o.hashes < 1 || o.hashes > bloom_filter::kMaxHashes) {
    throw usage_error(
        fmt::format("--hashes: must be in 1..{}, got {}", bloom_filter::kMaxHashes, o.hashes));
  }
  const double k = o.hashes;
  std::string out =
      fmt::format("fpr: {}\nentropy_bits_per_item: {:.4f}\n", decimal(bloom_math::fpr(b, 1, k)),
                  bloom_math::entropy_bits_per_item(b, k));
  if (o.items) {
    const std::uint64_t n = parse_count("--items", *o.items);
    if (n == 0) throw usage_error("--items: must be at least 1");
    const double bits = std::ceil(b * static_cast<double>(n));
    if (bits > static_cast<double>(bloom_filter::kMaxBits)) {
      throw usage_error(fmt::format("--items, --bits-per-item: {} bits, more than 2^40", bits));
    }
    // N random items (fixed seed, so that every run prints the same figures), coded with the
    // parameter of the filter's own share of zero bits; then kQueries other items queried.
    constexpr std::uint64_t kSeed = 20021001;
    constexpr std::uint64_t kQueries = 1'000'000;
    const auto m = static_cast<std::uint64_t>(bits);
    check_fits("--items, --bits-per-item", bits / 8 * 2);  // the array and its code
    std::optional<bloom_filter> filter;
    sized_by("--items, --bits-per-item", [&] { filter.emplace(m, o.hashes, kSeed); });
    std::mt19937_64 rng(kSeed);
    for (std::uint64_t i = 0; i < n; ++i) filter->insert(hash128{rng(), rng()});
    const double zero = 1 - static_cast<double>(filter->bits_set()) / static_cast<double>(m);
    std::string code;
    golomb_encode(filter->words(), m, golomb_parameter(zero), code);
    std::uint64_t false_positives = 0;
    for (std::uint64_t i = 0; i < kQueries; ++i) {
      false_positives += filter->contains(hash128{rng(), rng()}) ? 1 : 0;
    }
    out += fmt::format("compressed_bits_per_item: {:.4f}\nmeasured_fpr: {}\n",
                       static_cast<double>(code.size()) * 8 / static_cast<double>(n),
                       decimal(static_cast<double>(false_positives) / kQueries));
  }
  write_out(out);
  return 0;
}

}  // namespace sketch::cli
