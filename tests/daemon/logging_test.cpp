#include "sketchd/util/logging.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace sketchd {
namespace {

TEST(LogLines, ItemsCannotBreakALine) {
  EXPECT_EQ(loggable_item("u1"), "\"u1\"");
  EXPECT_EQ(loggable_item("a\nb\tc\\d"), "\"a\\nb\\tc\\\\d\"");
  EXPECT_EQ(loggable_item(std::string("x\0\x1b[2J\x7f", 7)), "\"x\\x00\\x1b[2J\\x7f\"");
  EXPECT_EQ(loggable_item("a\xff"), "\"a\xef\xbf\xbd\"");  // invalid UTF-8 replaced
  // Quoted, an item with quotes and spaces still reads as one item.
  EXPECT_EQ(loggable_item("x\" (99, 50.0%) \"y"), "\"x\\\" (99, 50.0%) \\\"y\"");
  // Cut to 64 bytes, and marked as cut: two items that differ after their 64th byte do not
  // look the same.
  const std::string z64(64, 'z');
  EXPECT_EQ(loggable_item(std::string(100, 'z')), fmt::format("\"{}\"…", z64));
  EXPECT_EQ(loggable_item(z64), fmt::format("\"{}\"", z64));
  // 40 invalid bytes become 40 U+FFFD of 3 bytes when cleaned: cut too.
  const std::string replaced = loggable_item(std::string(40, '\xff'));
  EXPECT_EQ(replaced.substr(replaced.size() - 4), "\"…");
}

// What the JSON log writes to stderr for `log` (the lines, as they are).
template <typename Log>
std::string json_lines(Log log) {
  setup_logging(log_config{.level = log_level::info, .format = log_format::json});
  testing::internal::CaptureStderr();
  log(*module_logger("pipeline"));
  return testing::internal::GetCapturedStderr();
}

// A line of the JSON log is one JSON object whatever its message holds (invalid bytes,
// terminal controls, quotes, a newline), with the fields of the log_fields in force.
TEST(JsonLog, EachLineIsOneJsonObjectWithItsFields) {
  const std::string text = json_lines([](spdlog::logger& l) {
    log_fields fields(R"("pipeline":"clicks","skipped":3)");
    l.warn("item {} \x1b[2J \"q\" \xc2\x9b\nnext", std::string("x\xffy"));
  });
  ASSERT_EQ(text.find('\n'), text.size() - 1) << text;  // one line
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  const auto line = nlohmann::json::parse(text);
  EXPECT_EQ(line.at("level"), "warning");
  EXPECT_EQ(line.at("logger"), "pipeline");
  EXPECT_EQ(line.at("message"), "item x\xef\xbf\xbdy \x1b[2J \"q\" \xc2\x9b\nnext");
  EXPECT_EQ(line.at("pipeline"), "clicks");
  EXPECT_EQ(line.at("skipped"), 3);
  EXPECT_NE(text.find(R"("message":"item x)"
                      "\xef\xbf\xbd"
                      R"(y \u001b[2J \"q\" \u009b\nnext")"),
            std::string::npos)
      << text;
  // Without log_fields, the object ends after the message.
  const std::string plain = json_lines([](spdlog::logger& l) { l.info("plain"); });
  EXPECT_NE(plain.find(R"(,"message":"plain"})"), std::string::npos) << plain;
}

}  // namespace
}  // namespace sketchd
