#include "sketchd/kafka/time_lookup.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "sketchd/kafka/client.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {
namespace {

using steady = std::chrono::steady_clock;

std::shared_ptr<spdlog::logger> log() { return module_logger("kafka"); }

// The group named when the caller's properties name none (see time_lookup in the header).
constexpr const char* kDefaultGroup = "sketchd-time-lookup";
// How long one poll waits, so that the deadline is looked at in between.
constexpr int kPollSliceMs = 100;

// Milliseconds left until `deadline`, at least 0.
int remaining_ms(steady::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 3'600'000));
}

kafka_error timed_out(const std::string& topic, std::int32_t partition) {
  return kafka_error("find the offset of a timestamp", error_code::timed_out,
                     error_context(topic, partition), "the deadline passed first");
}

// Why `query` cannot be asked, if it cannot; `seen` holds the partitions asked before it.
std::optional<kafka_error> invalid(const time_query& query,
                                   std::set<std::pair<std::string, std::int32_t>>& seen) {
  const char* why = nullptr;
  if (query.topic.empty()) why = "the topic is empty";
  if (query.partition < 0) why = "the partition is negative";
  if (query.timestamp_ms < 0) why = "the timestamp is negative";
  if (why == nullptr && !seen.emplace(query.topic, query.partition).second)
    why = "the partition is asked twice";
  if (why == nullptr) return std::nullopt;
  return kafka_error("find the offset of a timestamp", error_code::invalid_arg,
                     error_context(query.topic, query.partition), why);
}

time_answer unanswered(const time_query& query) {
  time_answer answer;
  answer.topic = query.topic;
  answer.partition = query.partition;
  answer.timestamp_ms = query.timestamp_ms;
  return answer;
}

}  // namespace

search_outcome search_first_at_or_after(std::int64_t low, std::int64_t high,
                                        std::int64_t timestamp_ms, const probe_reader& read) {
  // Invariants: the offsets [hi, found) hold no message, and `found` is high or a message
  // read at or after the timestamp; the message at lo − 1 (when lo > low) was read and is
  // before it. Each step moves lo past its probe or hi down to it.
  search_outcome out;
  std::int64_t lo = low;
  std::int64_t hi = high;
  std::int64_t found = high;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    probe_read probe = read(mid);
    ++out.reads;
    if (probe.error) {
      out.error = std::move(probe.error);
      return out;
    }
    const std::optional<message_time>& m = probe.message;
    if (m && m->offset >= mid && m->offset < hi && m->timestamp_ms < timestamp_ms) {
      lo = m->offset + 1;
    } else {
      // At or after the timestamp, or nothing in [mid, hi): what follows mid is `found`.
      hi = mid;
      if (m && m->offset >= mid && m->offset < found) found = m->offset;
    }
  }
  out.offset = found;
  return out;
}

confirmation confirm_broker_answer(std::int64_t low, std::int64_t high, std::int64_t timestamp_ms,
                                   std::int64_t answer, const probe_reader& read) {
  confirmation out;
  const bool none = answer == -1 || answer == high;
  if (!none && (answer < low || answer > high)) return out;
  if (none && low == high) {
    out.confirmed = true;
    return out;
  }
  // The message first at or after `at`, counted; nothing on an error (kept in `out`).
  const auto message_from = [&](std::int64_t at) -> std::optional<message_time> {
    probe_read probe = read(at);
    ++out.reads;
    if (probe.error) out.error = std::move(probe.error);
    return out.error ? std::nullopt : probe.message;
  };
  if (none) {  // the last message is before the timestamp
    const auto last = message_from(high - 1);
    out.confirmed = last && last->offset == high - 1 && last->timestamp_ms < timestamp_ms;
    return out;
  }
  const auto at = message_from(answer);  // at or after the timestamp
  if (!at || at->offset != answer || at->timestamp_ms < timestamp_ms) return out;
  if (answer == low) {
    out.confirmed = true;
    return out;
  }
  // The one before is before the timestamp; none right before `answer` (a gap) tells nothing
  // more, and the answer stands.
  const auto before = message_from(answer - 1);
  out.confirmed = before && (before->offset == answer ||
                             (before->offset == answer - 1 && before->timestamp_ms < timestamp_ms));
  return out;
}

struct time_lookup::broker_answer {
  std::optional<std::int64_t> offset;  // none: no answer, search
  std::optional<kafka_error> error;    // the partition's own error: final
};

void time_lookup::handle_deleter::operator()(rd_kafka_s* handle) const noexcept {
  rd_kafka_destroy(handle);
}

time_lookup::time_lookup(const std::string& bootstrap_servers,
                         const std::map<std::string, std::string>& properties) {
  property_map own = properties;
  for (const char* name : {"enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof",
                           "auto.offset.reset", "group.instance.id"})
    own.erase(name);
  const bool has_group = own.contains("group.id");
  client_config conf(own);
  conf.set("bootstrap.servers", bootstrap_servers);
  if (!has_group) conf.set_own("group.id", kDefaultGroup);
  conf.set_own("enable.auto.commit", "false");
  conf.set_own("enable.auto.offset.store", "false");
  // A read in a trailing gap (transaction markers) ends at the end of the log.
  conf.set_own("enable.partition.eof", "true");
  // A probe below a start that retention moved meanwhile reads the new first message: the
  // first message at or after the probe.
  conf.set_own("auto.offset.reset", "earliest");
  // One message per probe: fetch little ahead of it.
  conf.set_own("max.partition.fetch.bytes", "65536");
  conf.set_own("fetch.wait.max.ms", "100");
  handle_ptr handle = std::move(conf).create(RD_KAFKA_CONSUMER);
  consumer_.reset(handle.release());
  throw_if_error(rd_kafka_poll_set_consumer(consumer_.get()), "redirect the main queue");
}

time_lookup::~time_lookup() {
  unassign();
  // Assigned only, never subscribed: the close leaves no group and commits nothing.
  static_cast<void>(rd_kafka_consumer_close(consumer_.get()));
}

std::vector<time_answer> time_lookup::find(std::span<const time_query> queries,
                                           steady::time_point deadline) {
  std::vector<time_answer> answers;
  answers.reserve(queries.size());
  std::set<std::pair<std::string, std::int32_t>> seen;
  for (const time_query& q : queries) {
    answers.push_back(unanswered(q));
    answers.back().error = invalid(q, seen);
  }
  const std::vector<broker_answer> broker = ask_broker(answers, deadline);
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (answers[i].ok()) settle(answers[i], broker[i], deadline);
  }
  unassign();
  return answers;
}

std::vector<time_lookup::broker_answer> time_lookup::ask_broker(
    std::span<const time_answer> answers, steady::time_point deadline) {
  std::vector<broker_answer> out(answers.size());
  const topic_partition_list_ptr list(
      rd_kafka_topic_partition_list_new(static_cast<int>(answers.size())));
  std::vector<std::size_t> index;  // of each element of `list` into `answers`
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (!answers[i].ok()) continue;
    rd_kafka_topic_partition_list_add(list.get(), answers[i].topic.c_str(), answers[i].partition)
        ->offset = answers[i].timestamp_ms;
    index.push_back(i);
  }
  if (index.empty()) return out;
  const rd_kafka_resp_err_t err =
      rd_kafka_offsets_for_times(consumer_.get(), list.get(), remaining_ms(deadline));
  if (err) log()->debug("offsets_for_times: {}; searching by timestamp", rd_kafka_err2str(err));
  for (std::size_t k = 0; k < index.size(); ++k) {
    const rd_kafka_topic_partition_t& tp = list->elems[k];
    const time_answer& a = answers[index[k]];
    if (tp.err && tp.err != RD_KAFKA_RESP_ERR__IN_PROGRESS) {  // not the leader's look-up cut short
      out[index[k]].error = kafka_error("find the offset of a timestamp", to_error_code(tp.err),
                                        error_context(a.topic, a.partition));
    } else if (!err) {
      out[index[k]].offset = tp.offset;
    }
  }
  return out;
}

void time_lookup::settle(time_answer& answer, const broker_answer& broker,
                         steady::time_point deadline) {
  if (broker.error) {
    answer.error = broker.error;
    return;
  }
  std::int64_t low = 0;
  std::int64_t high = 0;
  const rd_kafka_resp_err_t err =
      remaining_ms(deadline) == 0
          ? RD_KAFKA_RESP_ERR__TIMED_OUT
          : query_watermarks(consumer_.get(), answer.topic.c_str(), answer.partition, &low, &high,
                             remaining_ms(deadline));
  if (err) {
    answer.error = err == RD_KAFKA_RESP_ERR__TIMED_OUT
                       ? timed_out(answer.topic, answer.partition)
                       : kafka_error("read the watermarks", to_error_code(err),
                                     error_context(answer.topic, answer.partition));
    return;
  }
  const probe_reader read = [&](std::int64_t offset) {
    return read_at(answer.topic, answer.partition, offset, high, deadline);
  };
  if (broker.offset) {
    const confirmation c =
        confirm_broker_answer(low, high, answer.timestamp_ms, *broker.offset, read);
    answer.reads = c.reads;
    if (c.error) {
      answer.error = c.error;
      return;
    }
    if (c.confirmed) {
      answer.offset = *broker.offset == -1 ? high : *broker.offset;
      answer.how = found_by::broker;
      return;
    }
  }
  const search_outcome s = search_first_at_or_after(low, high, answer.timestamp_ms, read);
  answer.reads += s.reads;
  answer.error = s.error;
  answer.offset = s.offset;
  answer.how = found_by::search;
}

probe_read time_lookup::read_at(const std::string& topic, std::int32_t partition,
                                std::int64_t offset, std::int64_t high,
                                steady::time_point deadline) {
  const error_context where(topic, partition, offset);
  const topic_partition_list_ptr list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), partition)->offset = offset;
  if (const rd_kafka_resp_err_t err = rd_kafka_assign(consumer_.get(), list.get()))
    return {std::nullopt, kafka_error("assign", to_error_code(err), where)};
  while (remaining_ms(deadline) > 0) {
    const message_ptr m(
        rd_kafka_consumer_poll(consumer_.get(), std::min(remaining_ms(deadline), kPollSliceMs)));
    if (!m || m->rkt == nullptr || m->partition != partition ||
        topic != rd_kafka_topic_name(m->rkt))
      continue;  // another partition's, or a client-wide error (librdkafka retries)
    const bool eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
    if (m->err && !eof)
      return {std::nullopt, kafka_error("read a message", to_error_code(m->err), where)};
    if (m->offset < offset) continue;  // a fetch of the previous probe, were one left over
    if (eof || m->offset >= high) return {};
    return {message_time{m->offset, rd_kafka_message_timestamp(m.get(), nullptr)}, std::nullopt};
  }
  return {std::nullopt, timed_out(topic, partition)};
}

void time_lookup::unassign() noexcept {
  static_cast<void>(rd_kafka_assign(consumer_.get(), nullptr));
}

}  // namespace sketchd::kafka
