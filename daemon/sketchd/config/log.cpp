// The log section: the level and format of the log lines, and the summary line's interval.
#include "sketchd/config/sections.h"

namespace sketchd::config_detail {

log_config read_log(checker& c, const field& f) {
  log_config l;
  const mapping m(c, f, {"level", "format", "summary_interval"});
  m.read("level", l.level, [&c](const field& level) {
    // "warning": the name the log lines themselves show for the level.
    return c.choice<log_level>(
        level,
        {log_level::trace, log_level::debug, log_level::info, log_level::warn, log_level::error,
         log_level::critical, log_level::off},
        {{"warning", log_level::warn}});
  });
  m.read("format", l.format, choices(c, {log_format::text, log_format::json}));
  m.read("summary_interval", l.summary_interval,
         durations(c, std::chrono::milliseconds(0), kMaxInterval));
  return l;
}

}  // namespace sketchd::config_detail
