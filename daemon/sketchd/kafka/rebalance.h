// The source's side of the group's rebalances (see sketchd/kafka/source.h): librdkafka's
// rebalance callback, which runs the daemon's hooks on the owner's thread, starts the
// assigned partitions where the hooks and the group's committed offsets say, commits
// before partitions are revoked, and (un)assigns them; and the pause and the hold of the
// assignment, which must cover what a rebalance assigns meanwhile.
#pragma once

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/source.h"

namespace sketchd::kafka {

class read_ahead;
class time_lookup;
struct time_answer;
struct group_commits;

// The hooks of source.h (source::on_revoke() and the others), each run on the owner's
// thread; an empty one does nothing.
struct rebalance_hooks {
  std::function<void(std::span<const topic_partition>)> on_revoke;
  std::function<std::optional<std::int64_t>(const topic_partition&)> on_assign;
  std::function<void()> on_assignment;
  std::function<void(std::span<const topic_partition>)> on_assignment_prepare;
  std::function<void(std::span<const std::uint32_t>)> on_partition_counts;
  std::function<bool(const topic_partition&, std::int64_t start, std::int64_t committed)>
      on_start_behind_commit;
  std::function<void(const topic_partition&, std::int64_t start)> on_start_known;
  std::function<std::optional<std::int64_t>(const topic_partition&)> on_fill_since;
  std::function<void(const topic_partition&, const fill_outcome&)> on_filled;
  std::function<void(std::span<const committed_metadata>)> on_taken_over;
  std::function<void()> on_assigned;
  // The source's: the offsets to commit before `revoked` go (null when none; when
  // `closing`, only what was stored since the close's commit), which are then no longer the
  // source's to commit.
  std::function<rd_kafka_topic_partition_list_t*(std::span<const topic_partition> revoked,
                                                 bool closing)>
      revocation_commit;
};

// Thread safety: on_rebalance() runs on the thread that polls the consumer (the poller, or
// the owner during close()); hooks(), pause(), hold() and release() are the owner's;
// set_closing() the owner's once the poller has stopped; the getters any thread's.
class rebalance_handler {
 public:
  // For `consumer`, subscribed to `topics`; both outlive this object, as does `ahead`.
  // `from_earliest`: auto.offset.reset reads a partition without a commit from its start.
  // `make_lookup` makes the time_lookup of an assignment's fills (on_fill_since), released
  // once they are found.
  rebalance_handler(rd_kafka_t* consumer, const std::vector<std::string>& topics,
                    bool from_earliest, read_ahead& ahead,
                    std::function<std::unique_ptr<time_lookup>()> make_lookup);
  ~rebalance_handler();

  // Set before the first rebalance.
  [[nodiscard]] rebalance_hooks& hooks() noexcept { return hooks_; }

  // librdkafka's rebalance callback: `err` is _ASSIGN_PARTITIONS or _REVOKE_PARTITIONS.
  // Never throws but what a hook throws.
  void on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions);

  // From now on, a revocation commits without waiting, and only what was stored after
  // close()'s own commit.
  void set_closing() noexcept { closing_ = true; }

  // See source::pause(), hold() and release(); release() resumes the assignment when
  // `resume` and no pause is in force.
  void pause();
  [[nodiscard]] bool paused() const noexcept { return paused_; }
  void hold();
  void release(bool resume);

  // The group's committed offset of an assigned partition as read at its assignment, when it
  // was read (for the statistics, which lack it for a partition started at a restored
  // position). Any thread.
  [[nodiscard]] std::optional<std::int64_t> committed_at_assignment(std::string_view topic,
                                                                    std::int32_t partition) const;

  // The partitions assigned after the last rebalance.
  [[nodiscard]] std::size_t assigned() const noexcept { return assigned_.load(); }
  // A rebalance has assigned partitions (even none).
  [[nodiscard]] bool assigned_once() const noexcept { return assigned_once_.load(); }
  // An assignment change during the close did not return in time (apply()): a thread still
  // waits inside librdkafka, and the handle must not be destroyed.
  [[nodiscard]] bool call_abandoned() const noexcept { return call_abandoned_.load(); }

 private:
  // The source's index of each of `partitions`.
  std::vector<topic_partition> indexed(const rd_kafka_topic_partition_list_t* partitions) const;
  void revoke(rd_kafka_topic_partition_list_t* partitions, std::span<const topic_partition> list);
  // True when one of `partitions` starts at a position from on_assign.
  bool assign(rd_kafka_topic_partition_list_t* partitions, std::span<const topic_partition> list);
  // The fills of the partitions `since` asks a time for (by index in `partitions`): their
  // starts set in `partitions` where they are filled; see source::on_fill_since().
  std::vector<fill_outcome> fill_from_log(rd_kafka_topic_partition_list_t* partitions,
                                          const std::vector<std::optional<std::int64_t>>& since,
                                          const group_commits& commits);
  // One partition's fill: `group` its committed offset (nullptr when unknown), `answer`
  // where its log reaches the time asked.
  fill_outcome fill_one(rd_kafka_topic_partition_t& tp, const rd_kafka_topic_partition_t* group,
                        const time_answer& answer);
  // Runs on_taken_over for the partitions of `partitions` without a start (`starts`) whose
  // group's committed offset carries metadata.
  void tell_taken_over(const rd_kafka_topic_partition_list_t* partitions,
                       std::span<const topic_partition> list,
                       const std::vector<std::optional<std::int64_t>>& starts,
                       const group_commits& commits);
  // (Un)assigns `partitions`, pausing what is assigned when a pause or a hold is in force,
  // and logs the assignment after the change.
  void apply(bool assign, bool cooperative, rd_kafka_topic_partition_list_t* partitions);
  // Pauses (true) or resumes (false) the current assignment.
  void pause_assignment(bool pause);

  rd_kafka_t* consumer_;
  bool cooperative_;  // the rebalance protocol, from partition.assignment.strategy
  const std::vector<std::string>& topics_;
  bool from_earliest_;
  read_ahead& ahead_;
  std::function<std::unique_ptr<time_lookup>()> make_lookup_;
  rebalance_hooks hooks_;
  std::atomic<bool> paused_{false};
  // Taken around an assignment and the pause of what it assigns (poller), and around a
  // hold's pause or its release's resume (owner): a release never misses partitions
  // assigned during the hold.
  std::mutex pause_mutex_;
  std::atomic<bool> assigned_once_{false};
  std::atomic<bool> closing_{false};
  std::atomic<bool> call_abandoned_{false};
  std::atomic<std::size_t> assigned_{0};
  mutable std::mutex committed_mutex_;  // guards committed_
  std::map<std::pair<std::string, std::int32_t>, std::int64_t, std::less<>> committed_;
};

}  // namespace sketchd::kafka
