#include "sketchd/generator/generator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "sketch/zipf.h"
#include "sketchd/kafka/client.h"
#include "sketchd/kafka/sink.h"

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

std::shared_ptr<spdlog::logger> log() {
  auto l = spdlog::get("generator");
  return l ? l : spdlog::default_logger();
}

}  // namespace

struct generator::callbacks {
  static void delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    if (!m->err) return;
    // Dropped by the purge at the stop, on purpose.
    if (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
      return;
    auto* self = static_cast<generator*>(opaque);
    self->failed_.fetch_add(1, std::memory_order_relaxed);
    self->produced_.fetch_sub(1, std::memory_order_relaxed);
    const std::lock_guard lock(self->mutex_);
    self->last_delivery_error_ = rd_kafka_err2str(m->err);
  }
};

void generator::run() {
  // The generator's defaults, then kafka.properties over them.
  kafka::property_map properties = {{"linger.ms", "20"}, {"compression.type", "lz4"}};
  for (auto& [name, value] : kafka::producer_properties(properties_)) properties[name] = value;
  kafka::client_config conf(properties);
  conf.set("bootstrap.servers", bootstrap_servers_);
  rd_kafka_conf_set_dr_msg_cb(conf.get(), callbacks::delivery);
  rd_kafka_conf_set_opaque(conf.get(), this);
  kafka::handle_ptr producer = std::move(conf).create(RD_KAFKA_PRODUCER);

  const sketch::zipf_distribution zipf(config_.distinct, config_.zipf);
  std::mt19937_64 rng(seed_);
  std::string item;
  std::string value;
  std::uint64_t seq = 0;      // events produced (or failed) so far
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
      item = fmt::format("u{}", zipf(rng));
      if (config_.format == generator_format::json) {
        value = fmt::format(R"({{"user":{{"id":"{}"}},"seq":{}}})", item, seq);
      } else {
        value = item;
      }
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          producer.get(), RD_KAFKA_V_TOPIC(config_.topic.c_str()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY(config_.key ? item.data() : nullptr, config_.key ? item.size() : 0),
          RD_KAFKA_V_VALUE(value.data(), value.size()), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) break;  // the local queue drains first
      if (err) {
        failed_.fetch_add(1, std::memory_order_relaxed);
        const std::lock_guard lock(mutex_);
        last_delivery_error_ = rd_kafka_err2str(err);
      } else {
        produced_.fetch_add(1, std::memory_order_relaxed);
      }
      ++seq;
    }
    rd_kafka_poll(producer.get(), 10);

    if (now - last_report >= kReportEvery) {
      const std::uint64_t failed = failed_.load(std::memory_order_relaxed);
      if (failed > failed_reported) {
        const std::lock_guard lock(mutex_);
        log()->warn("{} event(s) not delivered to topic {} in the last {} s ({} in all): {}",
                    failed - failed_reported, config_.topic,
                    std::chrono::duration_cast<std::chrono::seconds>(now - last_report).count(),
                    failed, last_delivery_error_);
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
  // Synthetic events: the stop does not wait for a broker that may be away. The flush
  // serves the purged events' delivery reports.
  rd_kafka_purge(producer.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_flush(producer.get(), 1000);
}

}  // namespace sketchd
