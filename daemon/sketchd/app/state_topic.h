// The state topic (state.topic) in the running daemon: each pipeline's shard of an input
// partition is written there, and read back by whoever is assigned the partition next
// (docs/STATE-TOPIC.md; the records are state/topic_store.h's).
//
//   - at the start, the topic is made sure of (kafka::ensure_topic: created compacted when
//     missing, with state.topic_partitions, or as many partitions as the input topic with
//     the most);
//   - write(): the shards of the partitions given, with the input position each reflects and
//     where the outputs stood; the caller has had every output delivered first (the
//     snapshotter, every snapshot_interval; a revocation);
//   - read() at each assignment, on the consumer's poller thread: the newest complete record
//     of every shard of the partitions assigned;
//   - restore() on the processing thread: a partition whose every pipeline has a record of
//     the same input position, younger than the pipelines' longest window, gets them back as
//     its shards; the caller starts the partition at that position (the messages up to the
//     group's commit go into the windows again without being forwarded) and reads the
//     outputs back from the record's positions (what was forwarded since is not again).
//
// A record of another cluster or other parameters, or one reflecting an input offset past the
// partition's end (the input topic was deleted and created again since), is refused with a
// warning naming why, and the partition is filled from the log instead, as without the topic.
//
// Thread safety: read() on the poller thread, the rest on the processing thread; read() and
// restore() meet under a mutex.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/kafka/client.h"
#include "sketchd/kafka/source.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/state/topic_store.h"

namespace sketchd::app {

class state_topic {
 public:
  // Makes sure the topic exists and connects to it, within `timeout`. `topics` are the
  // source's (topic_partition::topic_index indexes them); everything is borrowed. Throws
  // kafka::kafka_error (or std::runtime_error) saying why the topic cannot be used.
  state_topic(const config& cfg, const std::string& bootstrap_servers,
              const std::vector<std::string>& topics,
              const std::vector<std::unique_ptr<pipeline>>& pipelines,
              std::chrono::milliseconds timeout);

  // Registers sketchd_state_topic_* in `registry`.
  void register_metrics(metrics::registry& registry);

  // Writes the shards of the partitions of `positions` (each at its next offset) of every
  // pipeline that has one, with the output positions `outputs`, within `timeout` over all.
  // False (logged, counted) when some record could not be written: its previous snapshot
  // stays the newest on the topic.
  bool write(std::span<const kafka::partition_offset> positions,
             const std::vector<state::partition_offset>& outputs,
             std::chrono::milliseconds timeout);

  // The poller thread, at an assignment: reads the records of every shard of `assigned`
  // (replacing what an earlier read left). A topic that cannot be read is a warning: the
  // partitions are then filled from the log.
  void read(std::span<const kafka::topic_partition> assigned);
  // The processing thread: the partitions of the last read().
  [[nodiscard]] std::vector<kafka::topic_partition> assigned();

  // What restore() gives back: where the partition starts, when its shards were written,
  // and the outputs' positions then (output_checkpoints.h's metadata text, for
  // replay_after_takeover()).
  struct restored {
    std::int64_t input_offset = 0;
    std::int64_t created_ms = 0;
    std::string outputs;
  };
  // The processing thread: restores the shards read for `tp` into the pipelines, or nothing
  // (logged) when there are none, they disagree, are as old as `longest_window` (the longest
  // window of the pipelines reading it) or do not fit.
  [[nodiscard]] std::optional<restored> restore(const kafka::topic_partition& tp,
                                                std::chrono::milliseconds longest_window);

 private:
  // The pipelines reading source topic `topic_index`, with that topic's index in each.
  [[nodiscard]] std::vector<std::pair<pipeline*, std::uint32_t>> readers_of(
      std::size_t topic_index) const;

  const std::vector<std::string>& topics_;
  const std::vector<std::unique_ptr<pipeline>>& pipelines_;
  std::string name_;
  sketch::bit_coding coding_;  // of the shards' dedup windows (state.compression)
  std::unique_ptr<state::topic_store> store_;
  kafka::handle_ptr metadata_;                     // asks the input partitions' watermarks (read())
  std::map<std::string, std::string> parameters_;  // by pipeline

  std::mutex mutex_;
  std::map<state::shard_id, state::shard_snapshot> read_;  // by read(), until restore()
  std::vector<kafka::topic_partition> assigned_;           // by read()

  prometheus::Counter* written_ = nullptr;
  prometheus::Counter* write_failures_ = nullptr;
  prometheus::Counter* bytes_written_ = nullptr;
  prometheus::Counter* restored_ = nullptr;
  prometheus::Counter* refused_ = nullptr;
  prometheus::Gauge* last_write_ = nullptr;
};

}  // namespace sketchd::app
