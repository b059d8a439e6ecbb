#include "sketchd/kafka/source.h"

#include <pthread.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {

namespace {

std::shared_ptr<spdlog::logger> log() { return module_logger("kafka"); }

// At most one line every 10 s about the errors of consumed messages: the first at once;
// those after it are counted and reported, with the last of them, once 10 s have passed
// since the line before (flush(), on every turn of the poll loop, so that a burst of
// errors followed by silence is reported too). Not thread-safe; the poller thread's.
class rate_limited {
 public:
  static constexpr auto kEvery = std::chrono::seconds(10);

  void warn(std::string message) {
    const auto now = std::chrono::steady_clock::now();
    if (held_ == 0 && now - last_ >= kEvery) {
      log()->warn("{}", message);
      last_ = now;
      return;
    }
    ++held_;
    last_message_ = std::move(message);
    flush(now);
  }

  void flush(std::chrono::steady_clock::time_point now) {
    if (held_ == 0 || now - last_ < kEvery) return;
    log()->warn("{} more such error(s) in the last {} s, the last one: {}", held_,
                std::chrono::duration_cast<std::chrono::seconds>(now - last_).count(),
                last_message_);
    held_ = 0;
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  std::uint64_t held_ = 0;
  std::string last_message_;
};

// True on the source's poller thread (the thread librdkafka runs the callbacks on, except
// during close(), when the owner's thread serves them).
thread_local bool on_poller_thread = false;

bool find_header(const void* context, std::string_view name, std::string_view* out) {
  auto* m = static_cast<rd_kafka_message_t*>(const_cast<void*>(context));
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR || headers == nullptr)
    return false;
  // The first header of that name (docs/CONFIGURATION.md), of any length.
  const char* header = nullptr;
  const void* value = nullptr;
  std::size_t size = 0;
  for (std::size_t i = 0;
       rd_kafka_header_get_all(headers, i, &header, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
       ++i) {
    if (name != header) continue;
    *out = value ? std::string_view(static_cast<const char*>(value), size) : std::string_view();
    return true;
  }
  return false;
}

// A partition whose restored start is behind the group's committed offset.
struct behind_commit {
  int index;  // in partitions
  std::int64_t start;
  std::int64_t committed;
};
// How long the group's committed offsets and the partitions' first and last offsets are
// waited for.
constexpr int kCommittedWaitMs = 10000;

// The first and last offsets of the partitions of `known` (index in partitions, offset),
// with one ListOffsets request per leader for each end; the starts outside them are
// dropped: the reading begins where auto.offset.reset says, not at the commit (a log
// truncated below it, or retention past it), and which offset that is is not known here.
void keep_starts_in_range(rd_kafka_t* rk, const rd_kafka_topic_partition_list_t* partitions,
                          std::vector<std::pair<int, std::int64_t>>& known) {
  if (known.empty()) return;
  const auto ends = [&](std::int64_t which) {
    topic_partition_list_ptr list(
        rd_kafka_topic_partition_list_new(static_cast<int>(known.size())));
    for (const auto& [index, offset] : known) {
      // ListOffsets' "timestamps" for the first offset and the next one.
      rd_kafka_topic_partition_list_add(list.get(), partitions->elems[index].topic,
                                        partitions->elems[index].partition)
          ->offset = which;
    }
    if (rd_kafka_offsets_for_times(rk, list.get(), kCommittedWaitMs) != RD_KAFKA_RESP_ERR_NO_ERROR)
      list.reset();
    return list;
  };
  const topic_partition_list_ptr low = ends(RD_KAFKA_OFFSET_BEGINNING);
  const topic_partition_list_ptr high = low ? ends(RD_KAFKA_OFFSET_END) : nullptr;
  std::erase_if(known, [&](const std::pair<int, std::int64_t>& k) {
    if (!high) return true;
    const auto& tp = partitions->elems[k.first];
    const auto* l = rd_kafka_topic_partition_list_find(low.get(), tp.topic, tp.partition);
    const auto* h = rd_kafka_topic_partition_list_find(high.get(), tp.topic, tp.partition);
    if (l == nullptr || h == nullptr || l->err || h->err || l->offset < 0 || h->offset < 0)
      return true;
    return k.second != 0 && (k.second < l->offset || k.second > h->offset);
  });
}

// The starts of `partitions` from on_assign (a snapshot's positions), where the group has
// committed no further: those partitions start there. The others, whose start is behind
// the group's committed offset (this instance committed past its snapshot before it
// stopped, or another member processed the partition since), are returned with the
// committed offset, for the owner to decide. Should the committed offsets be unreadable,
// every partition starts at its restored position.
//
// Also the starts of the other partitions, as far as the group's committed offsets tell
// them (`known`: index in partitions, offset): a snapshot written before a partition's first
// message is processed holds that position, so that a restart reads what this instance
// processes of it afterwards into the windows again, even when it was committed since.
// `from_earliest`: a partition without a commit is read from its start (offset 0 stands for
// it: at a restart, before the log's first offset is read from the log's first message).
// `want_known`: the caller keeps state positions (a state directory); without it, nor a
// restored start, nothing is asked of the group.
std::vector<behind_commit> start_at_restored_positions(
    rd_kafka_t* rk, rd_kafka_topic_partition_list_t* partitions,
    const std::vector<std::optional<std::int64_t>>& starts, bool want_known, bool from_earliest,
    std::vector<std::pair<int, std::int64_t>>& known) {
  std::vector<behind_commit> behind;
  bool restored = false;
  for (int i = 0; i < partitions->cnt; ++i)
    restored = restored || starts[static_cast<std::size_t>(i)].has_value();
  if (!restored && !want_known) return behind;
  const topic_partition_list_ptr committed(rd_kafka_topic_partition_list_new(partitions->cnt));
  for (int i = 0; i < partitions->cnt; ++i) {
    if (!want_known && !starts[static_cast<std::size_t>(i)]) continue;
    rd_kafka_topic_partition_list_add(committed.get(), partitions->elems[i].topic,
                                      partitions->elems[i].partition);
  }
  if (committed->cnt == 0) return behind;
  const rd_kafka_resp_err_t err = rd_kafka_committed(rk, committed.get(), kCommittedWaitMs);
  if (err && restored) {
    log()->warn(
        "cannot read the group's committed offsets ({}): the restored partitions start at the "
        "snapshot's positions, and what the group processed after the snapshot is processed "
        "(and forwarded) again",
        rd_kafka_err2str(err));
  } else if (err) {
    log()->warn(
        "cannot read the group's committed offsets ({}): a snapshot written before the first "
        "message of each assigned partition is processed leaves that partition out, and a "
        "restart from it forwards again the items of that partition which were first seen "
        "before it",
        rd_kafka_err2str(err));
  }
  for (int i = 0; i < partitions->cnt; ++i) {
    const auto& start = starts[static_cast<std::size_t>(i)];
    if (!start) {
      const rd_kafka_topic_partition_t* group =
          err ? nullptr
              : rd_kafka_topic_partition_list_find(committed.get(), partitions->elems[i].topic,
                                                   partitions->elems[i].partition);
      if (!want_known || group == nullptr || group->err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
      if (group->offset >= 0) {
        known.emplace_back(i, group->offset);
      } else if (from_earliest) {
        known.emplace_back(i, 0);  // any offset up to the log's first reads from there
      }
      continue;
    }
    auto& tp = partitions->elems[i];
    tp.offset = *start;
    const rd_kafka_topic_partition_t* group =
        err ? nullptr : rd_kafka_topic_partition_list_find(committed.get(), tp.topic, tp.partition);
    if (group && group->err == RD_KAFKA_RESP_ERR_NO_ERROR && group->offset > *start) {
      // The messages to read again are those of [start, committed) the log still holds:
      // retention may have deleted the first ones, and a log truncated below the commit (an
      // unclean leader election) holds none past its end; what is written there later is
      // new, to be processed and forwarded as usual.
      std::int64_t low = 0;
      std::int64_t high = 0;
      const rd_kafka_resp_err_t w = rd_kafka_query_watermark_offsets(rk, tp.topic, tp.partition,
                                                                     &low, &high, kCommittedWaitMs);
      if (w) {
        tp.offset = group->offset;
        log()->warn(
            "partition {} [{}] starts at the group's committed offset {}, past the snapshot's {}: "
            "its first and last offsets cannot be read ({}), so the messages between are not "
            "read again (their items are not in this instance's windows)",
            tp.topic, tp.partition, group->offset, *start, rd_kafka_err2str(w));
        continue;
      }
      const std::int64_t from = std::max(*start, low);
      const std::int64_t until = std::min(group->offset, high);
      if (from < until) {
        tp.offset = from;
        behind.push_back({i, from, until});
      } else {
        tp.offset = std::clamp(group->offset, low, high);
        log()->info(
            "partition {} [{}] starts at offset {}: the log (offsets {} to {}) holds none of the "
            "messages between the snapshot's position {} and the group's committed offset {}",
            tp.topic, tp.partition, tp.offset, low, high, *start, group->offset);
      }
    } else {
      log()->info("partition {} [{}] starts at offset {} (restored state)", tp.topic, tp.partition,
                  *start);
    }
  }
  keep_starts_in_range(rk, partitions, known);
  return behind;
}

// librdkafka's description of the fatal error it has raised, and the original error's name.
std::string fatal_error_text(rd_kafka_t* rk) {
  char text[512];
  const rd_kafka_resp_err_t original = rd_kafka_fatal_error(rk, text, sizeof text);
  return fmt::format("{} ({})", text, rd_kafka_err2name(original));
}

}  // namespace

struct source::callbacks {
  static void rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                        rd_kafka_topic_partition_list_t* partitions, void* opaque) {
    auto* self = static_cast<source*>(opaque);
    const bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    const bool assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    std::vector<topic_partition> list;
    for (int i = 0; i < partitions->cnt; ++i) {
      const auto& tp = partitions->elems[i];
      std::size_t index = 0;
      while (index < self->options_.topics.size() && self->options_.topics[index] != tp.topic)
        ++index;
      list.push_back({index, tp.partition});
    }
    hook_request request;
    request.what = assign ? hook_request::kind::assign : hook_request::kind::revoke;
    request.partitions = list;
    if (!assign) {
      // What is not handed over yet is never processed here: the new owner reads it.
      self->filling_->drop(list);
      {
        std::lock_guard lock(self->queue_mutex_);
        if (self->ready_full_) self->ready_->drop(list);
      }
      self->run_on_owner(request);
      // Offsets stored so far are committed before the partitions go to another member
      // (when closing, close() has just committed them, within its bound). A lost
      // assignment (the session expired: the group has moved on without this member)
      // cannot commit, and the coordinator may be what is unreachable: no wait for it.
      const bool lost = rd_kafka_assignment_lost(rk) == 1;
      if (lost) {
        log()->warn(
            "assignment lost (the group's session expired, or this member left it after "
            "max.poll.interval.ms without a poll): {} partition(s) revoked "
            "without a commit; their next owner reads them from the last commit",
            partitions->cnt);
      }
      const rd_kafka_resp_err_t c =
          self->closing_ || lost ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_commit(rk, nullptr, 0);
      if (c && c != RD_KAFKA_RESP_ERR__NO_OFFSET) {
        log()->warn("commit before revocation failed: {}", rd_kafka_err2str(c));
      }
    } else {
      self->assigned_once_ = true;
      self->run_on_owner(request);
      std::vector<std::pair<int, std::int64_t>> known;
      const std::vector<behind_commit> behind = start_at_restored_positions(
          rk, partitions, request.starts, static_cast<bool>(self->on_start_known_),
          self->from_earliest_, known);
      if (!known.empty()) {
        std::vector<topic_partition> known_list;
        hook_request tell;
        tell.what = hook_request::kind::start_known;
        for (const auto& [index, offset] : known) {
          known_list.push_back(list[static_cast<std::size_t>(index)]);
          tell.committed.push_back(offset);
        }
        tell.partitions = known_list;
        self->run_on_owner(tell);
      }
      if (!behind.empty()) {
        std::vector<topic_partition> behind_list;
        hook_request ask;
        ask.what = hook_request::kind::behind_commit;
        for (const behind_commit& b : behind) {
          behind_list.push_back(list[static_cast<std::size_t>(b.index)]);
          ask.starts.push_back(b.start);
          ask.committed.push_back(b.committed);
        }
        ask.partitions = behind_list;
        self->run_on_owner(ask);
        for (std::size_t j = 0; j < behind.size(); ++j) {
          if (!ask.start_behind[j]) partitions->elems[behind[j].index].offset = behind[j].committed;
        }
      }
    }
    // With a pause or a hold in force, what is assigned is paused too, before a release
    // can resume the assignment without it.
    std::unique_lock pause_lock(self->pause_mutex_);
    if (cooperative) {
      const error_ptr e(assign ? rd_kafka_incremental_assign(rk, partitions)
                               : rd_kafka_incremental_unassign(rk, partitions));
      if (e) {
        log()->error("incremental {} failed: {}", assign ? "assign" : "unassign",
                     rd_kafka_error_string(e.get()));
      }
    } else {
      const rd_kafka_resp_err_t e = rd_kafka_assign(rk, assign ? partitions : nullptr);
      if (e) log()->error("assign failed: {}", rd_kafka_err2str(e));
    }
    if (assign && (self->paused_ || self->held_)) rd_kafka_pause_partitions(rk, partitions);
    pause_lock.unlock();
    // The assignment after this change (an incremental unassign completes asynchronously,
    // so it is computed here rather than read back).
    if (cooperative) {
      self->assigned_ =
          assign ? self->assigned_.load() + static_cast<std::size_t>(partitions->cnt)
                 : self->assigned_.load() -
                       std::min(self->assigned_.load(), static_cast<std::size_t>(partitions->cnt));
    } else {
      self->assigned_ = assign ? static_cast<std::size_t>(partitions->cnt) : 0;
    }
    log()->info("{} {} partition(s) ({} rebalance); {} assigned now",
                assign ? "assigned" : "revoked", partitions->cnt,
                cooperative ? "cooperative" : "eager", self->assigned_.load());
  }

  static void error(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
    auto* self = static_cast<source*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
      self->set_fatal(fatal_error_text(rk));
      return;
    }
    // Transient: librdkafka reconnects and retries by itself.
    if (logged_by_librdkafka(err)) return;
    log()->warn("{}: {}", rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err)), reason);
  }

  // The result of each commit of stored offsets (the background one every
  // auto.commit.interval.ms, and those at a revocation or the close); librdkafka tries
  // again at the next one, and does not log a failure at its default log level: it is
  // logged here, at most one line every 10 s. Nothing to commit (_NO_OFFSET) is no failure.
  static void offset_commit(rd_kafka_t*, rd_kafka_resp_err_t err,
                            rd_kafka_topic_partition_list_t* offsets, void* opaque) {
    auto* self = static_cast<source*>(opaque);
    rd_kafka_resp_err_t why =
        err == RD_KAFKA_RESP_ERR__NO_OFFSET ? RD_KAFKA_RESP_ERR_NO_ERROR : err;
    for (int i = 0; why == RD_KAFKA_RESP_ERR_NO_ERROR && offsets != nullptr && i < offsets->cnt;
         ++i) {
      why = offsets->elems[i].err;
    }
    if (why == RD_KAFKA_RESP_ERR_NO_ERROR) return;
    const std::uint64_t failures =
        self->commit_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count();
    std::int64_t last = self->commit_warning_ms_.load(std::memory_order_relaxed);
    if (last != 0 && now_ms - last < 10'000) return;
    if (!self->commit_warning_ms_.compare_exchange_strong(last, now_ms)) return;
    log()->warn(
        "committing the input offsets failed: {} ({}); the commit is retried every "
        "auto.commit.interval.ms, and should sketchd stop before one succeeds, the messages "
        "since the last commit are read again ({} failed commit(s) so far)",
        rd_kafka_err2str(why), rd_kafka_err2name(why), failures);
  }

  // Statistics JSON: topics.<name>.partitions.<id>.consumer_lag (-1 when unknown) and the
  // read, stored and committed offsets, and brokers.<name>.state of the cluster's brokers: those
  // with a node id (a bootstrap address becomes one once the metadata names it), except the
  // group coordinator's "logical" entry, a second handle on one of them.
  static int stats(rd_kafka_t*, char* json, std::size_t json_len, void* opaque) {
    auto* self = static_cast<source*>(opaque);
    std::vector<partition_lag> lag;
    std::int64_t uncommitted = 0;
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(json, json_len).get(root) != simdjson::SUCCESS) return 0;
    simdjson::dom::object brokers;
    if (root["brokers"].get(brokers) == simdjson::SUCCESS) {
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
      // librdkafka says when every broker is down (_ALL_BROKERS_DOWN), not when they are
      // back: without this line, its last failure would be the log's last word.
      const auto now = std::chrono::steady_clock::now();
      if (up == 0 && self->had_broker_up_ && !self->no_broker_since_) {
        self->no_broker_since_ = now;
      } else if (up > 0) {
        if (self->no_broker_since_) {
          log()->info(
              "{} broker(s) of the input cluster reachable again, after about {} s with none", up,
              std::chrono::duration_cast<std::chrono::seconds>(now - *self->no_broker_since_)
                  .count());
        }
        self->no_broker_since_.reset();
        self->had_broker_up_ = true;
      }
      self->brokers_up_ = up;  // after the line: a reader of the gauge finds it logged
    }
    simdjson::dom::object topics;
    if (root["topics"].get(topics) != simdjson::SUCCESS) return 0;
    for (auto [topic, t] : topics) {
      simdjson::dom::object partitions;
      if (t["partitions"].get(partitions) != simdjson::SUCCESS) continue;
      for (auto [id, p] : partitions) {
        std::int64_t partition = 0;
        std::string_view assigned_state;
        if (p["partition"].get(partition) != simdjson::SUCCESS || partition < 0) continue;
        if (p["fetch_state"].get(assigned_state) == simdjson::SUCCESS && assigned_state == "none")
          continue;
        // A revoked partition keeps its entry, and a lag from its last committed offset, in
        // a fetch state other than "none" ("stopped"); "desired" is false once it is not
        // assigned any more.
        bool desired = true;
        if (p["desired"].get(desired) == simdjson::SUCCESS && !desired) continue;
        // Messages read (handed to sketchd: app_offset; or stored, their outputs delivered)
        // and not yet committed, counted from the start of the partition while the group
        // has committed nothing there (a crash would start there again,
        // auto.offset.reset: earliest); librdkafka gives negative offsets while they are
        // unknown. What a crash would read again, whether its outputs were delivered (and
        // would be forwarded again) or not (pending, or failed).
        std::int64_t read = -1;
        std::int64_t stored = -1;
        std::int64_t committed = -1;
        std::int64_t low = -1;
        if (p["app_offset"].get(read) != simdjson::SUCCESS) read = -1;
        if (p["stored_offset"].get(stored) == simdjson::SUCCESS) read = std::max(read, stored);
        if (read >= 0 && p["committed_offset"].get(committed) == simdjson::SUCCESS) {
          // Without a commit a crash starts at the log's start (earliest) or end (latest).
          if (committed < 0 && self->from_earliest_ && p["lo_offset"].get(low) == simdjson::SUCCESS)
            committed = low;
          if (committed >= 0 && read > committed) uncommitted += read - committed;
        }
        std::int64_t consumer_lag = -1;
        if (p["consumer_lag"].get(consumer_lag) != simdjson::SUCCESS || consumer_lag < 0) continue;
        lag.push_back({std::string(topic), static_cast<std::int32_t>(partition), consumer_lag});
      }
    }
    self->uncommitted_ = uncommitted;
    std::lock_guard lock(self->mutex_);
    self->lag_ = std::move(lag);
    return 0;  // librdkafka frees the JSON
  }
};

namespace {

// sketchd's consumer configuration without bootstrap.servers, group.id and callbacks.
client_config consumer_config(const property_map& properties) {
  client_config conf;
  // Our defaults first, so that the user's properties override any of them...
  conf.set_own("partition.assignment.strategy", "cooperative-sticky");
  conf.set_own("statistics.interval.ms", "5000");
  conf.set_own("fetch.wait.max.ms", "100");
  // librdkafka before 2.1 (Debian 12 ships 2.0.2) stops fetching for a whole second
  // (no fetch.queue.backoff.ms yet) whenever the consumer queue holds queued.min.messages
  // messages — and with every partition forwarded to one queue, that count is the whole
  // queue's. At the default of 100,000 a consumer catching up on a backlog faster than
  // 100,000 messages per second idles most of every second. 1,000,000 keeps it fetching;
  // the queue stays bounded by queued.max.messages.kbytes (64 MiB by default).
  conf.set_own("queued.min.messages", "1000000");
  conf.set_own("auto.offset.reset", "earliest");
  for (const auto& [k, v] : consumer_properties(properties)) conf.set(k, v);
  // ...except what at-least-once delivery depends on.
  conf.set_own("enable.auto.offset.store", "false");
  conf.set_own("enable.partition.eof", "false");
  return conf;
}

}  // namespace

std::optional<std::string> consumer_refusal(const property_map& properties) {
  client_config conf = consumer_config(without_security(properties));
  conf.set_own("group.id", "sketchd-check-config");
  return std::move(conf).refusal(RD_KAFKA_CONSUMER);
}

source::source(const source_options& options)
    : options_(options), consumer_(nullptr, [](rd_kafka_s*) {}) {
  client_config conf = consumer_config(options_.properties);
  if (const auto reset = options_.properties.find("auto.offset.reset");
      reset != options_.properties.end()) {
    // As librdkafka reads the value: whatever the case.
    const auto is = [&](const char* v) { return ::strcasecmp(reset->second.c_str(), v) == 0; };
    from_earliest_ = is("earliest") || is("smallest") || is("beginning");
  }
  conf.set("bootstrap.servers", options_.bootstrap_servers);
  conf.set("group.id", options_.group_id);
  rd_kafka_conf_set_rebalance_cb(conf.get(), &callbacks::rebalance);
  rd_kafka_conf_set_error_cb(conf.get(), &callbacks::error);
  rd_kafka_conf_set_stats_cb(conf.get(), &callbacks::stats);
  rd_kafka_conf_set_offset_commit_cb(conf.get(), &callbacks::offset_commit);
  rd_kafka_conf_set_opaque(conf.get(), this);
  handle_ptr handle = std::move(conf).create(RD_KAFKA_CONSUMER);
  consumer_ = decltype(consumer_)(handle.release(), [](rd_kafka_s* rk) { rd_kafka_destroy(rk); });
  rd_kafka_poll_set_consumer(consumer_.get());

  topic_partition_list_ptr topics(
      rd_kafka_topic_partition_list_new(static_cast<int>(options_.topics.size())));
  for (const auto& t : options_.topics) {
    rd_kafka_topic_partition_list_add(topics.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  throw_if_error(rd_kafka_subscribe(consumer_.get(), topics.get()), "subscribe");
  for (auto* b : {&filling_, &ready_, &current_}) {
    *b = std::make_unique<batch>();
    (*b)->messages.reserve(options_.batch_size);
    (*b)->records.reserve(options_.batch_size);
  }
  poller_ = std::thread([this] { poll_loop(); });
}

source::~source() {
  try {
    close();
  } catch (const std::exception& e) {
    log()->error("closing the consumer: {}", e.what());
  }
}

void source::batch::release() noexcept {
  for (rd_kafka_message_t* m : messages) rd_kafka_message_destroy(m);
  messages.clear();
  records.clear();
}

void source::batch::drop(std::span<const topic_partition> revoked) noexcept {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const bool gone =
        std::find(revoked.begin(), revoked.end(),
                  topic_partition{records[i].topic_index, records[i].partition}) != revoked.end();
    if (gone) {
      rd_kafka_message_destroy(messages[i]);
      continue;
    }
    records[kept] = records[i];
    messages[kept] = messages[i];
    ++kept;
  }
  records.resize(kept);
  messages.resize(kept);
}

std::size_t source::topic_index(const rd_kafka_message_t* m) {
  for (const auto& [rkt, index] : topic_cache_) {
    if (rkt == m->rkt) return index;
  }
  const std::string_view name = rd_kafka_topic_name(m->rkt);
  std::size_t index = 0;
  while (index < options_.topics.size() && options_.topics[index] != name) ++index;
  topic_cache_.emplace_back(m->rkt, index);
  return index;
}

void source::poll_loop() {
  on_poller_thread = true;
  // Named for `top -H` and the benchmark harness, which reads its CPU time.
  pthread_setname_np(pthread_self(), "sketchd-poll");
  rate_limited message_errors;
  auto next_held_lines = std::chrono::steady_clock::now();
  // Short waits, so that close() is not held up by an idle topic.
  const int wait_ms = std::min(options_.poll_timeout_ms, 100);
  // One message of rd_kafka_consumer_poll into B (its size added to BYTES), or its error
  // logged and dropped.
  const auto take = [&](rd_kafka_message_t* m, batch& b, std::size_t& bytes) {
    if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
      // A consumer in a group (a static member fenced by another with its
      // group.instance.id, say) receives its fatal error here, never through the error
      // callback: librdkafka hands it to whoever polls.
      set_fatal(fatal_error_text(consumer_.get()));
      rd_kafka_message_destroy(m);
      return;
    }
    if (m->err) {
      if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        message_errors_.fetch_add(1, std::memory_order_relaxed);
        message_errors.warn(fmt::format("consume error{}: {}",
                                        m->rkt
                                            ? fmt::format(" [topic {}, partition {}]",
                                                          rd_kafka_topic_name(m->rkt), m->partition)
                                            : std::string(),
                                        rd_kafka_message_errstr(m)));
      }
      rd_kafka_message_destroy(m);
      return;
    }
    b.messages.push_back(m);
    bytes += m->len + m->key_len;
    record r;
    r.topic_index = topic_index(m);
    r.partition = m->partition;
    r.offset = m->offset;
    rd_kafka_timestamp_type_t type;
    r.timestamp_ms = rd_kafka_message_timestamp(m, &type);
    r.view.has_key = m->key != nullptr;
    r.view.key = std::string_view(static_cast<const char*>(m->key), m->key ? m->key_len : 0);
    r.view.value = std::string_view(static_cast<const char*>(m->payload), m->payload ? m->len : 0);
    r.view.find_header = &find_header;
    r.view.header_context = m;
    r.native = m;
    b.records.push_back(r);
  };
  const auto housekeeping = [&] {
    const auto now = std::chrono::steady_clock::now();
    message_errors.flush(now);
    if (now >= next_held_lines) {
      log_held_back_lines();
      next_held_lines = now + std::chrono::seconds(1);
    }
  };
  for (;;) {
    {
      std::lock_guard lock(queue_mutex_);
      if (stopping_) break;
    }
    housekeeping();
    batch& b = *filling_;
    int timeout = wait_ms;
    std::size_t bytes = 0;
    while (b.messages.size() < options_.batch_size && bytes < options_.batch_bytes) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_.get(), timeout);
      if (m == nullptr) break;
      timeout = 0;  // after the first message, only what is already there
      take(m, b, bytes);
    }
    if (b.messages.empty()) continue;
    std::unique_lock lock(queue_mutex_);
    while (ready_full_ && !stopping_) {
      if (held_) {
        // The owner waits on the outputs (hold()): poll on, the assignment paused. That
        // serves librdkafka's events (the statistics) and keeps this member in its group;
        // a message that still comes joins the batch beyond its bounds. A rebalance
        // callback waits inside this poll for the owner to run its hooks, once the hold
        // ends: the revoke hook delivers the batch's outputs first, which the hold is
        // waiting for (librdkafka counts the time inside a poll as polling).
        lock.unlock();
        housekeeping();
        if (rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_.get(), wait_ms))
          take(m, b, bytes);
        lock.lock();
        continue;
      }
      queue_cv_.wait(lock, [this] { return !ready_full_ || stopping_ || held_; });
    }
    if (stopping_) break;
    std::swap(ready_, filling_);
    ready_full_ = true;
    lock.unlock();
    queue_cv_.notify_all();
    // The batch that comes back is the one the processing thread finished with (or an empty
    // one): its messages are freed here, off the processing thread.
    filling_->release();
  }
  std::lock_guard lock(queue_mutex_);
  poller_done_ = true;
  queue_cv_.notify_all();
}

void source::run_hook(hook_request& request) {
  switch (request.what) {
    case hook_request::kind::revoke:
      if (on_revoke_) on_revoke_(request.partitions);
      return;
    case hook_request::kind::assign:
      if (on_assignment_) on_assignment_();
      request.starts.assign(request.partitions.size(), std::nullopt);
      if (!on_assign_) return;
      for (std::size_t i = 0; i < request.partitions.size(); ++i)
        request.starts[i] = on_assign_(request.partitions[i]);
      return;
    case hook_request::kind::start_known:
      if (!on_start_known_) return;
      for (std::size_t i = 0; i < request.partitions.size(); ++i)
        on_start_known_(request.partitions[i], request.committed[i]);
      return;
    case hook_request::kind::behind_commit:
      request.start_behind.assign(request.partitions.size(), false);
      if (!on_start_behind_commit_) return;
      for (std::size_t i = 0; i < request.partitions.size(); ++i) {
        request.start_behind[i] = on_start_behind_commit_(request.partitions[i], *request.starts[i],
                                                          request.committed[i]);
      }
      return;
  }
}

void source::run_on_owner(hook_request& request) {
  if (!on_poller_thread) {
    run_hook(request);
    return;
  }
  std::unique_lock lock(queue_mutex_);
  pending_ = &request;
  queue_cv_.notify_all();
  queue_cv_.wait(lock, [&request] { return request.done; });
}

void source::serve_pending(std::unique_lock<std::mutex>& lock) {
  hook_request* request = pending_;
  pending_ = nullptr;
  lock.unlock();
  // The poller waits for `done` whatever happens: a hook that throws must not leave it
  // (and close()) waiting forever.
  struct release_poller {
    source& self;
    std::unique_lock<std::mutex>& lock;
    hook_request& request;
    ~release_poller() {
      if (!lock.owns_lock()) lock.lock();
      request.done = true;
      self.queue_cv_.notify_all();
    }
  } release{*this, lock, *request};
  run_hook(*request);
}

std::span<const record> source::poll_batch() {
  // The batch processed last goes back to the poller with the next swap, which frees it.
  if (closed_) return {};
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.poll_timeout_ms);
  std::unique_lock lock(queue_mutex_);
  for (;;) {
    if (pending_) {
      serve_pending(lock);
      continue;
    }
    if (ready_full_) {
      std::swap(current_, ready_);
      ready_full_ = false;
      lock.unlock();
      queue_cv_.notify_all();
      return current_->records;
    }
    if (poller_done_ || !queue_cv_.wait_until(lock, deadline, [this] {
          return pending_ != nullptr || ready_full_ || poller_done_;
        })) {
      return {};
    }
  }
}

void source::store_offsets(std::span<const partition_offset> offsets) {
  // While close() runs, the revocations it serves still store what their flush delivered:
  // the commit of the revocation (or librdkafka's, when it unassigns) takes them along.
  if (offsets.empty() || !consumer_ ||
      (closed_ && rd_kafka_consumer_closed(consumer_.get()) == 1)) {
    return;
  }
  topic_partition_list_ptr list(
      rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const partition_offset& o : offsets) {
    rd_kafka_topic_partition_list_add(list.get(), options_.topics[o.topic_index].c_str(),
                                      o.partition)
        ->offset = o.next_offset;
  }
  // Unlike rd_kafka_offset_store(), rd_kafka_offsets_store() stores the offsets as given.
  const rd_kafka_resp_err_t err = rd_kafka_offsets_store(consumer_.get(), list.get());
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
  for (int i = 0; i < list->cnt; ++i) {
    const auto& tp = list->elems[i];
    if (tp.err) {
      // _STATE: the partition was revoked meanwhile; its new owner reads it again.
      log()->debug("offset not stored [topic {}, partition {}, offset {}]: {}", tp.topic,
                   tp.partition, tp.offset, rd_kafka_err2str(tp.err));
    }
  }
}

void source::pause_assignment(bool pause) {
  rd_kafka_topic_partition_list_t* assignment = nullptr;
  if (rd_kafka_assignment(consumer_.get(), &assignment) == RD_KAFKA_RESP_ERR_NO_ERROR &&
      assignment) {
    topic_partition_list_ptr owned(assignment);
    if (pause) {
      rd_kafka_pause_partitions(consumer_.get(), assignment);
    } else {
      rd_kafka_resume_partitions(consumer_.get(), assignment);
    }
  }
}

void source::pause() {
  if (paused_ || closed_) return;
  const std::lock_guard lock(pause_mutex_);
  paused_ = true;  // read by the rebalance callback, on the poller thread
  if (!held_) pause_assignment(true);
}

void source::hold() {
  if (held_ || paused_ || closed_) return;
  {
    const std::lock_guard lock(pause_mutex_);
    held_ = true;
    pause_assignment(true);
  }
  // Set under the poller's lock too, so that its wait sees it.
  { const std::lock_guard lock(queue_mutex_); }
  queue_cv_.notify_all();
}

void source::release() {
  if (!held_) return;
  const std::lock_guard lock(pause_mutex_);
  held_ = false;
  if (!paused_ && !closed_) pause_assignment(false);
}

void source::close() {
  if (closed_ || !consumer_) return;
  closed_ = true;
  {
    // The poller may be inside a rebalance, waiting for its hooks: serve them until it stops.
    std::unique_lock lock(queue_mutex_);
    stopping_ = true;
    queue_cv_.notify_all();
    while (!poller_done_) {
      if (pending_) {
        try {
          serve_pending(lock);
        } catch (const std::exception& e) {
          log()->error("rebalance hook while closing: {}", e.what());
        }
        continue;
      }
      queue_cv_.wait(lock, [this] { return pending_ != nullptr || poller_done_; });
    }
  }
  if (poller_.joinable()) poller_.join();
  for (auto* b : {&filling_, &ready_, &current_}) (*b)->release();
  ready_full_ = false;
  closing_ = true;
  // Each step is bounded: with the coordinator unreachable, librdkafka's synchronous commit
  // and close wait for its own timeouts, a minute and more. What is not committed is read
  // again after a restart (at-least-once).
  rd_kafka_t* rk = consumer_.get();
  // Polls q until done() or kCloseStepWait has passed; returns the first event of `type`
  // (nullptr if none came). Rebalance events (during the close) go to the same callback as
  // in poll_loop(), here on the owner's thread; other events are dropped.
  const auto wait = [this, rk](rd_kafka_queue_t* q, int type, const auto& done) {
    const auto deadline = std::chrono::steady_clock::now() + kCloseStepWait;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      event_ptr ev(rd_kafka_queue_poll(q, 100));
      if (ev == nullptr) continue;
      if (rd_kafka_event_type(ev.get()) == type) return ev;
      if (rd_kafka_event_type(ev.get()) == RD_KAFKA_EVENT_REBALANCE) {
        callbacks::rebalance(rk, rd_kafka_event_error(ev.get()),
                             rd_kafka_event_topic_partition_list(ev.get()), this);
      }
    }
    return event_ptr();
  };
  const queue_ptr commit_queue(rd_kafka_queue_new(rk));
  rd_kafka_resp_err_t err =
      rd_kafka_commit_queue(rk, nullptr, commit_queue.get(), nullptr, nullptr);
  if (!err) {
    const event_ptr ev =
        wait(commit_queue.get(), RD_KAFKA_EVENT_OFFSET_COMMIT, [] { return false; });
    if (ev == nullptr) {
      log()->warn(
          "final commit: no answer within {} s; the messages since the last commit will be read "
          "again",
          kCloseStepWait.count());
    } else {
      err = rd_kafka_event_error(ev.get());
      if (!err) {
        // Said, so that an operator reading the stop sees where the next start begins.
        int committed = 0;
        if (const rd_kafka_topic_partition_list_t* l =
                rd_kafka_event_topic_partition_list(ev.get())) {
          for (int i = 0; i < l->cnt; ++i)
            committed += l->elems[i].err == 0 && l->elems[i].offset >= 0;
        }
        log()->info("final commit: the offsets of {} partition(s) committed", committed);
      }
    }
  }
  if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) log()->info("final commit: nothing new to commit");
  if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
    log()->warn("final commit failed: {}", rd_kafka_err2str(err));
  // Leaving the group: rebalance callbacks during the close run here, on the owner's thread.
  const queue_ptr close_queue(rd_kafka_queue_new(rk));
  if (const error_ptr e{rd_kafka_consumer_close_queue(rk, close_queue.get())}) {
    log()->warn("closing the consumer: {}", rd_kafka_error_string(e.get()));
  } else {
    wait(close_queue.get(), RD_KAFKA_EVENT_NONE,
         [rk] { return rd_kafka_consumer_closed(rk) == 1; });
  }
  const bool left = rd_kafka_consumer_closed(rk) == 1;
  if (!left) {
    log()->warn(
        "leaving the group: no answer within {} s; the group rebalances once session.timeout.ms "
        "has passed",
        kCloseStepWait.count());
  }
  log_held_back_lines();  // the poller, which told them, is gone
  if (!assigned_once_ || !left) {
    // Two cases where rd_kafka_destroy() must not run: librdkafka 2.0 fails an assertion
    // (abort) for a consumer that joined a cooperative group but was never assigned (its
    // issue 4312, fixed in 2.3), and destroying a consumer that has not left its group
    // waits for the group, unbounded. The handle is kept until the process exits instead:
    // nothing is left to commit.
    // Never destroyed, so the handles stay reachable (for leak checkers) to the end.
    // Silenced: whatever it meets from now on (brokers gone away, an embedded cluster
    // destroyed before the process exits) is no news to anyone.
    rd_kafka_set_log_level(rk, 0);
    static auto* const kept_mutex = new std::mutex;
    static auto* const kept = new std::vector<rd_kafka_t*>;
    const std::lock_guard lock(*kept_mutex);
    kept->push_back(consumer_.release());
  }
}

std::vector<partition_lag> source::lag() const {
  std::lock_guard lock(mutex_);
  return lag_;
}

std::optional<int> source::brokers_up() const noexcept {
  const int up = brokers_up_.load();
  return up < 0 ? std::nullopt : std::optional<int>(up);
}

std::optional<std::string> source::fatal_error() const {
  std::lock_guard lock(mutex_);
  return fatal_;
}

void source::set_fatal(std::string text) {
  std::lock_guard lock(mutex_);
  if (!fatal_) fatal_ = std::move(text);  // the first one: librdkafka raises only one
}

}  // namespace sketchd::kafka
