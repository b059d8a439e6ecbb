// `sketchd mock-kafka`: librdkafka's mock cluster as a standalone server.
//
// SIGINT and SIGTERM are blocked before the cluster's threads start (they inherit the
// mask), and the main thread takes them with sigwait(): no signal handler at all, so
// nothing runs in signal context. This relies on main() starting no thread before the
// command, as it does not.
#include "sketchd/commands.h"
#include "sketchd/kafka/mock_cluster.h"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <exception>
#include <system_error>

#include <pthread.h>

namespace sketchd {
namespace {

// Blocks SIGINT and SIGTERM in the calling thread (and the threads it starts) for its
// lifetime. On destruction, discards those still pending and restores the previous mask.
// Not thread-safe; one owner, on the thread that created it.
class blocked_stop_signals {
 public:
  blocked_stop_signals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    if (const int rc = pthread_sigmask(SIG_BLOCK, &set_, &previous_); rc != 0) {
      throw std::system_error(rc, std::generic_category(), "block SIGINT and SIGTERM");
    }
  }
  ~blocked_stop_signals() {
    constexpr timespec kNoWait{};
    while (sigtimedwait(&set_, nullptr, &kNoWait) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  blocked_stop_signals(const blocked_stop_signals&) = delete;
  blocked_stop_signals& operator=(const blocked_stop_signals&) = delete;

  // Waits until SIGINT or SIGTERM arrives; returns which.
  [[nodiscard]] int wait() const {
    int received = 0;
    for (;;) {
      const int rc = sigwait(&set_, &received);
      if (rc == 0) return received;
      if (rc != EINTR) throw std::system_error(rc, std::generic_category(), "wait for a signal");
    }
  }

 private:
  sigset_t set_{};
  sigset_t previous_{};
};

}  // namespace

int mock_kafka_command(const mock_kafka_options& options) {
  try {
    const blocked_stop_signals signals;
    kafka::mock_cluster cluster(options.brokers);
    for (const auto& [name, partitions] : options.topics) cluster.create_topic(name, partitions);

    fmt::print("bootstrap: {}\n", cluster.bootstrap_servers());
    std::fflush(stdout);
    fmt::print(stderr, "sketchd mock-kafka: {} broker(s) on loopback", cluster.broker_count());
    for (const auto& [name, partitions] : options.topics) {
      fmt::print(stderr, ", topic {} ({} partition(s))", name, partitions);
    }
    fmt::print(stderr,
               "; unknown topics are created with {} partitions on first use; stop with "
               "SIGINT or SIGTERM\n",
               kafka::mock_cluster::kAutoCreatePartitions);

    const int received = signals.wait();
    fmt::print(stderr, "sketchd mock-kafka: {} received, stopping\n",
               received == SIGINT ? "SIGINT" : "SIGTERM");
  } catch (const std::exception& e) {
    fmt::print(stderr, "sketchd mock-kafka: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace sketchd
