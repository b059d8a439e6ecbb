// A forwarder for the processor's tests: it keeps every message it is given, and reports
// their deliveries when the test says, from poll() or flush() as Kafka's producer does. Its
// queue can be made full (forward() and produce() then ask give_up() before each try) and
// it can refuse a message at once. Not thread-safe: one test.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketchd/processor/forwarder.h"

namespace sketchd::test_support {

class fake_forwarder final : public forwarder {
 public:
  struct message {
    std::string topic;
    std::uint64_t opaque = 0;
    const kafka::record* record = nullptr;  // forward(): the consumed message given
    std::string key;
    std::string value;
    std::int64_t timestamp_ms = -1;  // produce()'s
    bool reported = false;
    std::vector<std::pair<std::string, std::string>> extra;  // forward()'s extra headers
  };

  explicit fake_forwarder(std::vector<std::string> topics) : topics_(std::move(topics)) {}

  // Every message queued, in order.
  std::vector<message> messages;
  // forward() and produce() answer this at once, queueing nothing.
  std::optional<kafka::error_code> refuse;
  // The queue stays full for this many tries of forward() or produce(); each try serves the
  // ready reports and asks give_up() first.
  std::size_t full_tries = 0;
  std::size_t give_up_asked = 0;
  // flush() acknowledges every message still in flight, as brokers that answer would.
  bool flush_acknowledges = false;
  std::optional<std::string> fatal;
  // What ends() answers.
  std::vector<output_end> output_ends;

  // Message i's delivery report, served at the next poll() or flush().
  void report(std::size_t i, kafka::error_code err = kafka::error_code::no_error,
              std::string reason = {}) {
    message& m = messages.at(i);
    if (m.reported) throw std::logic_error("reported twice");
    m.reported = true;
    ready_.push_back({m.opaque, err, std::move(reason)});
  }
  // Acknowledges every message not reported yet.
  void acknowledge_all() {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (!messages[i].reported) report(i);
    }
  }
  // The messages given for `topic`, with their input offsets (forward()) or keys.
  [[nodiscard]] std::vector<std::int64_t> offsets(std::string_view topic) const {
    std::vector<std::int64_t> out;
    for (const message& m : messages) {
      if (m.topic == topic && m.record != nullptr) out.push_back(m.record->offset);
    }
    return out;
  }

  void on_delivery(delivery_function f) override { on_delivery_ = std::move(f); }
  [[nodiscard]] std::size_t topic_index(std::string_view topic) const override {
    const auto it = std::find(topics_.begin(), topics_.end(), topic);
    if (it == topics_.end()) throw std::invalid_argument("not an output topic");
    return static_cast<std::size_t>(it - topics_.begin());
  }
  [[nodiscard]] kafka::error_code forward(std::size_t topic, const kafka::record& r,
                                          std::span<const kafka::header> extra,
                                          std::uint64_t opaque,
                                          const std::function<bool()>& give_up) override {
    message m{topics_.at(topic),         opaque,         &r,    std::string(r.view.key),
              std::string(r.view.value), r.timestamp_ms, false, {}};
    for (const kafka::header& h : extra) m.extra.emplace_back(h.name, h.value);
    return queue(std::move(m), give_up);
  }
  [[nodiscard]] kafka::error_code produce(std::size_t topic, std::string_view key,
                                          std::string_view value, std::int64_t timestamp_ms,
                                          std::uint64_t opaque,
                                          const std::function<bool()>& give_up) override {
    return queue({topics_.at(topic),
                  opaque,
                  nullptr,
                  std::string(key),
                  std::string(value),
                  timestamp_ms,
                  false,
                  {}},
                 give_up);
  }
  void poll() override { serve(); }
  [[nodiscard]] bool flush(std::chrono::milliseconds) override {
    if (flush_acknowledges) acknowledge_all();
    serve();
    return in_flight() == 0;
  }
  [[nodiscard]] std::size_t in_flight() const override {
    return static_cast<std::size_t>(std::count_if(messages.begin(), messages.end(),
                                                  [](const message& m) { return !m.reported; })) +
           ready_.size();
  }
  [[nodiscard]] std::optional<std::string> fatal_error() const override { return fatal; }
  [[nodiscard]] std::vector<output_end> ends() const override { return output_ends; }

 private:
  struct ready_report {
    std::uint64_t opaque;
    kafka::error_code err;
    std::string reason;
  };
  kafka::error_code queue(message m, const std::function<bool()>& give_up) {
    if (refuse) return *refuse;
    for (; full_tries > 0; --full_tries) {
      ++give_up_asked;
      if (give_up && give_up()) return kafka::error_code::queue_full;
      serve();
    }
    messages.push_back(std::move(m));
    return kafka::error_code::no_error;
  }
  void serve() {
    std::vector<ready_report> now;
    now.swap(ready_);
    for (const ready_report& r : now) on_delivery_(r.opaque, r.err, r.reason);
  }

  std::vector<std::string> topics_;
  delivery_function on_delivery_;
  std::vector<ready_report> ready_;
};

}  // namespace sketchd::test_support
