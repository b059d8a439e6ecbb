#include "sketchd/util/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketchd/util/utf8.h"

namespace sketchd::json {
namespace {

// The JSON log's fields (and the API's answers) escape what the text log escapes: shown as
// they are, an item cannot act on a terminal either.
TEST(JsonText, StringsEscapeTerminalControls) {
  const auto quote = [](std::string_view s) { return dump(nlohmann::json(s)); };
  EXPECT_EQ(quote("u1"), "\"u1\"");
  EXPECT_EQ(quote(std::string("a\0\x1b[2J\x7f", 7)), "\"a\\u0000\\u001b[2J\\u007f\"");
  // CSI (U+009B), a line separator (U+2028), a right-to-left override (U+202E); an é kept.
  EXPECT_EQ(quote("\xc2\x9b"
                  "31m \xe2\x80\xa8 \xe2\x80\xae caf\xc3\xa9"),
            "\"\\u009b31m \\u2028 \\u202e caf\xc3\xa9\"");
}

// json::dump (nlohmann::json underneath) escapes the same: any bytes make valid JSON.
TEST(JsonText, DumpEscapesTerminalControlsAndReplacesInvalidUtf8) {
  const nlohmann::json j = {{"item", std::string("a\0\x1b[2J\x7f", 7)},
                            {"bidi",
                             "\xc2\x9b"
                             "31m \xe2\x80\xa8 \xe2\x80\xae caf\xc3\xa9"},
                            {"bad", "x\xffy"}};
  EXPECT_EQ(dump(j),
            "{\"bad\":\"x\xef\xbf\xbdy\",\"bidi\":\"\\u009b31m \\u2028 \\u202e caf\xc3\xa9\","
            "\"item\":\"a\\u0000\\u001b[2J\\u007f\"}");
  EXPECT_EQ(members({{"pipeline", "p"}, {"n", 3}}), "\"n\":3,\"pipeline\":\"p\"");
  EXPECT_EQ(members(nlohmann::json::object()), "");
}

// Invalid bytes become what utf8::clean makes of them, wherever the string is (a member
// name, an array, a nested object), so that the API, the logs and the metric labels show an
// item alike: a sequence cut short is one U+FFFD per byte (nlohmann's own replacement would
// make it one).
TEST(JsonText, DumpCleansEveryStringAsUtf8CleanDoes) {
  const std::string cut = "x\xe2\x82";
  std::string cleaned = "\"";  // (a `"\"" + …` here trips GCC 12's -Wrestrict)
  cleaned += utf8::clean(cut);
  cleaned += '"';
  EXPECT_EQ(dump(nlohmann::json(cut)), cleaned);
  const nlohmann::json nested = {{"k\xff", {{"a", nlohmann::json::array({cut, 1})}}}};
  EXPECT_EQ(dump(nested), "{\"k\xef\xbf\xbd\":{\"a\":[" + cleaned + ",1]}}");
}

TEST(JsonText, OrderedJsonKeepsItsMembersInOrder) {
  nlohmann::ordered_json o;
  o["name"] = "p";
  o["b"] = 1;
  o["a"] = nlohmann::ordered_json::array({true, nullptr});
  EXPECT_EQ(dump(o), "{\"name\":\"p\",\"b\":1,\"a\":[true,null]}");
  EXPECT_EQ(members(o), "\"name\":\"p\",\"b\":1,\"a\":[true,null]");
}

// As the hand-written writer that number() replaced wrote them (fmt's shortest form).
TEST(JsonText, NumbersAreWrittenAsIntegersWhenIntegral) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0"},
      {3.0, "3"},
      {-2.0, "-2"},
      {1e15, "1000000000000000"},
      {9e15, "9000000000000000"},
      {0.25, "0.25"},
      {1e-05, "1e-05"},
      {0.1, "0.1"},
      {1e300, "1e+300"},
      {std::numeric_limits<double>::quiet_NaN(), "null"},
      {std::numeric_limits<double>::infinity(), "null"}};
  for (const auto& [v, expected] : cases) {
    EXPECT_EQ(dump(number(v)), expected) << v;
    EXPECT_EQ(dump(number<nlohmann::json>(v)), expected) << v;
  }
  EXPECT_EQ(dump(number(3.0)), "3");
  EXPECT_EQ(dump(number(std::nan(""))), "null");
}

}  // namespace
}  // namespace sketchd::json
