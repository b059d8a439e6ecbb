// The summary line: every log.summary_interval, one line per pipeline (items/s, the
// window's top items, the Bloom filter's fill and estimated FPR), with its figures as JSON
// fields in the JSON log; and the warning of a dedup window that shrinks by capacity.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/pipeline/pipeline.h"

namespace spdlog {
class logger;
}

namespace sketchd::app {

// The summary line of `s` at `items_per_second`:
//   "NAME: R items/s, window N items, top: ITEM (EST, P%) …; bloom fill F (newest of G
//   generations), estimated FPR E (target T)"
[[nodiscard]] std::string summary_line(const pipeline_summary& s, double items_per_second);

// The summary line's figures as JSON members (log_fields): items as their metric labels
// show them (valid UTF-8, at most 128 bytes), so that a log search and a query of
// sketchd_heavy_hitter_ratio{item=…} name an item alike.
[[nodiscard]] std::string summary_fields(const pipeline_summary& s, double items_per_second);

// A dedup window that rotates by capacity holds more distinct items than dedup.capacity:
// to keep the target FPR it shrinks (sketchd_bloom_effective_window_seconds), and items
// older than the shrunk window are forwarded again. The summary line's fill and FPR look
// healthy meanwhile, so a warning says it, at most once a minute while it goes on.
// Pure but for the warning it logs. Not thread-safe; one owner.
class capacity_warning {
 public:
  static constexpr std::chrono::minutes kEvery{1};

  // At a summary at `now`: warns on `log` when `s` rotated by capacity since the last.
  void check(spdlog::logger& log, const pipeline_config& p, const pipeline_summary& s,
             std::chrono::steady_clock::time_point now);

 private:
  std::uint64_t at_last_summary_ = 0;
  std::uint64_t at_last_warning_ = 0;
  std::optional<std::chrono::steady_clock::time_point> warned_;
};

// Logs the summary lines every log.summary_interval (0: never). Not thread-safe; the
// processing thread's.
class summary_reporter {
 public:
  // `pipelines` is borrowed and must outlive the reporter.
  summary_reporter(std::chrono::milliseconds interval,
                   const std::vector<std::unique_ptr<pipeline>>& pipelines);

  // True when the interval has passed at `now`: report() is due.
  [[nodiscard]] bool due(std::chrono::steady_clock::time_point now) const;

  // One line per pipeline, over the time since the last report.
  void report(std::chrono::steady_clock::time_point now);

 private:
  std::chrono::milliseconds interval_;
  const std::vector<std::unique_ptr<pipeline>>& pipelines_;
  std::chrono::steady_clock::time_point last_;
  std::vector<std::uint64_t> items_at_last_;
  std::vector<capacity_warning> capacity_;
};

}  // namespace sketchd::app
