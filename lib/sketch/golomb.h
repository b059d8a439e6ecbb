// Golomb coding of a sparse bit array: the transmitted form of a compressed Bloom filter
// (M. Mitzenmacher, "Compressed Bloom Filters", IEEE/ACM Transactions on Networking 10(5),
// 2002; seed lecture 002, "Compressed Filter").
//
// The array is read as runs: before each set bit, the number r of zero bits since the
// previous set bit (or since bit 0). When every bit is zero with probability p on its own,
// as in a Bloom filter's array (nearly: the bits of a filter are weakly dependent), r is
// geometric, P(r) = p^r (1 − p). The Golomb code of parameter M (S. W. Golomb, "Run-length
// encodings", IEEE Trans. Inf. Theory 12(3), 1966) writes ⌊r / M⌋ in unary (that many 1
// bits, then a 0) and r mod M in truncated binary (⌈log2 M⌉ − 1 bits for the first
// 2^⌈log2 M⌉ − M remainders, ⌈log2 M⌉ for the others). With M the least integer such that
// p^M + p^(M+1) ≤ 1 it is the optimal prefix code for that distribution (R. G. Gallager and
// D. C. van Voorhis, "Optimal source codes for geometrically distributed integer
// alphabets", IEEE Trans. Inf. Theory 21(2), 1975).
//
// Guarantee (the expected length computed from the distribution, checked for p on a grid of
// step 0.0005 by GolombCode.ExpectedLengthIsNearTheEntropy): at most 1.5% over the entropy
// bound m·H(p) for p ≥ 0.7, the compressed filters' range (k/b ≤ 0.35: every column of the
// seed's table but the first), and exact at p = 1/2 (M = 1, one bit per bit). Between
// 0.55 and 0.7 it is up to 4.2% over the bound, about m bits: a caller keeps the plain array
// where it is smaller (the library's records do).
//
// Bits are written least significant first into bytes; the remainder's truncated-binary
// field is written with its high part first, so that the short codes stay a prefix-free set.
// No Debian package provides a Golomb or arithmetic coder for bit arrays (zstd and zlib code
// bytes: on a filter of the table's second and third columns `zstd -19` gives 16.30 and 16.48
// bits per item, above the bound of 15.84 and 15.82).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace sketch {

// The Golomb parameter for a share `zero_fraction` of zero bits: the least M ≥ 1 with
// p^M + p^(M+1) ≤ 1 (1 for p ≤ 0.618, the golden ratio's inverse). For p in [0, 1): p ≥ 1
// (an array without set bits) gives 1, and then no run is written anyway.
[[nodiscard]] std::uint64_t golomb_parameter(double zero_fraction) noexcept;

// The expected length in bits of the code of one run (one set bit) for runs geometric with
// zero probability p = `zero_fraction` in [0, 1): E[⌊r/M⌋] + 1 for the unary part, plus the
// truncated binary remainder's ⌈log2 M⌉ bits less one for the 2^⌈log2 M⌉ − M short codes,
// in closed form (the remainder is geometric truncated to [0, M)). M ≥ 1.
[[nodiscard]] double golomb_bits_per_run(double zero_fraction, std::uint64_t parameter) noexcept;

// The Golomb code, with parameter M, of bits [0, bits) of an array (bit i of the array is
// bit i % W of words[i / W], W = 64 or 32), appended to `out`, padded with zero bits to a
// whole byte. Writes one run per set bit; the zeros after the last set bit are not written
// (the reader knows `bits` and the number of set bits). Returns the number of set bits.
// `words` must hold at least `bits` bits; bits from `bits` up must be zero. M ≥ 1.
std::uint64_t golomb_encode(std::span<const std::uint64_t> words, std::uint64_t bits,
                            std::uint64_t parameter, std::string& out);
std::uint64_t golomb_encode(std::span<const std::uint32_t> words, std::uint64_t bits,
                            std::uint64_t parameter, std::string& out);

// Reads `set_bits` runs of a code written by golomb_encode into `words` (which it zeroes
// first and which must hold `bits` bits). False, with `words` unspecified, when the code is
// malformed: a run that ends at or past `bits`, a code that ends before the last run, bytes
// left over after it, or padding bits that are not zero. A wrong `set_bits` is not always
// seen (the zero padding reads as short runs): callers keep it under a checksum.
[[nodiscard]] bool golomb_decode(std::string_view code, std::uint64_t parameter,
                                 std::uint64_t set_bits, std::uint64_t bits,
                                 std::span<std::uint64_t> words);
[[nodiscard]] bool golomb_decode(std::string_view code, std::uint64_t parameter,
                                 std::uint64_t set_bits, std::uint64_t bits,
                                 std::span<std::uint32_t> words);

}  // namespace sketch
