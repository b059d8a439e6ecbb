#include "sketchd/app/crash_replay.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "sketchd/kafka/error.h"
#include "sketchd/kafka/output_replay.h"
#include "sketchd/processor/processor.h"
#include "sketchd/util/logging.h"

namespace sketchd::app {

namespace {

// One output topic read back; logs its outcome.
void replay_topic(const config& cfg, const std::string& bootstrap_servers, const std::string& topic,
                  std::vector<kafka::output_position> from,
                  const std::map<std::pair<std::string, std::int32_t>, std::int64_t>& inputs,
                  const std::vector<std::string>& topics, processor& proc,
                  std::chrono::milliseconds timeout) {
  const auto log = module_logger("state");
  kafka::replay_options options;
  options.bootstrap_servers = bootstrap_servers;
  options.properties = cfg.kafka.properties;
  options.topic = topic;
  options.from = std::move(from);
  options.timeout = timeout;
  std::uint64_t found = 0;
  const auto start = std::chrono::steady_clock::now();
  const kafka::replay_result result = kafka::replay_output(
      options,
      [&](std::string_view t, std::int32_t) {
        return std::find(topics.begin(), topics.end(), t) != topics.end();
      },
      [&](const kafka::replayed_message& m) {
        // A restored partition is read again from its position; one assigned to this
        // instance after the snapshot, from the group's commit (processor::start_known()
        // drops what is before it).
        const auto restored = inputs.find({std::string(m.source.topic), m.source.partition});
        if (restored != inputs.end() && m.source.offset < restored->second) return;
        const auto index = std::find(topics.begin(), topics.end(), m.source.topic);
        proc.forwarded_before(
            topic, {static_cast<std::size_t>(index - topics.begin()), m.source.partition},
            m.source.offset);
        ++found;
      });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log->info(
      "output topic {}: read back {} message(s) forwarded since the snapshot in {:.2f} s; {} of "
      "them came from this instance's input after the snapshot, and are not forwarded again",
      topic, result.read, seconds, found);
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
          "forwarded there since the snapshot, after offset {}, may be forwarded again",
          topic, p.partition, kafka::to_string(p.error), p.reason.empty() ? "" : ": " + p.reason,
          p.next_offset);
    } else if (p.log_start > p.start_offset) {
      log->warn(
          "output topic {} partition {} starts at offset {}, past the snapshot's position {} "
          "(retention deleted the messages between): those forwarded there since the snapshot "
          "may be forwarded again",
          topic, p.partition, p.log_start, p.start_offset);
    }
  }
}

}  // namespace

void replay_outputs(const config& cfg, const std::string& bootstrap_servers,
                    const restored_state& restored, const std::vector<std::string>& topics,
                    processor& proc, std::chrono::milliseconds timeout) {
  if (restored.positions.empty()) return;
  const auto log = module_logger("state");
  const std::vector<std::string> outputs = proc.replayable_outputs();
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
    try {
      replay_topic(cfg, bootstrap_servers, topic, std::move(from), inputs, topics, proc, timeout);
    } catch (const std::exception& e) {
      log->warn(
          "cannot read output topic {} back ({}): what was forwarded to it after the snapshot, "
          "before a crash, is forwarded again",
          topic, e.what());
    }
  }
}

}  // namespace sketchd::app
