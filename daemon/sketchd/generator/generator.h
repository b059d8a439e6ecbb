// The `generator:` section: synthetic Zipf-distributed events produced into a topic, so
// that a demo (or a test) has a live stream with heavy hitters and repeats.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>

#include "sketchd/config/config.h"

namespace sketchd {

// Produces events at `rate` per second on its own thread from start() to stop(). Item
// r (0-based Zipf rank) is "u<r>": "u0" is the most frequent. With format json the value
// is {"user":{"id":"u<r>"},"seq":N}; with text it is the item alone; with key the item is
// the message key too. Thread-safe: start/stop from one thread, produced() from any.
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

 private:
  void run();

  generator_config config_;
  std::string bootstrap_servers_;
  std::map<std::string, std::string> properties_;
  std::uint64_t seed_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> produced_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::thread thread_;
};

}  // namespace sketchd
