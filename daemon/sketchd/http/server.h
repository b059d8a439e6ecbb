// The one HTTP listener of the daemon: /metrics, /healthz, /readyz and the read-only JSON
// API under /api/v1 (DESIGN.md, "HTTP API"; its routes and answers in http/api.h, the
// connections' handling in http/connection.h).
#pragma once

#include <algorithm>
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
#include "sketchd/http/basic_auth.h"
#include "sketchd/http/connection.h"
#include "sketchd/http/listener.h"
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
  // The processing thread's loop turns at least every second (the source's poll timeout).
  // Its steps that may legitimately take longer — a snapshot (waiting up to 30 s for the
  // outputs in flight, then writing a state of any size), a rebalance's flush, the start
  // and the stop — run inside a long_step, which allows kLongStepLimit instead.
  static constexpr std::chrono::milliseconds kStallLimit{60'000};
  static constexpr std::chrono::milliseconds kLongStepLimit{600'000};

  // Allows `limit` instead of the stall limit while it lives (on the processing thread;
  // steps nest), and beats when it begins and ends.
  class long_step {
   public:
    explicit long_step(readiness& r, std::chrono::milliseconds limit = kLongStepLimit) noexcept
        : r_(r), previous_ms_(r.allowance_ms_.load(std::memory_order_relaxed)) {
      r_.beat();
      r_.allowance_ms_.store(limit.count(), std::memory_order_relaxed);
    }
    ~long_step() {
      r_.allowance_ms_.store(previous_ms_, std::memory_order_relaxed);
      r_.beat();
    }
    long_step(const long_step&) = delete;
    long_step& operator=(const long_step&) = delete;

   private:
    readiness& r_;
    std::int64_t previous_ms_;
  };

  explicit readiness(std::chrono::milliseconds stall_limit = kStallLimit);
  // Sets whether the daemon is ready; `reason` is what /readyz shows while it is not.
  void set(bool ready, std::string reason = {});
  // As last set (false until the first set(true)).
  [[nodiscard]] bool ready() const;
  // The reason last set ("starting" until the first set()).
  [[nodiscard]] std::string reason() const;

  void beat() noexcept;
  // Time since the last beat (or since construction).
  [[nodiscard]] std::chrono::nanoseconds since_beat() const noexcept;
  // How long since the last beat, when that is more than the stall limit.
  [[nodiscard]] std::optional<std::chrono::milliseconds> stalled() const noexcept;
  // The limit in force: the stall limit, or a long step's.
  [[nodiscard]] std::chrono::milliseconds stall_limit() const noexcept {
    return std::max(stall_limit_,
                    std::chrono::milliseconds(allowance_ms_.load(std::memory_order_relaxed)));
  }

 private:
  mutable std::mutex mutex_;
  bool ready_ = false;
  std::string reason_ = "starting";
  std::chrono::milliseconds stall_limit_;
  std::atomic<std::int64_t> last_beat_ns_;     // steady clock
  std::atomic<std::int64_t> allowance_ms_{0};  // a long_step's limit, or 0
};

// Why `config`'s address cannot be listened on (in use, not an address of this machine,
// a name that does not resolve, a port that needs privileges), found by binding it for a
// moment and letting go; nullopt when it can be, as far as that shows. Port 0 always can.
// For a start that fails before anything else is started, and for start()'s message.
[[nodiscard]] std::optional<std::string> cannot_listen(const http_config& config);

// Serves on its own thread from start() to stop(). Handlers only read: the metrics
// registry and the pipelines (under each pipeline's lock). Thread-safe.
class http_server {
 public:
  http_server(const http_config& config, const metrics::registry& registry,
              std::vector<const pipeline*> pipelines, const readiness& ready);
  // The same, with the routes on `server` (make_bounded_server()'s, or a subclass of
  // httplib::Server: the HTTP fuzz target feeds it requests without a socket).
  http_server(const http_config& config, const metrics::registry& registry,
              std::vector<const pipeline*> pipelines, const readiness& ready,
              std::unique_ptr<httplib::Server> server);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds the listener (throws std::runtime_error naming the address when it cannot) and
  // starts serving. Returns the bound port (useful with port 0).
  int start();
  // Stops serving, and returns once the listening thread and every connection's worker have
  // ended: no connection is accepted and no request read from then on, the connections
  // waiting for a request are closed; an answer being written is finished or given up (at
  // most 60 s after its request began). Does nothing before start() or after an earlier
  // stop(); the destructor calls it.
  void stop();

 private:
  void routes();

  http_config config_;
  const metrics::registry& registry_;
  std::vector<const pipeline*> pipelines_;
  const readiness& ready_;
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<http::basic_auth> auth_;    // with http.basic_auth_users only
  std::unique_ptr<http::listener> listener_;  // from start()
};

}  // namespace sketchd
