// Logging set-up: spdlog loggers per module ("kafka", "pipeline", "http", "state",
// "generator"), writing text or JSON lines to stderr at the configured level.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "sketchd/config/config.h"

namespace spdlog {
class logger;
}

namespace sketchd {

// Installs the loggers. JSON lines look like
//   {"time":"2026-11-22T20:00:00.123Z","level":"info","logger":"pipeline","message":"…"}
// with the message escaped, so any item bytes in it keep the line valid JSON.
void setup_logging(const log_config& config);

// The logger of `module` ("kafka", "pipeline", "http", "state", "generator"), or spdlog's
// default logger before setup_logging() has installed it (in tests). Never null.
[[nodiscard]] std::shared_ptr<spdlog::logger> module_logger(const std::string& module);

// An item as it shows in a log line: in double quotes, valid UTF-8 of at most 64 bytes,
// control characters, backslashes and quotes escaped (\n, \t, \xNN, \\, \"), so that an
// item cannot break a text line in two, move a terminal's cursor or read as two items; an
// item cut to 64 bytes is followed by "…" after its closing quote.
[[nodiscard]] std::string loggable_item(std::string_view item);

// Members added to the JSON object of each line this thread logs while it lives (text lines
// leave them out): the figures of a line as fields of their own, so that a log pipeline
// (Loki, Elasticsearch) can query them without parsing the message. `members` are a JSON
// object's members without the braces, such as `"pipeline":"clicks","window_items":5`.
class log_fields {
 public:
  explicit log_fields(std::string members) noexcept;
  ~log_fields();
  log_fields(const log_fields&) = delete;
  log_fields& operator=(const log_fields&) = delete;

 private:
  std::string previous_;
};

// Writes TEXT to stderr before logging is set up (usage and configuration errors). Never
// throws: when stderr cannot be written (closed, a full disk), the exit status still says
// what happened.
void print_stderr(std::string_view text) noexcept;

}  // namespace sketchd
