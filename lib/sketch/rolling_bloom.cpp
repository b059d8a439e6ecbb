#include "sketch/rolling_bloom.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sketch/serialize.h"

namespace sketch {
namespace {

constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max();

const rolling_bloom_options& checked(const rolling_bloom_options& o) {
  if (o.window_ms <= 0) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: window_ms must be positive (got {})", o.window_ms));
  }
  if (o.capacity < 1) {
    throw std::invalid_argument("rolling_bloom: capacity must be at least 1 (got 0)");
  }
  if (!(o.fpr > 0.0 && o.fpr < 1.0)) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: fpr must be in (0, 1) (got {})", o.fpr));
  }
  if (o.generations < 2 || o.generations > rolling_bloom::kMaxGenerations) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: generations must be in [2, {}] (got {})",
                    rolling_bloom::kMaxGenerations, o.generations));
  }
  return o;
}

// S = ⌈window / (G − 1)⌉, with G·S representable (so every horizon fits in int64).
std::int64_t slice_of(const rolling_bloom_options& o) {
  const std::int64_t parts = o.generations - 1;
  const std::int64_t slice = o.window_ms / parts + (o.window_ms % parts != 0 ? 1 : 0);
  if (slice > kMaxMs / o.generations) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: window_ms {} is too large", o.window_ms));
  }
  return slice;
}

std::uint64_t share_of(const rolling_bloom_options& o) {
  const std::uint64_t parts = o.generations - 1;
  return o.capacity / parts + (o.capacity % parts != 0 ? 1 : 0);
}

// fpr_g = 1 − (1 − fpr)^{1/G}, via log1p/expm1 so that small rates keep their precision.
double generation_fpr_of(const rolling_bloom_options& o) {
  return -std::expm1(std::log1p(-o.fpr) / static_cast<double>(o.generations));
}

// Bits of one generation: blocked_bloom_filter::bits_for(share, fpr_g), after checking the
// options. Throws std::invalid_argument naming what is out of range.
std::uint64_t generation_bits(const rolling_bloom_options& o) {
  checked(o);
  slice_of(o);
  try {
    return blocked_bloom_filter::bits_for(share_of(o), generation_fpr_of(o));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: capacity {} at fpr {} over {} generations is too large ({})",
                    o.capacity, o.fpr, o.generations, e.what()));
  }
}

// to − from when to >= from, else 0; exact for any two int64 values.
std::uint64_t elapsed(std::int64_t from, std::int64_t to) noexcept {
  if (to <= from) return 0;
  return static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);
}

}  // namespace

rolling_bloom::rolling_bloom(const rolling_bloom_options& options)
    : options_(checked(options)),
      slice_ms_(slice_of(options_)),
      share_(share_of(options_)),
      generation_fpr_(generation_fpr_of(options_)),
      start_ms_(options_.generations, 0),
      inserted_(options_.generations, 0) {
  const std::uint64_t bits = generation_bits(options_);
  ring_.reserve(options_.generations);
  for (std::uint32_t g = 0; g < options_.generations; ++g) ring_.emplace_back(bits, options_.seed);
}

void rolling_bloom::rotate(std::int64_t start_ms) noexcept {
  newest_ = (newest_ + ring_.size() - 1) % ring_.size();
  ring_[newest_].clear();
  inserted_[newest_] = 0;
  start_ms_[newest_] = start_ms;
  live_ = std::min(live_ + 1, ring_.size());
}

void rolling_bloom::advance(std::int64_t now_ms) noexcept {
  if (live_ == 0) {
    live_ = 1;
    start_ms_[newest_] = now_ms;
    return;
  }
  const std::int64_t start = start_ms_[newest_];
  const auto slice = static_cast<std::uint64_t>(slice_ms_);
  const std::uint64_t since = elapsed(start, now_ms);
  if (since < slice) return;  // also when time went backwards
  const std::uint64_t slices = since / slice;
  const std::uint64_t turns = std::min<std::uint64_t>(slices, ring_.size());
  // The slice now_ms falls in starts at start + slices·S <= now_ms; the `turns` new
  // generations take the last `turns` slices of the grid up to and including it. Unsigned
  // arithmetic without overflow: every start lies in [start, now_ms].
  for (std::uint64_t j = slices - turns + 1; j <= slices; ++j) {
    rotate(static_cast<std::int64_t>(static_cast<std::uint64_t>(start) + j * slice));
  }
  rotations_by_time_ += turns;
}

bool rolling_bloom::test_and_insert(hash128 h, std::int64_t now_ms) noexcept {
  advance(now_ms);
  for (std::size_t g = 1; g < live_; ++g) {
    if (ring_[slot(g)].contains(h)) return true;
  }
  if (ring_[newest_].test_and_insert(h)) return true;
  if (++inserted_[newest_] >= share_) {
    rotate(std::max(now_ms, start_ms_[newest_]));
    ++rotations_by_capacity_;
  }
  return false;
}

void rolling_bloom::test_and_insert(std::span<const hash128> hashes, std::int64_t now_ms,
                                    std::span<bool> present) noexcept {
  constexpr std::size_t kAhead = blocked_bloom_filter::kPrefetchDistance;
  const std::size_t n = std::min(hashes.size(), present.size());
  for (std::size_t i = 0; i < std::min(n, kAhead); ++i) prefetch(hashes[i]);
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) prefetch(hashes[i + kAhead]);
    present[i] = test_and_insert(hashes[i], now_ms);
  }
}

bool rolling_bloom::contains(hash128 h) const noexcept {
  for (std::size_t g = 0; g < live_; ++g) {
    if (ring_[slot(g)].contains(h)) return true;
  }
  return false;
}

double rolling_bloom::fill_ratio(std::size_t generation) const noexcept {
  return generation < ring_.size() ? ring_[slot(generation)].fill_ratio() : 0.0;
}

std::uint64_t rolling_bloom::generation_items(std::size_t generation) const noexcept {
  return generation < ring_.size() ? inserted_[slot(generation)] : 0;
}

std::int64_t rolling_bloom::generation_start_ms(std::size_t generation) const noexcept {
  return generation < ring_.size() ? start_ms_[slot(generation)] : 0;
}

double rolling_bloom::estimated_fpr() const noexcept {
  // 1 − Π(1 − p_g) as −expm1(Σ log1p(−p_g)), accurate for small rates.
  double log_pass = 0.0;
  for (const blocked_bloom_filter& f : ring_) log_pass += std::log1p(-f.estimated_fpr());
  return -std::expm1(log_pass);
}

double rolling_bloom::estimated_items() const noexcept {
  double sum = 0.0;
  for (const blocked_bloom_filter& f : ring_) sum += f.estimated_items();
  return sum;
}

std::size_t rolling_bloom::size_bytes() const noexcept {
  std::size_t sum = 0;
  for (const blocked_bloom_filter& f : ring_) sum += f.size_bytes();
  return sum;
}

std::int64_t rolling_bloom::effective_window_ms(std::int64_t now_ms) const noexcept {
  if (live_ == 0) return 0;
  const std::uint64_t span = elapsed(start_ms_[slot(live_ - 1)], now_ms);
  return static_cast<std::int64_t>(std::min<std::uint64_t>(span, kMaxMs));
}

// Payload (after the common header, whose seed field holds the seed option):
//
//   offset  size  field
//   ------  ----  ------------------------------------------------------------------------
//        0     8  window_ms (i64, > 0)
//        8     8  capacity (u64, >= 1)
//       16     8  fpr (f64, in (0, 1))
//       24     4  generations G (u32, in [2, 64])
//       28     4  newest: ring slot of generation 0 (u32, < G)
//       32     4  live generations (u32; 0 = clock not started, else 1..G)
//       36     8  rotations by time (u64)
//       44     8  rotations by capacity (u64)
//       52        then G entries, one per ring slot s = 0, 1, …, G − 1
//                 (generation g lives in slot (newest + g) mod G):
//                   8  start time of the generation in ms (i64)
//                   8  items inserted into it (u64, <= share; < share for generation 0)
//                   8  length L of the nested record (u64)
//                   L  the generation: a blocked_bloom_filter record (sketch/serialize.h,
//                      with its own header, seed and checksum)
// All fields little-endian.
std::string rolling_bloom::serialize() const {
  detail::record_writer out(structure_type::rolling_bloom, options_.seed);
  out.i64(options_.window_ms);
  out.u64(options_.capacity);
  out.f64(options_.fpr);
  out.u32(options_.generations);
  out.u32(static_cast<std::uint32_t>(newest_));
  out.u32(static_cast<std::uint32_t>(live_));
  out.u64(rotations_by_time_);
  out.u64(rotations_by_capacity_);
  for (std::size_t s = 0; s < ring_.size(); ++s) {
    out.i64(start_ms_[s]);
    out.u64(inserted_[s]);
    out.record(ring_[s].serialize());
  }
  return std::move(out).finish();
}

rolling_bloom rolling_bloom::deserialize(std::string_view record) {
  detail::record_reader in(record, structure_type::rolling_bloom);
  rolling_bloom_options o;
  o.window_ms = in.i64();
  o.capacity = in.u64();
  o.fpr = in.f64();
  o.generations = in.u32();
  o.seed = in.seed();
  const std::uint32_t newest = in.u32();
  const std::uint32_t live = in.u32();
  const std::uint64_t by_time = in.u64();
  const std::uint64_t by_capacity = in.u64();

  // Check the options and the record's size before anything is allocated: a corrupt
  // capacity must not become a huge allocation.
  std::uint64_t bits = 0;
  try {
    bits = generation_bits(o);
  } catch (const std::invalid_argument& e) {
    in.require(false, fmt::format("options out of range: {}", e.what()));
  }
  constexpr std::uint64_t kNestedOverhead = 8 + 8 + 8 + kHeaderSize + 20 + kTrailerSize;
  const std::uint64_t expected = o.generations * (kNestedOverhead + bits / 8);
  in.require(in.remaining() == expected,
             fmt::format("{} bytes of generations, the options need {}", in.remaining(), expected));
  rolling_bloom r(o);
  const std::size_t g_count = r.ring_.size();
  in.require(newest < g_count,
             fmt::format("newest slot {} is not below {} generations", newest, g_count));
  in.require(live <= g_count, fmt::format("{} live generations, more than {}", live, g_count));
  in.require(live > 0 || (by_time == 0 && by_capacity == 0),
             "rotations counted before the clock started");
  r.newest_ = newest;
  r.live_ = live;
  r.rotations_by_time_ = by_time;
  r.rotations_by_capacity_ = by_capacity;

  for (std::size_t s = 0; s < g_count; ++s) {
    const std::int64_t start = in.i64();
    const std::uint64_t inserted = in.u64();
    blocked_bloom_filter f = [&] {
      try {
        return blocked_bloom_filter::deserialize(in.record());
      } catch (const format_error& e) {
        throw format_error(fmt::format("{}: generation in slot {}: {}",
                                       to_string(structure_type::rolling_bloom), s, e.what()));
      }
    }();
    in.require(f.bits() == r.ring_[s].bits(),
               fmt::format("generation in slot {} has {} bits, the options give {}", s, f.bits(),
                           r.ring_[s].bits()));
    in.require(
        f.seed() == o.seed,
        fmt::format("generation in slot {} has seed {:#x}, the record {:#x}", s, f.seed(), o.seed));
    in.require(inserted <= r.share_, fmt::format("generation in slot {} holds {} items, more "
                                                 "than its share {}",
                                                 s, inserted, r.share_));
    in.require(
        s != newest || inserted < r.share_,
        fmt::format("the newest generation is full ({} items) but was not rotated", inserted));
    // An insert always sets at least one new bit and at most 8.
    in.require((inserted == 0) == (f.bits_set() == 0) && f.bits_set() <= 8 * inserted,
               fmt::format("generation in slot {}: {} set bits do not fit {} items", s,
                           f.bits_set(), inserted));
    r.start_ms_[s] = start;
    r.inserted_[s] = inserted;
    r.ring_[s] = std::move(f);
  }
  in.done();
  for (std::size_t g = live; g < g_count; ++g) {
    in.require(r.inserted_[r.slot(g)] == 0,
               fmt::format("generation {} is not live but holds items", g));
  }
  for (std::size_t g = 1; g < live; ++g) {
    in.require(r.start_ms_[r.slot(g)] <= r.start_ms_[r.slot(g - 1)],
               fmt::format("generation {} starts after the newer generation {}", g, g - 1));
  }
  return r;
}

}  // namespace sketch
