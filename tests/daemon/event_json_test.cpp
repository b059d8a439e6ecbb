// The JSON the processor writes: alert events for heavy_hitters.alerts_topic, and the fields
// of its JSON log lines, valid JSON whatever the item's bytes.
#include "sketchd/processor/event_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>

#include "sketchd/util/json.h"

namespace sketchd {
namespace {

heavy_hitters_config hh() {
  heavy_hitters_config c;
  c.epsilon = 0.001;
  c.threshold = 0.05;
  return c;
}

TEST(EventJson, UtcTimeHasMilliseconds) {
  EXPECT_EQ(utc_time(1'763'841'600'123), "2025-11-22T20:00:00.123Z");
  EXPECT_EQ(utc_time(0), "1970-01-01T00:00:00.000Z");
}

TEST(EventJson, AnAlertEventHasEveryMemberWithItsMeaning) {
  const sketch::heavy_event e{sketch::heavy_event::kind::leave, "user-7", 40, 1000};
  const nlohmann::json j = nlohmann::json::parse(alert_event("clicks", hh(), e, 1'763'841'600'123));
  EXPECT_EQ(j, (nlohmann::json{{"pipeline", "clicks"},
                               {"event", "leave"},
                               {"item", "user-7"},
                               {"estimate", 40},
                               {"ratio", 0.04},
                               {"window_items", 1000},
                               // ε·N with the sketch's ε = e/w, w = ⌈e/0.001⌉ = 2719.
                               {"error_bound", std::numbers::e / 2719.0 * 1000},
                               {"threshold", 0.05},
                               {"time", "2025-11-22T20:00:00.123Z"},
                               {"timestamp_ms", 1'763'841'600'123}}));
}

// The members in the order sketchd has always written them, and whole numbers as integers.
TEST(EventJson, AnAlertEventIsWrittenAsItAlwaysWas) {
  const sketch::heavy_event e{sketch::heavy_event::kind::enter, "u1", 500, 1000};
  heavy_hitters_config c = hh();
  c.threshold = 0.5;
  const std::string text = alert_event("p", c, e, 0);
  EXPECT_EQ(text.substr(0, text.find(",\"error_bound\":")),
            "{\"pipeline\":\"p\",\"event\":\"enter\",\"item\":\"u1\",\"estimate\":500,"
            "\"ratio\":0.5,\"window_items\":1000");
  EXPECT_NE(
      text.find(",\"threshold\":0.5,\"time\":\"1970-01-01T00:00:00.000Z\",\"timestamp_ms\":0}"),
      std::string::npos)
      << text;
}

TEST(EventJson, AnEmptyWindowHasARatioOfZero) {
  const sketch::heavy_event e{sketch::heavy_event::kind::enter, "x", 0, 0};
  EXPECT_EQ(heavy_ratio(e), 0.0);
  const nlohmann::json j = nlohmann::json::parse(alert_event("p", hh(), e, 0));
  EXPECT_EQ(j["ratio"], 0.0);
  EXPECT_EQ(j["event"], "enter");
}

// Any item bytes make valid JSON: invalid UTF-8 becomes U+FFFD, controls are escaped.
TEST(EventJson, AnyItemBytesMakeValidJson) {
  const sketch::heavy_event e{sketch::heavy_event::kind::enter, std::string("a\"\n\xff\x01", 5), 12,
                              100};
  const std::string text = alert_event("p", hh(), e, 0);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["item"], "a\"\n\xef\xbf\xbd\x01");
}

TEST(EventJson, AHeavySetChangesFieldsForTheLog) {
  const sketch::heavy_event e{sketch::heavy_event::kind::enter, "user-7", 25, 100};
  EXPECT_EQ(heavy_change_fields("clicks", e, 0.2), (nlohmann::ordered_json{{"pipeline", "clicks"},
                                                                           {"event", "enter"},
                                                                           {"item", "user-7"},
                                                                           {"estimate", 25},
                                                                           {"window_items", 100},
                                                                           {"ratio", 0.25},
                                                                           {"threshold", 0.2}}));
  // As log_fields takes them: the members without braces, in the order sketchd has always
  // written them.
  EXPECT_EQ(json::members(heavy_change_fields("clicks", e, 0.2)),
            "\"pipeline\":\"clicks\",\"event\":\"enter\",\"item\":\"user-7\",\"estimate\":25,"
            "\"window_items\":100,\"ratio\":0.25,\"threshold\":0.2");
}

TEST(EventJson, SkippedMessagesFieldsCountEachReasonAndGiveAnExample) {
  EXPECT_EQ(
      skipped_fields("clicks", 5, {{"invalid_json", 3}, {"missing_field", 2}}, {"raw", 2, 41}),
      (nlohmann::ordered_json{{"pipeline", "clicks"},
                              {"skipped", 5},
                              {"reasons", {{"invalid_json", 3}, {"missing_field", 2}}},
                              {"example", {{"topic", "raw"}, {"partition", 2}, {"offset", 41}}}}));
}

}  // namespace
}  // namespace sketchd
