#include "sketchd/app/crash_replay.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include "sketchd/kafka/error.h"
#include "sketchd/kafka/output_replay.h"
#include "sketchd/processor/output_checkpoints.h"
#include "sketchd/processor/processor.h"
#include "sketchd/util/logging.h"

namespace sketchd::app {

namespace {

// One output topic read back from `from` (every partition from its log start when `from` is
// empty): the copies whose provenance `accept` takes go to `take`, which says whether the
// copy is one not to forward again. Logs the outcome, `since` naming where the reading
// began ("the snapshot").
void replay_topic(const config& cfg, const std::string& bootstrap_servers, const std::string& topic,
                  std::vector<kafka::output_position> from, const kafka::provenance_filter& accept,
                  const std::function<bool(const kafka::replayed_message&)>& take,
                  std::string_view since, std::chrono::milliseconds timeout) {
  const auto log = module_logger("state");
  kafka::replay_options options;
  options.bootstrap_servers = bootstrap_servers;
  options.properties = cfg.kafka.properties;
  options.topic = topic;
  options.every_partition = from.empty();
  options.from = std::move(from);
  options.timeout = timeout;
  std::uint64_t found = 0;
  const auto start = std::chrono::steady_clock::now();
  const kafka::replay_result result =
      kafka::replay_output(options, accept, [&](const kafka::replayed_message& m) {
        if (take(m)) ++found;
      });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log->info(
      "output topic {}: read back {} message(s) forwarded since {} in {:.2f} s; {} of them came "
      "from input this instance reads again, and are not forwarded again",
      topic, result.read, since, seconds, found);
  std::uint64_t skipped = 0;
  for (std::uint64_t n : result.skipped) skipped += n;
  if (skipped > 0) {
    log->info("output topic {}: {} message(s) without sketchd's provenance headers, skipped", topic,
              skipped);
  }
  for (const kafka::partition_replay& p : result.partitions) {
    if (!p.complete) {
      log->warn(
          "output topic {} partition {} could not be read back to its end ({}{}): what was "
          "forwarded there since {}, after offset {}, may be forwarded again",
          topic, p.partition, kafka::to_string(p.error), p.reason.empty() ? "" : ": " + p.reason,
          since, p.next_offset);
    } else if (p.log_start > p.start_offset && !options.every_partition) {
      log->warn(
          "output topic {} partition {} starts at offset {}, past the position {} of {} "
          "(retention deleted the messages between): those forwarded there since may be "
          "forwarded again",
          topic, p.partition, p.log_start, p.start_offset, since);
    }
  }
}

// The index of `topic` in `topics` (one of them).
std::size_t index_of(const std::vector<std::string>& topics, std::string_view topic) {
  return static_cast<std::size_t>(std::find(topics.begin(), topics.end(), topic) - topics.begin());
}

}  // namespace

void replay_outputs(const config& cfg, const std::string& bootstrap_servers,
                    const restored_state& restored, const std::vector<std::string>& topics,
                    processor& proc, std::chrono::milliseconds timeout) {
  if (restored.positions.empty()) return;
  const auto log = module_logger("state");
  const std::vector<std::string>& outputs = proc.replayable_outputs();
  if (outputs.empty()) return;
  if (restored.outputs.empty()) {
    log->info(
        "the snapshot records no output positions (written by an older sketchd, or without "
        "them known): what was forwarded after it, before a crash, is forwarded again");
    return;
  }
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> inputs;
  for (const auto& o : restored.positions) inputs[{o.topic, o.partition}] = o.next_offset;
  for (const std::string& topic : outputs) {
    std::vector<kafka::output_position> from;
    for (const auto& o : restored.outputs) {
      if (o.topic == topic) from.push_back({o.partition, o.next_offset});
    }
    if (from.empty()) {
      log->warn(
          "the snapshot records no position of output topic {}: what was forwarded to it after "
          "the snapshot, before a crash, is forwarded again",
          topic);
      continue;
    }
    const auto accept = [&](std::string_view t, std::int32_t) {
      return std::find(topics.begin(), topics.end(), t) != topics.end();
    };
    const auto take = [&](const kafka::replayed_message& m) {
      // A restored partition is read again from its position; one assigned to this
      // instance after the snapshot, from the group's commit (processor::start_known()
      // drops what is before it).
      const auto restored = inputs.find({std::string(m.source.topic), m.source.partition});
      if (restored != inputs.end() && m.source.offset < restored->second) return false;
      proc.forwarded_before(topic, {index_of(topics, m.source.topic), m.source.partition},
                            m.source.offset);
      return true;
    };
    try {
      replay_topic(cfg, bootstrap_servers, topic, std::move(from), accept, take, "the snapshot",
                   timeout);
    } catch (const std::exception& e) {
      log->warn(
          "cannot read output topic {} back ({}): what was forwarded to it after the snapshot, "
          "before a crash, is forwarded again",
          topic, e.what());
    }
  }
}

void replay_after_takeover(const config& cfg, const std::string& bootstrap_servers,
                           std::span<const kafka::committed_metadata> taken,
                           const std::vector<std::string>& topics, processor& proc,
                           std::chrono::milliseconds timeout) {
  const std::vector<std::string>& outputs = proc.replayable_outputs();
  if (outputs.empty()) return;
  const auto log = module_logger("state");
  // Per taken partition, its committed offset (0 for one never committed: read from its
  // start); per output partition, the earliest position of their commits.
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> inputs;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> from;
  std::vector<std::string> never;  // the partitions never committed, by name
  std::vector<std::string> names;  // the others
  for (const kafka::committed_metadata& t : taken) {
    const std::string name = fmt::format("{} [{}]", topics[t.tp.topic_index], t.tp.partition);
    if (t.offset == kafka::committed_metadata::kNeverCommitted) {
      inputs[{topics[t.tp.topic_index], t.tp.partition}] = 0;
      never.push_back(name);
      continue;
    }
    const std::optional<std::vector<output_end>> ends = parse_output_ends(t.metadata);
    if (!ends) continue;  // another client's commit
    inputs[{topics[t.tp.topic_index], t.tp.partition}] = t.offset;
    names.push_back(name);
    for (const output_end& e : *ends) {
      const auto [it, added] = from.try_emplace({e.topic, e.partition}, e.offset);
      if (!added) it->second = std::min(it->second, e.offset);
    }
  }
  if (inputs.empty()) return;
  if (!names.empty()) {
    log->info(
        "{} partition(s) taken over with the outputs' positions of their last commit ({}): "
        "reading back what their previous owner forwarded since",
        names.size(), fmt::join(names, ", "));
  }
  // A partition the group never committed may have been read by a member that forwarded
  // from it and stopped, or lost it, before its first commit succeeded: every partition of
  // the outputs is read from its start (within the timeout), and its copies are found.
  if (!never.empty()) {
    log->info(
        "{} partition(s) taken over that the group never committed ({}): reading the output "
        "topics back from their start, for what a member forwarded from them before a commit",
        never.size(), fmt::join(never, ", "));
  }
  const std::string since = never.empty() ? "the last commit of the partitions taken over"
                                          : "the topic's start (partitions never committed)";
  for (const std::string& topic : outputs) {
    std::vector<kafka::output_position> positions;
    for (const auto& [tp, offset] : from) {
      if (tp.first == topic) positions.push_back({tp.second, offset});
    }
    if (!never.empty()) {
      positions.clear();  // every partition, from its start
    } else if (positions.empty()) {
      continue;  // committed by an instance that did not write it
    }
    const auto accept = [&](std::string_view t, std::int32_t partition) {
      return inputs.contains({std::string(t), partition});
    };
    const auto take = [&](const kafka::replayed_message& m) {
      const auto input = inputs.find({std::string(m.source.topic), m.source.partition});
      if (m.source.offset < input->second) return false;  // committed: not read again
      proc.forwarded_before(topic, {index_of(topics, m.source.topic), m.source.partition},
                            m.source.offset);
      return true;
    };
    try {
      replay_topic(cfg, bootstrap_servers, topic, std::move(positions), accept, take, since,
                   timeout);
    } catch (const std::exception& e) {
      log->warn(
          "cannot read output topic {} back ({}): what the previous owner of the partitions "
          "taken over forwarded after their last commit is forwarded again",
          topic, e.what());
    }
  }
}

}  // namespace sketchd::app
