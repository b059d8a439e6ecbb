// Logging set-up: spdlog loggers per module ("kafka", "pipeline", "http", "state",
// "generator"), writing text or JSON lines to stderr at the configured level.
#pragma once

#include "sketchd/config/config.h"

namespace sketchd {

// Installs the loggers. JSON lines look like
//   {"time":"2026-11-22T20:00:00.123Z","level":"info","logger":"pipeline","message":"…"}
// with the message escaped, so any item bytes in it keep the line valid JSON.
void setup_logging(const log_config& config);

}  // namespace sketchd
