// The wall clock as the daemon's loop and snapshots read it.
#pragma once

#include <chrono>
#include <cstdint>

namespace sketchd::app {

// Milliseconds since the Unix epoch, by the system clock.
[[nodiscard]] inline std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace sketchd::app
