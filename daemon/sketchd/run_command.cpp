// `sketchd run`: loads the configuration, then builds, runs and shuts down the daemon
// (app/app.h says what each step does and in which order).
#include <spdlog/spdlog.h>

#include <csignal>
#include <exception>
#include <string>

#include "sketchd/app/app.h"
#include "sketchd/app/signals.h"
#include "sketchd/commands.h"
#include "sketchd/config/config.h"
#include "sketchd/util/build_info.h"
#include "sketchd/util/logging.h"

namespace sketchd {

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
