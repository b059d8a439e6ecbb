// The value of a pipeline's gauge as its metrics collectable exports it (the first series
// of the family), for the tests of the pipeline and of the processor.
#pragma once

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"

namespace sketchd::test_support {

inline double pipeline_gauge(const pipeline& p, std::string_view name) {
  std::vector<prometheus::MetricFamily> families;
  p.collect(families);
  for (const auto& f : families) {
    if (f.name == name) return metrics::value_of(f.metric.at(0), f.type);
  }
  ADD_FAILURE() << "no " << name;
  return -1;
}

}  // namespace sketchd::test_support
