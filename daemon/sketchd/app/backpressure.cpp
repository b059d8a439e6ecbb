#include "sketchd/app/backpressure.h"

#include <algorithm>

namespace sketchd::app {

bool backpressure::queue_full_wait(clock::time_point now) {
  if (!waiting_since_ || now - last_waited_ > kWaitGap) waiting_since_ = now;
  last_waited_ = now;
  return now - *waiting_since_ >= kHoldAfter;
}

bool backpressure::give_up(clock::time_point now, bool stop_requested) {
  if (!stop_requested) return false;
  if (!stop_seen_) stop_seen_ = now;
  return now - *stop_seen_ >= kQueueGrace;
}

void backpressure::stop_seen(clock::time_point now) {
  if (!stop_seen_) stop_seen_ = now;
}

std::chrono::milliseconds backpressure::final_wait(clock::time_point now) const {
  const clock::time_point seen = stop_seen_.value_or(now);
  return std::max<std::chrono::milliseconds>(
      std::chrono::seconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(seen + kFinalWait - now));
}

}  // namespace sketchd::app
