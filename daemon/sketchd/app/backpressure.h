// Output backpressure: how long the processing thread waits on the outputs, and when it
// holds the input meanwhile.
//
// A batch waits while the producer's queue is full (the processor calls its give-up check
// every 10 ms then: waiting on the output cluster is not a stall), and a snapshot waits for
// the outputs in flight. Once the processing thread has waited kHoldAfter without a break,
// the input is held (kafka::source::hold) until the batch (or the snapshot) is done, so
// that the consumer stays in its group and its statistics current however long the outputs
// take. Waits shorter than that, as under an output merely slower than the input, hold
// nothing: a hold drops librdkafka's read-ahead, fetched again after.
//
// A stop request does not give up on a full queue at once: the batch in hand goes on being
// queued for kQueueGrace, so that a stop while the output is merely slow (the queue full,
// the brokers answering) still delivers the batch and writes the final snapshot, within the
// stop's kFinalWait (counted from when the processing thread sees the request, within a
// batch of the signal); only outputs that cannot be queued by then are left to the restart.
#pragma once

#include <chrono>
#include <optional>

namespace sketchd::app {

// Pure: every decision takes the time it is made at. Not thread-safe; the processing
// thread's.
class backpressure {
 public:
  using clock = std::chrono::steady_clock;

  static constexpr std::chrono::seconds kQueueGrace{5};
  static constexpr std::chrono::seconds kFinalWait{10};
  static constexpr std::chrono::seconds kHoldAfter{1};
  // The queue-full wait calls its give-up test every 10 ms: a longer gap ends a wait.
  static constexpr std::chrono::milliseconds kWaitGap{100};

  // A wait on the full queue at `now`. True when the waits have gone on without a gap
  // longer than kWaitGap for kHoldAfter or more: the input is to be held.
  [[nodiscard]] bool queue_full_wait(clock::time_point now);

  // Whether to give up queueing the batch in hand at `now`: only once a stop has been
  // requested and kQueueGrace has passed since the processing thread first saw it.
  [[nodiscard]] bool give_up(clock::time_point now, bool stop_requested);

  // The stop is seen at `now`, unless it was already (by give_up()).
  void stop_seen(clock::time_point now);

  // What is left of the stop's kFinalWait at `now`, at least a second: the final
  // snapshot's (or final flush's) wait for the outputs.
  [[nodiscard]] std::chrono::milliseconds final_wait(clock::time_point now) const;

  // A snapshot that started at `start` has waited for the outputs long enough at `now` to
  // hold the input.
  [[nodiscard]] static bool snapshot_holds(clock::time_point start, clock::time_point now) {
    return now - start >= kHoldAfter;
  }

 private:
  std::optional<clock::time_point> stop_seen_;
  std::optional<clock::time_point> waiting_since_;
  clock::time_point last_waited_{};
};

}  // namespace sketchd::app
