// The Bloom filter formulas of the lectures, shared by every Bloom structure of the
// library and by the `sketch size` and `sketch fpr` commands.
//
// Notation: m bits, n items, k hash functions. Sources:
//   [L000] Lecture 10, "Bloom's Filter & Count-Min Sketch" (W. Rivera): optimal k,
//          the spell-checking example (8 bits per word, 5 hash functions, about 2%);
//   [L002] Lecture "Bloom-Filter" (M. Werner): fraction of zero bits (1 - 1/N)^{dn},
//          optimal d = ln 2 · N/n, union, intersection, halving, counting filters;
//   [L003] CSE 312 Lecture 10, "Bloom Filters": k separate vectors of m bits,
//          FPR = (1 - (1 - 1/m)^n)^k, example n = 5,000,000, k = 30, m = 2,500,000 → 1.28%;
//   [L004] Lecture "Bloom Filter": FPR (1 - e^{-kn/m})^k, k = (m/n) ln 2, and the table
//          of false-positive rates for m/n = 2..13 and k = 1..8.
// Every function is pure, thread-safe and does not allocate.
#pragma once

#include <cstdint>

namespace sketch::bloom_math {

// The most hash functions a classic Bloom filter takes, and so the most suggest_classic
// chooses: beyond it the false-positive rate is below 2^-64 for the optimal k anyway.
inline constexpr std::uint32_t kMaxHashes = 64;

// Bits for n items at false-positive rate p with the optimal k:
//   m = -n ln p / (ln 2)^2                                   [L004], from k = (m/n) ln 2.
// For n >= 0 and 0 < p < 1; not rounded.
[[nodiscard]] double optimal_bits(double n, double p) noexcept;

// Hash functions minimising the FPR for m/n = bits_per_item:
//   k = (m/n) ln 2, rounded to the nearest integer, within [1, kMaxHashes]
//                                                              [L000], [L002], [L004].
[[nodiscard]] std::uint32_t optimal_hashes(double bits_per_item) noexcept;

// False-positive rate after n insertions, with the usual approximation of the tables:
//   (1 - e^{-kn/m})^k                                         [L004], [L000].
[[nodiscard]] double fpr(double m, double n, double k) noexcept;

// False-positive rate after n insertions, without the exponential approximation of the
// zero-bit fraction:
//   (1 - (1 - 1/m)^{kn})^k                                    [L004], [L002].
// Computed with log1p/expm1 so that it stays accurate for large m. For m >= 1, n >= 0.
[[nodiscard]] double fpr_exact(double m, double n, double k) noexcept;

// False-positive rate of the partitioned layout, k separate vectors of m bits each, one
// per hash function:
//   (1 - (1 - 1/m)^n)^k                                       [L003].
[[nodiscard]] double fpr_partitioned(double m_per_hash, double n, double k) noexcept;

// False-positive rate of a filter whose fraction of set bits is `fill`:
//   fill^k          ([L000]: "(1 - ρ)^k" with ρ the fraction of zero bits).
[[nodiscard]] double fpr_from_fill(double fill, double k) noexcept;

// Distinct items inserted, estimated from the fraction of set bits:
//   n̂ = -(m/k) ln(1 - fill)       (Swamidass & Baldi, "Mathematical correction for
//   fingerprint similarity measures to improve chemical retrieval", J. Chem. Inf. Model.
//   47(3), 2007). fill = 1 gives +infinity.
[[nodiscard]] double estimated_items(double m, double k, double fill) noexcept;

// Compressed Bloom filters (M. Mitzenmacher, "Compressed Bloom Filters", IEEE/ACM
// Transactions on Networking 10(5), 2002; [L002], "Compressed Filter"). With b = m/n bits
// per item and k hash functions a bit stays zero with probability p = e^{-k/b}, so
//   FPR = (1 - e^{-k/b})^k                                    (fpr(b, 1, k)),
// and no coder transmits the array in fewer than m·H(p) bits on average, H the binary
// entropy H(p) = -p log2 p - (1 - p) log2(1 - p): per item
//   z = b · H(e^{-k/b}).
// At the optimal k, p = 1/2 and z = b: nothing to gain. A larger, sparser array with fewer
// hashes has z < b and, at an equal z, a lower FPR ([L002]'s table: b = 16, k = 11 gives
// 0.000459 at 16 transmitted bits per item; b = 48, k = 3 gives 0.000222 at 15.82).
// For bits_per_item > 0 and k >= 1.
[[nodiscard]] double entropy_bits_per_item(double bits_per_item, double k) noexcept;

// The binary entropy H(p) in bits, 0 at p = 0 and p = 1.
[[nodiscard]] double binary_entropy(double p) noexcept;

// A compressed filter's shape: array bits per item b, hashes k, its FPR (1 − e^{−k/b})^k
// and its ideal transmitted size b·H(e^{−k/b}) per item.
struct compressed_shape {
  double bits_per_item = 0;
  std::uint32_t hashes = 0;
  double fpr = 0;
  double transmitted_bits_per_item = 0;
};

// Sizing for transmission (Mitzenmacher 2002): among the filters of at most
// `max_bits_per_item` array bits per item, the one with the lowest FPR whose transmitted
// size is at most `transmitted_bits_per_item`. For each k, the transmitted size rises with b
// on b ≥ k / ln 2 (where at least half the bits stay zero), so the largest b within the
// budget is found by bisection; the k with the lowest FPR wins. Without the memory bound the
// FPR would keep falling as k → 1 and b → ∞ (the array grows exponentially with the budget),
// hence the bound. Throws std::invalid_argument naming the argument when the budget is not
// positive, max_bits_per_item < 1, or no filter fits (a budget below 1/ln 2 bits per item).
[[nodiscard]] compressed_shape shape_for_transmission(double transmitted_bits_per_item,
                                                      double max_bits_per_item);

// The other way round: among the filters of at most `max_bits_per_item` bits per item whose
// FPR is at most p, the one with the smallest transmitted size. For each k the least b
// reaching p is b = −k / ln(1 − p^{1/k}) (b ≥ k / ln 2 whenever p ≤ 2^−k; other k are
// skipped), and the transmitted size rises with b, so that b is the best for that k. Throws
// std::invalid_argument naming the argument unless 0 < p < 1 and max_bits_per_item ≥ 1, or
// when no filter of that size reaches p.
[[nodiscard]] compressed_shape shape_for_fpr(double p, double max_bits_per_item);

struct sizing {
  std::uint64_t bits = 0;
  std::uint32_t hashes = 0;
  double fpr = 0;  // fpr_exact(bits, n, hashes), at most the target
};

// The classic layout for n items at false-positive rate at most p.
// Starts from m = ceil(optimal_bits(n, p)) and k = (m/n) ln 2; because k must be an
// integer and rounding it raises the FPR above the target, m then grows to the least
// value at which an integer k near (m/n) ln 2 (at most kMaxHashes) gives
// fpr_exact(m, n, k) <= p, and k is re-chosen as the one with the lowest fpr_exact at
// that m. The least m for a fixed k has a closed form, (1 - (1 - 1/m)^{kn})^k <= p ⇔
// m >= 1 / (1 - (1 - p^{1/k})^{1/(kn)}), so no search is needed.
// Throws std::invalid_argument naming the argument unless n > 0 and 0 < p < 1, or when
// the filter would need more than 2^63 bits.
[[nodiscard]] sizing suggest_classic(std::uint64_t n, double p);

}  // namespace sketch::bloom_math
