// The Kafka source of the daemon: one consumer in the group `group_id`, subscribed to
// the topics of every pipeline, read in batches.
//
// Delivery is at-least-once: `enable.auto.offset.store` is off, so an offset is stored
// only by store_offsets(), which the daemon calls once the messages before it are
// processed and their outputs acknowledged; stored offsets are committed in the
// background (`enable.auto.commit`), before partitions are revoked, and synchronously by
// close(). Rebalancing is cooperative-sticky unless the user's properties choose
// otherwise; both protocols are handled.
//
// Read-ahead: a poller thread of the source reads the next batch from librdkafka while
// the owner processes the current one, so polling and processing run on two cores:
//
//   poller thread:  rd_kafka_consumer_poll … ─► filling ─► ready (one batch ahead) ┐
//   owner thread:   poll_batch() takes `ready` ◄─────────────────────────────────────┘
//                   (leaving its processed batch in its place), processes it, stores
//                   offsets
//
// At most three batches exist (filling, ready, the owner's), each of at most batch_size
// messages, and none grows past source_options::batch_bytes of keys and values — except
// the one filled during a hold (below), which takes what still comes beyond its bounds:
// little, since the pause drops librdkafka's read-ahead. The poller
// frees the messages of the processed batch it gets back when it hands over the next one,
// so the owner's thread never frees librdkafka's messages (freeing them there cost it about
// 8% of its time, partly waiting for the allocator's lock that librdkafka's threads hold).
// The poller never touches the owner's state: librdkafka runs the rebalance callback on the
// poller thread, which drops the revoked partitions' messages from the batches not yet
// handed over and then hands the hooks below to the owner, waiting until the owner has run
// them inside poll_batch() (between two batches, as without read-ahead) before the
// partitions are committed and unassigned.
//
// Hooks let the daemon act inside a rebalance: before partitions are revoked (to deliver
// and store what it can for them), and when partitions are assigned (to start them at
// the offsets of a restored snapshot instead of the committed ones). Both run on the
// owner's thread.
#pragma once

#include <atomic>
#include <chrono>
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

#include "sketchd/kafka/error.h"
#include "sketchd/kafka/statistics.h"
#include "sketchd/pipeline/extractor.h"
#include "sketchd/util/rate_limit.h"

struct rd_kafka_s;
struct rd_kafka_message_s;
struct rd_kafka_topic_partition_list_s;

namespace sketchd::kafka {

class read_ahead;
class rebalance_handler;

struct source_options {
  std::string bootstrap_servers;
  std::string group_id;
  std::map<std::string, std::string> properties;  // the user's, passed as they are
  std::vector<std::string> topics;
  std::uint32_t batch_size = 5000;
  // A batch also stops growing once its keys and values reach this many bytes (it holds at
  // least one message), so that the three batches the source keeps stay small next to
  // librdkafka's own read-ahead (queued.max.messages.kbytes) whatever the message size.
  std::size_t batch_bytes = kDefaultBatchBytes;
  std::int32_t poll_timeout_ms = 100;
  static constexpr std::size_t kDefaultBatchBytes = std::size_t{4} << 20;
};

// Why librdkafka would refuse to create sketchd's consumer with the user's `properties`
// (kafka.properties) as a whole, on top of sketchd's own settings: its checks across
// properties, such as fetch.max.bytes against message.max.bytes. Nothing when it would
// accept them. The security settings are left out (see without_security() in
// kafka/client.h): they are checked when the consumer starts. Connects nowhere; property
// values are removed from the reason.
[[nodiscard]] std::optional<std::string> consumer_refusal(
    const std::map<std::string, std::string>& properties);

// A partition of one of the source's topics.
struct topic_partition {
  std::size_t topic_index = 0;  // into source_options::topics
  std::int32_t partition = 0;
  friend bool operator==(const topic_partition&, const topic_partition&) = default;
};

// An offset to store: the next message to read in a partition.
struct partition_offset {
  std::size_t topic_index = 0;
  std::int32_t partition = 0;
  std::int64_t next_offset = 0;
};

// An offset about to be committed, and the metadata committed with it (see
// source::on_commit()).
struct commit_offset {
  std::size_t topic_index = 0;
  std::int32_t partition = 0;
  std::int64_t next_offset = 0;
  std::string metadata;
};

// A partition assigned without a start from on_assign, whose group's committed offset was
// committed with metadata, or which the group never committed and which is read from its
// start (see source::on_taken_over()).
struct committed_metadata {
  topic_partition tp;
  std::int64_t offset = 0;  // the group's committed offset; kNeverCommitted for none
  std::string metadata;     // empty when never committed
  static constexpr std::int64_t kNeverCommitted = -1;
};

// One consumed message, valid until the next poll_batch() or close().
struct record {
  std::size_t topic_index = 0;  // into source_options::topics
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int64_t timestamp_ms = -1;              // -1 when the message has none
  message_view view;                           // key, value and header lookup for the extractor
  const rd_kafka_message_s* native = nullptr;  // for the sink (forwarding keeps headers)
};

// What on_filled() tells of a partition assigned without a start from on_assign, whose
// windows asked for its messages since a time (on_fill_since()).
struct fill_outcome {
  // [from, until) is read first: the messages since the time asked up to the group's
  // committed offset (or, with auto.offset.reset at latest and no commit, up to the log's
  // end at the assignment), which the group has processed already.
  bool filled = false;
  std::int64_t from = 0;
  std::int64_t until = 0;
  // The log holds every message since the time asked: its first offset is 0, or a message
  // before the fill's first one is older than the time. False also when it cannot be known
  // (the committed offsets or the log's times could not be read).
  bool complete = false;
};

struct partition_lag {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t lag = 0;  // messages between the committed offset and the high watermark
};

// Not thread-safe, one owner (the processing thread), except lag(), brokers_up(),
// consume_errors(), assigned_partitions(), assigned_once(), commit_failures(),
// uncommitted_messages() and fatal_error(), which any thread may call. The poller thread
// (sketchd/kafka/read_ahead.h) and the rebalance handling (sketchd/kafka/rebalance.h) are
// internal.
class source {
 public:
  // Creates the consumer and subscribes. Throws kafka_error for a bad property (named,
  // its value never shown) or a client that cannot be created.
  explicit source(const source_options& options);
  ~source();
  source(const source&) = delete;
  source& operator=(const source&) = delete;

  // Hands the previous batch back to the poller thread, which frees its messages, and waits
  // up to poll_timeout for the next one (the poller's: what librdkafka had, up to
  // batch_size, from the first message on). Runs the
  // rebalance hooks when a rebalance is waiting for them. Message errors are logged
  // (rate-limited) and skipped by the poller. Never throws on input.
  [[nodiscard]] std::span<const record> poll_batch();

  // Stores offsets to be committed. Offsets of partitions revoked meanwhile are dropped:
  // the partition's new owner reads those messages again.
  void store_offsets(std::span<const partition_offset> offsets);

  // Called inside poll_batch() (or close()) before partitions are revoked, after the
  // messages that belong to them are dropped from the batches not yet handed over; the
  // stored offsets are committed right after the hook returns.
  void on_revoke(std::function<void(std::span<const topic_partition>)> hook);
  // Called inside poll_batch() when a partition is assigned: the offset to start at, or
  // nullopt for the committed offset (or auto.offset.reset).
  void on_assign(std::function<std::optional<std::int64_t>(const topic_partition&)> hook);
  // Called inside poll_batch() once the partitions of an assignment are the consumer's,
  // before any of their messages is handed over, when on_assign gave one of them a start:
  // from then on store_offsets() can store their offsets (before, librdkafka refuses them,
  // and the assignment would reset them).
  void on_assigned(std::function<void()> hook);
  // Called inside poll_batch() at every assignment, before on_assign for each of its
  // partitions: also for an assignment of none.
  void on_assignment(std::function<void()> hook);
  // Called inside poll_batch() at every assignment, before on_assignment: the partition
  // count of each of the source's topics (counts[i] of topics[i]), read from the cluster's
  // metadata (0 when it did not answer within 5 s). Set only by who needs them: each
  // assignment then asks.
  void on_partition_counts(std::function<void(std::span<const std::uint32_t>)> hook);
  // Called at every assignment with its partitions, before the hooks above, on the
  // consumer's poller thread, not inside poll_batch(): for slow reads (the state topic)
  // whose results the hooks above then use, while the owner goes on processing. It must
  // not touch what the owner owns.
  void on_assignment_prepare(std::function<void(std::span<const topic_partition>)> hook);
  // Called inside poll_batch(), after on_assign, for a partition whose start from on_assign
  // is behind the group's committed offset: true to start there anyway (the messages up to
  // the committed offset are read again), false to start at the committed offset. Without
  // the hook, such a partition starts at the committed offset.
  void on_start_behind_commit(
      std::function<bool(const topic_partition&, std::int64_t start, std::int64_t committed)> hook);
  // Called inside poll_batch(), after on_assign, for each partition assigned without a start
  // from on_assign: the offset its reading starts at, as known at the assignment (the
  // group's committed offset; 0, the log's first message or before it, for a partition the
  // group has never committed when auto.offset.reset reads from the earliest). Not called
  // when that cannot be known (the committed offsets cannot be read, or the reading starts
  // at the log's end).
  void on_start_known(std::function<void(const topic_partition&, std::int64_t start)> hook);
  // Filling the windows from the log. Called inside poll_batch(), after on_assign, for each
  // partition assigned without a start from on_assign: the time (ms since the epoch) from
  // which the owner's windows want its messages, or nullopt. For those it gives a time, the
  // offset where the log reaches it is looked up (kafka::time_lookup: the broker's
  // offsets_for_times, or a search by reading timestamps), the partition's reading starts
  // there when that is before the group's committed offset, and on_filled() is called,
  // after on_start_known, with what was found. With auto.offset.reset at latest, a
  // partition the group never committed is filled up to the log's end at the assignment;
  // at earliest it is read from its start, as always, and not filled.
  void on_fill_since(std::function<std::optional<std::int64_t>(const topic_partition&)> hook);
  void on_filled(std::function<void(const topic_partition&, const fill_outcome&)> hook);
  // Commits. Called on the owner's thread with the offsets about to be committed (every
  // auto.commit.interval.ms, before partitions are revoked, and at the close), to set the
  // metadata committed with each (at most offset.metadata.max.bytes; "" for none). Should a
  // broker refuse the metadata as too large, it is left out from then on.
  void on_commit(std::function<void(std::span<commit_offset>)> hook);
  // Called inside poll_batch(), after on_filled, with the partitions just assigned without a
  // start from on_assign whose group's committed offset carries metadata (as on_commit set
  // it, possibly by another member), before any of their messages is read. With
  // auto.offset.reset earliest, also those the group never committed, read from their
  // start: a member may have forwarded from them and stopped before its first commit.
  void on_taken_over(std::function<void(std::span<const committed_metadata>)> hook);

  // Stops fetching from every assigned partition, and from partitions assigned later.
  // poll_batch() then returns nothing while the consumer stays in its group.
  void pause();
  [[nodiscard]] bool paused() const noexcept;

  // Backpressure. While the owner waits for room in the output queue, the input is held:
  // the assignment (and what is assigned meanwhile) paused, and the poller polling on
  // although the owner takes no batch, so that the group does not take this member for
  // dead after max.poll.interval.ms and the statistics (lag, uncommitted messages) stay
  // current. Nothing is lost: librdkafka drops what it had fetched ahead and fetches it
  // again after release(), from the last message handed over. Owner's thread only;
  // release() does nothing without a hold, and leaves pause() in force.
  void hold();
  void release();
  [[nodiscard]] bool held() const noexcept;

  // Stops the poller (its unprocessed read-ahead is dropped: those offsets were never
  // stored), commits the stored offsets (within 5 s) and leaves the group. Idempotent.
  void close();

  // Consumer lag per assigned partition, from the statistics callback.
  [[nodiscard]] std::vector<partition_lag> lag() const;
  // Brokers of the cluster the consumer has an open connection to, from the statistics
  // callback; nullopt before the first statistics.
  [[nodiscard]] std::optional<int> brokers_up() const noexcept;
  // Errors librdkafka reported in place of a message (partition, topic or transport
  // errors), each logged at a rate limit and skipped.
  [[nodiscard]] std::uint64_t consume_errors() const noexcept;
  [[nodiscard]] std::size_t assigned_partitions() const noexcept;
  // Commits of stored offsets that failed (librdkafka tries again at the next one).
  [[nodiscard]] std::uint64_t commit_failures() const noexcept {
    return commit_failures_.load(std::memory_order_relaxed);
  }
  // Messages of the assigned partitions whose offsets are stored and not yet committed,
  // from the statistics callback: what a crash would read (and forward) again. nullopt
  // before the first statistics.
  [[nodiscard]] std::optional<std::int64_t> uncommitted_messages() const noexcept {
    const std::int64_t n = uncommitted_.load();
    return n < 0 ? std::nullopt : std::optional<std::int64_t>(n);
  }
  // A rebalance has assigned partitions to this consumer (even none): it is in its group.
  [[nodiscard]] bool assigned_once() const noexcept;
  // Set when librdkafka reported a fatal error: the daemon must stop.
  [[nodiscard]] std::optional<std::string> fatal_error() const;

  [[nodiscard]] const std::vector<std::string>& topics() const noexcept { return options_.topics; }

 private:
  struct callbacks;
  void set_fatal(std::string text);
  // Takes librdkafka's statistics JSON (sketchd/kafka/statistics.h).
  void take_statistics(std::string_view json);
  // The stored offsets to commit, with their metadata; null when there are none, or with
  // `only_changed`, when none was stored since the last commit. Owner's thread.
  [[nodiscard]] rd_kafka_topic_partition_list_s* commit_list(bool only_changed);
  // The commit every auto.commit.interval.ms, when due. Owner's thread.
  void commit_when_due();

  source_options options_;
  // The group's generation is in flux. Set by librdkafka's interceptors on its broker
  // threads, which outlive this object when close() keeps the handle: the flag lives
  // apart, and is kept with the handle. Declared before the handle, so that
  // it outlives the handle's destruction too.
  std::shared_ptr<std::atomic<bool>> joining_ = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<rd_kafka_s, void (*)(rd_kafka_s*)> consumer_;
  std::unique_ptr<read_ahead> read_ahead_;
  std::unique_ptr<rebalance_handler> rebalance_;
  // auto.offset.reset reads a partition without a commit from its start.
  bool from_earliest_ = true;
  bool closed_ = false;  // owner only

  // Commits: librdkafka's automatic ones are off, so that each commit carries the metadata
  // of on_commit(). The offsets stored and not yet removed by a revocation, by (topic index,
  // partition); guarded by stored_mutex_ (a revocation's commit runs on the poller).
  std::mutex stored_mutex_;
  std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> stored_;
  bool stored_changed_ = false;  // since the last commit (guarded by stored_mutex_)
  std::function<void(std::span<commit_offset>)> commit_hook_;
  std::chrono::milliseconds commit_interval_{5000};  // auto.commit.interval.ms
  std::chrono::steady_clock::time_point last_commit_{};
  std::atomic<bool> commit_failed_{false};     // the last commit failed: commit again
  std::atomic<bool> metadata_refused_{false};  // a broker refused the metadata as too large
  std::atomic<bool> commit_in_flight_{false};  // an asynchronous commit is unanswered

  // Of the callbacks of librdkafka (the statistics callback runs on one thread at a time).
  mutable std::mutex mutex_;  // guards lag_ and fatal_
  std::vector<partition_lag> lag_;
  std::optional<std::string> fatal_;
  std::atomic<int> brokers_up_{-1};            // -1 until the first statistics
  std::atomic<std::int64_t> uncommitted_{-1};  // -1 until the first statistics
  broker_outage broker_outage_;
  std::atomic<std::uint64_t> commit_failures_{0};
  // At most one commit failure warning every 10 s; the next one counts the failures.
  std::mutex commit_warning_mutex_;
  log_rate_limit commit_warnings_{std::chrono::seconds(10)};
};

}  // namespace sketchd::kafka
