// What the source reads from librdkafka's statistics (the JSON its statistics callback
// gets every statistics.interval.ms, described in librdkafka's STATISTICS.md): the
// consumer lag and offsets of each assigned partition, and how many of the cluster's
// brokers are up. A pure function of the JSON text, tested from a captured fixture.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sketchd::kafka {

// One assigned partition, from topics.<name>.partitions.<id>. Offsets are librdkafka's:
// negative while unknown (-1001), -1 when the statistics lack them.
struct partition_statistics {
  std::string topic;
  std::int32_t partition = 0;
  // Messages between the committed offset and the high watermark; nullopt while unknown
  // (librdkafka's -1: nothing committed yet, or no watermark).
  std::optional<std::int64_t> consumer_lag;
  std::int64_t read_offset = -1;       // app_offset: the next message to hand to sketchd
  std::int64_t stored_offset = -1;     // stored by sketchd, its outputs delivered
  std::int64_t committed_offset = -1;  // the group's
  std::int64_t low_offset = -1;        // lo_offset: the log's first
  // Messages read (handed to sketchd, or stored) and not yet committed: what a crash would
  // read (and forward) again. See parse_statistics().
  std::int64_t uncommitted = 0;
  friend bool operator==(const partition_statistics&, const partition_statistics&) = default;
};

struct consumer_statistics {
  // Brokers of the cluster the consumer has an open connection to (state "UP"), counting
  // those with a node id only (a bootstrap address becomes one once the metadata names it)
  // and neither the group coordinator's "logical" entry, a second handle on one of them,
  // nor librdkafka's "internal" one. nullopt when the statistics have no brokers.
  std::optional<int> brokers_up;
  // The assigned partitions; nullopt when the statistics have no topics.
  std::optional<std::vector<partition_statistics>> partitions;

  // The sum of the partitions' uncommitted messages; 0 without partitions.
  [[nodiscard]] std::int64_t uncommitted_messages() const noexcept;
};

// The statistics JSON `json`, or nullopt when it is not JSON. Partitions that are not
// assigned are left out: librdkafka's placeholder (-1) of each topic, those in fetch state
// "none", and those "desired" no longer (a revoked partition keeps its entry, and a lag,
// in another fetch state). A partition's uncommitted messages count from its committed
// offset to the greater of its read and stored offsets; without a commit, from the log's
// first offset when `from_earliest` (auto.offset.reset reads a partition without a commit
// from its start, where a crash would start again), else none (a crash starts at the end).
// librdkafka's statistics know no committed offset for a partition it was told to start
// at an offset of the caller's (a restored snapshot's position) until it commits there
// itself: `known_commit` gives the group's committed offset, as read at the assignment, for
// such a partition (nullopt when unknown).
using known_commit_function =
    std::function<std::optional<std::int64_t>(std::string_view topic, std::int32_t partition)>;
[[nodiscard]] std::optional<consumer_statistics> parse_statistics(
    std::string_view json, bool from_earliest, const known_commit_function& known_commit = {});

// Whether the input cluster's brokers are reachable again after a time with none up:
// librdkafka says when every broker is down (_ALL_BROKERS_DOWN), not when they are back,
// and without the line this tells, its last failure would be the log's last word. Not
// thread-safe; one owner (the statistics callback runs on one thread at a time).
class broker_outage {
 public:
  using clock = std::chrono::steady_clock;

  // Takes the brokers up at `now`; when some are up after a time with none (since some
  // had been), how long that time was.
  [[nodiscard]] std::optional<clock::duration> update(int up, clock::time_point now);

 private:
  bool had_broker_up_ = false;
  std::optional<clock::time_point> none_since_;
};

}  // namespace sketchd::kafka
