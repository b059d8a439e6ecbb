#include "sketchd/metrics/metrics.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <algorithm>
#include <string>

namespace sketchd::metrics {
namespace {

// A label value is utf8::clean's (utf8_test.cpp) at most 128 bytes long.
TEST(LabelCleaning, LabelsAreValidUtf8OfAtMost128Bytes) {
  EXPECT_EQ(clean_label_value("a\xff"
                              "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(clean_label_value(std::string(300, 'a')).size(), 128u);
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xe2\x82\xac";  // 3 bytes each
  EXPECT_EQ(clean_label_value(euros).size(), 126u);       // cut at a character boundary
  EXPECT_EQ(clean_label_value(euros, 7).size(), 6u);
}

TEST(Exposition, EscapesLabelValuesAndHelp) {
  registry r;
  r.add([](std::vector<prometheus::MetricFamily>& out) {
    auto f = family("m", "a\\b\nc", prometheus::MetricType::Counter);
    add(f, {{"item", "q\"b\\s\nn"}}, 3);
    add(f, {}, 0.25);
    out.push_back(std::move(f));
  });
  EXPECT_EQ(r.scrape(),
            "# HELP m a\\\\b\\nc\n# TYPE m counter\nm{item=\"q\\\"b\\\\s\\nn\"} 3\nm 0.25\n");
}

TEST(Registry, MergesFamiliesOfTheSameNameAcrossCollectors) {
  registry r;
  r.add([](std::vector<prometheus::MetricFamily>& out) {
    auto f = family("x", "h", prometheus::MetricType::Gauge);
    add(f, {{"p", "a"}}, 1);
    out.push_back(std::move(f));
  });
  r.add([](std::vector<prometheus::MetricFamily>& out) {
    auto f = family("x", "h", prometheus::MetricType::Gauge);
    add(f, {{"p", "b"}}, 2);
    out.push_back(std::move(f));
  });
  EXPECT_EQ(r.scrape(), "# HELP x h\n# TYPE x gauge\nx{p=\"a\"} 1\nx{p=\"b\"} 2\n");
}

TEST(Registry, ServesTheFamiliesComponentsRegisteredBeforeTheCollectables) {
  registry r;
  r.add([](std::vector<prometheus::MetricFamily>& out) {
    out.push_back(single("y", "scraped", prometheus::MetricType::Gauge, 0.5));
  });
  auto& counters =
      prometheus::BuildCounter().Name("c_total").Help("counted").Register(r.families());
  counters.Add({{"topic", "t"}}).Increment(3);
  // The same name and help registered again is the same family (prometheus-cpp's Merge).
  auto& again = prometheus::BuildCounter().Name("c_total").Help("counted").Register(r.families());
  EXPECT_EQ(&again, &counters);
  EXPECT_EQ(r.scrape(),
            "# HELP c_total counted\n# TYPE c_total counter\nc_total{topic=\"t\"} 3\n"
            "# HELP y scraped\n# TYPE y gauge\ny 0.5\n");
}

TEST(ProcessMetrics, ReportsTheStandardSeries) {
  std::vector<prometheus::MetricFamily> out;
  collect_process_metrics(out);
  std::vector<std::string> names;
  for (const auto& f : out) names.push_back(f.name);
  for (const char* want : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_open_fds", "process_start_time_seconds"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const auto& f : out) {
    // A fresh test process may not have used a whole clock tick of CPU yet.
    if (f.name == "process_cpu_seconds_total") {
      EXPECT_GE(value_of(f.metric.at(0), f.type), 0);
    } else {
      EXPECT_GT(value_of(f.metric.at(0), f.type), 0) << f.name;
    }
  }
}

}  // namespace
}  // namespace sketchd::metrics
