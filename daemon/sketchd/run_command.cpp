// `sketchd run`: the daemon's main loop.
//
//   config ─► [embedded broker] ─► pipelines ─► metrics + HTTP ─► source ─► loop:
//     poll a batch → each pipeline: begin_batch, process its messages, end_batch
//     → store the batch's offsets → (every summary_interval) one log line per pipeline
//
// One processing thread (this one) owns the pipelines' state; librdkafka and the HTTP
// server run their own threads. Signals only set a flag that the loop reads; on SIGINT or
// SIGTERM the loop finishes its batch, stores and commits the offsets, and returns 0.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "sketchd/commands.h"
#include "sketchd/config/config.h"
#include "sketchd/generator/generator.h"
#include "sketchd/http/server.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/source.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/util/logging.h"

namespace sketchd {

namespace {

std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
  stop_signal.store(signal);
  stop_requested.store(true);
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every topic the daemon reads or writes, for the embedded broker to create.
std::set<std::string> topics_of(const config& c) {
  std::set<std::string> topics;
  for (const auto& p : c.pipelines) {
    topics.insert(p.topics.begin(), p.topics.end());
    if (p.heavy_hitters && p.heavy_hitters->alerts_topic) topics.insert(*p.heavy_hitters->alerts_topic);
    if (p.dedup && p.dedup->output_topic) topics.insert(*p.dedup->output_topic);
    if (p.dedup && p.dedup->duplicates_topic) topics.insert(*p.dedup->duplicates_topic);
  }
  if (c.generator) topics.insert(c.generator->topic);
  return topics;
}

std::string summary_line(const pipeline_summary& s, double items_per_second) {
  std::string line = fmt::format("{}: {:.0f} items/s", s.name, items_per_second);
  if (s.has_heavy_hitters) {
    line += fmt::format(", window {} items, top:", s.window_items);
    if (s.top.empty()) line += " -";
    for (const auto& e : s.top) {
      line += fmt::format(" {} ({}, {:.1f}%)", metrics::clean_label_value(e.item, 64), e.estimate,
                          s.window_items ? 100.0 * static_cast<double>(e.estimate) / static_cast<double>(s.window_items) : 0.0);
    }
  }
  if (s.has_dedup) {
    line += fmt::format("; bloom fill {:.3f}, estimated FPR {:.2g} (target {:.2g})", s.fill, s.estimated_fpr,
                        s.target_fpr);
  }
  return line;
}

// Counters of the processing loop, published once per batch for the scrape.
struct loop_counters {
  std::mutex mutex;
  std::vector<std::uint64_t> consumed_by_topic;
};

int run(const config& cfg) {
  auto log = spdlog::default_logger();
  auto pipeline_log = spdlog::get("pipeline");

  std::optional<kafka::mock_cluster> embedded;
  std::string bootstrap = cfg.kafka.brokers;
  if (cfg.kafka.embedded) {
    embedded.emplace(cfg.kafka.embedded->brokers);
    for (const auto& t : topics_of(cfg)) embedded->create_topic(t, cfg.kafka.embedded->partitions);
    bootstrap = embedded->bootstrap_servers();
    log->info("embedded Kafka cluster (librdkafka mock) at {}", bootstrap);
  }

  std::vector<std::unique_ptr<pipeline>> pipelines;
  std::vector<const pipeline*> readers;
  for (const auto& p : cfg.pipelines) {
    pipelines.push_back(std::make_unique<pipeline>(p));
    readers.push_back(pipelines.back().get());
  }

  // The topics of all pipelines, and for each the pipelines that read it.
  kafka::source_options so;
  so.bootstrap_servers = bootstrap;
  so.group_id = cfg.kafka.group_id;
  so.properties = cfg.kafka.properties;
  so.batch_size = cfg.kafka.batch_size;
  so.poll_timeout_ms = static_cast<std::int32_t>(cfg.kafka.poll_timeout.count());
  std::vector<std::vector<pipeline*>> routes;
  for (const auto& p : pipelines) {
    for (const auto& t : p->config().topics) {
      auto it = std::find(so.topics.begin(), so.topics.end(), t);
      if (it == so.topics.end()) {
        so.topics.push_back(t);
        routes.emplace_back();
        it = so.topics.end() - 1;
      }
      routes[static_cast<std::size_t>(it - so.topics.begin())].push_back(p.get());
    }
  }

  metrics::registry registry;
  loop_counters counters;
  counters.consumed_by_topic.assign(so.topics.size(), 0);
  registry.add([](std::vector<metrics::metric_family>& out) {
    out.push_back({"sketchd_build_info", "sketchd's version and source revision; always 1.", metrics::metric_type::gauge,
                   {{{{"version", SKETCHD_VERSION}, {"revision", SKETCHD_REVISION}}, 1}}});
  });
  registry.add([&counters, &so](std::vector<metrics::metric_family>& out) {
    metrics::metric_family f{"sketchd_messages_consumed_total", "Messages consumed from Kafka, by topic.",
                             metrics::metric_type::counter, {}};
    std::lock_guard lock(counters.mutex);
    for (std::size_t i = 0; i < so.topics.size(); ++i) {
      f.samples.push_back({{{"topic", so.topics[i]}}, static_cast<double>(counters.consumed_by_topic[i])});
    }
    out.push_back(std::move(f));
  });
  for (const auto* p : readers) {
    registry.add([p](std::vector<metrics::metric_family>& out) { p->collect(out); });
  }
  registry.add(metrics::collect_process_metrics);

  readiness ready;
  http_server http(cfg.http, registry, readers, ready);
  const int port = http.start();
  spdlog::get("http")->info("serving /metrics, /healthz, /readyz and /api/v1 on http://{}:{}",
                            cfg.http.host.find(':') != std::string::npos ? "[" + cfg.http.host + "]" : cfg.http.host,
                            port);

  kafka::source source(so);
  registry.add([&source](std::vector<metrics::metric_family>& out) {
    metrics::metric_family f{"sketchd_kafka_consumer_lag_messages",
                             "Messages between the group's committed offset and the end of each assigned partition.",
                             metrics::metric_type::gauge, {}};
    for (const auto& l : source.lag()) {
      f.samples.push_back({{{"topic", l.topic}, {"partition", std::to_string(l.partition)}}, static_cast<double>(l.lag)});
    }
    out.push_back(std::move(f));
  });
  log->info("consuming {} topic(s) as group {} from {}", so.topics.size(), so.group_id, bootstrap);
  for (const auto& [k, v] : cfg.kafka.properties) log->debug("kafka property {} = {}", k, redact_property(k, v));

  std::unique_ptr<generator> gen;
  if (cfg.generator) {
    gen = std::make_unique<generator>(*cfg.generator, bootstrap, cfg.kafka.properties);
    gen->start();
  }
  ready.set(true);

  std::vector<std::uint64_t> consumed(so.topics.size(), 0);
  auto last_summary = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> items_at_summary(pipelines.size(), 0);
  int status = 0;

  while (!stop_requested.load()) {
    if (auto fatal = source.fatal_error()) {
      log->critical("fatal Kafka error, stopping: {}", *fatal);
      ready.set(false, "fatal Kafka error: " + *fatal);
      status = 1;
      break;
    }
    const auto batch = source.poll_batch();
    const std::int64_t now = wall_ms();
    for (auto& p : pipelines) p->begin_batch();
    for (const kafka::record& r : batch) {
      ++consumed[r.topic_index];
      for (pipeline* p : routes[r.topic_index]) (void)p->process(r.view, r.timestamp_ms, now);
    }
    for (auto& p : pipelines) {
      for (const auto& e : p->end_batch(now)) {
        pipeline_log->info("{}: {} {} the heavy set: estimate {} of {} items ({:.2f}%, threshold {:.2f}%)", p->name(),
                           metrics::clean_label_value(e.item), e.kind == sketch::heavy_event::kind::enter ? "entered" : "left",
                           e.estimate, e.window_items,
                           e.window_items ? 100.0 * static_cast<double>(e.estimate) / static_cast<double>(e.window_items) : 0.0,
                           100.0 * p->config().heavy_hitters->threshold);
      }
    }
    source.store_offsets();
    {
      std::lock_guard lock(counters.mutex);
      counters.consumed_by_topic = consumed;
    }

    const auto t = std::chrono::steady_clock::now();
    if (cfg.log.summary_interval.count() > 0 && t - last_summary >= cfg.log.summary_interval) {
      const double seconds = std::chrono::duration<double>(t - last_summary).count();
      for (std::size_t i = 0; i < pipelines.size(); ++i) {
        const pipeline_summary s = pipelines[i]->summary();
        pipeline_log->info("{}", summary_line(s, static_cast<double>(s.items - items_at_summary[i]) / seconds));
        items_at_summary[i] = s.items;
      }
      last_summary = t;
    }
  }

  ready.set(false, "shutting down");
  if (stop_signal.load()) log->info("received signal {}, shutting down", stop_signal.load());
  if (gen) gen->stop();
  source.close();
  http.stop();
  log->info("stopped");
  return status;
}

}  // namespace

int run_command(const std::string& config_path) {
  const load_result loaded = load_config_file(config_path);
  for (const config_error& e : loaded.errors) fmt::print(stderr, "{}\n", e.to_string());
  if (!loaded.value) return 1;
  setup_logging(loaded.value->log);

  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(*loaded.value);
  } catch (const std::exception& e) {
    spdlog::critical("cannot run: {}", e.what());
    return 1;
  }
}

}  // namespace sketchd
