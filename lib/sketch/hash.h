// Hashing for every structure of the library.
//
// One seeded XXH3 128-bit hash per item. Its two 64-bit halves feed enhanced double
// hashing (Dillinger & Manolios, "Bloom Filters in Probabilistic Verification", 2004),
// which derives as many indices as a structure needs from that one hash, so the daemon
// hashes each item once and gives the same `hash128` to a Bloom filter and a Count-Min
// sketch built with the same seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace sketch {

// The default seed of every structure; any 64-bit value may be used instead. Structures
// that are merged, or that share one hash per item, must use the same seed.
inline constexpr std::uint64_t kDefaultSeed = 0x5ce7c4d5eed0f00dULL;

struct hash128 {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  friend bool operator==(const hash128&, const hash128&) = default;
};

// XXH3 128-bit of `size` bytes at `data` with `seed`. Thread-safe, no allocation. Inlined
// from libxxhash's header (XXH_INLINE_ALL, the algorithm is libxxhash's own): a call into
// the shared library cost about as much as hashing a short item, and inlined, a known size
// (an 8-byte id) compiles to its one branch of XXH3.
[[nodiscard]] inline hash128 hash_bytes(const void* data, std::size_t size,
                                        std::uint64_t seed) noexcept {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data, size, seed);
  return hash128{h.low64, h.high64};
}

// The hash of an item: hash_bytes of its bytes, which every structure's string_view
// overloads take, so that hashing once and passing the hash128 gives the same indices.
// Thread-safe, no allocation.
[[nodiscard]] inline hash128 hash_item(std::string_view item, std::uint64_t seed) noexcept {
  return hash_bytes(item.data(), item.size(), seed);
}

// Maps a uniform 64-bit value to [0, n) by multiply-shift (Lemire, "Fast Random Integer
// Generation in an Interval", 2019): no division, and no modulo bias beyond n / 2^64
// (under 1e-9 for every n below 2^34), far below any effect measurable on a sketch.
__extension__ using uint128 = unsigned __int128;  // GCC and Clang on 64-bit targets

[[nodiscard]] inline std::uint64_t reduce(std::uint64_t x, std::uint64_t n) noexcept {
  return static_cast<std::uint64_t>((static_cast<uint128>(x) * n) >> 64);
}

// The k indices of one item in [0, range): enhanced double hashing, each value mixed,
//   g_0 = a,  g_{i+1} = g_i + b_i,  b_{i+1} = b_i + c_i,  c_{i+1} = c_i + φ,  c_0 = φ
//   index_i = reduce(mix(g_i), range)
// with a = low half, b = high half of the hash and φ = ⌊2^64 / golden ratio⌋, so
// g_i = a + i·b + φ·C(i+1, 3) (mod 2^64).
//
// Why the mix: without it, index_i of two items x, y differ by reduce of
// (a_x − a_y) + i·(b_x − b_y) (the cubic term is the same for every item and cancels),
// a line in i. Two items that share their indices at two positions (a and b both close,
// probability about 1/range²) then share them at nearly every position, where independent
// hash functions would give 1/range^k. A Count-Min sketch of w = 272 and d = 14 (δ = 8e-7)
// measured estimates over εN for 1.9e-5 of absent items, 23 times δ, and a classic filter
// sized for 10 items at 1e-9 a false-positive rate of 1.1e-7. mix() breaks the line: its
// xor-shift changes the difference of two values by an amount that depends on their high
// bits, and its multiplication carries every bit into the top bits that reduce() keeps.
// With it, the same sketch and filter measured no estimate over εN and no false positive
// in 10^7 and 5·10^7 queries, as independent hash functions did (Hash.TwoItemsShareThe…
// tests check two and three positions). It costs one multiplication per index (2–3 ns per
// Count-Min update of d = 5, docs/PERFORMANCE.md). The cubic term stays: without the mix,
// plain double hashing (a + i·b) gave an item whose b lies near p/q · 2^64 indices that
// repeat every q steps.
//
// For m a power of two, reduce(v, m/2) = reduce(v, m) >> 1, so halving a filter keeps
// every item's indices. Not thread-safe; a value type used on the stack.
class index_sequence {
 public:
  index_sequence(hash128 h, std::uint64_t range) noexcept : g_(h.low), b_(h.high), range_(range) {}

  [[nodiscard]] std::uint64_t next() noexcept {
    const std::uint64_t index = reduce(mix(g_), range_);
    g_ += b_;
    b_ += c_;
    c_ += kGolden;
    return index;
  }

  // The first round of MurmurHash3's 64-bit finaliser (fmix64, Appleby): an xor-shift and
  // a multiplication by an odd constant, a bijection.
  [[nodiscard]] static constexpr std::uint64_t mix(std::uint64_t x) noexcept {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    return x;
  }

 private:
  static constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;  // ⌊2^64 / φ⌋, odd
  std::uint64_t g_;
  std::uint64_t b_;
  std::uint64_t range_;
  std::uint64_t c_ = kGolden;
};

}  // namespace sketch
