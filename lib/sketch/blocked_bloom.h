// The split-block Bloom filter: the library's fast default Bloom filter.
//
// Every item touches one 256-bit block (one cache line holds two), so an insert or a query
// costs one cache miss instead of k, and on x86-64 one AVX2 instruction sequence sets or
// tests all 8 bits at once. The price is a higher false-positive rate than the classic
// filter at equal size, because blocks fill unevenly; fpr() below gives the exact figure
// and suggest_bits() sizes for it.
//
// Sources: F. Putze, P. Sanders, J. Singler, "Cache-, Hash- and Space-Efficient Bloom
// Filters", WEA 2007 (blocked Bloom filters and their false-positive rate as a Poisson
// mixture of per-block rates); the Apache Parquet format specification,
// "BloomFilter.md" (the split-block layout, the 8 salts and the bit selection used here,
// also Apache Impala's and Kudu's filter); union, intersection and halving from seed
// lecture 002 (M. Werner, "Bloom-Filter").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/hash.h"
#include "sketch/serialize.h"

// The AVX2 path exists on x86 only; defining SKETCH_NO_AVX2 leaves it out (to build and
// test the portable fallback on x86).
#if (defined(__x86_64__) || defined(__i386__)) && !defined(SKETCH_NO_AVX2)
#include <immintrin.h>
#define SKETCH_BLOCKED_BLOOM_AVX2 1
#else
#define SKETCH_BLOCKED_BLOOM_AVX2 0
#endif

namespace sketch {
namespace detail {

// The salts of the Parquet split-block filter: word i of a block gets bit
// (key · kBlockedBloomSalt[i]) >> 27, the top 5 bits of a 32-bit multiplicative hash of the key.
inline constexpr std::uint32_t kBlockedBloomSalt[8] = {0x47b6137bU, 0x44974d91U, 0x8824ad5bU,
                                                       0xa2b7289dU, 0x705495c7U, 0x2df1424bU,
                                                       0x9efc4947U, 0x5c6bfb31U};

// The hot path of blocked_bloom_filter::test_and_insert, defined here so that it inlines into
// the caller. Both versions are branch-free: they always store old | mask (the line is loaded
// anyway) and return the number of bits newly set (0..8; 0 means the item was present), so a
// stream that mixes new items and duplicates costs no mispredicted branch.
[[nodiscard]] inline std::uint32_t blocked_bloom_test_and_insert_scalar(
    std::uint32_t* block, std::uint32_t key) noexcept {
  std::uint32_t added = 0;
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t bit = std::uint32_t{1} << ((key * kBlockedBloomSalt[i]) >> 27);
    added += static_cast<std::uint32_t>((block[i] & bit) == 0);
    block[i] |= bit;
  }
  return added;
}

// The same bits as blocked_bloom_test_and_insert_scalar; returns whether all 8 were set before
// (the item was present) without counting the new ones.
[[nodiscard]] inline bool blocked_bloom_test_and_set_scalar(std::uint32_t* block,
                                                            std::uint32_t key) noexcept {
  std::uint32_t missing = 0;
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t bit = std::uint32_t{1} << ((key * kBlockedBloomSalt[i]) >> 27);
    missing |= bit & ~block[i];
    block[i] |= bit;
  }
  return missing == 0;
}

// True when all 8 bits of `key` are set in the block. Stops at the first clear bit: most
// queries of absent items end after one or two words.
[[nodiscard]] inline bool blocked_bloom_contains_scalar(const std::uint32_t* block,
                                                        std::uint32_t key) noexcept {
  for (int i = 0; i < 8; ++i) {
    if ((block[i] & (std::uint32_t{1} << ((key * kBlockedBloomSalt[i]) >> 27))) == 0) return false;
  }
  return true;
}

// True when the CPU runs AVX2 (checked once, then cached).
[[nodiscard]] bool cpu_has_avx2() noexcept;

// The size above which the batch calls prefetch: half of one core's L2 cache as the system
// reports it (sysconf), 256 KiB when it reports none. Checked once, then cached. A filter
// this small stays in L2, where a prefetch per item only costs instructions (in_cache
// blocked_batch, docs/PERFORMANCE.md).
[[nodiscard]] std::uint64_t batch_prefetch_above_bytes() noexcept;

#if SKETCH_BLOCKED_BLOOM_AVX2
// The AVX2 versions: compiled for AVX2 by function attribute only and called only when the
// CPU has it (cpu_has_avx2(), checked once, in the constructor), so the binary still runs on
// any x86-64. The same bits as the scalar ones.

// The 8 bits of `key`, one per 32-bit lane: lane i holds 1 << ((key · SALT[i]) >> 27).
[[nodiscard]] __attribute__((target("avx2"))) inline __m256i blocked_bloom_mask_avx2(
    std::uint32_t key) noexcept {
  const __m256i salts = _mm256_setr_epi32(
      static_cast<int>(kBlockedBloomSalt[0]), static_cast<int>(kBlockedBloomSalt[1]),
      static_cast<int>(kBlockedBloomSalt[2]), static_cast<int>(kBlockedBloomSalt[3]),
      static_cast<int>(kBlockedBloomSalt[4]), static_cast<int>(kBlockedBloomSalt[5]),
      static_cast<int>(kBlockedBloomSalt[6]), static_cast<int>(kBlockedBloomSalt[7]));
  const __m256i product = _mm256_mullo_epi32(_mm256_set1_epi32(static_cast<int>(key)), salts);
  return _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_srli_epi32(product, 27));
}

// Sets the mask's bits in the block (32-byte aligned) and returns how many were clear
// (0..8): always stores old | mask, branch-free.
[[nodiscard]] __attribute__((target("avx2"))) inline std::uint32_t blocked_bloom_set_avx2(
    std::uint32_t* block, __m256i mask) noexcept {
  auto* p = reinterpret_cast<__m256i*>(block);
  const __m256i old = _mm256_load_si256(p);
  _mm256_store_si256(p, _mm256_or_si256(old, mask));
  // Lanes where the mask's bit was clear; each lane of a mask has exactly one bit.
  const __m256i missing = _mm256_andnot_si256(old, mask);
  const __m256i zero_lanes = _mm256_cmpeq_epi32(missing, _mm256_setzero_si256());
  const auto zero_bits = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(zero_lanes)));
  return 8 - static_cast<std::uint32_t>(__builtin_popcount(zero_bits));
}

// True when all of the mask's bits are set in the block (32-byte aligned).
[[nodiscard]] __attribute__((target("avx2"))) inline bool blocked_bloom_has_avx2(
    const std::uint32_t* block, __m256i mask) noexcept {
  const __m256i bits = _mm256_load_si256(reinterpret_cast<const __m256i*>(block));
  return _mm256_testc_si256(bits, mask) != 0;  // (~bits & mask) == 0
}

[[nodiscard]] __attribute__((target("avx2"))) inline std::uint32_t
blocked_bloom_test_and_insert_avx2(std::uint32_t* block, std::uint32_t key) noexcept {
  return blocked_bloom_set_avx2(block, blocked_bloom_mask_avx2(key));
}

// Sets the key's bits and returns whether all were set before (the item was present),
// without counting the new ones: one load, one test, one store.
[[nodiscard]] __attribute__((target("avx2"))) inline bool blocked_bloom_test_and_set_avx2(
    std::uint32_t* block, std::uint32_t key) noexcept {
  const __m256i mask = blocked_bloom_mask_avx2(key);
  auto* p = reinterpret_cast<__m256i*>(block);
  const __m256i old = _mm256_load_si256(p);
  _mm256_store_si256(p, _mm256_or_si256(old, mask));
  return _mm256_testc_si256(old, mask) != 0;
}
#endif

// Memory for bit arrays, 64-byte aligned (a 32-byte block never straddles two cache lines,
// and a group of blocks starting on a line fills whole lines).
// Arrays of kHugePageBytes or more are aligned to kHugePageBytes and advised
// MADV_HUGEPAGE (Linux), so that a random access misses the TLB far less often where
// transparent huge pages are enabled in `madvise` or `always` mode. Throws std::bad_alloc.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
[[nodiscard]] void* allocate_bit_array(std::size_t bytes);
void free_bit_array(void* p, std::size_t bytes) noexcept;

// A std::allocator over allocate_bit_array, for the bit arrays of the filters.
template <class T>
struct bit_array_allocator {
  using value_type = T;

  bit_array_allocator() noexcept = default;
  template <class U>
  explicit bit_array_allocator(const bit_array_allocator<U>&) noexcept {}

  [[nodiscard]] T* allocate(std::size_t n) {
    return static_cast<T*>(allocate_bit_array(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { free_bit_array(p, n * sizeof(T)); }

  friend bool operator==(const bit_array_allocator&, const bit_array_allocator&) noexcept {
    return true;
  }
};

}  // namespace detail

// Which implementation of the per-item operations a filter uses. Both set and test exactly
// the same bits (a unit test compares them bit for bit); `scalar` exists to test that and
// to measure the gain.
enum class simd_path : std::uint8_t {
  automatic,  // AVX2 when the CPU has it (cached __builtin_cpu_supports("avx2")), else scalar
  scalar,     // portable C++ only
};

// A set of items with no false negatives, in the split-block layout:
//
//   the bit array is B blocks of 256 bits; a block is 8 words of 32 bits.
//   An item with hash h uses block b = reduce(h.high, B) (multiply-shift, sketch/hash.h)
//   and sets exactly one bit in each of the block's 8 words: in word i the bit
//       (uint32(h.low) · SALT[i]) >> 27                      (Parquet's 8 odd salts),
//   so k = 8 always, and the item is present when those 8 bits are set.
//
// After n distinct insertions a query for another item answers "present" with probability
// fpr(bits(), n) (Putze et al. 2007): the Poisson mixture over the load of one block, which
// is higher than the classic (1 - (1 - 1/m)^{kn})^k at the same m.
//
// Word w = 8b + i of words() is word i of block b; bit j of a word is (word >> j) & 1. The
// array is 64-byte aligned. The count of set bits, from which the fill ratio and the
// estimates derived from it follow, is kept by every update but the single test_and_insert()
// (see bits_set()).
//
// Thread safety: not thread-safe for writers; one owner. Concurrent const calls are safe
// when no call modifies the filter.
class blocked_bloom_filter {
 public:
  static constexpr std::uint32_t kHashes = 8;       // one bit per 32-bit word of a block
  static constexpr std::uint64_t kBlockBits = 256;  // 8 words × 32 bits
  static constexpr std::uint64_t kWordsPerBlock = 8;
  // The largest m accepted (2^40 bits = 128 GiB, 2^32 blocks), as for the classic filter.
  static constexpr std::uint64_t kMaxBits = std::uint64_t{1} << 40;

  // False-positive rate of a blocked filter of `bits` bits (rounded up to whole blocks, at
  // least one, as the constructor does) after n distinct insertions (Putze et al. 2007,
  // section 3): with B = ⌈bits / 256⌉ blocks and λ = n / B items per block on average, a
  // block's load is Poisson(λ) and a block holding i items answers a foreign query with
  // (1 − (1 − 1/32)^i)^8, so
  //     FPR = Σ_{i≥0} e^{−λ} λ^i / i! · (1 − (1 − 1/32)^i)^8  +  λ · 2^-32,
  // the last term for a query whose 32 key bits equal those of an item in its block (its 8
  // bits are then set whatever the rest: an upper bound, the floor of the rate below about
  // 1e-9). Summed in log space outward from the mode until the Poisson tail is below 1e-17
  // of the sum. Pure, thread-safe, no allocation. For bits >= 0 and n >= 0 (n = 0 gives 0).
  [[nodiscard]] static double fpr(double bits, double n) noexcept;

  // Bits for n distinct items at false-positive rate at most p: 256 · B for the smallest
  // number of blocks B with fpr(256 · B, n) <= p (binary search; fpr falls as B grows).
  // Always more than the classic optimum −n ln p / (ln 2)^2 of lecture 004. Throws
  // std::invalid_argument naming the argument unless n > 0 and 0 < p < 1, or when more
  // than kMaxBits would be needed.
  [[nodiscard]] static std::uint64_t suggest_bits(std::uint64_t n, double p);

  // A filter of suggest_bits(n, fpr) bits: false-positive rate at most `fpr` after n distinct
  // insertions. Throws std::invalid_argument as suggest_bits().
  [[nodiscard]] static blocked_bloom_filter for_capacity(std::uint64_t n, double fpr,
                                                         std::uint64_t seed = kDefaultSeed,
                                                         simd_path path = simd_path::automatic);

  // An empty filter of `bits` bits rounded up to a whole number of 256-bit blocks. Throws
  // std::invalid_argument unless 1 <= bits <= kMaxBits. `path` = scalar forces the portable
  // code (for tests and benchmarks; the bits are the same either way).
  explicit blocked_bloom_filter(std::uint64_t bits, std::uint64_t seed = kDefaultSeed,
                                simd_path path = simd_path::automatic);

  // Sets the item's 8 bits. Afterwards contains(h) is true (no false negatives).
  void insert(hash128 h) noexcept;
  void insert(std::string_view item) noexcept { insert(hash_item(item, seed_)); }

  // True when the item's 8 bits are set: always for an inserted item, with probability
  // fpr(bits(), n) for any other after n insertions.
  [[nodiscard]] bool contains(hash128 h) const noexcept;
  [[nodiscard]] bool contains(std::string_view item) const noexcept {
    return contains(hash_item(item, seed_));
  }

  // contains() then insert() in one pass over the block: true when the item was already
  // present (all 8 bits set before the call; then nothing changes), false when it is new
  // (first seen, up to the false-positive rate); it is inserted either way.
  // Branch-free and inlined (see detail::blocked_bloom_test_and_insert_*): the block is
  // always rewritten, with the same bits as insert().
  [[nodiscard]] bool test_and_insert(hash128 h) noexcept {
    std::uint32_t* block = block_of(h);
    const auto key = static_cast<std::uint32_t>(h.low);
#if SKETCH_BLOCKED_BLOOM_AVX2
    const bool present = avx2_ ? detail::blocked_bloom_test_and_set_avx2(block, key)
                               : detail::blocked_bloom_test_and_set_scalar(block, key);
#else
    const bool present = detail::blocked_bloom_test_and_set_scalar(block, key);
#endif
    count_stale_ = true;
    return present;
  }
  [[nodiscard]] bool test_and_insert(std::string_view item) noexcept {
    return test_and_insert(hash_item(item, seed_));
  }

  // Items processed ahead by the batch calls: while item i is processed, the block of item
  // i + kPrefetchDistance is prefetched (the best of 8, 16 and 32 measured out of cache; see
  // docs/PERFORMANCE.md).
  static constexpr std::size_t kPrefetchDistance = 32;

  // test_and_insert() of the first n = min(hashes.size(), present.size()) hashes, in order:
  // present[i] = test_and_insert(hashes[i]), with the same bits and answers as n single
  // calls. A filter larger than detail::batch_prefetch_above_bytes() is prefetched
  // kPrefetchDistance items ahead, so that the cache misses of a filter larger than the
  // caches overlap; the AVX2 path runs as one loop. No allocation.
  void test_and_insert(std::span<const hash128> hashes, std::span<bool> present) noexcept;

  // Asks the CPU to start loading the item's block (32 bytes, within one cache line), for
  // writing, so that a following insert, contains or test_and_insert of h finds it in cache.
  // A hint only: no effect on the filter, no allocation; call it some items ahead.
  void prefetch(const hash128& h) const noexcept { __builtin_prefetch(block_of(h), 1, 3); }

  // Number of set bits, exact. insert() and the batch call keep the count up to date as they
  // go; a single test_and_insert() does not (it would cost its popcount of the new bits on
  // every call), so after one the count is taken from the array when read, in one pass (O(m)),
  // until an operation that counts (clear(), union_with(), intersect_with()) or
  // recount_bits() stores it again. fill_ratio(), estimated_items(), estimated_fpr(),
  // serialize() and == read it so.
  [[nodiscard]] std::uint64_t bits_set() const noexcept {
    return count_stale_ ? count_bits() : bits_set_;
  }
  // Counts the set bits once and stores the count, so that bits_set() is O(1) again until the
  // next single test_and_insert(). One pass over the array.
  void recount_bits() noexcept { recount(); }
  // Fraction of set bits, bits_set / m.
  [[nodiscard]] double fill_ratio() const noexcept;

  // Distinct items inserted, from the fill:  n̂ = −(m/8) ln(1 − fill).
  // Each 32-bit word is a one-hash classic filter of its block's items: with Poisson(λ)
  // items in a block, a bit stays zero with probability E[(31/32)^X] = e^{−λ/32} exactly
  // (the Poisson generating function), so fill = 1 − e^{−λ/32}, λ̂ = −32 ln(1 − fill) and
  // n̂ = λ̂ · B = −(m/8) ln(1 − fill) (the classic −(m/k) ln(1 − fill) of Swamidass & Baldi
  // 2007 with k = 8). +infinity when every bit is set.
  [[nodiscard]] double estimated_items() const noexcept;

  // False-positive rate of the filter as it is: fpr(m, n̂), the Poisson mixture at the
  // estimated load. Not fill^8, the classic fill^k (lecture 000): that formula assumes the
  // k bits of a query are independent draws from the whole array, but here all 8 fall in
  // one block whose load X varies, and since (1 − y)^8 is convex in y = q^X (q = 31/32),
  // Jensen gives E[(1 − q^X)^8] >= (1 − E[q^X])^8 = fill^8: fill^8 underestimates (0.85% instead
  // of the true 1.26% at 10 bits per item, 0.057% instead of 0.13% at 16). 1 when every
  // bit is set.
  [[nodiscard]] double estimated_fpr() const noexcept;
  // estimated_items() and estimated_fpr() of a filter of `bits` bits (a multiple of 256)
  // with `bits_set` of them set: for structures that keep blocked filters' bits in a layout
  // of their own (rolling_bloom).
  [[nodiscard]] static double estimated_items(std::uint64_t bits, std::uint64_t bits_set) noexcept;
  [[nodiscard]] static double estimated_fpr(std::uint64_t bits, std::uint64_t bits_set) noexcept;

  [[nodiscard]] std::uint64_t bits() const noexcept { return blocks_ * kBlockBits; }
  [[nodiscard]] std::uint64_t blocks() const noexcept { return blocks_; }
  [[nodiscard]] std::uint32_t hashes() const noexcept { return kHashes; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  // Bytes of the bit array: 32 · B.
  [[nodiscard]] std::size_t size_bytes() const noexcept {
    return words_.size() * sizeof(std::uint32_t);
  }
  // The bit array: 8 words per block (see the class comment).
  [[nodiscard]] std::span<const std::uint32_t> words() const noexcept { return words_; }
  // True when insert/contains/test_and_insert run the AVX2 code.
  [[nodiscard]] bool uses_avx2() const noexcept { return avx2_; }

  // Empties the filter (all bits zero), keeping m and the seed; no allocation.
  void clear() noexcept;

  // Same m and seed (k is always 8): the precondition of union and intersection.
  [[nodiscard]] bool compatible(const blocked_bloom_filter& other) const noexcept;

  // This filter becomes the filter of the union of both sets: bitwise OR, exactly the
  // filter that inserting both sets would give (lecture 002: F_M ∨ F_N = F_{M ∪ N}).
  // Throws std::invalid_argument naming the parameter that differs.
  void union_with(const blocked_bloom_filter& other);

  // This filter becomes the bitwise AND of both: it contains every item of the
  // intersection, with more false positives than a filter built from the intersection
  // alone (lecture 002: F_M ∧ F_N ⊇ F_{M ∩ N}). Throws std::invalid_argument naming the
  // parameter that differs.
  void intersect_with(const blocked_bloom_filter& other);

  // The same set in half the blocks, same seed (lecture 002, "Halbieren"). An item's block
  // is reduce(h.high, B) = ⌊h.high · B / 2^64⌋ and, for B even, ⌊x/2⌋ = ⌊⌊x⌋/2⌋ gives
  // reduce(h.high, B/2) = reduce(h.high, B) >> 1, while the bits inside a block depend on
  // h.low only: so blocks 2j and 2j+1 fold into block j by OR. The result equals, bit for
  // bit, the filter of B/2 blocks built from the same items; its FPR is that of B/2 blocks.
  // (The identity holds for every even B, powers of two included.) Throws
  // std::invalid_argument unless B is even (so at least 2).
  [[nodiscard]] blocked_bloom_filter halved() const;

  // The filter as one record of the library's binary format (sketch/serialize.h), its bit
  // array written as `coding` says: plain (a copy), Golomb-coded (the compressed Bloom filter
  // of seed 002), or the smaller of the two.
  [[nodiscard]] std::string serialize(bit_coding coding = bit_coding::plain) const {
    std::string out;
    serialize_to(out, coding);
    return out;
  }
  // The same record, appended to `out` (after what it holds).
  void serialize_to(std::string& out, bit_coding coding = bit_coding::plain) const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure or holds parameters this class does not accept.
  [[nodiscard]] static blocked_bloom_filter deserialize(std::string_view record,
                                                        simd_path path = simd_path::automatic);

  // Same parameters and the same bits (the SIMD path is not part of the value).
  friend bool operator==(const blocked_bloom_filter& a, const blocked_bloom_filter& b) noexcept;

 private:
  // rolling_bloom keeps its generations' blocks interleaved in one array and builds a
  // filter of one generation's bits on request (rolling_bloom::generation).
  friend class rolling_bloom;

  void require_compatible(const blocked_bloom_filter& other, const char* operation) const;
  void recount() noexcept;
  [[nodiscard]] std::uint64_t count_bits() const noexcept;
  [[nodiscard]] std::uint32_t* block_of(hash128 h) noexcept {
    return words_.data() + reduce(h.high, blocks_) * kWordsPerBlock;
  }
  [[nodiscard]] const std::uint32_t* block_of(hash128 h) const noexcept {
    return words_.data() + reduce(h.high, blocks_) * kWordsPerBlock;
  }

  std::vector<std::uint32_t, detail::bit_array_allocator<std::uint32_t>> words_;
  std::uint64_t blocks_;
  std::uint64_t seed_;
  std::uint64_t bits_set_ = 0;  // the count of set bits, when !count_stale_
  bool count_stale_ = false;    // a single test_and_insert() ran since the last count
  bool avx2_;
};

}  // namespace sketch
