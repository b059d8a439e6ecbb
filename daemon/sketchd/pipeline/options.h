// The library's options for a pipeline's configuration: what the pipeline builds its
// structures with, and what its state's parameters are derived from.
#pragma once

#include <cstdint>

#include "sketch/rolling_bloom.h"
#include "sketch/rolling_count_min.h"
#include "sketchd/config/config.h"
#include "sketchd/pipeline/extractor.h"

namespace sketchd::pipeline_options {

[[nodiscard]] inline extractor_options extractor_of(const pipeline_config& c) {
  extractor_options o;
  o.from = c.item.from;
  o.json_pointer = c.item.path;
  o.header_name = c.item.header;
  o.max_item_bytes = c.max_item_bytes;
  return o;
}

[[nodiscard]] inline sketch::rolling_count_min_options count_min_of(const heavy_hitters_config& h,
                                                                    std::uint64_t seed) {
  sketch::rolling_count_min_options o;
  o.window_ms = h.window.count();
  o.buckets = h.buckets;
  o.epsilon = h.epsilon;
  o.delta = h.delta;
  o.top_k = h.top_k;
  o.threshold = h.threshold;
  o.conservative = h.conservative;
  o.seed = seed;
  return o;
}

[[nodiscard]] inline sketch::rolling_bloom_options bloom_of(const dedup_config& d,
                                                            std::uint64_t seed) {
  sketch::rolling_bloom_options o;
  o.window_ms = d.window.count();
  o.capacity = d.capacity;
  o.fpr = sized_fpr(d);
  o.generations = d.generations;
  o.seed = seed;
  return o;
}

}  // namespace sketchd::pipeline_options
