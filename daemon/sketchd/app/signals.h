// The stop signals: SIGINT, SIGTERM and SIGHUP, taken by a thread of their own that only
// sets flags (and logs), which the processing loop reads.
#pragma once

#include <atomic>

namespace spdlog {
class logger;
}

namespace sketchd::app {

// SIGINT, SIGTERM and SIGHUP are blocked in every thread (call this before any thread
// starts: threads inherit the mask) and taken by a thread of their own with sigwait(),
// which may log. The first asks for a clean stop (stop_flag()). A second, while the stop
// runs, is answered with what a third would do; the third exits at once with status 1,
// without finishing the stop: a final snapshot and commit not written by then are not
// written (nothing is lost: what was not committed is read again after the restart, and
// the snapshot file is either the previous one or the new one). Call once per process.
void start_signal_thread();

// Set by the first stop signal; read by the processing loop. Never reset.
[[nodiscard]] const std::atomic<bool>& stop_flag() noexcept;

// The first stop signal's number, or 0 before one came.
[[nodiscard]] int stop_signal() noexcept;

// Logs the first stop signal's line on `log` unless the signal thread has (it logs as the
// signal comes once logging is set up; a signal that came before is logged by the stop).
void log_stop_signal_once(spdlog::logger& log);

}  // namespace sketchd::app
