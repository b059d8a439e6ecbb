#include "sketchd/kafka/statistics.h"

#include <simdjson.h>

#include <algorithm>

namespace sketchd::kafka {
namespace {

std::optional<int> brokers_up(simdjson::dom::element root) {
  simdjson::dom::object brokers;
  if (root["brokers"].get(brokers) != simdjson::SUCCESS) return std::nullopt;
  int up = 0;
  for (auto [name, b] : brokers) {
    std::int64_t nodeid = -1;
    std::string_view origin;
    std::string_view state;
    if (b["nodeid"].get(nodeid) != simdjson::SUCCESS || nodeid < 0) continue;
    if (b["source"].get(origin) == simdjson::SUCCESS &&
        (origin == "logical" || origin == "internal"))
      continue;
    if (b["state"].get(state) == simdjson::SUCCESS && state == "UP") ++up;
  }
  return up;
}

// The offset `name` of partition `p`, or nullopt when it has none.
std::optional<std::int64_t> offset_of(simdjson::dom::element p, std::string_view name) {
  std::int64_t offset = -1;
  if (p[name].get(offset) != simdjson::SUCCESS) return std::nullopt;
  return offset;
}

// Partition `p` of `topic`, or nullopt when it is not assigned.
std::optional<partition_statistics> assigned_partition(std::string_view topic,
                                                       simdjson::dom::element p, bool from_earliest,
                                                       const known_commit_function& known_commit) {
  std::int64_t partition = 0;
  std::string_view fetch_state;
  if (p["partition"].get(partition) != simdjson::SUCCESS || partition < 0) return std::nullopt;
  if (p["fetch_state"].get(fetch_state) == simdjson::SUCCESS && fetch_state == "none")
    return std::nullopt;
  // A revoked partition keeps its entry, and a lag from its last committed offset, in
  // a fetch state other than "none" ("stopped"); "desired" is false once it is not
  // assigned any more.
  bool desired = true;
  if (p["desired"].get(desired) == simdjson::SUCCESS && !desired) return std::nullopt;
  partition_statistics out;
  out.topic = std::string(topic);
  out.partition = static_cast<std::int32_t>(partition);
  const std::optional<std::int64_t> committed = offset_of(p, "committed_offset");
  const std::optional<std::int64_t> low = offset_of(p, "lo_offset");
  out.read_offset = offset_of(p, "app_offset").value_or(-1);
  out.stored_offset = offset_of(p, "stored_offset").value_or(-1);
  out.committed_offset = committed.value_or(-1);
  out.low_offset = low.value_or(-1);
  // Messages read (handed to sketchd: app_offset; or stored, their outputs delivered)
  // and not yet committed, counted from the start of the partition while the group
  // has committed nothing there (a crash would start there again,
  // auto.offset.reset: earliest); librdkafka gives negative offsets while they are
  // unknown. What a crash would read again, whether its outputs were delivered (and
  // would be forwarded again) or not (pending, or failed).
  const std::int64_t read = std::max(out.read_offset, out.stored_offset);
  if (read >= 0 && committed) {
    std::int64_t from = *committed;
    if (from < 0 && known_commit) {
      if (const std::optional<std::int64_t> known = known_commit(topic, out.partition))
        from = *known;
    }
    // Without a commit a crash starts at the log's start (earliest) or end (latest).
    if (from < 0 && from_earliest && low) from = *low;
    if (from >= 0 && read > from) out.uncommitted = read - from;
  }
  std::int64_t lag = -1;
  if (p["consumer_lag"].get(lag) == simdjson::SUCCESS && lag >= 0) out.consumer_lag = lag;
  return out;
}

}  // namespace

std::int64_t consumer_statistics::uncommitted_messages() const noexcept {
  std::int64_t n = 0;
  if (partitions) {
    for (const partition_statistics& p : *partitions) n += p.uncommitted;
  }
  return n;
}

std::optional<consumer_statistics> parse_statistics(std::string_view json, bool from_earliest,
                                                    const known_commit_function& known_commit) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json.data(), json.size()).get(root) != simdjson::SUCCESS) return std::nullopt;
  consumer_statistics out;
  out.brokers_up = brokers_up(root);
  simdjson::dom::object topics;
  if (root["topics"].get(topics) != simdjson::SUCCESS) return out;
  out.partitions.emplace();
  for (auto [topic, t] : topics) {
    simdjson::dom::object partitions;
    if (t["partitions"].get(partitions) != simdjson::SUCCESS) continue;
    for (auto [id, p] : partitions) {
      if (auto assigned = assigned_partition(topic, p, from_earliest, known_commit))
        out.partitions->push_back(std::move(*assigned));
    }
  }
  return out;
}

std::optional<broker_outage::clock::duration> broker_outage::update(int up, clock::time_point now) {
  if (up == 0 && had_broker_up_ && !none_since_) {
    none_since_ = now;
    return std::nullopt;
  }
  if (up == 0) return std::nullopt;
  std::optional<clock::duration> outage;
  if (none_since_) outage = now - *none_since_;
  none_since_.reset();
  had_broker_up_ = true;
  return outage;
}

}  // namespace sketchd::kafka
