// The classic Bloom filter: one array of m bits and k indices per item.
//
// Sources: Bloom, "Space/Time Trade-offs in Hash Coding with Allowable Errors", CACM 13(7),
// 1970; the seed lectures 000-004 (formulas in sketch/bloom_math.h); union, intersection
// and halving from lecture 002 (M. Werner, "Bloom-Filter").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/bloom_math.h"
#include "sketch/hash.h"
#include "sketch/serialize.h"

namespace sketch {

// A set of items with no false negatives and a false-positive rate set by its size:
// after n distinct insertions a query for another item answers "present" with
// probability (1 - (1 - 1/m)^{kn})^k (bloom_math::fpr_exact).
//
// Bit i lives in words()[i / 64] at bit position i % 64; the k bits of an item are
// index_sequence(hash, m) (enhanced double hashing, each value mixed, with multiply-shift
// reduction). The count of set bits is kept up to date by every update, so the fill ratio and the
// estimates derived from it cost nothing to read.
//
// Thread safety: not thread-safe for writers; one owner. Concurrent const calls are safe
// when no call modifies the filter.
class bloom_filter {
 public:
  // The largest m accepted (2^40 bits = 128 GiB); it keeps every size computation far
  // from overflow.
  static constexpr std::uint64_t kMaxBits = std::uint64_t{1} << 40;
  static constexpr std::uint32_t kMaxHashes = bloom_math::kMaxHashes;

  // A filter for n distinct items at false-positive rate at most `fpr`, sized by
  // bloom_math::suggest_classic (m = -n ln p / (ln 2)^2 rounded up until the exact FPR
  // with an integer k = (m/n) ln 2 meets p; lecture 004). Throws std::invalid_argument
  // unless n > 0 and 0 < fpr < 1, or when the filter would exceed kMaxBits.
  [[nodiscard]] static bloom_filter for_capacity(std::uint64_t n, double fpr,
                                                 std::uint64_t seed = kDefaultSeed);

  // An empty filter of `bits` bits (any m >= 1) and `hashes` hash functions. Throws
  // std::invalid_argument unless 1 <= bits <= kMaxBits and 1 <= hashes <= kMaxHashes.
  bloom_filter(std::uint64_t bits, std::uint32_t hashes, std::uint64_t seed = kDefaultSeed);

  // Sets the k bits of the item. Afterwards contains(h) is true (no false negatives).
  void insert(hash128 h) noexcept;
  void insert(std::string_view item) noexcept { insert(hash_item(item, seed_)); }

  // True when all k bits of the item are set: always for an inserted item, with
  // probability fill^k (lecture 000) for any other.
  [[nodiscard]] bool contains(hash128 h) const noexcept;
  [[nodiscard]] bool contains(std::string_view item) const noexcept {
    return contains(hash_item(item, seed_));
  }

  // contains() then insert() in one pass over the k bits: returns true when the item was
  // already present (all k bits set before the call), false when it is new (first seen,
  // up to the false-positive rate), and leaves it inserted either way.
  [[nodiscard]] bool test_and_insert(hash128 h) noexcept;
  [[nodiscard]] bool test_and_insert(std::string_view item) noexcept {
    return test_and_insert(hash_item(item, seed_));
  }

  // Number of set bits, exact; maintained by every update.
  [[nodiscard]] std::uint64_t bits_set() const noexcept { return bits_set_; }
  // Fraction of set bits, bits_set / m.
  [[nodiscard]] double fill_ratio() const noexcept;
  // False-positive rate of the filter as it is: fill^k (lecture 000, "(1 - ρ)^k").
  [[nodiscard]] double estimated_fpr() const noexcept;
  // Distinct items inserted: -(m/k) ln(1 - fill) (Swamidass & Baldi 2007); +infinity
  // when every bit is set.
  [[nodiscard]] double estimated_items() const noexcept;

  [[nodiscard]] std::uint64_t bits() const noexcept { return bits_; }
  [[nodiscard]] std::uint32_t hashes() const noexcept { return hashes_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  // Bytes of the bit array: 8 · ceil(m / 64).
  [[nodiscard]] std::size_t size_bytes() const noexcept {
    return words_.size() * sizeof(std::uint64_t);
  }
  // The bit array: bit i is words()[i / 64] >> (i % 64) & 1; bits from m up are zero.
  [[nodiscard]] std::span<const std::uint64_t> words() const noexcept { return words_; }

  // Empties the filter (all bits zero), keeping m, k and the seed.
  void clear() noexcept;

  // Same m, k and seed: the precondition of union, intersection and comparison.
  [[nodiscard]] bool compatible(const bloom_filter& other) const noexcept;

  // This filter becomes the filter of the union of both sets: bitwise OR, exactly the
  // filter that inserting both sets would give (lecture 002: F_M ∨ F_N = F_{M ∪ N}).
  // Throws std::invalid_argument naming the parameter that differs.
  void union_with(const bloom_filter& other);

  // This filter becomes the bitwise AND of both: it contains every item of the
  // intersection, with more false positives than a filter built from the intersection
  // alone (lecture 002: F_M ∧ F_N ⊇ F_{M ∩ N}). Throws std::invalid_argument naming the
  // parameter that differs.
  void intersect_with(const bloom_filter& other);

  // The same set in m/2 bits, with the same k and seed (lecture 002, "Halbieren": when m is
  // a power of two, fold the filter by OR). Indices are reduce(g, m) = floor(g·m / 2^64),
  // the top log2(m) bits of g, so for m a power of two reduce(g, m/2) = reduce(g, m) >> 1:
  // bit i of this filter maps to bit i/2, that is, adjacent pairs (2j, 2j+1) fold into j
  // (the "two halves" of the lecture are for index = g mod m). The result equals, bit for
  // bit, the filter of m/2 bits built from the same items; its FPR is that of m/2 bits.
  // Throws std::invalid_argument unless m is a power of two and at least 128.
  [[nodiscard]] bloom_filter halved() const;

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
  [[nodiscard]] static bloom_filter deserialize(std::string_view record);

  // Same parameters and the same bits.
  friend bool operator==(const bloom_filter& a, const bloom_filter& b) noexcept;

 private:
  void require_compatible(const bloom_filter& other, const char* operation) const;
  void recount() noexcept;

  std::vector<std::uint64_t> words_;
  std::uint64_t bits_;
  std::uint64_t seed_;
  std::uint64_t bits_set_ = 0;
  std::uint32_t hashes_;
};

}  // namespace sketch
