// The source's read-ahead (see sketchd/kafka/source.h): a poller thread reads the next
// batch from librdkafka while the owner processes the current one, and frees the messages
// of the batch the owner hands back. The rebalance callbacks that librdkafka runs on the
// poller thread reach the owner's thread through run_on_owner().
#pragma once

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sketchd/kafka/source.h"
#include "sketchd/util/rate_limit.h"

namespace sketchd::kafka {

// Thread safety: take() is the owner's; drop() the poller's (a rebalance callback), or
// anyone's once stop() has returned; run_on_owner() and set_held() any thread's;
// consume_errors() and held() any thread's.
class read_ahead {
 public:
  // Reads from `consumer` (which outlives this object) in batches of `options`, waiting
  // poll_timeout_ms for a message at most, and 100 ms (so that stop() is not held up by an
  // idle topic); `on_fatal` is called on the poller thread when a message carries
  // librdkafka's fatal error. The poller starts with start().
  read_ahead(rd_kafka_t* consumer, const source_options& options, std::function<void()> on_fatal);
  // Stops the poller if stop() was not called.
  ~read_ahead();
  read_ahead(const read_ahead&) = delete;
  read_ahead& operator=(const read_ahead&) = delete;

  // Starts the poller thread; once.
  void start();

  // Hands the previous batch back to the poller, which frees its messages, and waits up to
  // `timeout` for the next one (what librdkafka had, up to batch_size, from the first
  // message on). Runs the tasks the poller posts with run_on_owner() meanwhile, and lets a
  // task's exception through. Empty once the poller has stopped.
  [[nodiscard]] std::span<const record> take(std::chrono::milliseconds timeout);

  // Drops the messages of `revoked` from the batches not handed over yet: the partitions'
  // new owner reads them.
  void drop(std::span<const topic_partition> revoked) noexcept;

  // Runs `task` on the owner's thread: at once when called off the poller thread
  // (close()), else posted to take() (or stop()) and waited for.
  void run_on_owner(const std::function<void()>& task);

  // The owner waits on the outputs (source::hold()): the poller polls on with no room for
  // its batch, so that the group keeps this member and the statistics stay current.
  // set_held(true) wakes the poller up.
  void set_held(bool held);
  [[nodiscard]] bool held() const noexcept { return held_; }

  // Stops the poller, running its posted tasks meanwhile (a task's exception is logged),
  // and frees every batch: the unprocessed read-ahead is dropped, its offsets never
  // stored. Owner's thread; idempotent.
  void stop();

  // Errors librdkafka reported in place of a message, each logged at a rate limit and
  // skipped.
  [[nodiscard]] std::uint64_t consume_errors() const noexcept {
    return message_errors_.load(std::memory_order_relaxed);
  }

 private:
  // The messages of one batch and their records (records[i] views messages[i]).
  struct batch {
    std::vector<rd_kafka_message_t*> messages;
    std::vector<record> records;
    void release() noexcept;
    void drop(std::span<const topic_partition> revoked) noexcept;
  };
  // A task posted by run_on_owner().
  struct owner_task {
    const std::function<void()>* run = nullptr;
    bool done = false;
  };

  void poll_loop();
  // Fills `b` from librdkafka: up to batch_size messages or batch_bytes bytes.
  void fill(batch& b, std::size_t& bytes);
  // Waits for the owner to take the ready batch, polling on while held; false when
  // stopping.
  bool wait_for_room(std::unique_lock<std::mutex>& lock, batch& b, std::size_t& bytes);
  // One message of rd_kafka_consumer_poll into `b` (its size added to `bytes`), or its
  // error logged and the message dropped.
  void take_message(rd_kafka_message_t* m, batch& b, std::size_t& bytes);
  // Logs the consume errors held back, once their interval has passed.
  void tell_held_message_errors(std::chrono::steady_clock::time_point now);
  // The rate-limited lines' turn, on every turn of the poll loop.
  void housekeeping();
  void serve_pending(std::unique_lock<std::mutex>& lock);
  std::size_t topic_index(const rd_kafka_message_t* m);

  rd_kafka_t* consumer_;
  const std::vector<std::string>& topics_;
  std::uint32_t batch_size_;
  std::size_t batch_bytes_;
  int wait_ms_;
  std::function<void()> on_fatal_;
  std::atomic<bool> held_{false};

  // filling_ belongs to the poller; current_ to the owner; ready_, the flags and pending_
  // are guarded by queue_mutex_.
  std::unique_ptr<batch> filling_;
  std::unique_ptr<batch> ready_;
  std::unique_ptr<batch> current_;
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  bool ready_full_ = false;
  bool stopping_ = false;
  bool poller_done_ = false;
  bool stopped_ = false;  // owner only
  owner_task* pending_ = nullptr;

  // The poller's own.
  std::vector<std::pair<const void*, std::size_t>> topic_cache_;  // rkt → topic index
  // At most one line every 10 s about the errors of consumed messages: the first at once;
  // those after it are counted and reported, with the last of them, once 10 s have passed
  // since the line before (on every turn of the poll loop, so that a burst of errors
  // followed by silence is reported too).
  log_rate_limit message_error_lines_{std::chrono::seconds(10)};
  std::chrono::steady_clock::time_point next_held_lines_{};

  std::atomic<std::uint64_t> message_errors_{0};  // written by the poller
  std::thread poller_;
};

}  // namespace sketchd::kafka
