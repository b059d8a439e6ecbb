#include "sketchd/processor/partition_positions.h"

#include <limits>

namespace sketchd {

void partition_positions::assignment_begins() {
  assigned_any_ = true;
  returning_ = std::move(revoked_);
  revoked_.clear();
}

bool partition_positions::assigned(const kafka::topic_partition& tp,
                                   std::optional<std::int64_t> start) {
  assigned_any_ = true;  // also told by assignment_begins(), for an assignment of none
  // A new assignment of a partition starts with a clean slate of deliveries; its position
  // is known from its first message on, or from the snapshot it starts at.
  positions_[key_of(tp)] = start.value_or(-1);
  read_again_until_.erase(key_of(tp));
  if (start) {
    started_.insert(key_of(tp));
  } else {
    started_.erase(key_of(tp));
  }
  return !start && returning_.count(key_of(tp)) == 0;
}

void partition_positions::take_started(std::vector<kafka::partition_offset>& out) {
  for (const key& k : started_) {
    const auto it = positions_.find(k);
    if (it == positions_.end() || it->second < 0 || read_again_until_.contains(k)) continue;
    out.push_back({k.first, k.second, it->second});
  }
  started_.clear();
}

void partition_positions::revoked(const kafka::topic_partition& tp) {
  started_.erase(key_of(tp));
  revoked_.insert(key_of(tp));
  positions_.erase(key_of(tp));
  read_again_until_.erase(key_of(tp));
}

void partition_positions::restore(const std::vector<kafka::partition_offset>& positions,
                                  std::int64_t snapshot_ms) {
  for (const auto& p : positions)
    restored_[std::make_pair(p.topic_index, p.partition)] = {p.next_offset, snapshot_ms};
}

void partition_positions::restore_one(const kafka::topic_partition& tp, std::int64_t next_offset,
                                      std::int64_t snapshot_ms) {
  restored_[key_of(tp)] = {next_offset, snapshot_ms};
}

std::optional<std::int64_t> partition_positions::take_restored(const kafka::topic_partition& tp) {
  const auto it = restored_.find(key_of(tp));
  if (it == restored_.end()) return std::nullopt;
  const restored_position start = it->second;
  restored_.erase(it);
  started_from_ms_[key_of(tp)] = start.snapshot_ms;
  return start.next_offset;
}

std::chrono::milliseconds partition_positions::snapshot_age(const kafka::topic_partition& tp,
                                                            std::int64_t now_ms) const noexcept {
  const auto it = started_from_ms_.find(key_of(tp));
  if (it == started_from_ms_.end() || it->second < 0) return std::chrono::milliseconds::max();
  return std::chrono::milliseconds(now_ms - it->second);
}

bool partition_positions::start_behind_commit(const kafka::topic_partition& tp,
                                              std::int64_t committed,
                                              std::chrono::milliseconds longest_window,
                                              std::int64_t now_ms) {
  if (snapshot_age(tp, now_ms) >= longest_window) {
    positions_[key_of(tp)] = committed;
    started_.erase(key_of(tp));  // the group's own offset: nothing to store
    return false;
  }
  read_again_until_[key_of(tp)] = committed;
  return true;
}

void partition_positions::start_known(const kafka::topic_partition& tp, std::int64_t start) {
  const auto it = positions_.find(key_of(tp));
  if (it != positions_.end() && it->second < 0) it->second = start;
}

void partition_positions::fill(const kafka::topic_partition& tp, std::int64_t from,
                               std::int64_t until) {
  positions_[key_of(tp)] = from;
  read_again_until_[key_of(tp)] = until;
}

partition_positions::delivery_step partition_positions::delivered(std::size_t topic_index,
                                                                  std::int32_t partition,
                                                                  std::int64_t next) {
  if (next < 0) return {};
  const key k{topic_index, partition};
  const auto it = positions_.find(k);
  if (it == positions_.end()) return {};  // revoked meanwhile
  it->second = next;
  delivery_step step{true, std::nullopt};
  if (const auto again = read_again_until_.find(k); again != read_again_until_.end()) {
    if (next < again->second) return {};
    step.read_again_ended_at = again->second;
    read_again_until_.erase(again);
  }
  return step;
}

std::vector<kafka::partition_offset> partition_positions::positions() const {
  std::vector<kafka::partition_offset> out;
  for (const auto& [k, next] : positions_) {
    if (next >= 0) out.push_back({k.first, k.second, next});
  }
  // Before the first assignment (the group is still joining, as after a crash, until the
  // dead member's session expires), the restored positions: the state holds those
  // partitions' messages up to there, and a snapshot written now must say so. Not later:
  // a partition the group gives to another member is no longer this instance's.
  if (!assigned_any_) {
    for (const auto& [k, r] : restored_) out.push_back({k.first, k.second, r.next_offset});
  }
  return out;
}

}  // namespace sketchd
