#include "sketchd/processor/event_json.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <numbers>

#include "sketchd/metrics/metrics.h"
#include "sketchd/util/json.h"

namespace sketchd {

namespace {

// The members in the order sketchd has always written them, numbers as it wrote them.
using json::number;

std::string_view event_name(const sketch::heavy_event& e) {
  return e.kind == sketch::heavy_event::kind::enter ? "enter" : "leave";
}

}  // namespace

double heavy_ratio(const sketch::heavy_event& e) noexcept {
  return e.window_items ? static_cast<double>(e.estimate) / static_cast<double>(e.window_items)
                        : 0.0;
}

std::string utc_time(std::int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

std::string alert_event(std::string_view pipeline, const heavy_hitters_config& hh,
                        const sketch::heavy_event& e, std::int64_t wall_ms) {
  // The sketch's ε is e/w with w = ⌈e/ε⌉ (seed 005): the bound it reports, ε·N.
  const double width = std::ceil(std::numbers::e / hh.epsilon);
  const double error_bound = std::numbers::e / width * static_cast<double>(e.window_items);
  return json::dump(nlohmann::ordered_json{{"pipeline", pipeline},
                                           {"event", event_name(e)},
                                           {"item", e.item},
                                           {"estimate", e.estimate},
                                           {"ratio", number(heavy_ratio(e))},
                                           {"window_items", e.window_items},
                                           {"error_bound", number(error_bound)},
                                           {"threshold", number(hh.threshold)},
                                           {"time", utc_time(wall_ms)},
                                           {"timestamp_ms", wall_ms}});
}

nlohmann::ordered_json heavy_change_fields(std::string_view pipeline, const sketch::heavy_event& e,
                                           double threshold) {
  return {{"pipeline", pipeline},
          {"event", event_name(e)},
          {"item", metrics::clean_label_value(e.item)},
          {"estimate", e.estimate},
          {"window_items", e.window_items},
          {"ratio", number(heavy_ratio(e))},
          {"threshold", number(threshold)}};
}

nlohmann::ordered_json skipped_fields(
    std::string_view pipeline, std::uint64_t skipped,
    const std::vector<std::pair<std::string_view, std::uint64_t>>& reasons,
    const skipped_example& example) {
  nlohmann::ordered_json by_reason = nlohmann::ordered_json::object();
  for (const auto& [reason, n] : reasons) by_reason[std::string(reason)] = n;
  return {
      {"pipeline", pipeline},
      {"skipped", skipped},
      {"reasons", std::move(by_reason)},
      {"example",
       {{"topic", example.topic}, {"partition", example.partition}, {"offset", example.offset}}}};
}

}  // namespace sketchd
