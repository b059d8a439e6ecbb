#include "sketchd/kafka/output_replay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <stdexcept>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::shared_ptr<spdlog::logger> log() { return module_logger("kafka"); }

// A decimal integer ≥ 0 taking the whole text: no sign, no space.
template <typename Integer>
bool parse_decimal(std::string_view text, Integer& out) noexcept {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && at == end;
}

// Errors after which a partition will not be read any further.
bool final_error(rd_kafka_resp_err_t err) noexcept {
  return err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION || err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
         err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
         err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
         err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE ||
         err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET;
}

// Rounded up, so that a wait given this many milliseconds ends at the deadline or after it,
// never a fraction of a millisecond before it.
int remaining_ms(steady_clock::time_point deadline) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - steady_clock::now());
  return static_cast<int>(std::max<milliseconds::rep>(0, left.count()));
}

// librdkafka's partition consumer of one topic, its partitions on one queue. Not
// thread-safe; one owner.
class partition_consumer {
 public:
  explicit partition_consumer(const replay_options& o) {
    client_config conf(consumer_properties(o.properties));
    conf.set("bootstrap.servers", o.bootstrap_servers);
    conf.set_own("enable.partition.eof", "true");
    conf.set_own("isolation.level", "read_uncommitted");
    // An offset the log no longer holds is an error, not a jump to the end.
    conf.set_own("auto.offset.reset", "error");
    handle_ = std::move(conf).create(RD_KAFKA_CONSUMER);
    topic_ = rd_kafka_topic_new(handle_.get(), o.topic.c_str(), nullptr);
    if (topic_ == nullptr)
      throw kafka_error("create topic handle", to_error_code(rd_kafka_last_error()),
                        error_context(o.topic));
    queue_.reset(rd_kafka_queue_new(handle_.get()));
  }
  ~partition_consumer() {
    for (std::int32_t p : started_) rd_kafka_consume_stop(topic_, p);
    queue_.reset();
    rd_kafka_topic_destroy(topic_);
  }
  partition_consumer(const partition_consumer&) = delete;
  partition_consumer& operator=(const partition_consumer&) = delete;

  [[nodiscard]] rd_kafka_t* handle() const noexcept { return handle_.get(); }

  // Starts fetching `partition` from `offset` onto the queue.
  [[nodiscard]] rd_kafka_resp_err_t start(std::int32_t partition, std::int64_t offset) {
    if (rd_kafka_consume_start_queue(topic_, partition, offset, queue_.get()) == -1)
      return rd_kafka_last_error();
    started_.push_back(partition);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }

  // The next message or event of any started partition, waiting up to `wait_ms`.
  [[nodiscard]] message_ptr next(int wait_ms) {
    return message_ptr(rd_kafka_consume_queue(queue_.get(), wait_ms));
  }

 private:
  handle_ptr handle_;  // first: destroyed last
  rd_kafka_topic_t* topic_ = nullptr;
  queue_ptr queue_;
  std::vector<std::int32_t> started_;
};

void check(const replay_options& o) {
  if (o.every_partition && !o.from.empty())
    throw std::invalid_argument(
        fmt::format("output replay of {}: every partition, and partitions named", o.topic));
  std::set<std::int32_t> seen;
  for (const output_position& p : o.from) {
    if (p.partition < 0 || p.offset < 0)
      throw std::invalid_argument(
          fmt::format("output replay of {}: partition {} from offset {}: negative", o.topic,
                      p.partition, p.offset));
    if (!seen.insert(p.partition).second)
      throw std::invalid_argument(
          fmt::format("output replay of {}: partition {} asked twice", o.topic, p.partition));
  }
}

void fail(partition_replay& p, rd_kafka_resp_err_t err) {
  p.error = to_error_code(err);
  p.reason = rd_kafka_err2str(err);
}

// Finds the end of every partition and starts reading those with something to read;
// returns how many were started.
std::size_t start_partitions(partition_consumer& consumer, const replay_options& o,
                             steady_clock::time_point deadline, replay_result& result) {
  std::size_t started = 0;
  for (partition_replay& p : result.partitions) {
    std::int64_t low = -1;
    std::int64_t high = -1;
    const rd_kafka_resp_err_t err = query_watermarks(
        consumer.handle(), o.topic.c_str(), p.partition, &low, &high, remaining_ms(deadline));
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && remaining_ms(deadline) == 0) {
      // librdkafka answers what it last saw (often _ALL_BROKERS_DOWN before any metadata).
      p.error = error_code::timed_out;
      p.reason = fmt::format("the end of {} [{}] was not known within {} ms ({})", o.topic,
                             p.partition, o.timeout.count(), rd_kafka_err2str(err));
      continue;
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      fail(p, err);
      continue;
    }
    p.log_start = low;
    p.end_offset = high;
    p.next_offset = std::max(p.start_offset, low);
    if (p.next_offset >= high) {
      p.next_offset = std::max(p.start_offset, high);
      p.complete = true;
      continue;
    }
    const rd_kafka_resp_err_t start_err = consumer.start(p.partition, p.next_offset);
    if (start_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      fail(p, start_err);
      continue;
    }
    ++started;
  }
  return started;
}

// One message read: parsed, filtered, handed over.
void take(const rd_kafka_message_t* m, const provenance_filter& accept,
          const replay_function& on_message, replay_result& result) {
  ++result.read;
  replayed_message r;
  r.output_partition = m->partition;
  r.output_offset = m->offset;
  rd_kafka_timestamp_type_t type;
  r.timestamp_ms = rd_kafka_message_timestamp(m, &type);
  r.view = view_of(m);
  const provenance_parse parsed = parse_provenance(r.view);
  if (!parsed.ok) {
    ++result.skipped[static_cast<std::size_t>(parsed.reason)];
    return;
  }
  if (!accept(parsed.value.topic, parsed.value.partition)) return;
  r.source = parsed.value;
  ++result.matched;
  on_message(r);
}

}  // namespace

std::string_view to_string(replay_skip reason) noexcept {
  switch (reason) {
    case replay_skip::missing_provenance:
      return "missing_provenance";
    case replay_skip::invalid_topic:
      return "invalid_topic";
    case replay_skip::invalid_partition:
      return "invalid_partition";
    case replay_skip::invalid_offset:
      return "invalid_offset";
  }
  return "unknown";
}

bool replay_result::complete() const noexcept {
  return std::all_of(partitions.begin(), partitions.end(),
                     [](const partition_replay& p) { return p.complete; });
}

provenance_parse parse_provenance(const message_view& view) noexcept {
  provenance_parse out;
  std::string_view topic;
  std::string_view partition;
  std::string_view offset;
  if (view.find_header == nullptr ||
      !view.find_header(view.header_context, kSourceTopicHeader, &topic) ||
      !view.find_header(view.header_context, kSourcePartitionHeader, &partition) ||
      !view.find_header(view.header_context, kSourceOffsetHeader, &offset)) {
    out.reason = replay_skip::missing_provenance;
    return out;
  }
  out.value.topic = topic;
  if (topic.empty()) {
    out.reason = replay_skip::invalid_topic;
  } else if (!parse_decimal(partition, out.value.partition)) {
    out.reason = replay_skip::invalid_partition;
  } else if (!parse_decimal(offset, out.value.offset)) {
    out.reason = replay_skip::invalid_offset;
  } else {
    out.ok = true;
  }
  return out;
}

replay_result replay_output(const replay_options& options, const provenance_filter& accept,
                            const replay_function& on_message) {
  check(options);
  const auto deadline = steady_clock::now() + options.timeout;
  replay_result result;
  partition_consumer consumer(options);
  std::vector<output_position> from = options.from;
  if (options.every_partition) {
    const std::uint32_t count = partition_counts(consumer.handle(), {options.topic},
                                                 std::chrono::milliseconds(remaining_ms(deadline)))
                                    .front();
    if (count == 0)
      throw std::runtime_error(fmt::format("the partitions of topic {} are not known within {} ms",
                                           options.topic, options.timeout.count()));
    for (std::uint32_t p = 0; p < count; ++p) from.push_back({static_cast<std::int32_t>(p), 0});
  }
  for (const output_position& p : from) {
    partition_replay& r = result.partitions.emplace_back();
    r.partition = p.partition;
    r.start_offset = p.offset;
    r.next_offset = p.offset;
  }
  std::size_t pending = start_partitions(consumer, options, deadline, result);
  const auto state_of = [&result](std::int32_t partition) -> partition_replay* {
    for (partition_replay& p : result.partitions) {
      if (p.partition == partition) return &p;
    }
    return nullptr;
  };
  const auto finish = [&pending](partition_replay& p) {
    p.complete = p.error == error_code::no_error;
    --pending;
  };
  while (pending > 0 && steady_clock::now() < deadline) {
    const message_ptr m = consumer.next(std::min(remaining_ms(deadline), 100));
    if (!m) continue;
    partition_replay* p = state_of(m->partition);
    // Done already (an end reached, a final error): what follows is not this call's.
    if (p == nullptr || p->complete || p->error != error_code::no_error) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (m->offset >= p->end_offset) {
        p->next_offset = p->end_offset;
        finish(*p);
      }
      continue;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (final_error(m->err)) {
        fail(*p, m->err);
        p->reason = rd_kafka_message_errstr(m.get());
        finish(*p);
      } else {
        log()->debug("output replay of {} [{}]: {}", options.topic, p->partition,
                     rd_kafka_message_errstr(m.get()));
      }
      continue;
    }
    if (m->offset >= p->end_offset) continue;  // produced after the call began
    take(m.get(), accept, on_message, result);
    p->next_offset = m->offset + 1;
    if (p->next_offset >= p->end_offset) finish(*p);
  }
  for (partition_replay& p : result.partitions) {
    if (p.complete || p.error != error_code::no_error) continue;
    p.error = error_code::timed_out;
    p.reason = fmt::format("{} [{}]: its end, offset {}, not reached within {} ms", options.topic,
                           p.partition, p.end_offset, options.timeout.count());
  }
  return result;
}

}  // namespace sketchd::kafka
