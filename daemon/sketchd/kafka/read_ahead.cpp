#include "sketchd/kafka/read_ahead.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "sketchd/kafka/client.h"
#include "sketchd/util/logging.h"

namespace sketchd::kafka {

namespace {

std::shared_ptr<spdlog::logger> log() { return module_logger("kafka"); }

// True on a source's poller thread (the thread librdkafka runs the callbacks on, except
// during close(), when the owner's thread serves them).
thread_local bool on_poller_thread = false;

}  // namespace

read_ahead::read_ahead(rd_kafka_t* consumer, const source_options& options,
                       std::function<void()> on_fatal)
    : consumer_(consumer),
      topics_(options.topics),
      batch_size_(options.batch_size),
      batch_bytes_(options.batch_bytes),
      // Short waits, so that close() is not held up by an idle topic.
      wait_ms_(std::min(options.poll_timeout_ms, 100)),
      on_fatal_(std::move(on_fatal)) {
  for (auto* b : {&filling_, &ready_, &current_}) {
    *b = std::make_unique<batch>();
    (*b)->messages.reserve(batch_size_);
    (*b)->records.reserve(batch_size_);
  }
}

read_ahead::~read_ahead() { stop(); }

void read_ahead::start() {
  poller_ = std::thread([this] { poll_loop(); });
}

void read_ahead::batch::release() noexcept {
  for (rd_kafka_message_t* m : messages) rd_kafka_message_destroy(m);
  messages.clear();
  records.clear();
}

void read_ahead::batch::drop(std::span<const topic_partition> revoked) noexcept {
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

void read_ahead::drop(std::span<const topic_partition> revoked) noexcept {
  filling_->drop(revoked);
  const std::lock_guard lock(queue_mutex_);
  if (ready_full_) ready_->drop(revoked);
}

std::size_t read_ahead::topic_index(const rd_kafka_message_t* m) {
  for (const auto& [rkt, index] : topic_cache_) {
    if (rkt == m->rkt) return index;
  }
  const std::string_view name = rd_kafka_topic_name(m->rkt);
  std::size_t index = 0;
  while (index < topics_.size() && topics_[index] != name) ++index;
  topic_cache_.emplace_back(m->rkt, index);
  return index;
}

void read_ahead::take_message(rd_kafka_message_t* m, batch& b, std::size_t& bytes) {
  if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
    // A consumer in a group (a static member fenced by another with its
    // group.instance.id, say) receives its fatal error here, never through the error
    // callback: librdkafka hands it to whoever polls.
    on_fatal_();
    rd_kafka_message_destroy(m);
    return;
  }
  if (m->err) {
    if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      message_errors_.fetch_add(1, std::memory_order_relaxed);
      std::string line = fmt::format("consume error{}: {}",
                                     m->rkt ? fmt::format(" [topic {}, partition {}]",
                                                          rd_kafka_topic_name(m->rkt), m->partition)
                                            : std::string(),
                                     rd_kafka_message_errstr(m));
      const auto now = std::chrono::steady_clock::now();
      if (message_error_lines_.admit(now, line)) {
        log()->warn("{}", line);
      } else {
        tell_held_message_errors(now);
      }
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
  r.view = view_of(m);
  r.native = m;
  b.records.push_back(r);
}

void read_ahead::tell_held_message_errors(std::chrono::steady_clock::time_point now) {
  const auto held = message_error_lines_.take_held(now);
  if (!held) return;
  log()->warn("{} more such error(s) in the last {} s, the last one: {}", held->count,
              std::chrono::duration_cast<std::chrono::seconds>(held->over).count(), held->last);
  // This line is its interval's one: an error that follows within 10 s waits for the next.
  static_cast<void>(message_error_lines_.admit(now));
}

void read_ahead::housekeeping() {
  const auto now = std::chrono::steady_clock::now();
  tell_held_message_errors(now);
  if (now >= next_held_lines_) {
    log_held_back_lines();
    next_held_lines_ = now + std::chrono::seconds(1);
  }
}

void read_ahead::fill(batch& b, std::size_t& bytes) {
  int timeout = wait_ms_;
  while (b.messages.size() < batch_size_ && bytes < batch_bytes_) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_, timeout);
    if (m == nullptr) break;
    timeout = 0;  // after the first message, only what is already there
    take_message(m, b, bytes);
  }
}

bool read_ahead::wait_for_room(std::unique_lock<std::mutex>& lock, batch& b, std::size_t& bytes) {
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
      if (rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_, wait_ms_))
        take_message(m, b, bytes);
      lock.lock();
      continue;
    }
    queue_cv_.wait(lock, [this] { return !ready_full_ || stopping_ || held_; });
  }
  return !stopping_;
}

void read_ahead::poll_loop() {
  on_poller_thread = true;
  // Named for `top -H` and the benchmark harness, which reads its CPU time.
  pthread_setname_np(pthread_self(), "sketchd-poll");
  next_held_lines_ = std::chrono::steady_clock::now();
  for (;;) {
    {
      const std::lock_guard lock(queue_mutex_);
      if (stopping_) break;
    }
    housekeeping();
    batch& b = *filling_;
    std::size_t bytes = 0;
    fill(b, bytes);
    if (b.messages.empty()) continue;
    std::unique_lock lock(queue_mutex_);
    if (!wait_for_room(lock, b, bytes)) break;
    std::swap(ready_, filling_);
    ready_full_ = true;
    lock.unlock();
    queue_cv_.notify_all();
    // The batch that comes back is the one the processing thread finished with (or an empty
    // one): its messages are freed here, off the processing thread.
    filling_->release();
  }
  const std::lock_guard lock(queue_mutex_);
  poller_done_ = true;
  queue_cv_.notify_all();
}

void read_ahead::run_on_owner(const std::function<void()>& task) {
  if (!on_poller_thread) {
    task();
    return;
  }
  owner_task request{&task};
  std::unique_lock lock(queue_mutex_);
  pending_ = &request;
  queue_cv_.notify_all();
  queue_cv_.wait(lock, [&request] { return request.done; });
}

void read_ahead::serve_pending(std::unique_lock<std::mutex>& lock) {
  owner_task* task = pending_;
  pending_ = nullptr;
  lock.unlock();
  // The poller waits for `done` whatever happens: a task that throws must not leave it
  // (and close()) waiting forever.
  struct release_poller {
    read_ahead& self;
    std::unique_lock<std::mutex>& lock;
    owner_task& task;
    ~release_poller() {
      if (!lock.owns_lock()) lock.lock();
      task.done = true;
      self.queue_cv_.notify_all();
    }
  } release{*this, lock, *task};
  (*task->run)();
}

std::span<const record> read_ahead::take(std::chrono::milliseconds timeout) {
  // The batch processed last goes back to the poller with the next swap, which frees it.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
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

void read_ahead::set_held(bool held) {
  held_ = held;
  if (!held) return;
  // Set under the poller's lock too, so that its wait sees it.
  { const std::lock_guard lock(queue_mutex_); }
  queue_cv_.notify_all();
}

void read_ahead::stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    // The poller may be inside a rebalance, waiting for its hooks: serve them until it stops.
    std::unique_lock lock(queue_mutex_);
    stopping_ = true;
    queue_cv_.notify_all();
    while (poller_.joinable() && !poller_done_) {
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
}

}  // namespace sketchd::kafka
