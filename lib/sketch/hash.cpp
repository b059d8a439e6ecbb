#include "sketch/hash.h"

// The implementation is compiled inline from libxxhash's header so that hashing short
// items costs no call into the shared library; the algorithm is libxxhash's own.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace sketch {

hash128 hash_bytes(const void* data, std::size_t size, std::uint64_t seed) noexcept {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data, size, seed);
  return hash128{h.low64, h.high64};
}

}  // namespace sketch
