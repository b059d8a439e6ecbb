// The clock of a pipeline: the time its windows are at, on the wall clock or on the event
// clock (message timestamps), and what follows from it between batches (a restored clock
// holding still, partitions taken over leaving the heavy-hitter window incomplete).
#pragma once

#include <algorithm>
#include <cstdint>

#include "sketchd/config/config.h"

namespace sketchd {

// Times in ms since the epoch. The wall time of each call is given (`wall_ms`), never
// read: the clock is a pure function of what it is told, and a test replays any sequence.
// Not thread-safe: one owner (the pipeline, under its lock).
class pipeline_clock {
 public:
  // Events whose timestamp is further than this ahead of the wall clock do not move the
  // clock (they count at its current time), so one producer with a wrong clock cannot push
  // the window into the future.
  static constexpr std::int64_t kMaxClockSkewMs = 60'000;
  // How long an event-time clock restored from a snapshot holds still when no item comes:
  // past it, the stream is taken as idle and its windows slide from the snapshot's time
  // (the downtime counts), as if sketchd had been running without input.
  static constexpr std::int64_t kHoldStillMs = 60'000;

  // `takeover_ms`: how long after take_over() the heavy-hitter window stays incomplete on
  // this clock (a window and a slice), or 0 without heavy hitters.
  pipeline_clock(clock_kind kind, std::int64_t takeover_ms) noexcept
      : kind_(kind), takeover_ms_(takeover_ms) {}

  // The time an item with timestamp `event_ms` (≤ 0 when it has none) counts at, read at
  // `wall_ms`; moves the clock. On the per-message path: no allocation, no exception.
  [[nodiscard]] std::int64_t time_of(std::int64_t event_ms, std::int64_t wall_ms) noexcept {
    std::int64_t t = wall_ms;
    if (kind_ == clock_kind::event) {
      // A message without a timestamp, or with one further ahead of the wall clock than
      // kMaxClockSkewMs (a producer with a wrong clock), counts at the pipeline's current
      // time: its last event time plus the wall time since (the wall time before any), as an
      // idle stream slides. Taking the wall time (or the cap) would jump the clock from a
      // backlog's time to now, and expire every slice and generation at once. It does not
      // move the clock's reference, so that a stream of such messages still slides its
      // windows by the wall time.
      const bool usable = event_ms > 0 && event_ms <= wall_ms + kMaxClockSkewMs;
      if (!usable && clock_ms_ > 0) {
        if (!live_) {
          clock_wall_ms_ = wall_ms;
          live_ = true;
        }
        return clock_ms_ + std::max<std::int64_t>(0, wall_ms - clock_wall_ms_);
      }
      if (usable) t = event_ms;
    }
    // A late message (older than the clock) counts at the clock's time, in the current slice
    // and generation, as it would anyway: passing its own time would also date a generation
    // its insert fills back to that time, so that the next one rotated out early and the
    // dedup horizon shrank.
    if (t < clock_ms_) {
      if (!live_) {
        // The first item of the run is older than the restored clock (read again since the
        // snapshot): the clock stays, and an idle stream slides it from now on.
        clock_wall_ms_ = wall_ms;
        live_ = true;
      }
      return clock_ms_;
    }
    clock_ms_ = t;
    clock_wall_ms_ = wall_ms;
    live_ = true;
    return t;
  }

  // The end of a batch at `wall_ms`: the time to slide the windows to, or 0 when they hold
  // still (an event clock that has seen nothing). On the wall clock, `wall_ms`; on the event
  // clock, the latest event time plus the wall time elapsed since it was seen (an idle
  // stream), once an item has been seen since the start or the restore (before that the
  // windows hold still; a restored clock for kHoldStillMs at most, counted from the first
  // batch after input_assigned() when hold_until_assigned() was called).
  [[nodiscard]] std::int64_t end_batch(std::int64_t wall_ms) noexcept;

  // For a pipeline fed by a consumer group: kHoldStillMs counts from input_assigned() on,
  // not from the first batch. After a crash the group can take longer than that to hand the
  // partitions back (the dead member's session timeout, 45 s by default, then the
  // rebalance), and the backlog must still find the windows where the snapshot left them.
  void hold_until_assigned() noexcept { await_assignment_ = true; }
  void input_assigned() noexcept { await_assignment_ = false; }
  // Partitions whose earlier items the heavy-hitter window has not counted were assigned:
  // the window is incomplete until takeover_ms have passed on this clock from the next
  // end_batch() that moves it.
  void take_over() noexcept { takeover_pending_ = true; }

  // Back to a saved clock (time_ms() and wall_ms() of another run); `advanced_ms` is the
  // time the windows had been slid to (the newest generation may have been slid past the
  // last item by an idle stream). It holds still until an item comes (or kHoldStillMs).
  void restore(std::int64_t clock_ms, std::int64_t clock_wall_ms,
               std::int64_t advanced_ms) noexcept {
    clock_ms_ = clock_ms;
    clock_wall_ms_ = clock_wall_ms;
    live_ = false;  // the wall time of another run (see end_batch())
    held_since_wall_ms_ = 0;
    advanced_ms_ = advanced_ms;
  }

  // The newest time the windows have seen: the latest event time (on the wall clock, the
  // latest wall time of an item), 0 before any.
  [[nodiscard]] std::int64_t time_ms() const noexcept { return clock_ms_; }
  // The wall time when time_ms() was seen (saved with it).
  [[nodiscard]] std::int64_t wall_ms() const noexcept { return clock_wall_ms_; }
  // "Now" for the gauges that depend on it: the newest of time_ms() and the time the windows
  // were last slid to.
  [[nodiscard]] std::int64_t now_ms() const noexcept { return std::max(clock_ms_, advanced_ms_); }
  // How long (ms on this clock) the heavy-hitter window stays incomplete after take_over():
  // takeover_ms while pending, then what is left of it, 0 when whole.
  [[nodiscard]] std::int64_t incomplete_ms() const noexcept {
    if (takeover_pending_) return takeover_ms_;
    return std::max<std::int64_t>(0, incomplete_until_ms_ - now_ms());
  }

 private:
  clock_kind kind_;
  std::int64_t takeover_ms_;
  // The latest time seen, and the wall time when it was seen, so that an idle event-time
  // stream still slides its windows. clock_wall_ms_ is of this run only once an item has
  // come since the start or the restore (live_): until then an event-time clock holds
  // still, so that a backlog (messages produced while sketchd was down or before it
  // started) is counted at its own times, not at the time the first empty batch came.
  std::int64_t clock_ms_ = 0;
  std::int64_t clock_wall_ms_ = 0;
  bool live_ = false;
  std::int64_t held_since_wall_ms_ = 0;  // wall time of the first batch held still, or 0
  bool await_assignment_ = false;        // see hold_until_assigned()
  // take_over(): pending until a batch moves the clock (an event clock that has seen
  // nothing has no time yet), then the clock time at which the window is whole again.
  bool takeover_pending_ = false;
  std::int64_t incomplete_until_ms_ = 0;
  // The time the windows were last slid to (end_batch()).
  std::int64_t advanced_ms_ = 0;
};

}  // namespace sketchd
