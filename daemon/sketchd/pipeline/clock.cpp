#include "sketchd/pipeline/clock.h"

namespace sketchd {

std::int64_t pipeline_clock::end_batch(std::int64_t wall_ms) noexcept {
  // Slide the windows even when no message came: on the wall clock, or for an idle
  // event-time stream by the wall time elapsed since its last event. An event-time clock
  // that no item has moved in this run holds still: the first batches of a run are often
  // empty (the group is being joined) while a backlog waits, whose items must land in the
  // slices of their own times, not all in one slice opened at the wall time.
  // A restored clock holds still for kHoldStillMs at most: a stream that stays idle after a
  // restart slides its windows from the snapshot's time on, and its heavy hitters expire.
  if (kind_ == clock_kind::event && !live_ && clock_ms_ > 0) {
    if (held_since_wall_ms_ == 0 && !await_assignment_) held_since_wall_ms_ = wall_ms;
    if (held_since_wall_ms_ != 0 && wall_ms - held_since_wall_ms_ >= kHoldStillMs) live_ = true;
  }
  std::int64_t now = wall_ms;
  if (kind_ == clock_kind::event) {
    now = live_ ? clock_ms_ + std::max<std::int64_t>(0, wall_ms - clock_wall_ms_) : clock_ms_;
  }
  if (now <= 0) return 0;  // an event clock that has seen nothing yet
  advanced_ms_ = std::max(advanced_ms_, now);
  if (takeover_pending_ && (kind_ == clock_kind::wall || live_)) {
    takeover_pending_ = false;
    // A window, and a slice more: a backlog read after the take-over (what the member that
    // left had counted since its last commit) lands in the current slice and later ones,
    // and distorts the shares until that slice has left the window.
    incomplete_until_ms_ = std::max(incomplete_until_ms_, advanced_ms_ + takeover_ms_);
  }
  return now;
}

}  // namespace sketchd
