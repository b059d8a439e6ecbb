// The streams the peer benchmarks read (bench/peers.sh builds and runs them): random 64-bit
// keys from a fixed seed, the same for sketchd and for each peer.
//
// A dedup stream of `distinct` keys: distinct / 2 keys are inserted untimed first; the timed
// stream then makes `distinct` operations, each with probability 1/2 a key inserted earlier
// (drawn uniformly) and otherwise a new key, so it ends at about `distinct` keys, the design
// load of a filter sized for them. Keys are splitmix64 of a sequence number: distinct,
// uniform, and regenerated instead of stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace peers {

// splitmix64's finaliser, a bijection of 64-bit values: key number i.
[[nodiscard]] inline std::uint64_t key_of(std::uint64_t i) noexcept {
  std::uint64_t z = i + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct dedup_stream {
  std::uint64_t prefill = 0;            // keys key_of(0 .. prefill) are inserted before timing
  std::vector<std::uint64_t> keys;      // the timed operations
  std::vector<std::uint8_t> is_repeat;  // 1 when keys[i] was inserted before
  std::uint64_t distinct = 0;           // prefill + the new keys of the stream
};

// Built once per size, on first use.
[[nodiscard]] const dedup_stream& dedup_stream_of(std::uint64_t distinct);

// The repeats among s.keys[0 .. end).
[[nodiscard]] std::uint64_t repeats_before(const dedup_stream& s, std::size_t end);

// The bytes of fastfilter's SimdBlockFilterFixed for `distinct` keys (max(1, n / 24) blocks of
// 32 bytes, about 10.7 bits per key, its 1% setting); sketchd's filter gets the same bytes.
[[nodiscard]] inline std::uint64_t dedup_filter_bytes(std::uint64_t distinct) noexcept {
  return 32 * (distinct / 24 > 0 ? distinct / 24 : 1);
}

// The size classes: `in_cache` fits this machine's L3 (1.3 MiB), `out_of_cache` does not
// (127 MiB). Timed passes over the stream: enough for a stable figure.
inline constexpr std::uint64_t kInCacheKeys = 1'000'000;
inline constexpr std::uint64_t kOutOfCacheKeys = 100'000'000;
[[nodiscard]] inline std::int64_t dedup_passes(std::uint64_t distinct) noexcept {
  return distinct <= kInCacheKeys ? 30 : 1;
}

}  // namespace peers
