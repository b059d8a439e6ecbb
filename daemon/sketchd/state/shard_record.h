// What shard_record.cpp (the state topic's record format, pure) shares with topic_store.cpp
// (its reading and writing on Kafka): nothing else includes it. See topic_store.h for the
// record, its key and its partition.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "sketchd/state/topic_store.h"

namespace sketchd::state {

// "shard PIPELINE/TOPIC/PARTITION", for messages.
inline std::string describe(const shard_id& s) {
  return fmt::format("shard {}/{}/{}", s.pipeline, s.topic, s.partition);
}

// A decimal field of a key or a header, whole: nullopt for anything else.
template <class T>
std::optional<T> number(std::string_view text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// encode_shard(s) as made on cluster `cluster_id` (the store's, whatever s.cluster_id says),
// without copying the state.
[[nodiscard]] std::string encode_record(const shard_snapshot& s, std::string_view cluster_id);

}  // namespace sketchd::state
