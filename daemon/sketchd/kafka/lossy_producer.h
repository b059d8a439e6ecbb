// A producer for events that may be lost: the generator's synthetic stream. Unlike the
// sink (sketchd/kafka/sink.h), nothing waits for its deliveries: it counts the events the
// broker did not take and keeps the last reason, and its close drops what is still queued
// instead of waiting for a broker that may be away.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace sketchd::kafka {

// Not thread-safe; one owner (the delivery reports are served inside poll(), on the
// owner's thread).
class lossy_producer {
 public:
  // A producer of `properties` (librdkafka's, producer settings only) connected to
  // `bootstrap_servers`. Throws kafka_error (code invalid_arg) when librdkafka refuses
  // the configuration, naming the property, never its value.
  lossy_producer(const std::map<std::string, std::string>& properties,
                 std::string_view bootstrap_servers);
  // close().
  ~lossy_producer();
  lossy_producer(const lossy_producer&) = delete;
  lossy_producer& operator=(const lossy_producer&) = delete;

  enum class produce_result {
    queued,      // copied into the local queue, on its way
    queue_full,  // the local queue is full: poll() lets it drain, then try again
    refused,     // refused at once: counted in refused(), the reason in last_error()
  };
  // Queues one event, copying `key` (none when nullopt) and `value`.
  [[nodiscard]] produce_result produce(const std::string& topic,
                                       std::optional<std::string_view> key, std::string_view value);

  // Serves delivery reports for up to `timeout`.
  void poll(std::chrono::milliseconds timeout);

  // Events refused by produce() so far.
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_; }
  // Events queued whose delivery failed so far (those dropped by close() not included).
  [[nodiscard]] std::uint64_t undelivered() const noexcept { return undelivered_; }
  // Why the last event refused or undelivered was not delivered; empty while none was.
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }

  // Drops the events not yet delivered (purged, not counted) and serves their reports for
  // at most one second. Idempotent.
  void close();

 private:
  struct callbacks;
  struct handle;
  std::unique_ptr<handle> handle_;
  std::uint64_t refused_ = 0;
  std::uint64_t undelivered_ = 0;
  std::string last_error_;
};

}  // namespace sketchd::kafka
