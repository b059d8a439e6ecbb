// The state position of every assigned partition: the next offset whose message the
// pipelines have not seen, once everything before it is delivered. A snapshot taken when
// the processor is quiescent holds these positions, and a restart resumes from them.
//
// The rules of a rebalance and a restart that move them:
//   - a partition assigned at a snapshot's position starts there; one assigned without
//     starts where its reading begins (start_known), or at its first delivered message;
//   - before the first assignment (even of no partition), the positions are those
//     restored from the snapshot; from then on, only the assigned partitions';
//   - a partition revoked and assigned again in the same rebalance is not taken over;
//   - a partition restored behind the group's committed offset is read again up to it,
//     without its offsets being stored before it, while the snapshot is younger than the
//     windows; otherwise it starts at the committed offset.
//
// Pure: no clock, no Kafka, no logging (the caller logs what the results say). Not
// thread-safe: one owner, the processor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "sketchd/kafka/source.h"

namespace sketchd {

class partition_positions {
 public:
  // An assignment (of none or more partitions) begins: the restored positions stop being
  // this instance's, and the partitions revoked since the last assignment are those that
  // may return in this one.
  void assignment_begins();

  // `tp` is assigned, at `start` when a snapshot's position is known. Its position starts
  // afresh there (unknown without `start`), and any reading again of it ends. True when it
  // is taken over: without a snapshot's position and not revoked from this instance in the
  // same rebalance, so that the windows have not counted its recent items.
  [[nodiscard]] bool assigned(const kafka::topic_partition& tp, std::optional<std::int64_t> start);
  // The partitions assigned at a restored position since the last call, with their position,
  // appended to `out`, unless they are read again up to the group's commit: a restored
  // position reflects messages whose outputs were delivered, so it may be stored (and
  // committed) at once. Without this, a partition started ahead of the group's commit (a
  // shard written after it) would keep that commit, and no lag, until its next message.
  void take_started(std::vector<kafka::partition_offset>& out);
  // `tp` is revoked: it has no position any more.
  // Whether the partition is assigned (from assigned() to revoked()).
  [[nodiscard]] bool is_assigned(const kafka::topic_partition& tp) const {
    return positions_.contains(key_of(tp));
  }
  void revoked(const kafka::topic_partition& tp);
  // `tp`, revoked, lost the state it had here (scope: partition drops its shards): assigned
  // again, even in the same rebalance, it is taken over.
  void forget_revoked(const kafka::topic_partition& tp) {
    revoked_.erase(key_of(tp));
    returning_.erase(key_of(tp));
  }

  // Positions restored from a snapshot written at `snapshot_ms` (wall clock).
  void restore(const std::vector<kafka::partition_offset>& positions, std::int64_t snapshot_ms);
  // One partition's position, restored from a shard snapshot written at `snapshot_ms` (the
  // state topic), in place of any it had.
  void restore_one(const kafka::topic_partition& tp, std::int64_t next_offset,
                   std::int64_t snapshot_ms);
  // During an assignment: whether `tp` was revoked in the same rebalance.
  [[nodiscard]] bool returning(const kafka::topic_partition& tp) const {
    return returning_.contains(key_of(tp));
  }
  // Whether `tp` has a restored position not yet taken.
  [[nodiscard]] bool has_restored(const kafka::topic_partition& tp) const {
    return restored_.contains(key_of(tp));
  }
  // The restored position of `tp`, once: later assignments of it have none.
  [[nodiscard]] std::optional<std::int64_t> take_restored(const kafka::topic_partition& tp);
  // The age at `now_ms` of the snapshot `tp` last started from (take_restored()); the
  // longest duration for a time before 1970 (never written by sketchd) or none, without
  // overflowing.
  [[nodiscard]] std::chrono::milliseconds snapshot_age(const kafka::topic_partition& tp,
                                                       std::int64_t now_ms) const noexcept;

  // `tp`, just assigned at its restored position, is behind the group's `committed`
  // offset. True when its snapshot is younger (at `now_ms`) than `longest_window`: the
  // partition is read again up to `committed` (replaying()), its offsets before it never
  // stored. False otherwise: its position is `committed`, where its reading starts.
  [[nodiscard]] bool start_behind_commit(const kafka::topic_partition& tp, std::int64_t committed,
                                         std::chrono::milliseconds longest_window,
                                         std::int64_t now_ms);
  // `tp`'s reading starts at `start`: its position until its first message is delivered,
  // unless it has one already.
  void start_known(const kafka::topic_partition& tp, std::int64_t start);
  // `tp`'s windows are filled from its log: its reading starts at `from`, its position, and
  // it is read again up to `until` (replaying()), its offsets before it never stored.
  void fill(const kafka::topic_partition& tp, std::int64_t from, std::int64_t until);

  // The message at `offset` of the partition is read again (before the committed offset).
  [[nodiscard]] bool replaying(std::size_t topic_index, std::int32_t partition,
                               std::int64_t offset) const {
    if (read_again_until_.empty()) return false;
    const auto it = read_again_until_.find(std::make_pair(topic_index, partition));
    return it != read_again_until_.end() && offset < it->second;
  }

  // What delivered() says to do with an offset.
  struct delivery_step {
    bool store = false;  // the offset may be stored
    // Set when the reading again ended here: the committed offset it went up to.
    std::optional<std::int64_t> read_again_ended_at;
  };
  // Every output of the partition's messages before `next` is delivered: its position
  // moves there. The offset is not stored for a partition revoked meanwhile (or for `next`
  // < 0, a reset slot), nor below the committed offset it is read again up to (storing it
  // would move the group's commit back).
  [[nodiscard]] delivery_step delivered(std::size_t topic_index, std::int32_t partition,
                                        std::int64_t next);

  // The position of every assigned partition whose position is known; before the first
  // assignment, the restored ones.
  [[nodiscard]] std::vector<kafka::partition_offset> positions() const;

 private:
  using key = std::pair<std::size_t, std::int32_t>;  // topic index, partition
  static key key_of(const kafka::topic_partition& tp) { return {tp.topic_index, tp.partition}; }

  std::map<key, std::int64_t> positions_;  // assigned partitions; -1 while unknown
  struct restored_position {
    std::int64_t next_offset = 0;
    std::int64_t snapshot_ms = 0;  // when its snapshot was written
  };
  std::map<key, restored_position> restored_;
  // When the snapshot each partition last started from was written (take_restored()).
  std::map<key, std::int64_t> started_from_ms_;
  // Partitions revoked since the last assignment, and, during an assignment, those revoked
  // before it: one assigned again in the same rebalance (an eager rebalance revokes every
  // partition and assigns them again; a lost assignment comes back) was counted here all
  // along, and is not taken over.
  std::set<key> revoked_;
  std::set<key> returning_;
  bool assigned_any_ = false;  // an assignment has come (even of no partition)
  // Partitions read again up to the group's committed offset (start_behind_commit): the
  // messages before it are not forwarded, and their offsets not stored.
  std::map<key, std::int64_t> read_again_until_;
  std::set<key> started_;  // assigned at a restored position, for take_started()
};

}  // namespace sketchd
