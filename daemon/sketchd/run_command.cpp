// `sketchd run`: loads the configuration, then builds, runs and shuts down the daemon
// (app/app.h says what each step does and in which order).
#include <spdlog/spdlog.h>

#include <csignal>
#include <exception>
#include <string>

#include "sketch/rolling_bloom.h"
#include "sketchd/app/app.h"
#include "sketchd/app/signals.h"
#include "sketchd/commands.h"
#include "sketchd/config/config.h"
#include "sketchd/util/build_info.h"
#include "sketchd/util/logging.h"

namespace sketchd {
namespace {

// The parameters dedup.sizing: transmission derives, one line for each pipeline that has it.
void log_transmission_sizing(const pipeline_config& p) {
  if (!p.dedup || p.dedup->sizing != dedup_sizing::transmission) return;
  const dedup_config& d = *p.dedup;
  sketch::rolling_bloom_options o;
  o.window_ms = d.window.count();
  o.capacity = d.capacity;
  o.generations = d.generations;
  o.fpr = d.fpr;
  const std::uint64_t memory_bits = sketch::rolling_bloom::generation_bits(o);
  o.fpr = sized_fpr(d);
  const std::uint64_t bits = sketch::rolling_bloom::generation_bits(o);
  constexpr double kMB = 1e6;
  spdlog::info(
      "pipeline {}: dedup sized for transmission: generations of {:.4g} MB for a window rate of "
      "{} (fpr {}; sized for memory, {:.4g} MB each), {:.4g} MB in all; a full generation "
      "Golomb-coded takes about {:.4g} MB in snapshots and shards",
      p.name, static_cast<double>(bits) / 8 / kMB, o.fpr, d.fpr,
      static_cast<double>(memory_bits) / 8 / kMB,
      static_cast<double>(bits) / 8 / kMB * d.generations,
      sketch::rolling_bloom::full_generation_coded_bits(o) / 8 / kMB);
}

}  // namespace

int run_command(const std::string& config_path) {
  // First, so that a stop requested while the configuration loads is a clean stop too. A
  // hang-up (the terminal closed, or an operator expecting a reload) stops cleanly as well,
  // instead of killing the process between two commits.
  app::start_signal_thread();
  std::signal(SIGPIPE, SIG_IGN);
  const load_result loaded = load_config_file(config_path);
  for (const config_error& e : loaded.errors) print_stderr(e.to_string() + "\n");
  if (!loaded.value) return 1;
  setup_logging(loaded.value->log);
  {
    std::string names;
    for (const auto& p : loaded.value->pipelines) names += (names.empty() ? "" : ", ") + p.name;
    spdlog::info("sketchd {} (revision {}) starting: configuration {}, pipeline(s) {}",
                 SKETCHD_VERSION, build_revision(), config_path, names);
  }
  for (const auto& p : loaded.value->pipelines) log_transmission_sizing(p);
  try {
    const std::unique_ptr<app::app> daemon = app::app::build(*loaded.value);
    if (!daemon) return 1;
    const int status = daemon->run(app::stop_flag());
    app::log_stop_signal_once(*spdlog::default_logger());
    return daemon->shutdown(status, app::stop_signal() == SIGHUP);
  } catch (const std::exception& e) {
    spdlog::critical("cannot run: {}", e.what());
    return 1;
  }
}

}  // namespace sketchd
