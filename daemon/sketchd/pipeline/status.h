// What a pipeline tells about itself to readers (the HTTP API renders these): plain values,
// taken under the pipeline's lock, that outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sketchd/config/config.h"

namespace sketchd {

struct heavy_hitters_status {
  std::int64_t window_ms = 0;
  std::uint32_t buckets = 0;
  double epsilon = 0;
  double delta = 0;
  std::uint32_t top_k = 0;
  double threshold = 0;  // φ
  std::uint64_t window_items = 0;
  double error_bound = 0;  // ε·N of the window
};

struct dedup_status {
  std::int64_t window_ms = 0;
  std::uint64_t capacity = 0;
  std::uint32_t generations = 0;
  std::uint64_t first_seen_total = 0;
  std::uint64_t duplicates_total = 0;
  double target_fpr = 0;
  double estimated_fpr = 0;
  double estimated_items = 0;
  std::vector<double> fill_ratio;  // per generation, the newest first
  std::uint64_t forwarded_total = 0;
  std::int64_t guaranteed_horizon_ms = 0;
  std::int64_t effective_window_ms = 0;
};

// The pipeline as configured and its state (GET /api/v1/pipelines/NAME).
struct pipeline_status {
  std::string name;
  std::vector<std::string> topics;
  item_config item;
  clock_kind clock = clock_kind::event;
  state_scope scope = state_scope::instance;
  std::size_t shards = 0;  // resident: 1 with scope: instance
  std::uint64_t items_total = 0;
  std::optional<heavy_hitters_status> heavy_hitters;
  std::optional<dedup_status> dedup;
};

// The current top-k of the heavy-hitter window (GET …/topk).
struct topk_status {
  struct entry {
    std::string item;  // the item's bytes, whatever they are
    std::uint64_t estimate = 0;
    double ratio = 0;  // estimate / window_items, 0 for an empty window
    bool heavy = false;
    friend bool operator==(const entry&, const entry&) = default;
  };
  std::string pipeline;
  std::uint64_t window_items = 0;
  double threshold = 0;
  double error_bound = 0;
  std::vector<entry> items;  // highest estimate first
  friend bool operator==(const topk_status&, const topk_status&) = default;
};

// One item's estimate in the heavy-hitter window (GET …/estimate?item=).
struct estimate_status {
  std::string item;
  std::uint64_t estimate = 0;
  double error_bound = 0;
  std::uint64_t window_items = 0;
  friend bool operator==(const estimate_status&, const estimate_status&) = default;
};

// Whether the dedup window holds an item (GET …/seen?item=).
struct seen_status {
  std::string item;
  bool seen = false;
  double estimated_fpr = 0;  // the chance that a new item is seen, now
  friend bool operator==(const seen_status&, const seen_status&) = default;
};

}  // namespace sketchd
