#include "sketchd/app/state_topic.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "sketchd/app/wall_clock.h"
#include "sketchd/kafka/admin.h"
#include "sketchd/kafka/client.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/processor/output_checkpoints.h"
#include "sketchd/util/logging.h"

namespace sketchd::app {

namespace {

// How long an assignment waits for the state topic to be read to its end.
constexpr std::chrono::seconds kReadTimeout(20);

// The partitions a missing state topic is created with: state.topic_partitions, or as many
// as the input topic with the most (each input partition's shards then have a state
// partition of their own), 1 when the metadata does not say.
// A client for metadata and watermarks, which creates no topic.
kafka::handle_ptr metadata_client(const config& cfg, const std::string& bootstrap_servers) {
  kafka::client_config client(kafka::producer_properties(cfg.kafka.properties));
  client.set("bootstrap.servers", bootstrap_servers);
  client.set_own("allow.auto.create.topics", "false");
  return std::move(client).create(RD_KAFKA_PRODUCER);
}

int partitions_to_create(const config& cfg, rd_kafka_t* metadata,
                         const std::vector<std::string>& topics) {
  if (cfg.state.topic_partitions > 0) return cfg.state.topic_partitions;
  const std::vector<std::uint32_t> counts =
      kafka::partition_counts(metadata, topics, std::chrono::seconds(5));
  const std::uint32_t most = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  return std::max<int>(1, static_cast<int>(most));
}

std::string shard_name(const state::shard_id& s) {
  return fmt::format("{} [{}] of pipeline {}", s.topic, s.partition, s.pipeline);
}

}  // namespace

state_topic::state_topic(const config& cfg, const std::string& bootstrap_servers,
                         const std::vector<std::string>& topics,
                         const std::vector<std::unique_ptr<pipeline>>& pipelines,
                         std::chrono::milliseconds timeout)
    : topics_(topics),
      pipelines_(pipelines),
      name_(cfg.state.topic.value_or("")),
      coding_(bit_coding_of(cfg.state.compression)),
      metadata_(metadata_client(cfg, bootstrap_servers)) {
  if (name_.empty()) throw std::invalid_argument("state_topic: no state.topic");
  const auto log = module_logger("state");
  kafka::topic_request request;
  request.name = name_;
  request.partitions = partitions_to_create(cfg, metadata_.get(), topics);
  request.configs = state::state_topic_configs();
  const kafka::ensure_result ensured =
      kafka::ensure_topic(bootstrap_servers, cfg.kafka.properties, request, timeout);
  for (const std::string& w : ensured.warnings) log->warn("state topic {}: {}", name_, w);
  log->info("state topic {}: {}, {} partition(s), compacted: {}", name_,
            kafka::to_string(ensured.origin), ensured.partitions,
            kafka::to_string(ensured.compacted));
  state::topic_store_options options;
  options.bootstrap_servers = bootstrap_servers;
  options.properties = cfg.kafka.properties;
  options.topic = name_;
  options.partitions = ensured.partitions;
  store_ = std::make_unique<state::topic_store>(std::move(options), timeout);
  for (const auto& p : pipelines_) parameters_[p->name()] = p->parameters();
}

void state_topic::register_metrics(metrics::registry& registry) {
  auto& families = registry.families();
  const auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(families).Add({});
  };
  written_ = counter("sketchd_state_topic_shards_written_total",
                     "Shard snapshots written to the state topic.");
  write_failures_ = counter("sketchd_state_topic_write_failures_total",
                            "Shard snapshots that could not be written to the state topic.");
  bytes_written_ = counter("sketchd_state_topic_written_bytes_total",
                           "Bytes of the shard snapshots written to the state topic.");
  restored_ = counter("sketchd_state_topic_shards_restored_total",
                      "Shards restored from the state topic at an assignment.");
  refused_ =
      counter("sketchd_state_topic_shards_refused_total",
              "Shard snapshots found on the state topic and not used: of another cluster, "
              "other parameters, expired, or disagreeing with the partition's other shards.");
  last_write_ = &prometheus::BuildGauge()
                     .Name("sketchd_state_topic_last_write_timestamp_seconds")
                     .Help(
                         "Unix time of the last complete write of the state topic's shards (0 "
                         "before the first).")
                     .Register(families)
                     .Add({});
}

std::vector<std::pair<pipeline*, std::uint32_t>> state_topic::readers_of(
    std::size_t topic_index) const {
  std::vector<std::pair<pipeline*, std::uint32_t>> out;
  const std::string& topic = topics_[topic_index];
  for (const auto& p : pipelines_) {
    const auto& ts = p->config().topics;
    const auto it = std::find(ts.begin(), ts.end(), topic);
    if (it != ts.end()) out.emplace_back(p.get(), static_cast<std::uint32_t>(it - ts.begin()));
  }
  return out;
}

bool state_topic::write(std::span<const kafka::partition_offset> positions,
                        const std::vector<state::partition_offset>& outputs,
                        std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto log = module_logger("state");
  bool complete = true;
  std::size_t count = 0;
  for (const kafka::partition_offset& position : positions) {
    for (const auto& [p, topic] : readers_of(position.topic_index)) {
      std::optional<std::string> saved = p->save_shard(topic, position.partition, coding_);
      if (!saved) continue;  // no message of the partition yet
      state::shard_snapshot s;
      s.shard = {p->name(), topics_[position.topic_index], position.partition};
      s.state = std::move(*saved);
      s.input_offset = position.next_offset;
      s.outputs = outputs;
      s.created_ms = wall_ms();
      s.parameters = p->parameters();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      try {
        const std::lock_guard lock(mutex_);
        const auto written = store_->write(s, std::max(left, std::chrono::milliseconds(1)));
        if (written_ != nullptr) {
          written_->Increment();
          bytes_written_->Increment(static_cast<double>(written.bytes));
        }
        ++count;
      } catch (const std::exception& e) {
        complete = false;
        if (write_failures_ != nullptr) write_failures_->Increment();
        log->warn(
            "state topic {}: the shard {} was not written ({}); its previous snapshot stays the "
            "newest",
            name_, shard_name(s.shard), e.what());
      }
    }
  }
  if (complete && last_write_ != nullptr) last_write_->Set(static_cast<double>(wall_ms()) / 1000.0);
  log->debug("state topic {}: {} shard(s) written", name_, count);
  return complete;
}

void state_topic::read(std::span<const kafka::topic_partition> assigned) {
  std::vector<state::shard_id> ids;
  for (const kafka::topic_partition& tp : assigned) {
    if (tp.topic_index >= topics_.size()) continue;
    for (const auto& [p, topic] : readers_of(tp.topic_index))
      ids.push_back({p->name(), topics_[tp.topic_index], tp.partition});
  }
  const std::lock_guard lock(mutex_);
  read_.clear();
  assigned_.assign(assigned.begin(), assigned.end());
  if (ids.empty()) return;
  const auto log = module_logger("state");
  const auto start = std::chrono::steady_clock::now();
  try {
    state::read_result found = store_->read(ids, parameters_, kReadTimeout);
    for (const std::string& why : found.skipped) log->warn("state topic {}: {}", name_, why);
    for (const auto& [shard, why] : found.refused) {
      if (refused_ != nullptr) refused_->Increment();
      log->warn("state topic {}: the snapshot of shard {} is not used: {}", name_,
                shard_name(shard), why);
    }
    read_ = std::move(found.restored);
    // Another incarnation of the input topic (deleted and created again) has a log that ends
    // before the shard's offset: its shards are not of this log. Topic ids would tell; the
    // mock cluster and brokers before 2.8 have none.
    // Asked once per input partition, whatever the number of pipelines reading it.
    std::map<std::pair<std::string, std::int32_t>,
             std::optional<std::pair<std::int64_t, std::int64_t>>>
        logs;
    std::erase_if(read_, [&](const auto& entry) {
      const state::shard_snapshot& s = entry.second;
      const auto [it, fresh] = logs.try_emplace({s.shard.topic, s.shard.partition});
      if (fresh) {
        std::int64_t low = 0;
        std::int64_t high = 0;
        if (kafka::query_watermarks(metadata_.get(), s.shard.topic.c_str(), s.shard.partition, &low,
                                    &high, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          it->second.emplace(low, high);
        }
      }
      // Unknown: the group's committed offset is checked by the source.
      if (!it->second) return false;
      const state::offset_plausibility plausible =
          state::check_input_offset(s.shard, s.input_offset, it->second->first, it->second->second);
      if (plausible.usable()) {
        if (!plausible.message.empty()) log->warn("state topic {}: {}", name_, plausible.message);
        return false;
      }
      if (refused_ != nullptr) refused_->Increment();
      log->warn("state topic {}: {}; the partition is filled from the log instead", name_,
                plausible.message);
      return true;
    });
    std::size_t bytes = 0;
    for (const auto& [shard, snapshot] : read_) bytes += snapshot.state.size();
    log->info(
        "state topic {}: {} of {} shard(s) found for the {} partition(s) assigned ({} bytes, read "
        "in {} ms)",
        name_, read_.size(), ids.size(), assigned.size(), bytes,
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                              start)
            .count());
  } catch (const std::exception& e) {
    log->warn(
        "state topic {}: cannot read the shards of the {} partition(s) assigned ({}); their "
        "windows are filled from the log instead",
        name_, assigned.size(), e.what());
  }
}

std::vector<kafka::topic_partition> state_topic::assigned() {
  const std::lock_guard lock(mutex_);
  return assigned_;
}

std::optional<state_topic::restored> state_topic::restore(
    const kafka::topic_partition& tp, std::chrono::milliseconds longest_window) {
  const auto log = module_logger("state");
  const std::string& topic = topics_[tp.topic_index];
  const auto readers = readers_of(tp.topic_index);
  std::vector<state::shard_snapshot> found;
  {
    const std::lock_guard lock(mutex_);
    for (const auto& [p, t] : readers) {
      const auto it = read_.find({p->name(), topic, tp.partition});
      if (it == read_.end()) continue;
      found.push_back(std::move(it->second));
      read_.erase(it);
    }
  }
  if (found.empty()) return std::nullopt;
  const auto refuse = [&](const std::string& why) -> std::optional<restored> {
    if (refused_ != nullptr) refused_->Increment(static_cast<double>(found.size()));
    log->warn(
        "state topic {}: the shards of partition {} [{}] are not used ({}); its windows are "
        "filled from the log instead",
        name_, topic, tp.partition, why);
    return std::nullopt;
  };
  // Every pipeline's shard reflects the same messages, or none is used: the partition is
  // read again from one position for all.
  if (found.size() != readers.size())
    return refuse(fmt::format("{} of its {} pipelines have one", found.size(), readers.size()));
  for (const auto& s : found) {
    if (s.input_offset != found.front().input_offset) {
      return refuse(fmt::format("they reflect different input offsets, {} and {}",
                                found.front().input_offset, s.input_offset));
    }
  }
  const std::int64_t created = found.front().created_ms;
  if (wall_ms() - created >= longest_window.count()) {
    return refuse(
        fmt::format("written {} s ago, longer ago than the windows", (wall_ms() - created) / 1000));
  }
  std::size_t done = 0;
  try {
    for (; done < readers.size(); ++done) {
      const auto& [p, t] = readers[done];
      const auto it = std::find_if(found.begin(), found.end(),
                                   [&](const auto& s) { return s.shard.pipeline == p->name(); });
      p->restore_shard(t, tp.partition, it->state);
    }
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // The shards restored before it are dropped by the assignment without a position.
    return refuse(e.what());
  }
  if (restored_ != nullptr) restored_->Increment(static_cast<double>(found.size()));
  std::vector<output_end> ends;
  for (const auto& o : found.front().outputs) ends.push_back({o.topic, o.partition, o.next_offset});
  log->info(
      "state topic {}: partition {} [{}] restored at offset {} ({} shard(s), written {} ms "
      "ago)",
      name_, topic, tp.partition, found.front().input_offset, found.size(), wall_ms() - created);
  return restored{found.front().input_offset, created,
                  encode_output_ends(ends, std::numeric_limits<std::size_t>::max())};
}

}  // namespace sketchd::app
