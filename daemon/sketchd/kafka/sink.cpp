#include "sketchd/kafka/sink.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "sketchd/kafka/client.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {

namespace {

std::shared_ptr<spdlog::logger> log() { return module_logger("kafka"); }

constexpr std::string_view kConsumerOnly[] = {"session.timeout.ms",
                                              "heartbeat.interval.ms",
                                              "max.poll.interval.ms",
                                              "auto.offset.reset",
                                              "partition.assignment.strategy",
                                              "group.instance.id",
                                              "enable.auto.commit",
                                              "auto.commit.interval.ms",
                                              "enable.auto.offset.store",
                                              "queued.min.messages",
                                              "queued.max.messages.kbytes",
                                              "fetch.wait.max.ms",
                                              "fetch.message.max.bytes",
                                              "fetch.max.bytes",
                                              "fetch.min.bytes",
                                              "fetch.error.backoff.ms",
                                              "fetch.queue.backoff.ms",
                                              "isolation.level",
                                              "enable.partition.eof",
                                              "check.crcs",
                                              "group.protocol.type",
                                              "coordinator.query.interval.ms",
                                              "offset.store.method",
                                              "consume.callback.max.messages"};

constexpr std::string_view kProducerOnly[] = {"transactional.id",
                                              "transaction.timeout.ms",
                                              "enable.idempotence",
                                              "enable.gapless.guarantee",
                                              "queue.buffering.max.messages",
                                              "queue.buffering.max.kbytes",
                                              "queue.buffering.max.ms",
                                              "linger.ms",
                                              "message.send.max.retries",
                                              "retries",
                                              "queue.buffering.backpressure.threshold",
                                              "compression.codec",
                                              "compression.type",
                                              "compression.level",
                                              "batch.num.messages",
                                              "batch.size",
                                              "delivery.report.only.error",
                                              "sticky.partitioning.linger.ms",
                                              "request.required.acks",
                                              "acks",
                                              "request.timeout.ms",
                                              "message.timeout.ms",
                                              "delivery.timeout.ms",
                                              "partitioner",
                                              "max.in.flight.requests.per.connection",
                                              "max.in.flight"};

template <std::size_t N>
std::map<std::string, std::string> without(const std::map<std::string, std::string>& all,
                                           const std::string_view (&names)[N]) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : all) {
    if (std::find(std::begin(names), std::end(names), k) == std::end(names)) out.emplace(k, v);
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> producer_properties(
    const std::map<std::string, std::string>& all) {
  return without(all, kConsumerOnly);
}

std::map<std::string, std::string> consumer_properties(
    const std::map<std::string, std::string>& all) {
  return without(all, kProducerOnly);
}

struct sink::callbacks {
  static void delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<sink*>(opaque);
    const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(m->_private));
    if (!m->err && m->offset >= 0) self->delivered_at(m->rkt, m->partition, m->offset);
    self->on_delivery_(id, to_error_code(m->err), m->err ? rd_kafka_err2str(m->err) : "");
  }

  static void error(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
    auto* self = static_cast<sink*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
      char text[512];
      const rd_kafka_resp_err_t original = rd_kafka_fatal_error(rk, text, sizeof text);
      std::lock_guard lock(self->mutex_);
      self->fatal_ = fmt::format("{} ({})", text, rd_kafka_err2name(original));
      return;
    }
    // Transient: librdkafka reconnects and retries by itself.
    if (logged_by_librdkafka(err)) return;
    log()->warn("producer: {}: {}", rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err)),
                reason);
  }
};

namespace {

// sketchd's producer configuration without bootstrap.servers and callbacks.
client_config producer_config(const property_map& properties) {
  client_config conf;
  // Our defaults first, so that the user's properties override any of them...
  conf.set_own("partitioner", "murmur2_random");
  conf.set_own("linger.ms", "5");
  // The output broker judges the size of a message, not this producer. librdkafka refuses
  // a message larger than message.max.bytes (1,000,000 by default) before compressing it,
  // while a broker limits record batches as they arrive, compressed: a message the input
  // topic holds compressed (2 MB of JSON in 300 kB of lz4) would stop consumption here even
  // where the output topic, compressed too, accepts it. 100,000,000 is the largest request
  // a default broker reads (socket.request.max.bytes, 104,857,600, less the framing); a
  // message larger than batch.size goes in a batch of its own. A message the output broker
  // refuses (MSG_SIZE_TOO_LARGE) stops consumption with the reason, never dropped.
  conf.set_own("message.max.bytes", "100000000");
  for (const auto& [k, v] : producer_properties(properties)) conf.set(k, v);
  // ...except what lossless, in-order forwarding depends on: idempotence, and a report of
  // every delivery (an input offset is stored only once its outputs are acknowledged).
  conf.set_own("enable.idempotence", "true");
  conf.set_own("delivery.report.only.error", "false");
  return conf;
}

}  // namespace

std::optional<std::string> producer_refusal(const property_map& properties) {
  return producer_config(without_security(properties)).refusal(RD_KAFKA_PRODUCER);
}

sink::sink(const sink_options& options, delivery_function on_delivery)
    : options_(options),
      on_delivery_(std::move(on_delivery)),
      producer_(nullptr, [](rd_kafka_s*) {}) {
  static_assert(sizeof(std::uintptr_t) >= sizeof(std::uint64_t), "opaques are 64-bit");
  client_config conf = producer_config(options_.properties);
  conf.set("bootstrap.servers", options_.bootstrap_servers);
  rd_kafka_conf_set_dr_msg_cb(conf.get(), &callbacks::delivery);
  rd_kafka_conf_set_error_cb(conf.get(), &callbacks::error);
  rd_kafka_conf_set_opaque(conf.get(), this);
  handle_ptr handle = std::move(conf).create(RD_KAFKA_PRODUCER);
  producer_ = decltype(producer_)(handle.release(), [](rd_kafka_s* rk) { rd_kafka_destroy(rk); });
  for (const auto& t : options_.topics) {
    rd_kafka_topic_t* rkt = rd_kafka_topic_new(producer_.get(), t.c_str(), nullptr);
    if (rkt == nullptr) {
      for (rd_kafka_topic_t* done : topics_) rd_kafka_topic_destroy(done);
      throw kafka_error("create topic handle", to_error_code(rd_kafka_last_error()),
                        error_context(t));
    }
    topics_.push_back(rkt);
  }
  delivered_.resize(topics_.size());
  learnt_.resize(topics_.size());
}

sink::~sink() {
  if (learner_.joinable()) {
    {
      std::lock_guard lock(learn_mutex_);
      learn_stop_ = true;
    }
    learn_wake_.notify_all();
    learner_.join();
  }
  for (rd_kafka_topic_t* rkt : topics_) rd_kafka_topic_destroy(rkt);
  topics_.clear();
  // Messages still queued are abandoned by rd_kafka_destroy(): the owner flushes first,
  // and offsets of messages without a delivery report were never stored.
  producer_.reset();
}

void sink::delivered_at(rd_kafka_topic_t* topic, std::int32_t partition, std::int64_t offset) {
  const auto it = std::find(topics_.begin(), topics_.end(), topic);
  if (it == topics_.end() || partition < 0) return;
  std::vector<std::int64_t>& ends = delivered_[static_cast<std::size_t>(it - topics_.begin())];
  const auto p = static_cast<std::size_t>(partition);
  if (p >= ends.size()) ends.resize(p + 1, -1);
  ends[p] = std::max(ends[p], offset + 1);
}

void sink::learn_ends() {
  if (learner_.joinable()) return;
  learner_ = std::thread([this] { learn_loop(); });
}

void sink::learn_loop() {
  // A client of its own, whose requests give up within a second or two: librdkafka's
  // rd_kafka_query_watermark_offsets() waits for its request whatever its timeout, and the
  // producer's requests to a broker that is down wait socket.timeout.ms (a minute): the
  // sink's destruction, which waits for this thread, would wait as long.
  handle_ptr client;
  try {
    client_config conf;
    for (const auto& [k, v] : producer_properties(options_.properties)) conf.set(k, v);
    conf.set("bootstrap.servers", options_.bootstrap_servers);
    conf.set_own("enable.idempotence", "false");
    conf.set_own("socket.timeout.ms", "1000");
    // The producer's own lines already say when a broker is unreachable.
    conf.set_own("log_level", "2");
    client = std::move(conf).create(RD_KAFKA_PRODUCER);
  } catch (const std::exception& e) {
    log()->warn(
        "cannot learn where the output partitions end ({}): a snapshot leaves out the "
        "partitions not written to, and a restart after a crash may forward again what was "
        "forwarded to them after it",
        e.what());
    return;
  }
  for (bool warned = false;;) {
    if (learn_round(client.get())) return;
    if (!warned) {
      log()->warn(
          "cannot learn yet where every output partition ends; trying again every 5 s (until "
          "then, a snapshot leaves those partitions out, and a restart after a crash may "
          "forward again what was forwarded to them after it)");
      warned = true;
    }
    std::unique_lock lock(learn_mutex_);
    if (learn_wake_.wait_for(lock, std::chrono::seconds(5), [this] { return learn_stop_; })) return;
  }
}

bool sink::learn_round(rd_kafka_s* client) {
  // Short requests, so that a stop never waits long; the next round tries again.
  constexpr int kTimeoutMs = 1000;
  const auto stopping = [this] {
    std::lock_guard lock(learn_mutex_);
    return learn_stop_;
  };
  bool all = true;
  for (std::size_t i = 0; i < topics_.size(); ++i) {
    if (stopping()) return true;
    const std::string& name = options_.topics[i];
    const std::unique_ptr<rd_kafka_topic_t, void (*)(rd_kafka_topic_t*)> topic(
        rd_kafka_topic_new(client, name.c_str(), nullptr), &rd_kafka_topic_destroy);
    if (!topic) return false;
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t err = rd_kafka_metadata(client, 0, topic.get(), &md, kTimeoutMs);
    const std::unique_ptr<const rd_kafka_metadata_t, void (*)(const rd_kafka_metadata_t*)> owned(
        md, [](const rd_kafka_metadata_t* m) {
          if (m) rd_kafka_metadata_destroy(m);
        });
    if (err || md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt == 0) {
      log()->debug("cannot learn the partitions of output topic {} yet: {}", name,
                   rd_kafka_err2str(err                  ? err
                                    : md->topic_cnt == 1 ? md->topics[0].err
                                                         : err));
      all = false;
      continue;
    }
    // The partitions' ends in one ListOffsets request per leader ("latest": the high
    // watermark). rd_kafka_offsets_for_times() keeps to its timeout;
    // rd_kafka_query_watermark_offsets() does not, retrying while a broker that is down
    // keeps changing state.
    topic_partition_list_ptr ends(rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt));
    for (int j = 0; j < md->topics[0].partition_cnt; ++j) {
      const auto p = static_cast<std::size_t>(md->topics[0].partitions[j].id);
      std::lock_guard lock(learn_mutex_);
      if (p < learnt_[i].size() && learnt_[i][p] >= 0) continue;
      rd_kafka_topic_partition_list_add(ends.get(), name.c_str(), md->topics[0].partitions[j].id)
          ->offset = RD_KAFKA_OFFSET_END;
    }
    if (ends->cnt == 0) continue;
    if (stopping()) return true;
    const rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(client, ends.get(), kTimeoutMs);
    for (int j = 0; j < ends->cnt; ++j) {
      const rd_kafka_topic_partition_t& tp = ends->elems[j];
      if (e || tp.err || tp.offset < 0) {
        log()->debug("cannot learn where output topic {} partition {} ends yet: {}", name,
                     tp.partition, rd_kafka_err2str(e ? e : tp.err));
        all = false;
        continue;
      }
      const auto p = static_cast<std::size_t>(tp.partition);
      std::lock_guard lock(learn_mutex_);
      if (p >= learnt_[i].size()) learnt_[i].resize(p + 1, -1);
      learnt_[i][p] = tp.offset;
    }
  }
  return all;
}

std::vector<sink::output_end> sink::ends() const {
  std::vector<output_end> out;
  std::lock_guard lock(learn_mutex_);
  for (std::size_t i = 0; i < topics_.size(); ++i) {
    const std::size_t n = std::max(delivered_[i].size(), learnt_[i].size());
    for (std::size_t p = 0; p < n; ++p) {
      const std::int64_t d = p < delivered_[i].size() ? delivered_[i][p] : -1;
      const std::int64_t l = p < learnt_[i].size() ? learnt_[i][p] : -1;
      if (std::max(d, l) >= 0) out.push_back({i, static_cast<std::int32_t>(p), std::max(d, l)});
    }
  }
  return out;
}

std::size_t sink::topic_index(std::string_view topic) const {
  const auto it = std::find(options_.topics.begin(), options_.topics.end(), topic);
  if (it == options_.topics.end())
    throw std::invalid_argument(fmt::format("not an output topic: {}", topic));
  return static_cast<std::size_t>(it - options_.topics.begin());
}

error_code sink::produce_with_headers(std::size_t topic, const void* key, std::size_t key_size,
                                      const void* value, std::size_t value_size,
                                      std::int64_t timestamp_ms, void* headers,
                                      std::uint64_t opaque, const std::function<bool()>& give_up) {
  auto* hdrs = static_cast<rd_kafka_headers_t*>(headers);
  for (;;) {
    const rd_kafka_resp_err_t err = rd_kafka_producev(
        producer_.get(), RD_KAFKA_V_RKT(topics_[topic]), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(key, key_size), RD_KAFKA_V_VALUE(const_cast<void*>(value), value_size),
        RD_KAFKA_V_TIMESTAMP(timestamp_ms > 0 ? timestamp_ms : 0), RD_KAFKA_V_HEADERS(hdrs),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<std::uintptr_t>(opaque))),
        RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
      return error_code::no_error;  // the headers are librdkafka's now
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || (give_up && give_up())) {
      if (hdrs) rd_kafka_headers_destroy(hdrs);
      return to_error_code(err);
    }
    // The local queue is full (the brokers are slower than the input, or down): deliver
    // what can be delivered and try again. Backpressure, never a drop.
    rd_kafka_poll(producer_.get(), 10);
  }
}

namespace {

template <typename Integer>
void add_decimal_header(rd_kafka_headers_t* headers, const char* name, Integer value) {
  char text[24];  // an int64 in decimal: at most 20 characters
  const auto [end, ec] = std::to_chars(std::begin(text), std::end(text), value);
  static_cast<void>(ec);  // cannot fail: the buffer holds every int64
  rd_kafka_header_add(headers, name, -1, text, end - text);
}

// A copy of the message's headers (librdkafka's own, which the producer takes over), in
// their order and byte for byte, with this hop's provenance headers and then `extra` at the
// end in place of any earlier ones of their names.
rd_kafka_headers_t* headers_with_provenance(rd_kafka_message_t* m, std::span<const header> extra) {
  rd_kafka_headers_t* original = nullptr;
  rd_kafka_headers_t* copy = nullptr;
  if (rd_kafka_message_headers(m, &original) == RD_KAFKA_RESP_ERR_NO_ERROR && original) {
    copy = rd_kafka_headers_copy(original);  // keeps names with a NUL byte whole
    for (const char* name : {kSourceTopicHeader, kSourcePartitionHeader, kSourceOffsetHeader})
      static_cast<void>(rd_kafka_header_remove(copy, name));  // NOENT when absent: most often
    for (const header& h : extra) static_cast<void>(rd_kafka_header_remove(copy, h.name));
  } else {
    copy = rd_kafka_headers_new(3 + extra.size());
  }
  // A consumed message always has its topic; a message without one (none is forwarded)
  // would get only its partition and offset, which a restore counts as missing provenance.
  if (m->rkt) rd_kafka_header_add(copy, kSourceTopicHeader, -1, rd_kafka_topic_name(m->rkt), -1);
  add_decimal_header(copy, kSourcePartitionHeader, m->partition);
  add_decimal_header(copy, kSourceOffsetHeader, m->offset);
  for (const header& h : extra) {
    rd_kafka_header_add(copy, h.name, -1, h.value.data(), static_cast<ssize_t>(h.value.size()));
  }
  return copy;
}

}  // namespace

error_code sink::forward(std::size_t topic, const rd_kafka_message_s* message,
                         std::span<const header> extra, std::uint64_t opaque,
                         const std::function<bool()>& give_up) {
  auto* m = const_cast<rd_kafka_message_t*>(message);
  rd_kafka_headers_t* headers = headers_with_provenance(m, extra);
  rd_kafka_timestamp_type_t type;
  const std::int64_t timestamp = rd_kafka_message_timestamp(m, &type);
  return produce_with_headers(topic, m->key, m->key ? m->key_len : 0, m->payload,
                              m->payload ? m->len : 0, timestamp, headers, opaque, give_up);
}

error_code sink::produce(std::size_t topic, std::string_view key, std::string_view value,
                         std::int64_t timestamp_ms, std::uint64_t opaque,
                         const std::function<bool()>& give_up) {
  return produce_with_headers(topic, key.data(), key.size(), value.data(), value.size(),
                              timestamp_ms, nullptr, opaque, give_up);
}

void sink::poll() { rd_kafka_poll(producer_.get(), 0); }

bool sink::flush(std::chrono::milliseconds timeout) {
  const rd_kafka_resp_err_t err =
      rd_kafka_flush(producer_.get(), static_cast<int>(timeout.count()));
  // rd_kafka_flush() serves the delivery reports itself; one more poll serves the last.
  rd_kafka_poll(producer_.get(), 0);
  return err == RD_KAFKA_RESP_ERR_NO_ERROR && rd_kafka_outq_len(producer_.get()) == 0;
}

std::size_t sink::in_flight() const {
  return static_cast<std::size_t>(rd_kafka_outq_len(producer_.get()));
}

std::optional<std::string> sink::fatal_error() const {
  std::lock_guard lock(mutex_);
  return fatal_;
}

}  // namespace sketchd::kafka
