// The split-block Bloom filter: the library's fast default Bloom filter.
//
// Every item touches one 256-bit block (one cache line holds two), so an insert or a query
// costs one cache miss instead of k, and on x86-64 one AVX2 instruction sequence sets or
// tests all 8 bits at once. The price is a higher false-positive rate than the classic
// filter at equal size, because blocks fill unevenly; fpr() below gives the exact figure
// and bits_for() sizes for it.
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
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/hash.h"

namespace sketch {
namespace detail {

// std::allocator with a fixed minimum alignment, for SIMD-aligned arrays in std::vector.
template <class T, std::size_t Align>
struct aligned_allocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = aligned_allocator<U, Align>;
  };

  aligned_allocator() noexcept = default;
  template <class U>
  explicit aligned_allocator(const aligned_allocator<U, Align>&) noexcept {}

  [[nodiscard]] T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{Align}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{Align}); }

  friend bool operator==(const aligned_allocator&, const aligned_allocator&) noexcept {
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
// array is 32-byte aligned. The count of set bits is kept up to date by every update, so
// the fill ratio and the estimates derived from it cost nothing to read.
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
  //     FPR = Σ_{i≥0} e^{−λ} λ^i / i! · (1 − (1 − 1/32)^i)^8.
  // Summed in log space outward from the mode until the Poisson tail is below 1e-17 of the
  // sum. Pure, thread-safe, no allocation. For bits >= 0 and n >= 0 (n = 0 gives 0).
  [[nodiscard]] static double fpr(double bits, double n) noexcept;

  // Bits for n distinct items at false-positive rate at most p: 256 · B for the smallest
  // number of blocks B with fpr(256 · B, n) <= p (binary search; fpr falls as B grows).
  // Always more than the classic optimum −n ln p / (ln 2)^2 of lecture 004. Throws
  // std::invalid_argument naming the argument unless n > 0 and 0 < p < 1, or when more
  // than kMaxBits would be needed.
  [[nodiscard]] static std::uint64_t bits_for(std::uint64_t n, double p);

  // A filter of bits_for(n, fpr) bits: false-positive rate at most `fpr` after n distinct
  // insertions. Throws std::invalid_argument as bits_for().
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
  [[nodiscard]] bool test_and_insert(hash128 h) noexcept;
  [[nodiscard]] bool test_and_insert(std::string_view item) noexcept {
    return test_and_insert(hash_item(item, seed_));
  }

  // Number of set bits, exact; maintained by every update (popcount of the new bits).
  [[nodiscard]] std::uint64_t bits_set() const noexcept { return bits_set_; }
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

  // The filter as one record of the library's binary format (sketch/serialize.h).
  [[nodiscard]] std::string serialize() const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure or holds parameters this class does not accept.
  [[nodiscard]] static blocked_bloom_filter deserialize(std::string_view record,
                                                        simd_path path = simd_path::automatic);

  // Same parameters and the same bits (the SIMD path is not part of the value).
  friend bool operator==(const blocked_bloom_filter& a, const blocked_bloom_filter& b) noexcept;

 private:
  void require_compatible(const blocked_bloom_filter& other, const char* operation) const;
  void recount() noexcept;
  [[nodiscard]] std::uint32_t* block_of(hash128 h) noexcept {
    return words_.data() + reduce(h.high, blocks_) * kWordsPerBlock;
  }
  [[nodiscard]] const std::uint32_t* block_of(hash128 h) const noexcept {
    return words_.data() + reduce(h.high, blocks_) * kWordsPerBlock;
  }

  std::vector<std::uint32_t, detail::aligned_allocator<std::uint32_t, 32>> words_;
  std::uint64_t blocks_;
  std::uint64_t seed_;
  std::uint64_t bits_set_ = 0;
  bool avx2_;
};

}  // namespace sketch
