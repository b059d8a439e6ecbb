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
      spdlog::error("generator: stopped: {}", e.what());
    }
  });
}

void generator::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

namespace {

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* failed = static_cast<std::atomic<std::uint64_t>*>(opaque);
  if (m->err) failed->fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void generator::run() {
  kafka::client_config conf(kafka::producer_properties(properties_));
  conf.set("bootstrap.servers", bootstrap_servers_);
  conf.set("linger.ms", "20");
  conf.set("compression.type", "lz4");
  rd_kafka_conf_set_dr_msg_cb(conf.get(), on_delivery);
  rd_kafka_conf_set_opaque(conf.get(), &failed_);
  kafka::handle_ptr producer = std::move(conf).create(RD_KAFKA_PRODUCER);

  const sketch::zipf_distribution zipf(config_.distinct, config_.zipf);
  std::mt19937_64 rng(seed_);
  std::string item;
  std::string value;
  std::uint64_t seq = 0;
  const auto start = std::chrono::steady_clock::now();
  spdlog::info("generator: {} events/s over {} distinct items (zipf {}) into topic {}",
               config_.rate, config_.distinct, config_.zipf, config_.topic);

  while (!stop_.load(std::memory_order_relaxed)) {
    // Produce what the rate allows up to now, then sleep a little: bursts of ~10 ms.
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto due = static_cast<std::uint64_t>(elapsed * static_cast<double>(config_.rate));
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
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(producer.get(), 10);  // the local queue drains; try again
        continue;
      }
      if (err) {
        failed_.fetch_add(1, std::memory_order_relaxed);
      } else {
        produced_.fetch_add(1, std::memory_order_relaxed);
      }
      ++seq;
    }
    rd_kafka_poll(producer.get(), 10);
  }
  rd_kafka_flush(producer.get(), 5000);
}

}  // namespace sketchd
