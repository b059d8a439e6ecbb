#include "sketchd/kafka/source.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/read_ahead.h"
#include "sketchd/kafka/rebalance.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/kafka/time_lookup.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {

namespace {

std::shared_ptr<spdlog::logger> log() { return module_logger("kafka"); }

// How long close() waits for the final commit, and then for leaving the group.
constexpr std::chrono::seconds kCloseStepWait{5};

// librdkafka's description of the fatal error it has raised, and the original error's name.
std::string fatal_error_text(rd_kafka_t* rk) {
  char text[512];
  const rd_kafka_resp_err_t original = rd_kafka_fatal_error(rk, text, sizeof text);
  return fmt::format("{} ({})", text, rd_kafka_err2name(original));
}

// Polls `queue` until done() or kCloseStepWait has passed; returns the first event of
// `type` (nullptr if none came). Rebalance events (during the close) go to `rebalance` as
// the rebalance callback's do, here on the owner's thread; other events are dropped.
event_ptr wait_for_event(rd_kafka_queue_t* queue, int type, const std::function<bool()>& done,
                         rebalance_handler& rebalance) {
  const auto deadline = std::chrono::steady_clock::now() + kCloseStepWait;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    event_ptr ev(rd_kafka_queue_poll(queue, 100));
    if (ev == nullptr) continue;
    if (rd_kafka_event_type(ev.get()) == type) return ev;
    if (rd_kafka_event_type(ev.get()) == RD_KAFKA_EVENT_REBALANCE) {
      rebalance.on_rebalance(rd_kafka_event_error(ev.get()),
                             rd_kafka_event_topic_partition_list(ev.get()));
    }
  }
  return event_ptr();
}

// The commit of `offsets` (the stored ones) at the close, waited for kCloseStepWait at most.
void commit_final(rd_kafka_t* rk, const rd_kafka_topic_partition_list_t* offsets,
                  rebalance_handler& rebalance) {
  if (offsets == nullptr) {
    log()->info("final commit: nothing new to commit");
    return;
  }
  const queue_ptr commit_queue(rd_kafka_queue_new(rk));
  rd_kafka_resp_err_t err =
      rd_kafka_commit_queue(rk, offsets, commit_queue.get(), nullptr, nullptr);
  if (!err) {
    const event_ptr ev = wait_for_event(
        commit_queue.get(), RD_KAFKA_EVENT_OFFSET_COMMIT, [] { return false; }, rebalance);
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
}

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
  // sketchd commits the stored offsets itself, every auto.commit.interval.ms, so that each
  // commit carries the outputs' positions in its metadata (source::on_commit()):
  // librdkafka's commits would erase them.
  conf.set_own("enable.auto.commit", "false");
  return conf;
}

}  // namespace

struct source::callbacks {
  static void rebalance(rd_kafka_t*, rd_kafka_resp_err_t err,
                        rd_kafka_topic_partition_list_t* partitions, void* opaque) {
    static_cast<source*>(opaque)->rebalance_->on_rebalance(err, partitions);
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
    self->commit_in_flight_ = false;
    rd_kafka_resp_err_t why =
        err == RD_KAFKA_RESP_ERR__NO_OFFSET ? RD_KAFKA_RESP_ERR_NO_ERROR : err;
    for (int i = 0; why == RD_KAFKA_RESP_ERR_NO_ERROR && offsets != nullptr && i < offsets->cnt;
         ++i) {
      why = offsets->elems[i].err;
    }
    if (why == RD_KAFKA_RESP_ERR_NO_ERROR) return;
    self->commit_failed_ = true;
    if (why == RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE &&
        !self->metadata_refused_.exchange(true)) {
      log()->warn(
          "the group coordinator refuses the outputs' positions in the metadata of offset "
          "commits as too large (offset.metadata.max.bytes): commits go without them from now "
          "on, and a member that takes over a partition after this one crashes forwards again "
          "what was forwarded after the last commit");
    }
    const std::uint64_t failures =
        self->commit_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
    {
      const auto now = std::chrono::steady_clock::now();
      const std::lock_guard lock(self->commit_warning_mutex_);
      // The failures held back are not told apart: the next line counts them all.
      static_cast<void>(self->commit_warnings_.take_held(now));
      if (!self->commit_warnings_.admit(now)) return;
    }
    log()->warn(
        "committing the input offsets failed: {} ({}); the commit is retried every "
        "auto.commit.interval.ms, and should sketchd stop before one succeeds, the messages "
        "since the last commit are read again ({} failed commit(s) so far)",
        rd_kafka_err2str(why), rd_kafka_err2name(why), failures);
  }

  // The group's join, as the requests to its coordinator show it: from a JoinGroup sent to
  // the SyncGroup's answer, the member's generation is in flux, and a commit sent meanwhile
  // may carry the generation before it: the coordinator then answers ILLEGAL_GENERATION,
  // and librdkafka takes the assignment for lost. librdkafka's own commits are not sent
  // then (it checks its join state, which it does not expose); sketchd's wait too.
  static rd_kafka_resp_err_t on_new(rd_kafka_t* rk, const rd_kafka_conf_t*, void* opaque, char*,
                                    std::size_t) {
    rd_kafka_interceptor_add_on_request_sent(rk, "sketchd-group-join", &request_sent, opaque);
    rd_kafka_interceptor_add_on_response_received(rk, "sketchd-group-join", &response_received,
                                                  opaque);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }
  static constexpr std::int16_t kJoinGroup = 11;  // Kafka's API keys
  static constexpr std::int16_t kSyncGroup = 14;
  static rd_kafka_resp_err_t request_sent(rd_kafka_t*, int, const char*, std::int32_t,
                                          std::int16_t api_key, std::int16_t, std::int32_t,
                                          std::size_t, void* opaque) {
    if (api_key == kJoinGroup) *static_cast<std::atomic<bool>*>(opaque) = true;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }
  static rd_kafka_resp_err_t response_received(rd_kafka_t*, int, const char*, std::int32_t,
                                               std::int16_t api_key, std::int16_t, std::int32_t,
                                               std::size_t, std::int64_t, rd_kafka_resp_err_t,
                                               void* opaque) {
    if (api_key == kSyncGroup) *static_cast<std::atomic<bool>*>(opaque) = false;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }

  static int stats(rd_kafka_t*, char* json, std::size_t json_len, void* opaque) {
    static_cast<source*>(opaque)->take_statistics(std::string_view(json, json_len));
    return 0;  // librdkafka frees the JSON
  }
};

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
  if (const auto interval = options_.properties.find("auto.commit.interval.ms");
      interval != options_.properties.end()) {
    // librdkafka has checked it: an integer of 0 to 86,400,000 (0 is refused by sketchd).
    commit_interval_ = std::chrono::milliseconds(std::stoll(interval->second));
  }
  conf.set("bootstrap.servers", options_.bootstrap_servers);
  conf.set("group.id", options_.group_id);
  rd_kafka_conf_set_rebalance_cb(conf.get(), &callbacks::rebalance);
  rd_kafka_conf_set_error_cb(conf.get(), &callbacks::error);
  rd_kafka_conf_set_stats_cb(conf.get(), &callbacks::stats);
  rd_kafka_conf_set_offset_commit_cb(conf.get(), &callbacks::offset_commit);
  throw_if_error(rd_kafka_conf_interceptor_add_on_new(conf.get(), "sketchd-group-join",
                                                      &callbacks::on_new, joining_.get()),
                 "adding an interceptor");
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
  // librdkafka runs the callbacks inside the poller's polls only: both exist before it starts.
  read_ahead_ = std::make_unique<read_ahead>(
      consumer_.get(), options_, [this] { set_fatal(fatal_error_text(consumer_.get())); });
  rebalance_ = std::make_unique<rebalance_handler>(
      consumer_.get(), options_.topics, from_earliest_, *read_ahead_, [this] {
        std::map<std::string, std::string> properties = options_.properties;
        properties["group.id"] = options_.group_id;
        return std::make_unique<time_lookup>(options_.bootstrap_servers, properties);
      });
  rebalance_->hooks().revocation_commit = [this](std::span<const topic_partition> revoked,
                                                 bool closing) {
    // At the close, only what was stored since its commit.
    rd_kafka_topic_partition_list_t* list = commit_list(/*only_changed=*/closing);
    const std::lock_guard lock(stored_mutex_);
    for (const topic_partition& tp : revoked) stored_.erase({tp.topic_index, tp.partition});
    return list;
  };
  last_commit_ = std::chrono::steady_clock::now();
  read_ahead_->start();
}

source::~source() {
  try {
    close();
  } catch (const std::exception& e) {
    log()->error("closing the consumer: {}", e.what());
  }
}

void source::on_revoke(std::function<void(std::span<const topic_partition>)> hook) {
  rebalance_->hooks().on_revoke = std::move(hook);
}
void source::on_assign(std::function<std::optional<std::int64_t>(const topic_partition&)> hook) {
  rebalance_->hooks().on_assign = std::move(hook);
}
void source::on_assignment(std::function<void()> hook) {
  rebalance_->hooks().on_assignment = std::move(hook);
}
void source::on_assigned(std::function<void()> hook) {
  rebalance_->hooks().on_assigned = std::move(hook);
}
void source::on_assignment_prepare(std::function<void(std::span<const topic_partition>)> hook) {
  rebalance_->hooks().on_assignment_prepare = std::move(hook);
}
void source::on_partition_counts(std::function<void(std::span<const std::uint32_t>)> hook) {
  rebalance_->hooks().on_partition_counts = std::move(hook);
}
void source::on_start_behind_commit(
    std::function<bool(const topic_partition&, std::int64_t, std::int64_t)> hook) {
  rebalance_->hooks().on_start_behind_commit = std::move(hook);
}
void source::on_start_known(std::function<void(const topic_partition&, std::int64_t)> hook) {
  rebalance_->hooks().on_start_known = std::move(hook);
}
void source::on_fill_since(
    std::function<std::optional<std::int64_t>(const topic_partition&)> hook) {
  rebalance_->hooks().on_fill_since = std::move(hook);
}
void source::on_filled(std::function<void(const topic_partition&, const fill_outcome&)> hook) {
  rebalance_->hooks().on_filled = std::move(hook);
}

void source::on_commit(std::function<void(std::span<commit_offset>)> hook) {
  commit_hook_ = std::move(hook);
}
void source::on_taken_over(std::function<void(std::span<const committed_metadata>)> hook) {
  rebalance_->hooks().on_taken_over = std::move(hook);
}

std::span<const record> source::poll_batch() {
  if (closed_) return {};
  commit_when_due();
  return read_ahead_->take(std::chrono::milliseconds(options_.poll_timeout_ms));
}

rd_kafka_topic_partition_list_t* source::commit_list(bool only_changed) {
  std::vector<commit_offset> offsets;
  {
    const std::lock_guard lock(stored_mutex_);
    if (only_changed && !stored_changed_) return nullptr;
    for (const auto& [tp, offset] : stored_) offsets.push_back({tp.first, tp.second, offset, {}});
    stored_changed_ = false;
  }
  if (offsets.empty()) return nullptr;
  if (commit_hook_ && !metadata_refused_) commit_hook_(offsets);
  rd_kafka_topic_partition_list_t* list =
      rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size()));
  for (const commit_offset& o : offsets) {
    rd_kafka_topic_partition_t* tp = rd_kafka_topic_partition_list_add(
        list, options_.topics[o.topic_index].c_str(), o.partition);
    tp->offset = o.next_offset;
    if (!o.metadata.empty()) {
      // librdkafka frees it with the list.
      tp->metadata = std::malloc(o.metadata.size());
      if (tp->metadata == nullptr) {
        rd_kafka_topic_partition_list_destroy(list);
        throw std::bad_alloc();
      }
      std::memcpy(tp->metadata, o.metadata.data(), o.metadata.size());
      tp->metadata_size = o.metadata.size();
    }
  }
  return list;
}

void source::commit_when_due() {
  const auto now = std::chrono::steady_clock::now();
  // Not while the group's generation is in flux, nor over a commit still unanswered: then at
  // the next batch.
  if (now - last_commit_ < commit_interval_ || *joining_ || commit_in_flight_) return;
  last_commit_ = now;
  {
    // Every stored offset is committed again (its metadata may have moved) when one has
    // changed, or the last commit failed.
    const std::lock_guard lock(stored_mutex_);
    if (!stored_changed_ && !commit_failed_) return;
  }
  commit_failed_ = false;
  const topic_partition_list_ptr list(commit_list(/*only_changed=*/false));
  if (!list) return;
  // Asynchronous: the result goes to callbacks::offset_commit, on the poller.
  commit_in_flight_ = true;
  if (const rd_kafka_resp_err_t err = rd_kafka_commit(consumer_.get(), list.get(), 1)) {
    commit_in_flight_ = false;
    commit_failed_ = true;
    log()->debug("commit not sent: {}", rd_kafka_err2str(err));
  }
}

void source::store_offsets(std::span<const partition_offset> offsets) {
  // While close() runs, the revocations it serves still store what their flush delivered:
  // the commit of the revocation takes them along.
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
  // Stored there too, they show in librdkafka's statistics (uncommitted messages).
  const rd_kafka_resp_err_t err = rd_kafka_offsets_store(consumer_.get(), list.get());
  const std::lock_guard lock(stored_mutex_);
  for (int i = 0; i < list->cnt; ++i) {
    const auto& tp = list->elems[i];
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || tp.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const partition_offset& o = offsets[static_cast<std::size_t>(i)];
      stored_[{o.topic_index, o.partition}] = o.next_offset;
      stored_changed_ = true;
    } else {
      // _STATE: the partition was revoked meanwhile; its new owner reads it again.
      log()->debug("offset not stored [topic {}, partition {}, offset {}]: {}", tp.topic,
                   tp.partition, tp.offset, rd_kafka_err2str(tp.err));
    }
  }
}

void source::pause() {
  if (closed_) return;
  rebalance_->pause();
}

bool source::paused() const noexcept { return rebalance_->paused(); }

void source::hold() {
  if (closed_) return;
  rebalance_->hold();
}

void source::release() { rebalance_->release(/*resume=*/!closed_); }

bool source::held() const noexcept { return read_ahead_->held(); }

void source::close() {
  if (closed_ || !consumer_) return;
  closed_ = true;
  read_ahead_->stop();
  rebalance_->set_closing();
  // Each step is bounded: with the coordinator unreachable, librdkafka's synchronous commit
  // and close wait for its own timeouts, a minute and more. What is not committed is read
  // again after a restart (at-least-once).
  rd_kafka_t* rk = consumer_.get();
  const topic_partition_list_ptr final_offsets(commit_list(/*only_changed=*/false));
  commit_final(rk, final_offsets.get(), *rebalance_);
  // Leaving the group: rebalance callbacks during the close run here, on the owner's thread.
  const queue_ptr close_queue(rd_kafka_queue_new(rk));
  if (const error_ptr e{rd_kafka_consumer_close_queue(rk, close_queue.get())}) {
    log()->warn("closing the consumer: {}", rd_kafka_error_string(e.get()));
  } else {
    wait_for_event(
        close_queue.get(), RD_KAFKA_EVENT_NONE, [rk] { return rd_kafka_consumer_closed(rk) == 1; },
        *rebalance_);
  }
  const bool left = rd_kafka_consumer_closed(rk) == 1;
  if (!left) {
    log()->warn(
        "leaving the group: no answer within {} s; the group rebalances once session.timeout.ms "
        "has passed",
        kCloseStepWait.count());
  }
  log_held_back_lines();  // the poller, which told them, is gone
  if (!rebalance_->assigned_once() || !left || rebalance_->call_abandoned()) {
    // Three cases where rd_kafka_destroy() must not run: librdkafka 2.0 fails an assertion
    // (abort) for a consumer that joined a cooperative group but was never assigned (its
    // issue 4312, fixed in 2.3); destroying a consumer that has not left its group waits
    // for the group, unbounded; and a thread of the close may still wait inside librdkafka
    // (rebalance_handler::call_abandoned()). The handle is kept until the process exits
    // instead: nothing is left to commit.
    // Never destroyed, so the handles stay reachable (for leak checkers) to the end.
    // Silenced: whatever it meets from now on (brokers gone away, an embedded cluster
    // destroyed before the process exits) is no news to anyone.
    rd_kafka_set_log_level(rk, 0);
    static auto* const kept_mutex = new std::mutex;
    // The interceptors' flag is kept with it: its broker threads may still answer a join.
    static auto* const kept = new std::vector<std::pair<rd_kafka_t*, std::shared_ptr<void>>>;
    const std::lock_guard lock(*kept_mutex);
    kept->emplace_back(consumer_.release(), joining_);
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

std::uint64_t source::consume_errors() const noexcept { return read_ahead_->consume_errors(); }

std::size_t source::assigned_partitions() const noexcept { return rebalance_->assigned(); }

bool source::assigned_once() const noexcept { return rebalance_->assigned_once(); }

std::optional<std::string> source::fatal_error() const {
  std::lock_guard lock(mutex_);
  return fatal_;
}

void source::set_fatal(std::string text) {
  std::lock_guard lock(mutex_);
  if (!fatal_) fatal_ = std::move(text);  // the first one: librdkafka raises only one
}

void source::take_statistics(std::string_view json) {
  const std::optional<consumer_statistics> stats = parse_statistics(
      json, from_earliest_, [this](std::string_view topic, std::int32_t partition) {
        return rebalance_->committed_at_assignment(topic, partition);
      });
  if (!stats) return;
  if (stats->brokers_up) {
    const int up = *stats->brokers_up;
    if (const auto outage = broker_outage_.update(up, std::chrono::steady_clock::now())) {
      log()->info("{} broker(s) of the input cluster reachable again, after about {} s with none",
                  up, std::chrono::duration_cast<std::chrono::seconds>(*outage).count());
    }
    brokers_up_ = up;  // after the line: a reader of the gauge finds it logged
  }
  if (!stats->partitions) return;
  std::vector<partition_lag> lag;
  for (const partition_statistics& p : *stats->partitions) {
    if (p.consumer_lag) lag.push_back({p.topic, p.partition, *p.consumer_lag});
  }
  uncommitted_ = stats->uncommitted_messages();
  std::lock_guard lock(mutex_);
  lag_ = std::move(lag);
}

}  // namespace sketchd::kafka
