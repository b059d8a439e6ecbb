#include "workload.h"

#include <map>
#include <memory>
#include <random>

namespace peers {

const dedup_stream& dedup_stream_of(std::uint64_t distinct) {
  static std::map<std::uint64_t, std::unique_ptr<dedup_stream>> cache;
  auto& s = cache[distinct];
  if (s) return *s;
  s = std::make_unique<dedup_stream>();
  s->prefill = distinct / 2;
  s->keys.reserve(distinct);
  s->is_repeat.reserve(distinct);
  std::mt19937_64 rng(20261130);
  std::bernoulli_distribution repeat(0.5);
  std::uint64_t next = s->prefill;
  for (std::uint64_t i = 0; i < distinct; ++i) {
    const bool again = next > 0 && repeat(rng);
    const std::uint64_t n =
        again ? std::uniform_int_distribution<std::uint64_t>(0, next - 1)(rng) : next++;
    s->keys.push_back(key_of(n));
    s->is_repeat.push_back(again ? 1 : 0);
  }
  s->distinct = next;
  return *s;
}

std::uint64_t repeats_before(const dedup_stream& s, std::size_t end) {
  std::uint64_t repeats = 0;
  for (std::size_t i = 0; i < end; ++i) repeats += s.is_repeat[i];
  return repeats;
}

}  // namespace peers
