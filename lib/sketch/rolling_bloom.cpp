#include "sketch/rolling_bloom.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "sketch/serialize.h"

namespace sketch {
namespace {

constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max();

// The checks of the options, one by one: the sizing helpers need some of them only.
void check_capacity(const rolling_bloom_options& o) {
  if (o.capacity < 1) {
    throw std::invalid_argument("rolling_bloom: capacity must be at least 1 (got 0)");
  }
}

void check_fpr(const rolling_bloom_options& o) {
  if (!(o.fpr > 0.0 && o.fpr < 1.0)) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: fpr must be in (0, 1) (got {})", o.fpr));
  }
}

void check_generations(const rolling_bloom_options& o) {
  if (o.generations < 2 || o.generations > rolling_bloom::kMaxGenerations) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: generations must be in [2, {}] (got {})",
                    rolling_bloom::kMaxGenerations, o.generations));
  }
}

const rolling_bloom_options& checked(const rolling_bloom_options& o) {
  if (o.window_ms <= 0) {
    throw std::invalid_argument(
        fmt::format("rolling_bloom: window_ms must be positive (got {})", o.window_ms));
  }
  check_capacity(o);
  check_fpr(o);
  check_generations(o);
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

// Bits of one generation: blocked_bloom_filter::suggest_bits(share, fpr_g), after checking the
// options. Throws std::invalid_argument naming what is out of range.
std::uint64_t generation_bits(const rolling_bloom_options& o) {
  checked(o);
  slice_of(o);
  try {
    return blocked_bloom_filter::suggest_bits(rolling_bloom::generation_capacity(o),
                                              rolling_bloom::generation_fpr(o));
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

// The probes of an item's G blocks, side by side (see the layout), for the scalar and the AVX2
// path, which set and test the same bits (those of blocked_bloom_filter). The ring slots
// of generations 0, 1, 2 … are newest, newest + 1, … mod G.
constexpr std::uint32_t kInOlder = UINT32_MAX;
// The distance in words between an item's blocks in two adjacent ring slots: one block.
constexpr std::size_t kStride = blocked_bloom_filter::kWordsPerBlock;

// test_and_insert's probe: the `older` generations after the newest are tested first; when
// none holds the item its bits are set in the newest's block. Returns kInOlder when an older
// generation holds it (nothing changes), else the number of bits newly set in the newest
// (0: the newest held it).
std::uint32_t probe_scalar(std::uint32_t* group, std::size_t g_count, std::size_t newest,
                           std::size_t older, std::uint32_t key) noexcept {
  std::size_t s = newest;
  for (std::size_t g = 0; g < older; ++g) {
    if (++s == g_count) s = 0;
    if (detail::blocked_bloom_contains_scalar(group + s * kStride, key)) return kInOlder;
  }
  return detail::blocked_bloom_test_and_insert_scalar(group + newest * kStride, key);
}

// contains' probe: true when one of the `live` generations from the newest holds the item.
bool holds_scalar(const std::uint32_t* group, std::size_t g_count, std::size_t newest,
                  std::size_t live, std::uint32_t key) noexcept {
  std::size_t s = newest;
  for (std::size_t g = 0; g < live; ++g) {
    if (detail::blocked_bloom_contains_scalar(group + s * kStride, key)) return true;
    if (++s == g_count) s = 0;
  }
  return false;
}

#if SKETCH_BLOCKED_BLOOM_AVX2
// The same, branch-free, with the item's mask computed once for all generations: every
// older block is tested (they share the item's cache lines), and the newest's block is
// rewritten with the mask's bits, or with none of them when an older generation held the
// item. Without a branch on the answer, which follows the data, a mispredicted branch does
// not stall the next items' loads, so their cache misses overlap.
__attribute__((target("avx2"))) std::uint32_t probe_avx2(std::uint32_t* group, std::size_t g_count,
                                                         std::size_t newest, std::size_t older,
                                                         std::uint32_t key) noexcept {
  const __m256i mask = detail::blocked_bloom_mask_avx2(key);
  std::size_t s = newest;
  int held = 0;
  for (std::size_t g = 0; g < older; ++g) {
    if (++s == g_count) s = 0;
    held |= detail::blocked_bloom_has_avx2(group + s * kStride, mask) ? 1 : 0;
  }
  const __m256i bits = _mm256_andnot_si256(_mm256_set1_epi32(-held), mask);
  const std::uint32_t added = detail::blocked_bloom_set_avx2(group + newest * kStride, bits);
  return held != 0 ? kInOlder : added;
}

__attribute__((target("avx2"))) bool holds_avx2(const std::uint32_t* group, std::size_t g_count,
                                                std::size_t newest, std::size_t live,
                                                std::uint32_t key) noexcept {
  const __m256i mask = detail::blocked_bloom_mask_avx2(key);
  std::size_t s = newest;
  for (std::size_t g = 0; g < live; ++g) {
    if (detail::blocked_bloom_has_avx2(group + s * kStride, mask)) return true;
    if (++s == g_count) s = 0;
  }
  return false;
}
#else
std::uint32_t probe_avx2(std::uint32_t* group, std::size_t g_count, std::size_t newest,
                         std::size_t older, std::uint32_t key) noexcept {
  return probe_scalar(group, g_count, newest, older, key);
}

bool holds_avx2(const std::uint32_t* group, std::size_t g_count, std::size_t newest,
                std::size_t live, std::uint32_t key) noexcept {
  return holds_scalar(group, g_count, newest, live, key);
}
#endif

}  // namespace

std::uint64_t rolling_bloom::generation_capacity(const rolling_bloom_options& o) {
  check_generations(o);
  check_capacity(o);
  const std::uint64_t parts = o.generations - 1;
  return o.capacity / parts + (o.capacity % parts != 0 ? 1 : 0);
}

// fpr_g = 1 − (1 − fpr)^{1/G}, via log1p/expm1 so that small rates keep their precision.
double rolling_bloom::generation_fpr(const rolling_bloom_options& o) {
  check_generations(o);
  check_fpr(o);
  return -std::expm1(std::log1p(-o.fpr) / static_cast<double>(o.generations));
}

std::int64_t rolling_bloom::slice_ms(const rolling_bloom_options& options) {
  return slice_of(checked(options));
}

std::uint64_t rolling_bloom::generation_bits(const rolling_bloom_options& options) {
  return sketch::generation_bits(options);
}

double rolling_bloom::full_generation_coded_bits(const rolling_bloom_options& options) {
  const std::uint64_t bits = sketch::generation_bits(options);
  const auto items = static_cast<double>(generation_capacity(options));
  // Each item sets bit j of word w of its block with probability 1/(32·B) = 8/m.
  const double set_share = -std::expm1(items * std::log1p(-8.0 / static_cast<double>(bits)));
  return expected_smaller_bits(bits, set_share);
}

namespace {
// The least decimal of three significant digits at or above x > 0, read from its text so
// that every build rounds it the same way.
double three_digits_up(double x) {
  const int exponent = static_cast<int>(std::floor(std::log10(x))) - 2;
  const double scaled = x / std::pow(10.0, exponent);  // in [100, 1000), about
  const auto digits = static_cast<long long>(std::ceil(scaled * (1 - 1e-12)));
  const std::string text = fmt::format("{}e{}", digits, exponent);
  return std::strtod(text.c_str(), nullptr);
}
}  // namespace

double rolling_bloom::transmission_fpr(const rolling_bloom_options& options) {
  const auto memory_bits = static_cast<double>(sketch::generation_bits(options));
  rolling_bloom_options o = options;
  const auto fits = [&](double fpr) {
    o.fpr = fpr;
    try {
      return static_cast<double>(sketch::generation_bits(o)) <= 2 * memory_bits &&
             full_generation_coded_bits(o) <= memory_bits;
    } catch (const std::invalid_argument&) {
      return false;  // more bits than a generation may have
    }
  };
  // Bisection on log f between options.fpr (fits: its code is at most its array) and a rate
  // a million times lower (at 8 bits per item, twice the memory lowers the rate by a factor
  // of a few hundred: twice 22 bits per item takes 2.5e-4 to about 6e-7).
  double hi = options.fpr;
  double lo = options.fpr * 1e-6;
  if (fits(lo)) return three_digits_up(lo);
  for (int i = 0; i < 60 && hi / lo > 1 + 1e-9; ++i) {
    const double mid = std::sqrt(lo * hi);
    (fits(mid) ? hi : lo) = mid;
  }
  const double rounded = three_digits_up(hi);
  return rounded < options.fpr && fits(rounded) ? rounded : options.fpr;
}

rolling_bloom::rolling_bloom(const rolling_bloom_options& options, simd_path path)
    : options_(checked(options)),
      slice_ms_(slice_of(options_)),
      share_(generation_capacity(options_)),
      generation_fpr_(generation_fpr(options_)),
      blocks_(generation_bits(options_) / blocked_bloom_filter::kBlockBits),
      words_(blocks_ * options_.generations * blocked_bloom_filter::kWordsPerBlock, 0U),
      bits_set_(options_.generations, 0),
      avx2_(path == simd_path::automatic && detail::cpu_has_avx2()),
      start_ms_(options_.generations, 0),
      inserted_(options_.generations, 0) {}

void rolling_bloom::clear_slot(std::size_t s) noexcept {
  if (bits_set_[s] == 0) return;  // never written since its last clear
  constexpr std::size_t kWords = blocked_bloom_filter::kWordsPerBlock;
  for (std::uint64_t b = 0; b < blocks_; ++b) {
    std::uint32_t* block = words_.data() + block_offset(b, s);
    std::fill(block, block + kWords, 0U);
  }
  bits_set_[s] = 0;
}

void rolling_bloom::rotate(std::int64_t start_ms) noexcept {
  const std::size_t g_count = options_.generations;
  newest_ = newest_ == 0 ? g_count - 1 : newest_ - 1;
  clear_slot(newest_);
  inserted_[newest_] = 0;
  start_ms_[newest_] = start_ms;
  live_ = std::min(live_ + 1, g_count);
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
  const std::uint64_t turns = std::min<std::uint64_t>(slices, options_.generations);
  // The slice now_ms falls in starts at start + slices·S <= now_ms; the `turns` new
  // generations take the last `turns` slices of the grid up to and including it. Unsigned
  // arithmetic without overflow: every start lies in [start, now_ms]. Counted by turns, not
  // compared with `slices`, which may be 2^64 − 1 (S = 1, from INT64_MIN to INT64_MAX).
  for (std::uint64_t i = turns; i > 0; --i) {
    const std::uint64_t j = slices - i + 1;
    rotate(static_cast<std::int64_t>(static_cast<std::uint64_t>(start) + j * slice));
  }
  rotations_by_time_ += turns;
}

bool rolling_bloom::test_and_insert(hash128 h, std::int64_t now_ms) noexcept {
  advance(now_ms);
  std::uint32_t* group = group_of(h);
  const auto key = static_cast<std::uint32_t>(h.low);
  const std::size_t g_count = options_.generations;
  const std::uint32_t added = avx2_ ? probe_avx2(group, g_count, newest_, live_ - 1, key)
                                    : probe_scalar(group, g_count, newest_, live_ - 1, key);
  // Branch-free on the answer (see probe_avx2); the rotation's branch is rarely taken.
  const bool present = added == kInOlder || added == 0;
  const std::uint32_t first = present ? 0 : 1;
  bits_set_[newest_] += added & (0U - first);
  inserted_[newest_] += first;
  if (inserted_[newest_] >= share_) {  // only after an insert: the count was below the share
    rotate(std::max(now_ms, start_ms_[newest_]));
    ++rotations_by_capacity_;
  }
  return present;
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
  if (live_ == 0) return false;
  const std::uint32_t* group = group_of(h);
  const auto key = static_cast<std::uint32_t>(h.low);
  const std::size_t g_count = options_.generations;
  // The newest generation first, then the live older ones.
  return avx2_ ? holds_avx2(group, g_count, newest_, live_, key)
               : holds_scalar(group, g_count, newest_, live_, key);
}

blocked_bloom_filter rolling_bloom::generation(std::size_t generation) const {
  if (generation >= options_.generations) {
    throw std::out_of_range(
        fmt::format("rolling_bloom: generation {} of {}", generation, options_.generations));
  }
  return slot_filter(slot(generation));
}

blocked_bloom_filter rolling_bloom::slot_filter(std::size_t s) const {
  blocked_bloom_filter f(bits_per_generation(), options_.seed);
  constexpr std::size_t kWords = blocked_bloom_filter::kWordsPerBlock;
  for (std::uint64_t b = 0; b < blocks_; ++b) {
    const std::uint32_t* block = words_.data() + block_offset(b, s);
    std::copy(block, block + kWords, f.words_.data() + b * kWords);
  }
  f.bits_set_ = bits_set_[s];
  return f;
}

double rolling_bloom::fill_ratio(std::size_t generation) const noexcept {
  if (generation >= options_.generations) return 0.0;
  return static_cast<double>(bits_set_[slot(generation)]) /
         static_cast<double>(bits_per_generation());
}

std::uint64_t rolling_bloom::generation_items(std::size_t generation) const noexcept {
  return generation < options_.generations ? inserted_[slot(generation)] : 0;
}

std::int64_t rolling_bloom::generation_start_ms(std::size_t generation) const noexcept {
  return generation < options_.generations ? start_ms_[slot(generation)] : 0;
}

double rolling_bloom::estimated_fpr() const noexcept {
  // 1 − Π(1 − p_g) as −expm1(Σ log1p(−p_g)), accurate for small rates.
  double log_pass = 0.0;
  for (const std::uint64_t set : bits_set_) {
    log_pass += std::log1p(-blocked_bloom_filter::estimated_fpr(bits_per_generation(), set));
  }
  return -std::expm1(log_pass);
}

double rolling_bloom::estimated_items() const noexcept {
  double sum = 0.0;
  for (const std::uint64_t set : bits_set_) {
    sum += blocked_bloom_filter::estimated_items(bits_per_generation(), set);
  }
  return sum;
}

std::size_t rolling_bloom::size_bytes() const noexcept {
  return words_.size() * sizeof(std::uint32_t);
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
// All fields little-endian. The record is of format version 4 when a generation's record
// is (its bit array Golomb-coded), else of version 3, whose size follows from the options.
void rolling_bloom::serialize_to(std::string& to, bit_coding coding) const {
  detail::record_writer out(structure_type::rolling_bloom, options_.seed, to);
  out.i64(options_.window_ms);
  out.u64(options_.capacity);
  out.f64(options_.fpr);
  out.u32(options_.generations);
  out.u32(static_cast<std::uint32_t>(newest_));
  out.u32(static_cast<std::uint32_t>(live_));
  out.u64(rotations_by_time_);
  out.u64(rotations_by_capacity_);
  for (std::size_t s = 0; s < options_.generations; ++s) {
    out.i64(start_ms_[s]);
    out.u64(inserted_[s]);
    // The generation's blocks, gathered into a filter of their own (they are interleaved
    // with the other generations'), written in place: one generation's copy at a time.
    bool coded = false;
    out.record_with([&](std::string& o) {
      const std::size_t at = o.size();
      slot_filter(s).serialize_to(o, coding);
      coded = detail::record_version(std::string_view(o).substr(at)) == kCodedFormatVersion;
    });
    if (coded) out.coded();
  }
  std::move(out).finish_appended();
}

namespace {
rolling_bloom_options read_options(detail::record_reader& in) {
  rolling_bloom_options o;
  o.window_ms = in.i64();
  o.capacity = in.u64();
  o.fpr = in.f64();
  o.generations = in.u32();
  o.seed = in.seed();
  return o;
}
}  // namespace

rolling_bloom_options rolling_bloom::record_options(std::string_view record) {
  detail::record_reader in(record, structure_type::rolling_bloom);
  return read_options(in);
}

rolling_bloom rolling_bloom::deserialize(std::string_view record) {
  detail::record_reader in(record, structure_type::rolling_bloom);
  const rolling_bloom_options o = read_options(in);
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
  // A plain record holds every generation's array; a coded one (version 4) holds at least
  // each generation's fields, and the arrays it describes are checked as they are decoded.
  constexpr std::uint64_t kNestedOverhead = 8 + 8 + 8 + kHeaderSize + 20 + kTrailerSize;
  const std::uint64_t expected = o.generations * (kNestedOverhead + bits / 8);
  if (in.version() < kCodedFormatVersion) {
    in.require(
        in.remaining() == expected,
        fmt::format("{} bytes of generations, the options need {}", in.remaining(), expected));
  } else {
    in.require(in.remaining() >= o.generations * kNestedOverhead,
               fmt::format("{} bytes of generations, fewer than the {} generations' fields",
                           in.remaining(), o.generations));
  }
  rolling_bloom r(o);
  const std::size_t g_count = r.options_.generations;
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
    const std::string_view nested = in.record();
    // Its size is checked before it allocates: a coded record's length does not bound it.
    in.require(detail::record_first_u64(nested) == r.bits_per_generation(),
               fmt::format("generation in slot {} has {} bits, the options give {}", s,
                           detail::record_first_u64(nested), r.bits_per_generation()));
    blocked_bloom_filter f = [&] {
      try {
        return blocked_bloom_filter::deserialize(nested);
      } catch (const format_error& e) {
        throw format_error(fmt::format("{}: generation in slot {}: {}",
                                       to_string(structure_type::rolling_bloom), s, e.what()));
      }
    }();
    in.require(
        f.seed() == o.seed,
        fmt::format("generation in slot {} has seed {:#x}, the record {:#x}", s, f.seed(), o.seed));
    in.require(inserted <= r.share_, fmt::format("generation in slot {} holds {} items, more "
                                                 "than its share {}",
                                                 s, inserted, r.share_));
    in.require(
        s != newest || inserted < r.share_,
        fmt::format("the newest generation is full ({} items) but was not rotated", inserted));
    // An insert is counted only when it sets at least one new bit, and sets at most 8: so
    // inserted ≤ bits set ≤ 8·inserted (both 0 together).
    in.require(inserted <= f.bits_set() && f.bits_set() <= 8 * inserted,
               fmt::format("generation in slot {}: {} set bits do not fit {} items", s,
                           f.bits_set(), inserted));
    r.start_ms_[s] = start;
    r.inserted_[s] = inserted;
    constexpr std::size_t kWords = blocked_bloom_filter::kWordsPerBlock;
    for (std::uint64_t b = 0; b < r.blocks_; ++b) {
      const std::uint32_t* block = f.words().data() + b * kWords;
      std::copy(block, block + kWords, r.words_.data() + r.block_offset(b, s));
    }
    r.bits_set_[s] = f.bits_set();
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
