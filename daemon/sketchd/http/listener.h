// The HTTP listener: sketchd's own accept loop, with a bound on the connections it holds
// (http.max_connections), and the connections waiting for their next request held without
// a thread each. One thread accepts and waits (poll) on the listening socket and on every
// connection waiting for input; a connection with input is handed to a worker (a bounded
// pool, connection.h), which serves what it can and hands it back.
//
//   accept ──► waiting (poll, no thread) ──input──► worker: serve_ready() ──► waiting / closed
//
// Beyond max_connections, the connection that has waited the longest for input is closed
// to make room (a client must expect a kept-alive connection to close between requests);
// when none waits (all are being served), the new one is refused at once (a 503 over plain
// HTTP, a close over TLS). A failing accept is told apart: a connection's own error is
// skipped; running out of file descriptors or memory closes a waiting connection, or pauses
// accepting for 100 ms; any other error means the listening socket is broken, and a new
// one is bound to the same address every second until it works, problem() saying why
// meanwhile (/readyz answers 503 with it on the connections still open).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sketchd/http/connection.h"

namespace httplib {
class Server;
class TaskQueue;
}  // namespace httplib

namespace sketchd::http {

class listener {
 public:
  struct options {
    std::string host;        // without the brackets of an IPv6 address
    std::uint16_t port = 0;  // 0: any free port (and the same one again after a failure)
    std::size_t max_connections = 512;
    bool tls = false;  // the server serves TLS (a refusal is a close, not a 503)
  };

  // `server` from make_bounded_server(), outliving the listener.
  listener(httplib::Server& server, options o);
  ~listener();
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

  // Binds the listening socket (std::system_error with the errno of the last address
  // tried, std::runtime_error when the host does not resolve) and starts accepting. Returns
  // the port bound.
  int start();
  // Stops accepting, closes every waiting connection, and returns once every worker has
  // ended (a connection being served finishes its answer within its bounds).
  void stop();

  // Why the listener does not accept connections (its socket broken, a new one not bound
  // yet), or nullopt. Thread-safe.
  [[nodiscard]] std::optional<std::string> problem() const;
  // The connections open: waiting for input, or being served. Thread-safe.
  [[nodiscard]] std::size_t open_connections() const;

 private:
  void run();
  void accept_all(std::chrono::steady_clock::time_point now);
  // Closes the connection that has waited the longest; false when none waits.
  bool close_longest_waiting();
  void dispatch(connection_ptr c);
  void refuse(int sock);
  void listener_failed(int error, std::chrono::steady_clock::time_point now);
  void wake() const;

  httplib::Server& server_;
  options options_;
  int listen_fd_ = -1;  // -1 while broken
  int wake_fd_ = -1;    // an eventfd: a worker handed a connection back, or a stop
  std::unique_ptr<httplib::TaskQueue> workers_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  // The run thread's own.
  std::deque<connection_ptr> waiting_;  // in the order they began to wait
  std::chrono::steady_clock::time_point accept_paused_until_{};
  std::chrono::steady_clock::time_point relisten_at_{};
  std::chrono::steady_clock::time_point warned_at_{};
  std::uint64_t refused_since_warning_ = 0;

  mutable std::mutex mutex_;
  std::vector<connection*> returned_;  // handed back by workers, waiting for input again
  std::size_t served_ = 0;             // dispatched to the workers, not returned yet
  std::size_t waiting_count_ = 0;      // waiting_.size(), for open_connections()
  std::optional<std::string> problem_;
};

}  // namespace sketchd::http
