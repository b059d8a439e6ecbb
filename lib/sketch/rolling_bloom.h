// First-seen deduplication over a sliding time window: a ring of split-block Bloom filters
// ("generations") that age out as time passes or as they fill.
//
// Sources: the blocked filter of sketch/blocked_bloom.h (Putze, Sanders, Singler 2007;
// the Apache Parquet split-block layout); ageing Bloom filters by rotating generations as in
// Yoon, "Aging Bloom Filter with Two Active Buffers for Dynamic Sets", IEEE TKDE 22(1), 2010,
// generalised to G generations; the FPR of a union of independent tests, 1 − Π(1 − p_g).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/blocked_bloom.h"
#include "sketch/hash.h"

namespace sketch {

struct rolling_bloom_options {
  std::int64_t window_ms = 0;     // > 0: items are remembered at least this long
  std::uint64_t capacity = 0;     // >= 1: distinct items expected per window
  double fpr = 0.001;             // (0, 1): target false-positive rate of a query
                                  // against the whole window (all generations)
  std::uint32_t generations = 4;  // G in [2, kMaxGenerations]
  std::uint64_t seed = kDefaultSeed;
};

// Design. G generations, each the bits of a blocked_bloom_filter with the same size and seed
// (stored interleaved, see the layout below), kept in a ring; generation 0 is the newest and
// the only one that receives inserts.
//
//   slice      S = ⌈window_ms / (G − 1)⌉ ms: the time one generation covers;
//   share      c = ⌈capacity / (G − 1)⌉ items: the most one generation receives;
//   fpr_g      = 1 − (1 − fpr)^{1/G}: each generation is sized by
//              blocked_bloom_filter::for_capacity(c, fpr_g), so a query against all G of
//              them, each holding at most c items, is a false positive with probability at
//              most 1 − Π_g (1 − fpr_g) = fpr (the generations hold independent items, so
//              their false positives are independent events).
//
// Time is passed in by the caller, in milliseconds (the library never reads a clock). The
// first time passed (to test_and_insert or advance) starts generation 0. Generation 0
// rotates — the ring turns, the oldest generation is cleared in place (no allocation) and
// becomes the new, empty generation 0 — when
//   * its slice ends: a call at now >= start + S, with `start` generation 0's start time,
//     rotates k = ⌊(now − start) / S⌋ times (every elapsed slice; after G rotations every
//     generation is empty, so at most G are performed) and the new generation 0 starts at
//     start + k·S, on the grid of slices; or
//   * it is full: right after the insert that brings its count to c (a burst); the new
//     generation 0 starts at max(now, start). The target FPR keeps holding and the window
//     shrinks instead (effective_window_ms shows it).
// Time going backwards (out-of-order event timestamps: now < start) never rotates and never
// throws; the call works on the generations as they are.
//
// Guaranteed dedup horizon. With time rotation only, an item first inserted at time t stays
// in the ring until G further rotations, so a call at any now <= t + (G − 1)·S finds it (a
// duplicate), and (G − 1)·S >= window_ms. It is forgotten from g0 + G·S on, g0 the start
// of the generation that took it; with time not going backwards g0 <= t, so at the latest
// from t + G·S: an item seen again G·S or more after its first sighting is new again
// (G·S = window_ms + S when G − 1 divides window_ms).
// Bursts: each of the G − 1 generations that follow the item's own lasts at least S ms or
// c insertions, so with e = now − t and f = items inserted after it, the item is still a
// duplicate whenever
//     e / ((G − 1)·S) + f / ((G − 1)·c) < 1,
// i.e. it is remembered at least as long as the last G − 1 full generations span.
//
// A duplicate found in any generation is not inserted again, so an item that keeps
// recurring is first-seen again once per horizon. contains() does not move time: it answers
// as of the latest time passed.
//
// Layout. The G generations' bits live in one array of B·G blocks of 256 bits, B the blocks
// of one generation, interleaved: block b of ring slot s is block b·G + s of the array. An
// item uses block b = reduce(h.high, B) in every generation, with the bits of
// blocked_bloom_filter inside it, so its G blocks lie side by side in G/2 cache lines (the
// array is 64-byte aligned): a probe of every generation costs about one cache miss (two
// lines for G = 4) instead of G. Generation g's bits are exactly those of a
// blocked_bloom_filter of B blocks and the same seed that took the same items
// (generation() builds that filter; serialize() writes it). docs/PERFORMANCE.md compares
// this layout with a separate array per generation, and with lines (not blocks)
// interleaved.
//
// test_and_insert(), contains() and advance() never allocate or throw.
//
// Thread safety: not thread-safe for writers; one owner. Concurrent const calls are safe
// when no call modifies the filter.
class rolling_bloom {
 public:
  static constexpr std::uint32_t kMaxGenerations = 64;

  // Throws std::invalid_argument naming the option that is out of range, or when one
  // generation would exceed blocked_bloom_filter::kMaxBits.
  // `path` = scalar forces the portable probes (for tests and benchmarks; the bits and the
  // answers are the same either way, see blocked_bloom_filter).
  explicit rolling_bloom(const rolling_bloom_options& options,
                         simd_path path = simd_path::automatic);

  // Moves time to `now_ms` (rotations as in the design above), then: true when some
  // generation holds the item (a duplicate, up to the false-positive rate; nothing is
  // inserted), else inserts it into generation 0, rotates if that filled it, and returns
  // false (first seen in the window).
  [[nodiscard]] bool test_and_insert(hash128 h, std::int64_t now_ms) noexcept;
  [[nodiscard]] bool test_and_insert(std::string_view item, std::int64_t now_ms) noexcept {
    return test_and_insert(hash_item(item, options_.seed), now_ms);
  }

  // test_and_insert(hashes[i], now_ms) for the first n = min(hashes.size(), present.size())
  // hashes, in order, present[i] its answer: the same answers and state as n single calls.
  // It prefetches the blocks of item i + blocked_bloom_filter::kPrefetchDistance in every
  // live generation while it processes item i, so that cache misses overlap. No allocation.
  void test_and_insert(std::span<const hash128> hashes, std::int64_t now_ms,
                       std::span<bool> present) noexcept;

  // True when some generation holds the item: always for an item inserted within the
  // guaranteed horizon of the latest time passed; with probability at most target_fpr()
  // for any other.
  [[nodiscard]] bool contains(hash128 h) const noexcept;
  [[nodiscard]] bool contains(std::string_view item) const noexcept {
    return contains(hash_item(item, options_.seed));
  }

  // Asks the CPU to start loading the item's block in every live generation (at least
  // generation 0; side by side, see the layout): the blocks that
  // test_and_insert(h, …) tests and the one it writes. A hint only: no effect on the state, no
  // allocation; call it some items ahead, in a batch.
  void prefetch(const hash128& h) const noexcept {
    const std::uint32_t* group = group_of(h);
    const std::size_t live = live_ > 0 ? live_ : 1;
    std::size_t s = newest_;
    for (std::size_t g = 0; g < live; ++g) {
      __builtin_prefetch(group + s * blocked_bloom_filter::kWordsPerBlock, 1, 3);
      if (++s == options_.generations) s = 0;
    }
  }

  // Rotates out the generations whose slice ended at or before `now_ms`; call it once per
  // batch so that idle streams age too. Earlier times do nothing.
  void advance(std::int64_t now_ms) noexcept;

  // G.
  [[nodiscard]] std::size_t generations() const noexcept { return options_.generations; }
  // Fill ratio of generation g (0 = newest); 0 for g >= G.
  [[nodiscard]] double fill_ratio(std::size_t generation) const noexcept;
  // Items inserted into generation g (exact count of first-seen items, at most c); 0 for
  // g >= G.
  [[nodiscard]] std::uint64_t generation_items(std::size_t generation) const noexcept;
  // Start time of generation g in ms; meaningful for the live ones (g < live_generations()).
  [[nodiscard]] std::int64_t generation_start_ms(std::size_t generation) const noexcept;
  // A copy of generation g's bits (0 = newest) as a blocked_bloom_filter of B blocks and the
  // same seed: the filter that the same items would give. Allocates its bit array; throws
  // std::out_of_range for g >= G.
  [[nodiscard]] blocked_bloom_filter generation(std::size_t generation) const;
  // Generations started since the clock began, at most G; 0 before the first time passed.
  [[nodiscard]] std::size_t live_generations() const noexcept { return live_; }

  // False-positive rate of a query now: 1 − Π_g (1 − p̂_g) with p̂_g the blocked filter's
  // estimated_fpr() of generation g (the Poisson mixture at its estimated load).
  [[nodiscard]] double estimated_fpr() const noexcept;
  // The `fpr` option: the rate the sizing guarantees, 1 − Π_g (1 − fpr_g).
  [[nodiscard]] double target_fpr() const noexcept { return options_.fpr; }
  // Distinct items in the window: Σ_g of each generation's estimated_items()
  // (−(m/8) ln(1 − fill), see blocked_bloom_filter).
  [[nodiscard]] double estimated_items() const noexcept;
  // Bytes of the G generations' bits, 32 · B · G.
  [[nodiscard]] std::size_t size_bytes() const noexcept;

  // (G − 1)·S: an item is remembered at least this long under time rotation (>= window_ms).
  [[nodiscard]] std::int64_t guaranteed_horizon_ms() const noexcept {
    return slice_ms_ * static_cast<std::int64_t>(options_.generations - 1);
  }
  // now − start of the oldest live generation (0 before the clock starts, never negative):
  // how far back the ring remembers, between (G − 1)·S and G·S under time rotation once
  // G generations are live, less after bursts.
  [[nodiscard]] std::int64_t effective_window_ms(std::int64_t now_ms) const noexcept;

  // Rotations because a slice ended (counting the rotations performed, at most G per call).
  [[nodiscard]] std::uint64_t rotations_by_time() const noexcept { return rotations_by_time_; }
  // Rotations because generation 0 reached its share c.
  [[nodiscard]] std::uint64_t rotations_by_capacity() const noexcept {
    return rotations_by_capacity_;
  }

  [[nodiscard]] const rolling_bloom_options& options() const noexcept { return options_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return options_.seed; }
  // S = ⌈window_ms / (G − 1)⌉.
  [[nodiscard]] std::int64_t slice_ms() const noexcept { return slice_ms_; }
  // c = ⌈capacity / (G − 1)⌉.
  [[nodiscard]] std::uint64_t generation_capacity() const noexcept { return share_; }
  // fpr_g = 1 − (1 − fpr)^{1/G}, the rate each generation is sized for.
  [[nodiscard]] double generation_fpr() const noexcept { return generation_fpr_; }
  // The same two from options alone (capacity, fpr and generations), for sizing without
  // building: each generation takes blocked_bloom_filter::suggest_bits(c, fpr_g) bits. Throw
  // std::invalid_argument for generations out of [2, kMaxGenerations], a capacity of 0 or
  // an fpr out of (0, 1) (the window is not needed, and not checked).
  [[nodiscard]] static std::uint64_t generation_capacity(const rolling_bloom_options& options);
  [[nodiscard]] static double generation_fpr(const rolling_bloom_options& options);
  // And S and the bits of one generation (generation(g).bits()), from options alone. Throw
  // std::invalid_argument, as the constructor does, for options out of range.
  [[nodiscard]] static std::int64_t slice_ms(const rolling_bloom_options& options);
  [[nodiscard]] static std::uint64_t generation_bits(const rolling_bloom_options& options);
  // The expected bits of a full generation (its share c of items inserted) written with
  // bit_coding::smaller (expected_smaller_bits): each of its m bits is set with probability
  // 1 − (1 − 8/m)^c, since an item sets one of the 32 bits of each of its block's 8 words.
  [[nodiscard]] static double full_generation_coded_bits(const rolling_bloom_options& options);
  // Sizing for transmission (seed 002's compressed Bloom filter; M. Mitzenmacher, "Compressed
  // Bloom Filters", IEEE/ACM Trans. Networking 10(5), 2002): the least window rate f ≤
  // options.fpr whose generations, full and coded, take no more bits than the generations
  // sized for options.fpr take in memory (generation_bits), with at most twice their memory.
  // Those larger, sparser generations travel (snapshots, shards) in the bytes the memory
  // sizing's arrays would, at a lower rate. With the blocked layout's 8 bits per item fixed,
  // a full generation's code grows with its array, so the memory sizing codes smaller still:
  // this trades memory for FPR at the bytes of the uncompressed filter, as the lecture's
  // table does, and is the same filter as options.fpr = f. Where the memory sizing's arrays
  // are near half full (fpr_g above about 2e-3) the code saves nothing and f is about
  // options.fpr. Rounded up to three significant digits, so that equal options give an equal
  // rate on every build. Throws std::invalid_argument as generation_bits() does.
  [[nodiscard]] static double transmission_fpr(const rolling_bloom_options& options);

  // The whole state (options, every generation with its start time and count, the ring
  // position, the rotation counters) as one record of the library's binary format
  // (sketch/serialize.h). `coding` is that of each generation's bit array (bit_coding):
  // with smaller, the empty and the sparse generations travel coded, the full ones plain.
  [[nodiscard]] std::string serialize(bit_coding coding = bit_coding::plain) const {
    std::string out;
    serialize_to(out, coding);
    return out;
  }
  // The same record, appended to `out` (after what it holds).
  void serialize_to(std::string& out, bit_coding coding = bit_coding::plain) const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure, or inconsistent (options out of range, generations of
  // another size or seed, counts beyond the share, unordered start times).
  [[nodiscard]] static rolling_bloom deserialize(std::string_view record);
  // The options of a record written by serialize(), read without building the filter (the
  // record's header and checksum are checked, its generations are not): for a reader that
  // checks what a record describes before deserialize() allocates it, since a record whose
  // generations are coded can be far smaller than their arrays. Throws format_error as
  // deserialize() does.
  [[nodiscard]] static rolling_bloom_options record_options(std::string_view record);

 private:
  // The ring slot of generation g < G.
  [[nodiscard]] std::size_t slot(std::size_t generation) const noexcept {
    const std::size_t s = newest_ + generation;
    return s >= options_.generations ? s - options_.generations : s;
  }
  // The offset in words_ of block b of ring slot s (see the layout).
  [[nodiscard]] std::size_t block_offset(std::uint64_t b, std::size_t s) const noexcept {
    return (b * options_.generations + s) * blocked_bloom_filter::kWordsPerBlock;
  }
  // The item's block in ring slot 0; its block in slot s is the s-th after it.
  [[nodiscard]] std::uint32_t* group_of(hash128 h) noexcept {
    return words_.data() + block_offset(reduce(h.high, blocks_), 0);
  }
  [[nodiscard]] const std::uint32_t* group_of(hash128 h) const noexcept {
    return words_.data() + block_offset(reduce(h.high, blocks_), 0);
  }
  [[nodiscard]] std::uint64_t bits_per_generation() const noexcept {
    return blocks_ * blocked_bloom_filter::kBlockBits;
  }
  // A copy of ring slot s's bits as a blocked filter (generation()).
  [[nodiscard]] blocked_bloom_filter slot_filter(std::size_t s) const;
  void rotate(std::int64_t start_ms) noexcept;
  // Zeroes the blocks of ring slot s.
  void clear_slot(std::size_t s) noexcept;

  rolling_bloom_options options_;
  std::int64_t slice_ms_;
  std::uint64_t share_;
  double generation_fpr_;
  std::uint64_t blocks_;  // B, the blocks of one generation
  // B·G blocks of 8 words, interleaved by ring slot (see the layout); generation g is
  // slot(g).
  std::vector<std::uint32_t, detail::bit_array_allocator<std::uint32_t>> words_;
  std::vector<std::uint64_t> bits_set_;  // by ring slot
  bool avx2_;                            // the AVX2 probes (simd_path)
  std::vector<std::int64_t> start_ms_;   // by ring slot
  std::vector<std::uint64_t> inserted_;  // by ring slot
  std::size_t newest_ = 0;               // ring slot of generation 0
  std::size_t live_ = 0;                 // 0 until the first time passed, then 1..G
  std::uint64_t rotations_by_time_ = 0;
  std::uint64_t rotations_by_capacity_ = 0;
};

}  // namespace sketch
