// A pipeline: one item per message, fed to a rolling Count-Min + top-k (heavy hitters)
// and a rolling Bloom filter (first-seen deduplication).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/hash.h"
#include "sketch/rolling_bloom.h"
#include "sketch/rolling_count_min.h"
#include "sketch/shards.h"
#include "sketchd/config/config.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/clock.h"
#include "sketchd/pipeline/extractor.h"
#include "sketchd/pipeline/status.h"

namespace sketchd {

namespace state {
class binary_writer;
class binary_reader;
}  // namespace state

// What process() did with a message; the sink (forwarding) acts on it.
enum class verdict : std::uint8_t {
  skipped,     // no item could be extracted (counted by reason)
  counted,     // an item, and the pipeline has no dedup section
  first_seen,  // dedup: the item was not in the window
  duplicate,   // dedup: the item was in the window (or a false positive)
};

// One message of a batch: the message, its timestamp (≤ 0 when it has none) and where it
// was read: `topic` indexes the pipeline's config().topics. With scope: partition, the
// message's item goes to the shard of that partition; with scope: instance, where it was
// read does not matter.
struct pipeline_input {
  const message_view* message = nullptr;
  std::int64_t event_ms = -1;
  std::uint32_t topic = 0;
  std::int32_t partition = 0;
};

// Counters of a pipeline since start. Kept as plain integers by the processing thread
// and published once per batch.
struct pipeline_counters {
  std::uint64_t items = 0;
  std::uint64_t first_seen = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t forwarded = 0;
  std::uint64_t forward_failures = 0;
  std::uint64_t heavy_enter = 0;
  std::uint64_t heavy_leave = 0;
  // Enter/leave events lost because more came in one batch than the top-k tracker's event
  // buffer holds (none in practice: logged by the processor when it happens).
  std::uint64_t heavy_events_dropped = 0;
  std::array<std::uint64_t, kExtractFailureCount> failures{};
};

// One line of the periodic summary log.
struct pipeline_summary {
  std::string name;
  std::uint64_t items = 0;
  std::uint64_t window_items = 0;
  std::vector<sketch::top_k_tracker::entry> top;  // at most 3
  double fill = 0;                                // newest generation
  std::size_t generations = 0;                    // of the rolling Bloom filter
  double estimated_fpr = 0;
  double target_fpr = 0;
  std::uint64_t rotations_by_capacity = 0;  // since start (sketchd_bloom_rotations_total)
  std::int64_t effective_window_ms = 0;     // sketchd_bloom_effective_window_seconds
  bool has_heavy_hitters = false;
  bool has_dedup = false;
};

// The coding of the dedup windows' bit arrays that `state.compression` asks for: smaller
// (Golomb-coded where that is smaller) for auto, plain for none.
[[nodiscard]] constexpr sketch::bit_coding bit_coding_of(state_compression c) noexcept {
  return c == state_compression::none ? sketch::bit_coding::plain : sketch::bit_coding::smaller;
}

// The state of one pipeline: its windows, in shards. With scope: instance, one shard (a
// rolling Count-Min sketch with its top-k, a rolling Bloom filter) takes every item. With
// scope: partition, each input partition has its own shard, made when the partition's first
// message comes, sized from the partition counts of the pipeline's topics
// (sketch::shards), and dropped when the partition is revoked; the readers combine the
// resident shards (sketch/shards.h says how, and why within the same guarantees).
//
// The processing thread calls begin_batch(), process() for
// the messages of the batch, then end_batch(): the pipeline's lock is held from
// begin_batch() to end_batch(), never taken per message. Readers (HTTP, metrics) take
// the same lock, so they see the state between two batches. Thread-safe in that sense;
// process() is for the one processing thread only.
class pipeline {
 public:
  // See pipeline_clock.
  static constexpr std::int64_t kMaxClockSkewMs = pipeline_clock::kMaxClockSkewMs;
  static constexpr std::int64_t kHoldStillMs = pipeline_clock::kHoldStillMs;

  explicit pipeline(const pipeline_config& config, std::uint64_t seed = sketch::kDefaultSeed);

  [[nodiscard]] const pipeline_config& config() const noexcept { return config_; }
  [[nodiscard]] const std::string& name() const noexcept { return config_.name; }

  void begin_batch();
  // Extracts the item, hashes it once and feeds both structures. `event_ms` is the
  // message timestamp (≤ 0 when the message has none), `wall_ms` the wall clock of the
  // batch; `topic` (an index into config().topics) and `partition` where it was read. No
  // lock, no logging; no allocation but a new partition's shard (std::bad_alloc).
  [[nodiscard]] verdict process(const message_view& message, std::int64_t event_ms,
                                std::int64_t wall_ms, std::uint32_t topic = 0,
                                std::int32_t partition = 0);
  // The same for each message of a batch, in order: out[i] is the verdict of batch[i]
  // (out.size() ≥ batch.size()), and the state and counters end as after the single calls.
  // The items are extracted a group at a time (extractor::extract(span, span): one JSON
  // parse for the group when it can). No lock, no logging; no allocation but the shards of
  // partitions met for the first time, made before any item is fed (std::bad_alloc: the
  // state is as before the call). With `failures` (its size ≥ batch.size()), failures[i] is
  // why batch[i] was skipped, extract_failure::none when it was not.
  void process(std::span<const pipeline_input> batch, std::int64_t wall_ms, std::span<verdict> out,
               std::span<extract_failure> failures = {});
  // Forwarding results reported by the sink (may come from the processing thread only).
  void add_forwarded(std::uint64_t n) noexcept { local_.forwarded += n; }
  void add_forward_failures(std::uint64_t n) noexcept { local_.forward_failures += n; }
  // Publishes the counters (the forwarding results since end_batch()), taking the lock
  // only for the copy.
  void publish_counters();
  // Slides the windows to the pipeline's clock (pipeline_clock::end_batch(): the wall clock,
  // or the event clock, which holds still until an item has come since the start or the
  // restore), re-estimates the top-k, publishes the counters, releases the lock, and returns
  // the heavy-hitter events of the batch.
  std::vector<sketch::heavy_event> end_batch(std::int64_t wall_ms);
  // Releases the lock of a batch that cannot be ended (an exception between begin_batch()
  // and end_batch()): the state stays as the batch left it. Does nothing without a batch.
  void abandon_batch() noexcept;
  // pipeline_clock::hold_until_assigned() and input_assigned(): on the processing thread,
  // between batches.
  void hold_until_assigned() noexcept { clock_.hold_until_assigned(); }
  void input_assigned() noexcept { clock_.input_assigned(); }
  // This instance has been assigned an input partition whose earlier items its heavy-hitter
  // window has not counted: another member of the group counted them (and may have left
  // with them), or nobody did (a start without a snapshot of it). Across the group, the
  // window misses some of its items until a whole window and a slice have passed on the
  // pipeline's clock from the next batch on: sketchd_cms_window_incomplete_seconds says
  // how long.
  // Processing thread, between batches; does nothing without heavy_hitters.
  void partitions_taken_over();
  // scope: partition. The partition counts of the pipeline's topics (counts[t] of
  // config().topics[t]; 0 when unknown), which size the shards made from now on: the Bloom
  // shards hold capacity/P items each with the margin of sketch::shards, P the sum. While a
  // count is unknown, a new Bloom shard is sized for the whole capacity (as many bits per
  // shard as the instance-wide filter: the false-positive rate holds, the memory does not
  // shrink). Processing thread, between batches.
  void set_partition_counts(std::span<const std::uint32_t> counts);
  // scope: partition. Drops the shards of the partitions for which `keep` is false (revoked,
  // or restored from a snapshot but assigned elsewhere): their memory is freed, and their
  // items no longer count in the readers. Processing thread, between batches; does nothing
  // with scope: instance.
  void keep_partitions(
      const std::function<bool(std::uint32_t topic, std::int32_t partition)>& keep);
  // The resident shards: 1 with scope: instance.
  [[nodiscard]] std::size_t shard_count() const;

  // Readers (any thread).
  [[nodiscard]] pipeline_counters counters() const;
  [[nodiscard]] pipeline_summary summary() const;
  // Adds the pipeline's collectable to `registry` (pipeline/metrics.cpp): the pipeline must
  // outlive its scrapes.
  void register_metrics(metrics::registry& registry) const;
  // The pipeline's metric families, as its collectable gives them at a scrape. Thread-safe.
  void collect(std::vector<prometheus::MetricFamily>& out) const;
  // What the HTTP API shows. nullopt when the pipeline has no heavy_hitters (topk, estimate)
  // or dedup (seen) section.
  [[nodiscard]] pipeline_status status() const;
  [[nodiscard]] std::optional<topk_status> topk() const;
  [[nodiscard]] std::optional<estimate_status> estimate(std::string_view item) const;
  [[nodiscard]] std::optional<seen_status> seen(std::string_view item) const;

  // Snapshots (sketchd/state/snapshot.h; written and read in pipeline/state.cpp).
  // save_state() is the pipeline's state between two batches: its parameters, its rolling
  // structures (with the top-k candidates) and its clock. restore_state() puts such a state
  // back; it throws state::mismatch_error listing every parameter that differs from this
  // pipeline's configuration, and state::snapshot_error when the state is corrupt (the
  // windows are then empty: the current structures are released before the state's are
  // built, so that the two are never held together). Both take the lock; call them
  // between batches. `coding` is how the dedup window's bit arrays are written
  // (bit_coding_of(state.compression)); restore_state() reads every coding.
  [[nodiscard]] std::string save_state(sketch::bit_coding coding = sketch::bit_coding::plain) const;
  void restore_state(std::string_view state);
  // scope: partition, the state topic (state/topic_store.h). save_shard() is the state of
  // the shard of input partition (`topic`, an index into config().topics, `partition`):
  // its structures (with the top-k candidates) without the parameters or the clock, which
  // the shard record carries beside it; nullopt when the partition has no shard.
  // restore_shard() makes such a state the partition's shard, in place of the one it has;
  // the record's parameters were checked by the caller. Throws state::snapshot_error when the
  // state is corrupt or its structures do not match the configuration (the partition then
  // has no shard). Both take the lock; call them between batches.
  [[nodiscard]] std::optional<std::string> save_shard(
      std::uint32_t topic, std::int32_t partition,
      sketch::bit_coding coding = sketch::bit_coding::plain) const;
  void restore_shard(std::uint32_t topic, std::int32_t partition, std::string_view state);
  // After restore_state(): why the heavy-hitter window was not restored while the rest of
  // the state was (its record is of an older library format, written before the Count-Min
  // rows' hashing changed: it starts empty), or nullopt.
  [[nodiscard]] const std::optional<std::string>& heavy_window_dropped() const noexcept {
    return heavy_window_dropped_;
  }
  // Whether a state of pipeline `name` (save_state(), or its first bytes: only the
  // parameters at its start are read) was made under the parameters `ours`
  // (parameters(), or describe_parameters() of a configuration): nullopt when it was, else
  // what differs, as restore_state() says it ("made under other parameters (KEY: A in the
  // snapshot, B in the configuration; …)"). Throws state::snapshot_error when the
  // parameters cannot be read.
  [[nodiscard]] static std::optional<std::string> state_mismatch(const std::string& name,
                                                                 const std::string& ours,
                                                                 std::string_view state);
  // The pipeline's clock: the newest time its windows have seen (ms since the epoch).
  [[nodiscard]] std::int64_t clock_ms() const;
  // The parameters that give the structures their shape and meaning, one "key: value"
  // per line: the item, the clock, the hash seed, every heavy_hitters and dedup setting,
  // and the sizes derived from them. Fixed at construction.
  [[nodiscard]] const std::string& parameters() const noexcept { return parameters_; }
  // The parameters() of a pipeline of this configuration and seed, without building it.
  [[nodiscard]] static std::string describe_parameters(const pipeline_config& config,
                                                       std::uint64_t seed = sketch::kDefaultSeed);

 private:
  // The windows of one input partition (scope: partition) or of all (scope: instance:
  // topic 0, partition -1).
  struct shard {
    std::uint32_t topic = 0;
    std::int32_t partition = -1;
    std::optional<sketch::rolling_count_min> heavy;
    std::optional<sketch::rolling_bloom> dedup;
  };
  // The shard of an input (made when missing: allocates).
  shard& shard_of(std::uint32_t topic, std::int32_t partition);
  // The shard of an input that has one (shard_of() made it), without allocating.
  [[nodiscard]] shard& resident_shard(std::uint32_t topic, std::int32_t partition) noexcept;
  // A new shard's structures, as the configuration and the partition counts size them.
  [[nodiscard]] shard make_shard(std::uint32_t topic, std::int32_t partition) const;
  [[nodiscard]] bool partition_scoped() const noexcept {
    return config_.scope == state_scope::partition;
  }
  // keep_partitions() with the lock held.
  void keep_partitions_locked(
      const std::function<bool(std::uint32_t topic, std::int32_t partition)>& keep);
  // The resident shards' structures, for the combining readers (sketch/shards.h).
  [[nodiscard]] std::vector<const sketch::rolling_count_min*> heavy_shards() const;
  [[nodiscard]] std::vector<const sketch::rolling_bloom*> dedup_shards() const;
  // The top `k` of the window over every shard, highest first.
  [[nodiscard]] std::vector<sketch::top_k_tracker::entry> top_of_shards(std::uint32_t k) const;
  // N over every shard, and its error bound εN.
  [[nodiscard]] std::uint64_t window_items() const;
  [[nodiscard]] double error_bound() const;
  // The rolling Bloom filters' figures over every shard (sketch::shards::combined_bloom_figures).
  [[nodiscard]] sketch::shards::bloom_figures bloom_figures() const;
  // Their rotations since this run started (by time, by capacity), dropped shards included.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> rotations() const;
  // scope: partition, at the end of a batch: the top and the heavy set over every shard
  // (combined_top_, heavy_set_), and the events of the items that entered or left the heavy
  // set since the last refresh.
  void heavy_events_of_shards(std::vector<sketch::heavy_event>& events);
  // Feeds an extracted item (or counts its failure).
  verdict feed(const extract_result& r, std::int64_t event_ms, std::int64_t wall_ms,
               shard& s) noexcept;
  // feed() for every item of group_results_ (inputs[i]'s is group_results_[i]), out[i] its
  // verdict.
  void feed_group(std::span<const pipeline_input> inputs, std::int64_t wall_ms,
                  std::span<verdict> out) noexcept;
  // collect() of each section, with the lock held.
  void collect_heavy_hitters(std::vector<prometheus::MetricFamily>& out) const;
  void collect_dedup(std::vector<prometheus::MetricFamily>& out) const;
  // save_state() and restore_state() of scope: partition (pipeline/state.cpp).
  void save_shards(state::binary_writer& w, sketch::bit_coding coding) const;
  // What the configuration builds (heavy hitters, dedup), without building it: what a
  // restored structure must match.
  [[nodiscard]] std::pair<std::optional<sketch::rolling_count_min_options>,
                          std::optional<sketch::rolling_bloom_options>>
  structure_options() const;
  // One shard's structures, as save_shards() writes each and save_shard() writes one.
  static void write_structures(state::binary_writer& w, const shard& s, sketch::bit_coding coding);
  void restore_shards(state::binary_reader& r,
                      const std::optional<sketch::rolling_count_min_options>& heavy_options,
                      const std::optional<sketch::rolling_bloom_options>& dedup_options);

  pipeline_config config_;
  std::uint64_t seed_;
  extractor extractor_;
  std::string parameters_;  // describe_parameters(), set by the constructor
  // bloom_of(config_.dedup), set by the constructor: with sizing transmission, deriving its
  // rate is a search, which each new shard would otherwise repeat.
  std::optional<sketch::rolling_bloom_options> dedup_options_;
  // Under mutex_ (the batch's lock for the processing thread). scope: instance: one, made
  // by the constructor; scope: partition: one per resident partition, found through
  // shard_index_[topic][partition].
  std::vector<std::unique_ptr<shard>> shards_;
  std::vector<std::vector<shard*>> shard_index_;
  std::vector<std::uint32_t> partition_counts_;  // of config().topics, 0 when unknown
  // scope: partition: the top of the window over every shard and the items heavy in it, as
  // the last combined refresh found them (heavy_events_of_shards()), which runs at most once
  // per kCombinedRefreshMs of the wall clock, and at the first batch after the shards
  // changed: it reads every candidate of every shard in every shard (c·S²·d counters, about
  // 25 ms for 32 shards of the default size), too much for every batch.
  static constexpr std::int64_t kCombinedRefreshMs = 1000;
  std::vector<sketch::top_k_tracker::entry> combined_top_;
  std::vector<std::string> heavy_set_;
  std::int64_t next_combined_refresh_ms_ = 0;
  bool shards_changed_ = false;
  // The rotations of shards dropped since the start (by time, by capacity), so that the
  // exported counters never go backwards.
  std::uint64_t dropped_rotations_by_time_ = 0;
  std::uint64_t dropped_rotations_by_capacity_ = 0;

  mutable std::mutex mutex_;
  std::unique_lock<std::mutex> batch_lock_{mutex_, std::defer_lock};
  // A group of a batch, for the extractor (extractor::kBatchMessages each).
  std::vector<const message_view*> group_;
  std::vector<extract_result> group_results_;
  std::vector<sketch::hash128> group_hashes_;  // of group_results_' items
  std::vector<shard*> group_shards_;           // their shards
  std::vector<std::int64_t> group_times_;      // their times on the pipeline's clock
  // Their Count-Min cells, depth() per item (rolling_count_min::locate), with heavy_hitters.
  std::vector<std::uint32_t> group_cells_;
  // Their estimates and the window's N after their count, until they are offered.
  std::vector<std::uint64_t> group_estimates_;
  std::vector<std::uint64_t> group_totals_;
  pipeline_counters local_;      // processing thread only
  pipeline_counters published_;  // under mutex_
  pipeline_clock clock_;         // under mutex_ (the batch's lock for the processing thread)
  // The rotations a restored state had made (by time, by capacity): the exported counters
  // count those of this run only, so that they never go backwards across a restart (a
  // snapshot older than the last scrape would take them back).
  std::uint64_t restored_rotations_by_time_ = 0;
  std::uint64_t restored_rotations_by_capacity_ = 0;
  std::optional<std::string> heavy_window_dropped_;  // by the last restore_state()
};

}  // namespace sketchd
