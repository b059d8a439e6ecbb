// The counting Bloom filter: a Bloom filter whose cells are small counters, so that items
// can be removed (lecture 002, "Counting Bloom Filter": "Entfernen durch Dekrementieren
// des Counters"; Fan, Cao, Almeida & Broder, "Summary Cache", IEEE/ACM ToN 8(3), 2000,
// who show that 4 bits per counter suffice: at k <= (m/n) ln 2, some counter of m reaches
// 16 with probability at most 1.37e-15 · m).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/bloom_math.h"
#include "sketch/hash.h"

namespace sketch {

// A multiset-aware Bloom filter: insert adds one to the k counters of an item, remove
// subtracts one, contains asks whether all k are non-zero. With m counters and n items
// present its false-positive rate is that of a classic filter of m bits,
// (1 - (1 - 1/m)^{kn})^k (bloom_math::fpr_exact).
//
// Counters are 4 bits, two per byte (counter i in byte i / 2, low nibble when i is even).
// A counter that reaches 15 is saturated: it never changes again, neither up nor down, so
// it can overstate presence but never cause a false negative. Removing an item that was
// never inserted (a false positive) can remove others; only remove what was inserted.
//
// Thread safety: not thread-safe for writers; one owner. Concurrent const calls are safe
// when no call modifies the filter.
class counting_bloom_filter {
 public:
  // The largest number of counters accepted (2^40 counters = 512 GiB).
  static constexpr std::uint64_t kMaxCounters = std::uint64_t{1} << 40;
  static constexpr std::uint32_t kMaxHashes = bloom_math::kMaxHashes;
  // The value at which a counter sticks.
  static constexpr std::uint8_t kSaturated = 15;

  // A filter for n items present at once at false-positive rate at most `fpr`: one counter
  // per bit of bloom_math::suggest_classic(n, fpr) (m = -n ln p / (ln 2)^2, k = (m/n) ln 2,
  // lecture 004). Throws std::invalid_argument unless n > 0 and 0 < fpr < 1, or when it
  // would exceed kMaxCounters.
  [[nodiscard]] static counting_bloom_filter for_capacity(std::uint64_t n, double fpr,
                                                          std::uint64_t seed = kDefaultSeed);

  // An empty filter of `counters` counters and `hashes` hash functions. Throws
  // std::invalid_argument unless 1 <= counters <= kMaxCounters, 1 <= hashes <= kMaxHashes.
  counting_bloom_filter(std::uint64_t counters, std::uint32_t hashes,
                        std::uint64_t seed = kDefaultSeed);

  // Adds one to each of the k counters of the item (saturated counters stay at 15).
  // Afterwards contains(h) is true.
  void insert(hash128 h) noexcept;
  void insert(std::string_view item) noexcept { insert(hash_item(item, seed_)); }

  // True when all k counters of the item are non-zero: always for an item inserted more
  // often than removed; with probability fill^k for another (lecture 000).
  [[nodiscard]] bool contains(hash128 h) const noexcept;
  [[nodiscard]] bool contains(std::string_view item) const noexcept {
    return contains(hash_item(item, seed_));
  }

  // When contains(h), subtracts one from each of the k counters of the item (saturated
  // counters stay at 15) and returns true; otherwise changes nothing and returns false.
  // Items inserted and not removed stay contained (no false negatives), provided only
  // inserted items are removed.
  bool remove(hash128 h) noexcept;
  bool remove(std::string_view item) noexcept { return remove(hash_item(item, seed_)); }

  [[nodiscard]] std::uint64_t counters() const noexcept { return counters_; }
  [[nodiscard]] std::uint32_t hashes() const noexcept { return hashes_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  // Bytes of the counter array: ceil(counters / 2).
  [[nodiscard]] std::size_t size_bytes() const noexcept { return cells_.size(); }

  // Sets every counter to zero, keeping the parameters.
  void clear() noexcept;

  // The filter as one record of the library's binary format (sketch/serialize.h).
  [[nodiscard]] std::string serialize() const {
    std::string out;
    serialize_to(out);
    return out;
  }
  // The same record, appended to `out` (after what it holds).
  void serialize_to(std::string& out) const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure or holds parameters this class does not accept.
  [[nodiscard]] static counting_bloom_filter deserialize(std::string_view record);

  // Same parameters and the same counters.
  friend bool operator==(const counting_bloom_filter& a,
                         const counting_bloom_filter& b) noexcept = default;

 private:
  [[nodiscard]] unsigned counter(std::uint64_t i) const noexcept {
    return static_cast<unsigned>(cells_[i / 2] >> (i % 2 * 4)) & 0xFU;
  }

  std::vector<std::uint8_t> cells_;
  std::uint64_t counters_;
  std::uint64_t seed_;
  std::uint32_t hashes_;
};

}  // namespace sketch
