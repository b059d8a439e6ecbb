#include "sketchd/app/signals.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>

#include "sketchd/util/logging.h"

namespace sketchd::app {

namespace {

// Written by the signal thread only (never from a signal handler), read by the others.
std::atomic<bool> stop_requested{false};
std::atomic<int> first_signal{0};
std::atomic<bool> stop_signal_logged{false};  // by the signal thread, as it came
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

// The first stop signal's line: a SIGHUP is no reload.
void log_stop_signal(spdlog::logger& log, int signal) {
  if (signal == SIGHUP) {
    log.warn(
        "received signal {} (SIGHUP): sketchd does not reload its configuration; shutting down "
        "cleanly, with exit status 129, so that a supervisor that restarts it on failure starts "
        "it again with the configuration as it is now",
        signal);
  } else {
    log.info("received signal {} (SIG{}), shutting down", signal, sigabbrev_np(signal));
  }
}

// The second and later signals, while the stop runs.
void on_later_signal(const std::shared_ptr<spdlog::logger>& log, int count, int signal) {
  if (!log) {
    print_stderr(count == 2 ? "sketchd: received a second signal while stopping\n"
                            : "sketchd: received a third signal: exiting now\n");
    if (count > 2) std::_Exit(1);
    return;
  }
  if (count == 2) {
    log->warn(
        "received a second stop signal, {} (SIG{}), while stopping: the stop goes on "
        "(within about 25 s even with the brokers away); a third exits at once with status "
        "1, without finishing it",
        signal, sigabbrev_np(signal));
    return;
  }
  log->critical(
      "received a third stop signal, {} (SIG{}): exiting now, without finishing the stop "
      "(a final snapshot or commit not written yet is not written: what was not committed "
      "is read again after a restart; exit status 1)",
      signal, sigabbrev_np(signal));
  log->flush();
  std::_Exit(1);
}

}  // namespace

void start_signal_thread() {
  static sigset_t signals;  // read by the thread for the whole life of the process
  sigemptyset(&signals);
  for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, s);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &signals, nullptr); rc != 0) {
    throw std::system_error(rc, std::generic_category(), "block SIGINT, SIGTERM and SIGHUP");
  }
  std::thread([] {
    for (int count = 1;; ++count) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0) {
        --count;
        continue;
      }
      // The logger through the registry's lock, which orders this thread after
      // setup_logging() (spdlog's default-logger shortcut reads a pointer unsynchronized);
      // before it, stderr.
      const std::shared_ptr<spdlog::logger> log = spdlog::get("sketchd");
      if (count > 1) {
        on_later_signal(log, count, signal);
        continue;
      }
      first_signal.store(signal);
      stop_requested.store(true);
      // Logged as it comes, so that a second one is logged after it; before the logging
      // is set up, the run's stop logs it (whichever comes first, once).
      if (log && !stop_signal_logged.exchange(true)) log_stop_signal(*log, signal);
    }
  }).detach();
}

const std::atomic<bool>& stop_flag() noexcept { return stop_requested; }

int stop_signal() noexcept { return first_signal.load(); }

void log_stop_signal_once(spdlog::logger& log) {
  const int signal = first_signal.load();
  if (signal != 0 && !stop_signal_logged.exchange(true)) log_stop_signal(log, signal);
}

}  // namespace sketchd::app
