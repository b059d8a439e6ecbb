// The pure pieces of the daemon's top floor (app/): the output backpressure's decisions,
// the summary line and the capacity warning.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <sstream>

#include "sketchd/app/backpressure.h"
#include "sketchd/app/preflight.h"
#include "sketchd/app/summary.h"
#include "sketchd/util/json.h"

namespace sketchd::app {
namespace {

using namespace std::chrono_literals;
using clock_type = backpressure::clock;
const clock_type::time_point t0{std::chrono::hours(1)};

TEST(Backpressure, TheInputIsHeldOnceTheQueueHasBeenFullForASecondWithoutABreak) {
  backpressure b;
  for (auto t = t0; t < t0 + 1s; t += 10ms) EXPECT_FALSE(b.queue_full_wait(t));
  EXPECT_TRUE(b.queue_full_wait(t0 + 1s));
}

TEST(Backpressure, AGapLongerThanTheWaitGapStartsTheWaitAgain) {
  backpressure b;
  for (auto t = t0; t < t0 + 900ms; t += 10ms) EXPECT_FALSE(b.queue_full_wait(t));
  // The next batch's wait, after a gap of 200 ms: a merely slow output holds nothing.
  const auto again = t0 + 900ms + 200ms;
  for (auto t = again; t < again + 1s; t += 50ms) EXPECT_FALSE(b.queue_full_wait(t));
  EXPECT_TRUE(b.queue_full_wait(again + 1s));
}

TEST(Backpressure, AStopGivesUpAFullQueueOnlyAfterItsGrace) {
  backpressure b;
  EXPECT_FALSE(b.give_up(t0, /*stop_requested=*/false));
  EXPECT_FALSE(b.give_up(t0 + 1s, true));  // the stop is seen here
  EXPECT_FALSE(b.give_up(t0 + 1s + backpressure::kQueueGrace - 1ms, true));
  EXPECT_TRUE(b.give_up(t0 + 1s + backpressure::kQueueGrace, true));
}

TEST(Backpressure, TheFinalWaitIsWhatIsLeftOfTheStopsTenSecondsAndAtLeastOne) {
  backpressure b;
  EXPECT_FALSE(b.give_up(t0, true));
  b.stop_seen(t0 + 3s);  // seen already: no change
  EXPECT_EQ(b.final_wait(t0 + 4s), 6s);
  EXPECT_EQ(b.final_wait(t0 + 9500ms), 1s);
  EXPECT_EQ(b.final_wait(t0 + 60s), 1s);
  backpressure unseen;
  unseen.stop_seen(t0);
  EXPECT_EQ(unseen.final_wait(t0), backpressure::kFinalWait);
}

TEST(Backpressure, ASnapshotHoldsTheInputAfterASecondOfWaiting) {
  EXPECT_FALSE(backpressure::snapshot_holds(t0, t0 + 999ms));
  EXPECT_TRUE(backpressure::snapshot_holds(t0, t0 + 1s));
}

pipeline_summary summary_of_both() {
  pipeline_summary s;
  s.name = "clicks";
  s.items = 1000;
  s.window_items = 200;
  s.top = {{"u1", 50, true}, {"u\n2", 20, true}};
  s.fill = 0.25;
  s.generations = 4;
  s.estimated_fpr = -0.0;
  s.target_fpr = 0.001;
  s.has_heavy_hitters = true;
  s.has_dedup = true;
  return s;
}

TEST(SummaryLine, NamesTheRateTheTopItemsAndTheFilter) {
  EXPECT_EQ(summary_line(summary_of_both(), 12.4),
            "clicks: 12 items/s, window 200 items, top: \"u1\" (50, 25.0%) \"u\\n2\" (20, 10.0%); "
            "bloom fill 0.250 (newest of 4 generations), estimated FPR 0 (target 0.001)");
  pipeline_summary empty;
  empty.name = "p";
  empty.has_heavy_hitters = true;
  EXPECT_EQ(summary_line(empty, 0), "p: 0 items/s, window 0 items, top: -");
}

TEST(SummaryLine, ItsFieldsAreTheSameFiguresAsJson) {
  const auto j = nlohmann::json::parse("{" + summary_fields(summary_of_both(), 12.5) + "}");
  EXPECT_EQ(j["pipeline"], "clicks");
  EXPECT_EQ(j["items_per_second"], 12.5);
  EXPECT_EQ(j["window_items"], 200);
  ASSERT_EQ(j["top"].size(), 2U);
  EXPECT_EQ(j["top"][1]["item"], "u\n2");
  EXPECT_EQ(j["top"][0]["ratio"], 0.25);
  EXPECT_EQ(j["bloom_generations"], 4);
  EXPECT_EQ(j["estimated_fpr"], 0.0);
  // In the order sketchd has always written them.
  EXPECT_EQ(summary_fields(summary_of_both(), 12.0).substr(0, 66),
            "\"pipeline\":\"clicks\",\"items_per_second\":12,\"window_items\":200,\"top\"");
}

TEST(CapacityWarning, WarnsAtMostOnceAMinuteWhileRotationsByCapacityGoOn) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger log("test", sink);
  log.set_pattern("%v");
  pipeline_config p;
  p.name = "clicks";
  p.dedup.emplace();
  p.dedup->capacity = 1000;
  p.dedup->window = std::chrono::hours(1);
  pipeline_summary s;
  s.has_dedup = true;
  s.effective_window_ms = 60'000;
  capacity_warning w;
  w.check(log, p, s, t0);  // no rotation
  EXPECT_EQ(out.str(), "");
  s.rotations_by_capacity = 3;
  w.check(log, p, s, t0 + 10s);
  EXPECT_NE(out.str().find("3 rotation(s) by capacity since sketchd started"), std::string::npos)
      << out.str();
  out.str("");
  s.rotations_by_capacity = 5;
  w.check(log, p, s, t0 + 40s);  // within the minute
  EXPECT_EQ(out.str(), "");
  s.rotations_by_capacity = 6;
  w.check(log, p, s, t0 + 71s);
  EXPECT_NE(out.str().find("3 rotation(s) by capacity since the last such line"), std::string::npos)
      << out.str();
}

TEST(Preflight, TheSourceReadsEachTopicOnceInTheConfigurationsOrder) {
  config c;
  c.pipelines.resize(2);
  c.pipelines[0].topics = {"b", "a"};
  c.pipelines[1].topics = {"a", "c"};
  c.pipelines[1].dedup.emplace();
  c.pipelines[1].dedup->output_topic = "out";
  EXPECT_EQ(input_topics(c), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(topics_of(c), (std::set<std::string>{"a", "b", "c", "out"}));
}

}  // namespace
}  // namespace sketchd::app
