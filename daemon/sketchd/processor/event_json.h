// The JSON the processor writes: the heavy-hitter alert events it sends to
// heavy_hitters.alerts_topic, and the fields of its JSON log lines (see log_fields). All of
// it through nlohmann::json (json::dump), so that any item bytes make valid JSON.
// Pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketch/top_k.h"
#include "sketchd/config/config.h"

namespace sketchd {

// The share of the window an event's item has: estimate / window_items, 0 for an empty
// window.
[[nodiscard]] double heavy_ratio(const sketch::heavy_event& e) noexcept;

// `ms` since 1970 as UTC, to the millisecond: "2026-11-22T20:00:00.123Z".
[[nodiscard]] std::string utc_time(std::int64_t ms);

// The alert event of `e` in pipeline `pipeline` (its heavy_hitters section `hh`), sent at
// `wall_ms`: an object with pipeline, event ("enter" or "leave"), item, estimate, ratio,
// window_items, error_bound, threshold, time (UTC) and timestamp_ms. error_bound is the
// sketch's bound ε·N with ε = e/w, w = ⌈e/ε⌉ (seed 005).
[[nodiscard]] std::string alert_event(std::string_view pipeline, const heavy_hitters_config& hh,
                                      const sketch::heavy_event& e, std::int64_t wall_ms);

// The fields of a heavy-set change's log line: pipeline, event, item (cleaned as a label
// value), estimate, window_items, ratio, threshold.
[[nodiscard]] nlohmann::ordered_json heavy_change_fields(std::string_view pipeline,
                                                         const sketch::heavy_event& e,
                                                         double threshold);

// The fields of a skipped-messages warning: pipeline, skipped (the total), reasons (the
// count of each) and example (topic, partition and offset of one such message).
struct skipped_example {
  std::string_view topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
};
[[nodiscard]] nlohmann::ordered_json skipped_fields(
    std::string_view pipeline, std::uint64_t skipped,
    const std::vector<std::pair<std::string_view, std::uint64_t>>& reasons,
    const skipped_example& example);

}  // namespace sketchd
