#include "sketchd/state/topic_store.h"

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/state/shard_record.h"

// The Kafka calls below go through kafka/client.h's handles and error conversion: the state
// store is the one part of state/ that talks to Kafka, and nothing in its header shows it.
// The record format, its key and its partition are in shard_record.cpp.

namespace sketchd::state {
namespace {

using clock = std::chrono::steady_clock;
using kafka::error_code;
using kafka::kafka_error;

constexpr const char* kSnapshotHeader = "sketchd-snapshot";
constexpr const char* kChunkHeader = "sketchd-chunk";
constexpr const char* kChunksHeader = "sketchd-chunks";
constexpr std::size_t kMinChunkSize = 1024;

int left_ms(clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count(), 1, INT32_MAX));
}

std::optional<std::string_view> header(rd_kafka_headers_t* headers, const char* name) {
  const void* value = nullptr;
  std::size_t size = 0;
  if (headers == nullptr ||
      rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      value == nullptr) {
    return std::nullopt;
  }
  return std::string_view(static_cast<const char*>(value), size);
}

}  // namespace

// ---- the store --------------------------------------------------------------------------

// Acknowledgements of the current write (its generation): the delivery callback counts
// them on the owner's thread, inside rd_kafka_poll().
struct topic_store::delivery_count {
  std::uint64_t generation = 0;
  std::size_t pending = 0;
  std::vector<std::string> failures;

  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<delivery_count*>(opaque);
    if (reinterpret_cast<std::uintptr_t>(m->_private) != self->generation) return;
    --self->pending;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      self->failures.push_back(fmt::format("partition {} offset {}: {} ({})", m->partition,
                                           m->offset, rd_kafka_err2str(m->err),
                                           rd_kafka_err2name(m->err)));
    }
  }
};

void topic_store::producer_deleter::operator()(rd_kafka_s* rk) const noexcept {
  rd_kafka_destroy(rk);
}

namespace {

kafka::handle_ptr make_producer(const topic_store_options& o, void* opaque,
                                void (*on_delivery)(rd_kafka_t*, const rd_kafka_message_t*,
                                                    void*)) {
  kafka::client_config config(kafka::producer_properties(o.properties));
  config.set("bootstrap.servers", o.bootstrap_servers);
  config.set_own("enable.idempotence", "true");
  config.set_own("acks", "all");
  config.set_own("message.max.bytes",
                 fmt::format("{}", std::max<std::size_t>(1000000, o.chunk_size + 64 * 1024)));
  config.set_own("delivery.report.only.error", "false");
  rd_kafka_conf_set_dr_msg_cb(config.get(), on_delivery);
  rd_kafka_conf_set_opaque(config.get(), opaque);
  return std::move(config).create(RD_KAFKA_PRODUCER);
}

std::string broker_cluster_id(rd_kafka_t* rk, std::chrono::milliseconds timeout) {
  char* id = rd_kafka_clusterid(rk, static_cast<int>(timeout.count()));
  if (id == nullptr) {
    throw kafka_error("read the Kafka cluster id", error_code::timed_out, {},
                      "the brokers did not tell it before the deadline");
  }
  std::string out(id);
  rd_kafka_mem_free(rk, id);
  return out;
}

}  // namespace

topic_store::topic_store(topic_store_options options, std::chrono::milliseconds timeout)
    : options_(std::move(options)), deliveries_(std::make_unique<delivery_count>()) {
  if (options_.partitions < 1) {
    throw std::invalid_argument(fmt::format("state topic {}: partitions must be at least 1, not {}",
                                            options_.topic, options_.partitions));
  }
  if (options_.chunk_size < kMinChunkSize) {
    throw std::invalid_argument(
        fmt::format("state topic {}: chunk size must be at least {}, not {}", options_.topic,
                    kMinChunkSize, options_.chunk_size));
  }
  producer_.reset(
      make_producer(options_, deliveries_.get(), &delivery_count::on_delivery).release());
  if (options_.cluster_id.empty())
    options_.cluster_id = broker_cluster_id(producer_.get(), timeout);
}

topic_store::~topic_store() {
  // Nothing is waited for: a write that returned has every message acknowledged, and one
  // that failed left only messages whose fate no longer matters.
  if (producer_) rd_kafka_purge(producer_.get(), RD_KAFKA_PURGE_F_QUEUE);
}

void topic_store::produce(std::int32_t partition, const std::string& key,
                          std::optional<std::string_view> value,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  rd_kafka_headers_t* h = rd_kafka_headers_new(headers.size());
  for (const auto& [name, text] : headers)
    rd_kafka_header_add(h, name.c_str(), -1, text.data(), static_cast<ssize_t>(text.size()));
  char* const bytes = value ? const_cast<char*>(value->data()) : nullptr;  // copied (F_COPY)
  const std::size_t size = value ? value->size() : 0;
  for (;;) {
    const rd_kafka_resp_err_t err = rd_kafka_producev(
        producer_.get(), RD_KAFKA_V_TOPIC(options_.topic.c_str()), RD_KAFKA_V_PARTITION(partition),
        RD_KAFKA_V_KEY(key.data(), key.size()), RD_KAFKA_V_VALUE(bytes, size),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(deliveries_->generation)), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;  // librdkafka owns the headers now
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_headers_destroy(h);
      kafka::throw_if_error(err, "write a state chunk",
                            kafka::error_context(options_.topic, partition));
    }
    rd_kafka_poll(producer_.get(), 10);  // the queue drains as acknowledgements come
  }
  ++deliveries_->pending;
}

void topic_store::await_acks(std::int32_t partition, clock::time_point deadline) {
  while (deliveries_->pending > 0 && clock::now() < deadline)
    rd_kafka_poll(producer_.get(), std::min(left_ms(deadline), 100));
  if (!deliveries_->failures.empty()) {
    throw kafka_error("write a state snapshot", error_code::fail,
                      kafka::error_context(options_.topic, partition),
                      fmt::format("{} message(s) not written, first: {}",
                                  deliveries_->failures.size(), deliveries_->failures.front()));
  }
  if (deliveries_->pending > 0) {
    throw kafka_error(
        "write a state snapshot", error_code::timed_out,
        kafka::error_context(options_.topic, partition),
        fmt::format("{} message(s) not acknowledged before the deadline", deliveries_->pending));
  }
}

topic_store::write_result topic_store::write(const shard_snapshot& s,
                                             std::chrono::milliseconds timeout) {
  const clock::time_point deadline = clock::now() + timeout;
  const std::string record = encode_record(s, options_.cluster_id);
  const std::int32_t partition = state_partition(s.shard, options_.partitions);
  const auto chunks =
      static_cast<std::uint32_t>((record.size() + options_.chunk_size - 1) / options_.chunk_size);
  static thread_local std::mt19937_64 random{std::random_device{}()};
  const std::string id = fmt::format("{:016x}", random());

  *deliveries_ = delivery_count{deliveries_->generation + 1, 0, {}};
  for (std::uint32_t i = 0; i < chunks; ++i) {
    const std::string_view piece =
        std::string_view(record).substr(i * options_.chunk_size, options_.chunk_size);
    produce(partition, shard_key(s.shard, i), piece,
            {{kSnapshotHeader, id},
             {kChunkHeader, fmt::format("{}", i)},
             {kChunksHeader, fmt::format("{}", chunks)}});
  }
  // A write that fails may still leave some of its chunks on the topic: their keys are
  // known from now on, and a later, shorter snapshot deletes them.
  std::uint32_t& known = known_chunks_[s.shard];
  known = std::max(known, chunks);
  await_acks(partition, deadline);
  write_result result{chunks, 0, record.size()};
  for (std::uint32_t i = chunks; i < known; ++i, ++result.tombstones)
    produce(partition, shard_key(s.shard, i), std::nullopt, {});
  await_acks(partition, deadline);
  known = chunks;
  return result;
}

// ---- reading ----------------------------------------------------------------------------

namespace {

// The chunks of the snapshots of the wanted shards as they come in log order, and the
// newest complete one of each shard. Not thread-safe; one owner.
class assembler {
 public:
  assembler(std::set<shard_id> wanted, const std::map<std::string, std::string>& parameters,
            std::string cluster_id)
      : wanted_(std::move(wanted)), parameters_(parameters), cluster_id_(std::move(cluster_id)) {}

  void add(const rd_kafka_message_t* m) {
    const std::string_view key(static_cast<const char*>(m->key), m->key ? m->key_len : 0);
    const auto parsed = parse_shard_key(key);
    if (!parsed) return skip(m, "not a sketchd shard key");
    if (!wanted_.contains(parsed->shard)) return;
    live_[parsed->shard][parsed->chunk] = m->payload != nullptr;
    if (m->payload == nullptr) return;  // a tombstone: it only follows a newer snapshot
    add_chunk(m, *parsed);
  }

  // The result, and the snapshots that never completed.
  read_result finish() {
    for (auto& [shard, snapshots] : pending_) {
      for (const auto& [id, p] : snapshots) {
        skipped_.push_back(fmt::format(
            "{}: snapshot {} at state partition {} offset {} is incomplete ({} of {} chunks)",
            describe(shard), id, p.partition, p.first_offset, p.chunks.size(), p.count));
      }
    }
    return {std::move(restored_), std::move(refused_), std::move(skipped_)};
  }

  // The chunk count each shard has on the topic once compacted (its last live key + 1).
  [[nodiscard]] std::map<shard_id, std::uint32_t> live_chunks() const {
    std::map<shard_id, std::uint32_t> out;
    for (const auto& [shard, keys] : live_) {
      std::uint32_t n = 0;
      for (const auto& [chunk, live] : keys)
        if (live) n = chunk + 1;
      out[shard] = n;
    }
    return out;
  }

 private:
  struct pending {
    std::uint32_t count = 0;
    std::map<std::uint32_t, std::string> chunks;
    std::int32_t partition = 0;
    std::int64_t first_offset = 0;
  };

  void skip(const rd_kafka_message_t* m, std::string_view why) {
    skipped_.push_back(
        fmt::format("state partition {} offset {}: {}", m->partition, m->offset, why));
  }

  void add_chunk(const rd_kafka_message_t* m, const parsed_key& key) {
    rd_kafka_headers_t* headers = nullptr;
    static_cast<void>(rd_kafka_message_headers(m, &headers));
    const auto id = header(headers, kSnapshotHeader);
    const auto chunk = number<std::uint32_t>(header(headers, kChunkHeader).value_or(""));
    const auto count = number<std::uint32_t>(header(headers, kChunksHeader).value_or(""));
    if (!id || !chunk || !count || *chunk != key.chunk || *chunk >= *count) {
      return skip(m, fmt::format("{}: a chunk without valid sketchd-snapshot, sketchd-chunk and "
                                 "sketchd-chunks headers",
                                 describe(key.shard)));
    }
    auto [it, fresh] = pending_[key.shard].try_emplace(std::string(*id));
    pending& p = it->second;
    if (fresh) p = {*count, {}, m->partition, m->offset};
    if (p.count != *count)
      return skip(m, fmt::format("{}: snapshot {} announces {} chunks, then {}",
                                 describe(key.shard), *id, p.count, *count));
    p.chunks[*chunk].assign(static_cast<const char*>(m->payload), m->len);
    if (p.chunks.size() == p.count) complete(key.shard, it->first);
  }

  // Every chunk of snapshot `id` is there: decode and judge it, and forget what it
  // supersedes (the incomplete snapshots of the shard begun before it).
  void complete(const shard_id& shard, std::string id) {
    auto& snapshots = pending_[shard];
    const pending p = std::move(snapshots.at(id));
    snapshots.erase(id);
    std::erase_if(snapshots, [&](const auto& e) { return e.second.first_offset < p.first_offset; });
    if (snapshots.empty()) pending_.erase(shard);
    std::size_t size = 0;
    for (const auto& [index, bytes] : p.chunks) size += bytes.size();
    std::string record;
    record.reserve(size);
    for (const auto& [index, bytes] : p.chunks) record += bytes;
    const std::string what = fmt::format("{}: snapshot {} at state partition {} offset {}",
                                         describe(shard), id, p.partition, p.first_offset);
    try {
      judge(shard, decode_shard(record, what), what);
    } catch (const snapshot_error& e) {
      skipped_.emplace_back(e.what());  // names the shard, the snapshot and where it starts
    }
  }

  void judge(const shard_id& shard, shard_snapshot s, const std::string& what) {
    if (s.shard != shard) {
      skipped_.push_back(
          fmt::format("{}: its record is of {}, not of its key's", what, describe(s.shard)));
      return;
    }
    restored_.erase(shard);
    refused_.erase(shard);
    if (s.cluster_id != cluster_id_) {
      refused_[shard] = fmt::format("{}: made on Kafka cluster {}, this is cluster {}", what,
                                    s.cluster_id, cluster_id_);
    } else if (s.parameters != parameters_.at(shard.pipeline)) {
      refused_[shard] = fmt::format(
          "{}: made under other parameters than this configuration's (the record's: {})", what,
          s.parameters.size() > 200
              ? fmt::format("{}…", std::string_view(s.parameters).substr(0, 200))
              : s.parameters);
    } else {
      restored_[shard] = std::move(s);
    }
  }

  std::set<shard_id> wanted_;
  const std::map<std::string, std::string>& parameters_;
  std::string cluster_id_;
  std::map<shard_id, std::map<std::string, pending>> pending_;
  std::map<shard_id, std::map<std::uint32_t, bool>> live_;
  std::map<shard_id, shard_snapshot> restored_;
  std::map<shard_id, std::string> refused_;
  std::vector<std::string> skipped_;
};

struct rkt_deleter {
  void operator()(rd_kafka_topic_t* t) const noexcept { rd_kafka_topic_destroy(t); }
};

// A consumer outside any group: per-partition fetches (the simple consumer API), no
// offsets stored or committed.
kafka::handle_ptr make_reader(const topic_store_options& o) {
  kafka::client_config config(kafka::consumer_properties(o.properties));
  config.set("bootstrap.servers", o.bootstrap_servers);
  config.set_own("enable.partition.eof", "true");
  config.set_own("enable.auto.commit", "false");
  config.set_own("enable.auto.offset.store", "false");
  // Retention (or the mock cluster's cap of 5 MiB per partition) may delete the first
  // records while they are read: reading goes on from the new start, never from the end.
  config.set_own("auto.offset.reset", "earliest");
  return std::move(config).create(RD_KAFKA_CONSUMER);
}

// The high watermark of each state partition with data: where reading stops.
std::map<std::int32_t, std::int64_t> ends(rd_kafka_t* rk, const std::string& topic,
                                          const std::set<std::int32_t>& partitions,
                                          clock::time_point deadline) {
  std::map<std::int32_t, std::int64_t> out;
  for (const std::int32_t p : partitions) {
    std::int64_t low = 0;
    std::int64_t high = 0;
    kafka::throw_if_error(
        kafka::query_watermarks(rk, topic.c_str(), p, &low, &high, left_ms(deadline)),
        "read the state topic's watermarks", kafka::error_context(topic, p));
    if (high > low) out[p] = high;
  }
  return out;
}

// Reads `partitions` from their start to their end offset into `into`.
void read_partitions(rd_kafka_t* rk, const std::string& topic,
                     std::map<std::int32_t, std::int64_t> partitions, assembler& into,
                     clock::time_point deadline) {
  const std::unique_ptr<rd_kafka_topic_t, rkt_deleter> rkt(
      rd_kafka_topic_new(rk, topic.c_str(), nullptr));
  const kafka::queue_ptr queue(rd_kafka_queue_new(rk));
  for (const auto& [p, end] : partitions) {
    if (rd_kafka_consume_start_queue(rkt.get(), p, RD_KAFKA_OFFSET_BEGINNING, queue.get()) != 0)
      kafka::throw_if_error(rd_kafka_last_error(), "read the state topic",
                            kafka::error_context(topic, p));
  }
  std::string last_error;
  const std::map<std::int32_t, std::int64_t> started = partitions;
  while (!partitions.empty() && clock::now() < deadline) {
    const kafka::message_ptr m(
        rd_kafka_consume_queue(queue.get(), std::min(left_ms(deadline), 100)));
    if (!m || !partitions.contains(m->partition)) continue;
    const std::int64_t end = partitions.at(m->partition);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->offset < end) into.add(m.get());
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
      last_error = rd_kafka_message_errstr(m.get());
    const bool at_end = (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && m->offset >= end) ||
                        (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->offset + 1 >= end);
    if (at_end) partitions.erase(m->partition);
  }
  for (const auto& [p, end] : started) rd_kafka_consume_stop(rkt.get(), p);
  if (!partitions.empty()) {
    throw kafka_error(
        "read the state topic", error_code::timed_out,
        kafka::error_context(topic, partitions.begin()->first),
        fmt::format("{} partition(s) not read to their end before the deadline{}{}",
                    partitions.size(), last_error.empty() ? "" : "; last error: ", last_error));
  }
}

}  // namespace

read_result topic_store::read(std::span<const shard_id> shards,
                              const std::map<std::string, std::string>& parameters,
                              std::chrono::milliseconds timeout) {
  const clock::time_point deadline = clock::now() + timeout;
  std::set<std::int32_t> partitions;
  for (const shard_id& s : shards) {
    if (!parameters.contains(s.pipeline))
      throw std::invalid_argument(
          fmt::format("{}: no parameters given for pipeline {}", describe(s), s.pipeline));
    partitions.insert(state_partition(s, options_.partitions));
  }
  assembler records(std::set<shard_id>(shards.begin(), shards.end()), parameters,
                    options_.cluster_id);
  const kafka::handle_ptr reader = make_reader(options_);
  read_partitions(reader.get(), options_.topic,
                  ends(reader.get(), options_.topic, partitions, deadline), records, deadline);
  for (const auto& [shard, n] : records.live_chunks()) known_chunks_[shard] = n;
  return records.finish();
}

}  // namespace sketchd::state
