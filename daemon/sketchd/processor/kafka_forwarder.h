// The daemon's forwarder: kafka::sink, one idempotent producer for every output topic. A
// forwarded message is the consumed one (key, value, headers, timestamp) plus its provenance
// headers (input topic, partition and offset, which the native message of the record
// carries), partitioned by key as the Java client does (see kafka/sink.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/processor/forwarder.h"

namespace sketchd {

// Not thread-safe: one owner, except in_flight() and fatal_error(), which any thread may call.
class kafka_forwarder final : public forwarder {
 public:
  // Creates the producer. Throws kafka::kafka_error for a bad property (named, its value
  // never shown).
  explicit kafka_forwarder(const kafka::sink_options& options);

  void on_delivery(delivery_function f) override { on_delivery_ = std::move(f); }
  [[nodiscard]] std::size_t topic_index(std::string_view topic) const override {
    return sink_.topic_index(topic);
  }
  [[nodiscard]] kafka::error_code forward(std::size_t topic, const kafka::record& r,
                                          std::span<const kafka::header> extra,
                                          std::uint64_t opaque,
                                          const std::function<bool()>& give_up) override {
    return sink_.forward(topic, r.native, extra, opaque, give_up);
  }
  [[nodiscard]] kafka::error_code produce(std::size_t topic, std::string_view key,
                                          std::string_view value, std::int64_t timestamp_ms,
                                          std::uint64_t opaque,
                                          const std::function<bool()>& give_up) override {
    return sink_.produce(topic, key, value, timestamp_ms, opaque, give_up);
  }
  void poll() override { sink_.poll(); }
  [[nodiscard]] bool flush(std::chrono::milliseconds timeout) override {
    return sink_.flush(timeout);
  }
  void learn_ends() override { sink_.learn_ends(); }
  [[nodiscard]] std::vector<output_end> ends() const override {
    std::vector<output_end> out;
    for (const auto& e : sink_.ends()) out.push_back({e.topic, e.partition, e.next_offset});
    return out;
  }
  [[nodiscard]] std::size_t in_flight() const override { return sink_.in_flight(); }
  [[nodiscard]] std::optional<std::string> fatal_error() const override {
    return sink_.fatal_error();
  }

 private:
  delivery_function on_delivery_;  // before sink_, whose reports it receives
  kafka::sink sink_;
};

// The output topics of `cfg`'s pipelines (dedup.output_topic, dedup.duplicates_topic,
// heavy_hitters.alerts_topic, dead_letter_topic), each once, in the order of the
// configuration.
[[nodiscard]] std::vector<std::string> output_topics(const config& cfg);

// The daemon's forwarder for `cfg`'s output topics on the cluster at `bootstrap_servers`,
// with the user's kafka.properties; nullptr when no pipeline has an output topic. Logs
// that it forwards. Throws kafka::kafka_error for a bad property.
[[nodiscard]] std::unique_ptr<forwarder> make_kafka_forwarder(const config& cfg,
                                                              const std::string& bootstrap_servers);

}  // namespace sketchd
