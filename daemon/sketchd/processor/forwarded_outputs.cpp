#include "sketchd/processor/forwarded_outputs.h"

#include <bit>
#include <iterator>

namespace sketchd {

void forwarded_outputs::add(std::size_t output, std::size_t topic_index, std::int32_t partition,
                            std::int64_t offset) {
  if (offset < 0) return;
  offsets& o = partitions_[key{topic_index, partition, output}];
  std::uint64_t& word = o.words[offset >> 6];
  const std::uint64_t bit = std::uint64_t{1} << (offset & 63);
  if ((word & bit) == 0) ++o.count;
  word |= bit;
}

bool forwarded_outputs::take(std::size_t output, std::size_t topic_index, std::int32_t partition,
                             std::int64_t offset) {
  if (partitions_.empty() || offset < 0) return false;
  const auto it = partitions_.find(key{topic_index, partition, output});
  if (it == partitions_.end()) return false;
  offsets& o = it->second;
  const auto w = o.words.find(offset >> 6);
  if (w == o.words.end()) return false;
  const std::uint64_t bit = std::uint64_t{1} << (offset & 63);
  if ((w->second & bit) == 0) return false;
  w->second &= ~bit;
  if (w->second == 0) o.words.erase(w);
  if (--o.count == 0) partitions_.erase(it);
  return true;
}

void forwarded_outputs::forget(std::size_t topic_index, std::int32_t partition) {
  auto it = partitions_.lower_bound(key{topic_index, partition, 0});
  while (it != partitions_.end() && std::get<0>(it->first) == topic_index &&
         std::get<1>(it->first) == partition) {
    it = partitions_.erase(it);
  }
}

void forwarded_outputs::forget_before(std::size_t topic_index, std::int32_t partition,
                                      std::int64_t offset) {
  auto it = partitions_.lower_bound(key{topic_index, partition, 0});
  while (it != partitions_.end() && std::get<0>(it->first) == topic_index &&
         std::get<1>(it->first) == partition) {
    offsets& o = it->second;
    for (auto w = o.words.begin(); w != o.words.end();) {
      const std::int64_t first = w->first << 6;
      std::uint64_t drop = 0;  // the bits of offsets before `offset`
      if (first + 64 <= offset) {
        drop = w->second;
      } else if (first < offset) {
        drop = w->second & ((std::uint64_t{1} << (offset - first)) - 1);
      }
      o.count -= static_cast<std::uint64_t>(std::popcount(drop));
      w->second &= ~drop;
      w = w->second == 0 ? o.words.erase(w) : std::next(w);
    }
    it = o.count == 0 ? partitions_.erase(it) : std::next(it);
  }
}

std::uint64_t forwarded_outputs::size() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [k, o] : partitions_) n += o.count;
  return n;
}

}  // namespace sketchd
