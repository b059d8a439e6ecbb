// `sketchd mock-kafka`: librdkafka's mock cluster as a standalone server.
//
// SIGINT and SIGTERM are blocked before the cluster's threads start (they inherit the
// mask), and the main thread takes them with sigwait(): no signal handler at all, so
// nothing runs in signal context. This relies on main() starting no thread before the
// command, as it does not.
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "sketchd/commands.h"
#include "sketchd/kafka/mock_cluster.h"

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

// Parses and applies one command of --control; returns an error message or "".
std::string apply_command(kafka::mock_cluster& cluster, const std::string& line) {
  std::istringstream in(line);
  std::string verb;
  in >> verb;
  const auto number = [&](long long min, long long max) -> std::optional<long long> {
    long long v = 0;
    if (!(in >> v) || v < min || v > max) return std::nullopt;
    return v;
  };
  const std::int32_t brokers = cluster.broker_count();
  if (verb == "down" || verb == "up") {
    const auto id = number(1, brokers);
    if (!id) return fmt::format("{}: a broker id from 1 to {}", verb, brokers);
    if (verb == "down") {
      cluster.set_broker_down(static_cast<std::int32_t>(*id));
    } else {
      cluster.set_broker_up(static_cast<std::int32_t>(*id));
    }
    return "";
  }
  if (verb == "rtt") {
    const auto id = number(1, brokers);
    const auto ms = number(0, 600'000);
    if (!id || !ms) return "rtt: BROKER MS";
    cluster.set_broker_rtt(static_cast<std::int32_t>(*id), std::chrono::milliseconds(*ms));
    return "";
  }
  if (verb == "leader") {
    std::string topic;
    in >> topic;
    const auto partition = number(0, 100000);
    const auto id = number(-1, brokers);
    if (topic.empty() || !partition || !id) return "leader: TOPIC PARTITION BROKER";
    cluster.set_partition_leader(topic, static_cast<std::int32_t>(*partition),
                                 static_cast<std::int32_t>(*id));
    return "";
  }
  if (verb == "coordinator") {
    std::string kind;
    std::string key;
    in >> kind >> key;
    const auto id = number(1, brokers);
    if ((kind != "group" && kind != "transaction") || key.empty() || !id) {
      return "coordinator: group|transaction NAME BROKER";
    }
    cluster.set_coordinator(kind, key, static_cast<std::int32_t>(*id));
    return "";
  }
  if (verb == "errors" || verb == "clear") {
    const auto api = number(0, 100);
    if (!api)
      return fmt::format("{}: a Kafka API number (0 = Produce, 1 = Fetch, 8 = OffsetCommit, …)",
                         verb);
    if (verb == "clear") {
      cluster.clear_request_errors(static_cast<kafka::api_key>(*api));
      return "";
    }
    std::string list;
    in >> list;
    std::vector<kafka::error_code> codes;
    std::istringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
      try {
        std::size_t used = 0;
        const int code = std::stoi(item, &used);
        if (used != item.size()) throw std::invalid_argument(item);
        codes.push_back(static_cast<kafka::error_code>(code));
      } catch (const std::exception&) {
        return fmt::format("errors: not an error code: {}", item);
      }
    }
    if (codes.empty()) return "errors: API CODE[,CODE...]";
    cluster.push_request_errors(static_cast<kafka::api_key>(*api), codes);
    return "";
  }
  return fmt::format("unknown command: {}", verb);
}

// Reads commands from stdin until `stop` (polling, so that it can be joined) or EOF.
void serve_control(kafka::mock_cluster& cluster, const std::atomic<bool>& stop) {
  std::string pending;
  char buffer[4096];
  while (!stop.load()) {
    pollfd fd{STDIN_FILENO, POLLIN, 0};
    const int ready = ::poll(&fd, 1, 200);
    if (ready <= 0) continue;
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n <= 0) return;  // EOF: no more commands; keep serving
    pending.append(buffer, static_cast<std::size_t>(n));
    for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string error;
      try {
        error = apply_command(cluster, line);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (error.empty()) {
        fmt::print("ok: {}\n", line);
        std::fflush(stdout);
      } else {
        fmt::print(stderr, "sketchd mock-kafka: error: {}\n", error);
      }
    }
  }
}

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

    std::atomic<bool> stop_control{false};
    std::thread control;
    if (options.control) control = std::thread([&] { serve_control(cluster, stop_control); });
    const int received = signals.wait();
    stop_control = true;
    if (control.joinable()) control.join();
    fmt::print(stderr, "sketchd mock-kafka: {} received, stopping\n",
               received == SIGINT ? "SIGINT" : "SIGTERM");
  } catch (const std::exception& e) {
    fmt::print(stderr, "sketchd mock-kafka: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace sketchd
