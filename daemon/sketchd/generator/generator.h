// The `generator:` section: synthetic Zipf-distributed events produced into a topic, so
// that a demo (or a test) has a live stream with heavy hitters and repeats.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "sketchd/config/config.h"

namespace sketchd {

// Produces events at `rate` per second on its own thread from start() to stop(). Item
// r (0-based Zipf rank) is "u<r>": "u0" is the most frequent. With format json the value
// is {"user":{"id":"u<r>"},"seq":N}; with text it is the item alone; with key the item is
// the message key too. `properties` (kafka.properties) apply over the generator's own
// defaults (linger.ms 20, lz4). When the broker falls behind, at most one second of events
// is owed: after a stall the rate resumes instead of a burst of everything missed, and the
// events skipped are logged. Events not delivered are logged too, at most every 10 s, with
// their count. On stop, events not yet delivered are dropped (they are synthetic): the
// stop does not wait for an unreachable broker. Thread-safe: start/stop from one thread,
// the accessors from any.
class generator {
 public:
  generator(const generator_config& config, std::string bootstrap_servers,
            std::map<std::string, std::string> properties, std::uint64_t seed = 20261122);
  ~generator();
  generator(const generator&) = delete;
  generator& operator=(const generator&) = delete;

  void start();
  void stop();
  [[nodiscard]] std::uint64_t produced() const noexcept {
    return produced_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t failed() const noexcept {
    return failed_.load(std::memory_order_relaxed);
  }
  // Events given up after a stall (owed for more than a second).
  [[nodiscard]] std::uint64_t skipped() const noexcept {
    return skipped_.load(std::memory_order_relaxed);
  }
  // Why the generator stopped on its own (it cannot create its producer, or runs out of
  // memory for its Zipf table), or nothing while it runs or after stop().
  [[nodiscard]] std::optional<std::string> fatal_error() const;
  // The bytes of its Zipf table: 8 per distinct item.
  [[nodiscard]] static std::uint64_t memory_bytes(const generator_config& config) noexcept {
    return 8 * config.distinct;
  }

 private:
  void run();

  generator_config config_;
  std::string bootstrap_servers_;
  std::map<std::string, std::string> properties_;
  std::uint64_t seed_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> produced_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> skipped_{0};
  mutable std::mutex mutex_;
  std::optional<std::string> fatal_;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace sketchd
