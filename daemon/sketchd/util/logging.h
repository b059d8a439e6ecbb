// Logging set-up: spdlog loggers per module ("kafka", "pipeline", "http", "state",
// "generator"), writing text or JSON lines to stderr at the configured level.
#pragma once

#include <string>
#include <string_view>

#include "sketchd/config/config.h"

namespace sketchd {

// Installs the loggers. JSON lines look like
//   {"time":"2026-11-22T20:00:00.123Z","level":"info","logger":"pipeline","message":"…"}
// with the message escaped, so any item bytes in it keep the line valid JSON.
void setup_logging(const log_config& config);

// An item as it shows in a log line: in double quotes, valid UTF-8 of at most 64 bytes,
// control characters, backslashes and quotes escaped (\n, \t, \xNN, \\, \"), so that an
// item cannot break a text line in two, move a terminal's cursor or read as two items; an
// item cut to 64 bytes is followed by "…" after its closing quote.
[[nodiscard]] std::string loggable_item(std::string_view item);

// Writes TEXT to stderr before logging is set up (usage and configuration errors). Never
// throws: when stderr cannot be written (closed, a full disk), the exit status still says
// what happened.
void print_stderr(std::string_view text) noexcept;

}  // namespace sketchd
