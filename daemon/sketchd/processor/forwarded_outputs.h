// What a run that crashed forwarded after its last snapshot: found at the restart by reading
// the output topics back from the snapshot's output positions (kafka/output_replay.h), by
// the provenance headers of each copy. The processor then reads those input messages again
// into the windows without forwarding them a second time (docs/SEMANTICS.md, "Crashes").
//
// Per (output topic, input topic, input partition), the set of input offsets that have a
// copy in that output topic, kept as a bitmap of 64-offset words in a hash map: 1/8 byte per
// input message where the copies are dense (a first-seen stream), one word per copy at worst,
// and an offset far from the others (a header another tool wrote) costs one word, not the
// distance to it. Each offset is taken once: the table empties as the input passes its
// offsets, and forget() drops a partition no longer read here.
//
// Pure: no Kafka, no clock. Not thread-safe: one owner, the processor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>

namespace sketchd {

class forwarded_outputs {
 public:
  // A copy of input message (topic_index, partition, offset) is in output topic `output`
  // (the forwarder's index). Adding it twice is adding it once.
  void add(std::size_t output, std::size_t topic_index, std::int32_t partition,
           std::int64_t offset);
  // True, once, when such a copy was added: the message's output to `output` is delivered.
  [[nodiscard]] bool take(std::size_t output, std::size_t topic_index, std::int32_t partition,
                          std::int64_t offset);
  // Drops what is left of input partition (topic_index, partition), for every output.
  void forget(std::size_t topic_index, std::int32_t partition);
  // Drops the offsets of input partition (topic_index, partition) before `offset` (its
  // reading starts there).
  void forget_before(std::size_t topic_index, std::int32_t partition, std::int64_t offset);

  [[nodiscard]] bool empty() const noexcept { return partitions_.empty(); }
  // Copies added and not yet taken (nor forgotten).
  [[nodiscard]] std::uint64_t size() const noexcept;

 private:
  using key = std::tuple<std::size_t, std::int32_t, std::size_t>;  // topic, partition, output
  struct offsets {
    std::unordered_map<std::int64_t, std::uint64_t> words;  // offset / 64 → bits
    std::uint64_t count = 0;
  };
  std::map<key, offsets> partitions_;
};

}  // namespace sketchd
