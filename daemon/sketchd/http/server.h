// The one HTTP listener of the daemon: /metrics, /healthz, /readyz and the read-only JSON
// API under /api/v1 (DESIGN.md, "HTTP API").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"

namespace httplib {
class Server;
}

namespace sketchd {

// Whether the daemon is ready, and why not (/readyz); and whether its processing thread is
// alive (/healthz): it beats at every turn of its loop, and while it waits on a full
// producer queue. Thread-safe.
class readiness {
 public:
  // The processing thread's loop turns at least every second (the source's poll timeout);
  // its longest legitimate pause, a snapshot waiting 30 s for the outputs in flight and
  // then writing the state, stays well under a minute.
  static constexpr std::chrono::milliseconds kStallLimit{60'000};

  explicit readiness(std::chrono::milliseconds stall_limit = kStallLimit);
  void set(bool ready, std::string reason = {});
  [[nodiscard]] bool ready() const;
  [[nodiscard]] std::string reason() const;

  void beat() noexcept;
  // Time since the last beat (or since construction).
  [[nodiscard]] std::chrono::nanoseconds since_beat() const noexcept;
  // How long since the last beat, when that is more than the stall limit.
  [[nodiscard]] std::optional<std::chrono::milliseconds> stalled() const noexcept;
  [[nodiscard]] std::chrono::milliseconds stall_limit() const noexcept { return stall_limit_; }

 private:
  mutable std::mutex mutex_;
  bool ready_ = false;
  std::string reason_ = "starting";
  std::chrono::milliseconds stall_limit_;
  std::atomic<std::int64_t> last_beat_ns_;  // steady clock
};

// Serves on its own thread from start() to stop(). Handlers only read: the metrics
// registry and the pipelines (under each pipeline's lock). Thread-safe.
class http_server {
 public:
  http_server(const http_config& config, const metrics::registry& registry,
              std::vector<const pipeline*> pipelines, const readiness& ready);
  // The same, with the routes on `server` (a subclass of httplib::Server: the HTTP fuzz
  // target feeds it requests without a socket).
  http_server(const http_config& config, const metrics::registry& registry,
              std::vector<const pipeline*> pipelines, const readiness& ready,
              std::unique_ptr<httplib::Server> server);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds the listener (throws std::runtime_error naming the address when it cannot) and
  // starts serving. Returns the bound port (useful with port 0).
  int start();
  void stop();

 private:
  void routes();

  http_config config_;
  const metrics::registry& registry_;
  std::vector<const pipeline*> pipelines_;
  const readiness& ready_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};  // set by thread_ when httplib's loop has ended
  int listen_socket_ = -1;  // the socket httplib last created to listen on (start())
};

}  // namespace sketchd
