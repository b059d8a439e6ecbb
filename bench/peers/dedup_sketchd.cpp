// sketchd's side of the dedup comparison, compiled as the shipped library is (baseline x86-64,
// AVX2 chosen at run time): one XXH3-128 of the key (sketch::hash_bytes, what the daemon
// computes once per item), then one blocked_bloom_filter::test_and_insert, one call at a time.
#include <memory>
#include <vector>

#include "dedup_loop.h"
#include "sketch/blocked_bloom.h"
#include "sketch/hash.h"

namespace {

struct sketchd_blocked {
  explicit sketchd_blocked(std::uint64_t distinct)
      : filter(peers::dedup_filter_bytes(distinct) * 8) {}
  bool test_and_insert(std::uint64_t key) noexcept {
    return filter.test_and_insert(sketch::hash_bytes(&key, sizeof key, sketch::kDefaultSeed));
  }
  [[nodiscard]] std::uint64_t bytes() const { return filter.size_bytes(); }
  sketch::blocked_bloom_filter filter;
};

// The floor of any filter that hashes as sketchd does and touches one random cache line per
// key: one XXH3-128, then one bit set in a random 32-byte block of an array of the same bytes.
// With `murmur`, the same with fastfilter's hash instead (murmur64's finaliser, two
// multiplications): what the hash costs.
template <bool murmur>
struct one_line_floor {
  explicit one_line_floor(std::uint64_t distinct)
      : blocks(peers::dedup_filter_bytes(distinct) / 32), words(blocks * 8, 0) {}
  static sketch::hash128 hash(std::uint64_t key) noexcept {
    if constexpr (murmur) {
      std::uint64_t h = key + 0x5ce7c4d5eed0f00dULL;
      h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdULL;
      h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ULL;
      h ^= h >> 33;
      return {h, (h << 32) | (h >> 32)};
    } else {
      return sketch::hash_bytes(&key, sizeof key, sketch::kDefaultSeed);
    }
  }
  bool test_and_insert(std::uint64_t key) noexcept {
    const sketch::hash128 h = hash(key);
    std::uint32_t& word = words[sketch::reduce(h.high, blocks) * 8];
    const std::uint32_t bit = std::uint32_t{1} << (h.low & 31);
    const bool present = (word & bit) != 0;
    word |= bit;
    return present;
  }
  [[nodiscard]] std::uint64_t bytes() const { return words.size() * sizeof(std::uint32_t); }
  std::uint64_t blocks;
  std::vector<std::uint32_t, sketch::detail::bit_array_allocator<std::uint32_t>> words;
};

template <bool murmur>
void floor_single(benchmark::State& state) {
  peers::run_dedup(state, [&] {
    return std::make_unique<one_line_floor<murmur>>(static_cast<std::uint64_t>(state.range(0)));
  });
}

void sketchd_single(benchmark::State& state) {
  peers::run_dedup(state, [&] {
    return std::make_unique<sketchd_blocked>(static_cast<std::uint64_t>(state.range(0)));
  });
}

const bool registered_0 = peers::register_dedup("Dedup/sketchd_blocked", sketchd_single);
const bool registered_1 = peers::register_dedup("Dedup/floor_one_line_xxh3", floor_single<false>);
const bool registered_2 = peers::register_dedup("Dedup/floor_one_line_murmur", floor_single<true>);

}  // namespace
