#include "sketchd/app/summary.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "sketchd/metrics/metrics.h"
#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace sketchd::app {

std::string summary_line(const pipeline_summary& s, double items_per_second) {
  std::string line = fmt::format("{}: {:.0f} items/s", s.name, items_per_second);
  if (s.has_heavy_hitters) {
    line += fmt::format(", window {} items, top:", s.window_items);
    if (s.top.empty()) line += " -";
    for (const auto& e : s.top) {
      line += fmt::format(" {} ({}, {:.1f}%)", loggable_item(e.item), e.estimate,
                          s.window_items ? 100.0 * static_cast<double>(e.estimate) /
                                               static_cast<double>(s.window_items)
                                         : 0.0);
    }
  }
  if (s.has_dedup) {
    // The fill of the newest generation, the one items go into: it restarts near 0 at
    // each rotation, while the estimated FPR covers every generation. std::max: an empty
    // filter's estimate is -0, printed "0".
    line += fmt::format(
        "; bloom fill {:.3f} (newest of {} generations), estimated FPR {:.2g} (target {:.2g})",
        s.fill, s.generations, std::max(0.0, s.estimated_fpr), s.target_fpr);
  }
  return line;
}

std::string summary_fields(const pipeline_summary& s, double items_per_second) {
  // The members in the order sketchd has always written them, numbers as it wrote them.
  using json::number;
  nlohmann::ordered_json f;
  f["pipeline"] = s.name;
  f["items_per_second"] = number(items_per_second);
  if (s.has_heavy_hitters) {
    f["window_items"] = s.window_items;
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const auto& e : s.top) {
      nlohmann::ordered_json entry;
      entry["item"] = metrics::clean_label_value(e.item);
      entry["estimate"] = e.estimate;
      entry["ratio"] = number(s.window_items ? static_cast<double>(e.estimate) /
                                                   static_cast<double>(s.window_items)
                                             : 0.0);
      top.push_back(std::move(entry));
    }
    f["top"] = std::move(top);
  }
  if (s.has_dedup) {
    f["bloom_fill"] = number(s.fill);
    f["bloom_generations"] = s.generations;
    f["estimated_fpr"] = number(std::max(0.0, s.estimated_fpr));
    f["target_fpr"] = number(s.target_fpr);
  }
  return json::members(f);
}

void capacity_warning::check(spdlog::logger& log, const pipeline_config& p,
                             const pipeline_summary& s, std::chrono::steady_clock::time_point now) {
  if (!s.has_dedup || !p.dedup) return;
  const bool rotated = s.rotations_by_capacity != at_last_summary_;  // in this interval
  at_last_summary_ = s.rotations_by_capacity;
  if (!rotated || (warned_ && now - *warned_ < kEvery)) return;
  const std::uint64_t since = s.rotations_by_capacity - at_last_warning_;
  const bool first = !warned_.has_value();
  at_last_warning_ = s.rotations_by_capacity;
  warned_ = now;
  log.warn(
      "{}: the dedup window holds more distinct items than dedup.capacity ({}): {} rotation(s) "
      "by capacity since {}, and it reaches back {} instead of {} (an item "
      "repeated after that is forwarded again); raise dedup.capacity",
      p.name, p.dedup->capacity, since, first ? "sketchd started" : "the last such line",
      format_duration(std::chrono::milliseconds(s.effective_window_ms)),
      format_duration(p.dedup->window));
}

summary_reporter::summary_reporter(std::chrono::milliseconds interval,
                                   const std::vector<std::unique_ptr<pipeline>>& pipelines)
    : interval_(interval),
      pipelines_(pipelines),
      last_(std::chrono::steady_clock::now()),
      items_at_last_(pipelines.size(), 0),
      capacity_(pipelines.size()) {}

bool summary_reporter::due(std::chrono::steady_clock::time_point now) const {
  return interval_.count() > 0 && now - last_ >= interval_;
}

void summary_reporter::report(std::chrono::steady_clock::time_point now) {
  const auto log = module_logger("pipeline");
  const double seconds = std::chrono::duration<double>(now - last_).count();
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    const pipeline_summary s = pipelines_[i]->summary();
    const double rate = static_cast<double>(s.items - items_at_last_[i]) / seconds;
    const log_fields fields(summary_fields(s, rate));
    log->info("{}", summary_line(s, rate));
    items_at_last_[i] = s.items;
    capacity_[i].check(*log, pipelines_[i]->config(), s, now);
  }
  last_ = now;
}

}  // namespace sketchd::app
