#include "sketchd/generator/generator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <optional>
#include <random>

#include "sketch/zipf.h"
#include "sketchd/kafka/lossy_producer.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/util/logging.h"

namespace sketchd {

generator::generator(const generator_config& config, std::string bootstrap_servers,
                     std::map<std::string, std::string> properties, std::uint64_t seed)
    : config_(config),
      bootstrap_servers_(std::move(bootstrap_servers)),
      properties_(std::move(properties)),
      seed_(seed) {}

generator::~generator() { stop(); }

void generator::start() {
  stop_ = false;
  thread_ = std::thread([this] {
    try {
      run();
    } catch (const std::exception& e) {
      const std::lock_guard lock(mutex_);
      fatal_ = e.what();
    }
  });
}

void generator::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  const std::lock_guard lock(mutex_);
  fatal_.reset();
}

std::optional<std::string> generator::fatal_error() const {
  const std::lock_guard lock(mutex_);
  return fatal_;
}

namespace {

constexpr auto kReportEvery = std::chrono::seconds(10);

std::shared_ptr<spdlog::logger> log() { return module_logger("generator"); }

}  // namespace

void generator::run() {
  // The generator's defaults, then kafka.properties over them.
  std::map<std::string, std::string> properties = {{"linger.ms", "20"},
                                                   {"compression.type", "lz4"}};
  for (auto& [name, value] : kafka::producer_properties(properties_)) properties[name] = value;
  kafka::lossy_producer producer(properties, bootstrap_servers_);

  const sketch::zipf_distribution zipf(config_.distinct, config_.zipf);
  std::mt19937_64 rng(seed_);
  std::string item;
  std::string value;
  std::uint64_t seq = 0;      // events produced (or failed) so far
  std::uint64_t queued = 0;   // events the producer took
  std::uint64_t skipped = 0;  // events owed for more than a second, given up
  std::uint64_t failed_reported = 0;
  std::uint64_t skipped_reported = 0;
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  log()->info("{} events/s over {} distinct items (zipf {}) into topic {}", config_.rate,
              config_.distinct, config_.zipf, config_.topic);

  while (!stop_.load(std::memory_order_relaxed)) {
    // Produce what the rate allows up to now, then sleep a little: bursts of ~10 ms.
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    std::uint64_t due =
        static_cast<std::uint64_t>(elapsed * static_cast<double>(config_.rate)) - skipped;
    if (due > seq + config_.rate) {
      // Behind by more than a second (the broker was slow or away): owe one second only.
      skipped += due - seq - config_.rate;
      skipped_.store(skipped, std::memory_order_relaxed);
      due = seq + config_.rate;
    }
    while (seq < due && !stop_.load(std::memory_order_relaxed)) {
      item.clear();
      fmt::format_to(std::back_inserter(item), "u{}", zipf(rng));
      value.clear();
      if (config_.format == generator_format::json) {
        fmt::format_to(std::back_inserter(value), R"({{"user":{{"id":"{}"}},"seq":{}}})", item,
                       seq);
      } else {
        value = item;
      }
      const auto result = producer.produce(
          config_.topic, config_.key ? std::optional<std::string_view>(item) : std::nullopt, value);
      // A full local queue drains first.
      if (result == kafka::lossy_producer::produce_result::queue_full) break;
      if (result == kafka::lossy_producer::produce_result::queued) ++queued;
      ++seq;
    }
    producer.poll(std::chrono::milliseconds(10));
    // An event queued and then not delivered is failed, no longer produced.
    produced_.store(queued - producer.undelivered(), std::memory_order_relaxed);
    failed_.store(producer.refused() + producer.undelivered(), std::memory_order_relaxed);

    if (now - last_report >= kReportEvery) {
      const std::uint64_t failed = failed_.load(std::memory_order_relaxed);
      if (failed > failed_reported) {
        log()->warn("{} event(s) not delivered to topic {} in the last {} s ({} in all): {}",
                    failed - failed_reported, config_.topic,
                    std::chrono::duration_cast<std::chrono::seconds>(now - last_report).count(),
                    failed, producer.last_error());
        failed_reported = failed;
      }
      if (skipped > skipped_reported) {
        log()->warn(
            "{} event(s) skipped in the last {} s: the broker took them slower than "
            "{} events/s, and at most one second of events is owed",
            skipped - skipped_reported,
            std::chrono::duration_cast<std::chrono::seconds>(now - last_report).count(),
            config_.rate);
        skipped_reported = skipped;
      }
      last_report = now;
    }
  }
  // Synthetic events: the stop does not wait for a broker that may be away.
  producer.close();
}

}  // namespace sketchd
