#include "sketchd/metrics/metrics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace sketchd::metrics {
namespace {

TEST(LabelCleaning, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(clean_label_value("plain"), "plain");
  EXPECT_EQ(clean_label_value("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(clean_label_value("a\xff"
                              "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(clean_label_value("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong '/'
  EXPECT_EQ(clean_label_value("\xed\xa0\x80"),
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");                     // surrogate
  EXPECT_EQ(clean_label_value("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // emoji
}

TEST(LabelCleaning, CutsAtMostMaxBytesOnACharacterBoundary) {
  const std::string long_ascii(300, 'a');
  EXPECT_EQ(clean_label_value(long_ascii).size(), 128u);
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xe2\x82\xac";  // 3 bytes each
  const std::string cut = clean_label_value(euros);
  EXPECT_EQ(cut.size(), 126u);  // 42 whole characters; a 43rd would make 129 bytes
  EXPECT_EQ(clean_label_value(cut), cut);
}

TEST(LogLines, ItemsCannotBreakALine) {
  EXPECT_EQ(loggable_item("u1"), "\"u1\"");
  EXPECT_EQ(loggable_item("a\nb\tc\\d"), "\"a\\nb\\tc\\\\d\"");
  EXPECT_EQ(loggable_item(std::string("x\0\x1b[2J\x7f", 7)), "\"x\\x00\\x1b[2J\\x7f\"");
  EXPECT_EQ(loggable_item("a\xff"), "\"a\xef\xbf\xbd\"");  // invalid UTF-8 replaced
  // Quoted, an item with quotes and spaces still reads as one item.
  EXPECT_EQ(loggable_item("x\" (99, 50.0%) \"y"), "\"x\\\" (99, 50.0%) \\\"y\"");
  // Cut to 64 bytes, and marked as cut: two items that differ after their 64th byte do not
  // look the same.
  const std::string quoted_64 = fmt::format("\"{}\"", std::string(64, 'z'));
  EXPECT_EQ(loggable_item(std::string(100, 'z')), quoted_64 + "…");
  EXPECT_EQ(loggable_item(std::string(64, 'z')), quoted_64);
  // 40 invalid bytes become 40 U+FFFD of 3 bytes when cleaned: cut too.
  const std::string replaced = loggable_item(std::string(40, '\xff'));
  EXPECT_EQ(replaced.substr(replaced.size() - 4), "\"…");
}

// The JSON log's fields (and the API's answers) escape what the text log escapes: shown as
// they are, an item cannot act on a terminal either.
TEST(LogLines, JsonStringsEscapeTerminalControls) {
  EXPECT_EQ(json::quote("u1"), "\"u1\"");
  EXPECT_EQ(json::quote(std::string("a\0\x1b[2J\x7f", 7)), "\"a\\u0000\\u001b[2J\\u007f\"");
  // CSI (U+009B), a line separator (U+2028), a right-to-left override (U+202E); an é kept.
  EXPECT_EQ(json::quote("\xc2\x9b"
                        "31m \xe2\x80\xa8 \xe2\x80\xae caf\xc3\xa9"),
            "\"\\u009b31m \\u2028 \\u202e caf\xc3\xa9\"");
}

// json::dump (nlohmann::json underneath) escapes the same: any bytes make valid JSON.
TEST(LogLines, JsonDumpEscapesTerminalControlsAndReplacesInvalidUtf8) {
  const nlohmann::json j = {{"item", std::string("a\0\x1b[2J\x7f", 7)},
                            {"bidi", "\xc2\x9b" "31m \xe2\x80\xa8 \xe2\x80\xae caf\xc3\xa9"},
                            {"bad", "x\xffy"}};
  EXPECT_EQ(json::dump(j),
            "{\"bad\":\"x\xef\xbf\xbdy\",\"bidi\":\"\\u009b31m \\u2028 \\u202e caf\xc3\xa9\","
            "\"item\":\"a\\u0000\\u001b[2J\\u007f\"}");
  EXPECT_EQ(json::members({{"pipeline", "p"}, {"n", 3}}), "\"n\":3,\"pipeline\":\"p\"");
  EXPECT_EQ(json::members(nlohmann::json::object()), "");
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
