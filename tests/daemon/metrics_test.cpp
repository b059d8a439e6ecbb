#include "sketchd/metrics/metrics.h"

#include <gtest/gtest.h>

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
  std::vector<metric_family> f{
      {"m", "a\\b\nc", metric_type::counter, {{{{"item", "q\"b\\s\nn"}}, 3}, {{}, 0.25}}}};
  EXPECT_EQ(serialize_text(f),
            "# HELP m a\\\\b\\nc\n# TYPE m counter\nm{item=\"q\\\"b\\\\s\\nn\"} 3\nm 0.25\n");
}

TEST(Registry, MergesFamiliesOfTheSameNameAcrossCollectors) {
  registry r;
  r.add([](std::vector<metric_family>& out) {
    out.push_back({"x", "h", metric_type::gauge, {{{{"p", "a"}}, 1}}});
  });
  r.add([](std::vector<metric_family>& out) {
    out.push_back({"x", "h", metric_type::gauge, {{{{"p", "b"}}, 2}}});
  });
  EXPECT_EQ(r.scrape(), "# HELP x h\n# TYPE x gauge\nx{p=\"a\"} 1\nx{p=\"b\"} 2\n");
}

TEST(ProcessMetrics, ReportsTheStandardSeries) {
  std::vector<metric_family> out;
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
      EXPECT_GE(f.samples.at(0).value, 0);
    } else {
      EXPECT_GT(f.samples.at(0).value, 0) << f.name;
    }
  }
}

}  // namespace
}  // namespace sketchd::metrics
