#include "sketchd/pipeline/pipeline.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "pipeline_gauge.h"
#include "sketch/zipf.h"

namespace sketchd {
namespace {

// A JSON pipeline with both sections, on the event clock, so that both the items and the
// times of a batch matter.
pipeline_config json_config() {
  pipeline_config c;
  c.name = "clicks";
  c.topics = {"events"};
  c.item.from = item_source::json;
  c.item.path = "/user/id";
  c.clock = clock_kind::event;
  c.heavy_hitters = heavy_hitters_config{.window = std::chrono::seconds(10),
                                         .buckets = 5,
                                         .epsilon = 0.001,
                                         .delta = 0.01,
                                         .top_k = 10,
                                         .threshold = 0.02,
                                         .alerts_topic = {}};
  c.dedup = dedup_config{.window = std::chrono::seconds(10),
                         .capacity = 20000,
                         .fpr = 0.001,
                         .output_topic = {},
                         .duplicates_topic = {}};
  return c;
}

// The daemon processes a batch at a time (items extracted a group at a time); tests and
// tools may pass one message at a time. Both must leave the pipeline in the same state with
// the same verdicts, whatever the batch sizes and whatever bad messages are mixed in.
TEST(Pipeline, BatchesGiveTheVerdictsAndStateOfSingleMessages) {
  const sketch::zipf_distribution zipf(5000, 1.1);
  std::mt19937_64 rng(7);
  std::vector<std::string> values;
  std::vector<std::int64_t> times;
  const std::int64_t start = 1'790'000'000'000;
  for (int i = 0; i < 30000; ++i) {
    const std::uint64_t k = zipf(rng);
    switch (rng() % 50) {
      case 0:
        values.push_back("not json");
        break;
      case 1:
        values.push_back(fmt::format(R"({{"user":{{"id":"u{}"}}}} trailing)", k));
        break;
      case 2:
        values.push_back(R"({"user":{}})");
        break;
      case 3:
        values.push_back(fmt::format(R"({{"user":{{"id":{}}}}})", k));
        break;  // a number
      default:
        values.push_back(fmt::format(R"({{"user":{{"id":"u{}"}},"seq":{}}})", k, i));
    }
    times.push_back(start + i);  // 30 s of events: the windows slide
  }
  std::vector<message_view> views(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) views[i].value = values[i];

  pipeline single(json_config());
  pipeline batched(json_config());
  std::size_t done = 0;
  for (std::size_t size = 1; done < views.size(); size = size % 1500 + 97) {
    const std::size_t n = std::min(size, views.size() - done);
    const std::int64_t wall = times[done + n - 1];
    single.begin_batch();
    std::vector<verdict> expected;
    for (std::size_t i = done; i < done + n; ++i)
      expected.push_back(single.process(views[i], times[i], wall));
    const auto single_events = single.end_batch(wall);

    std::vector<pipeline_input> inputs;
    for (std::size_t i = done; i < done + n; ++i) inputs.push_back({&views[i], times[i]});
    std::vector<verdict> verdicts(n);
    batched.begin_batch();
    batched.process(inputs, wall, verdicts);
    const auto batched_events = batched.end_batch(wall);

    ASSERT_EQ(verdicts, expected) << "batch at message " << done;
    ASSERT_EQ(batched_events.size(), single_events.size()) << "batch at message " << done;
    done += n;
  }
  EXPECT_EQ(batched.save_state(), single.save_state());
  EXPECT_EQ(batched.topk(), single.topk());
  const pipeline_counters a = batched.counters();
  const pipeline_counters b = single.counters();
  EXPECT_EQ(a.items, b.items);
  EXPECT_EQ(a.first_seen, b.first_seen);
  EXPECT_EQ(a.duplicates, b.duplicates);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_GT(a.failures[static_cast<std::size_t>(extract_failure::invalid_json)], 0U);
  EXPECT_GT(a.duplicates, 0U);
}

// The backlog of an event-time pipeline: 60 s of events, one a second, read at a wall time
// after the last of them. `restored`, when given, is the state to start from.
struct backlog_run {
  std::vector<verdict> verdicts;
  std::uint64_t window_items = 0;
};

backlog_run read_backlog(pipeline& p, std::int64_t wall) {
  // The first batches of a run are empty while the group is joined.
  for (int i = 0; i < 3; ++i) {
    p.begin_batch();
    (void)p.end_batch(wall + i);
  }
  backlog_run run;
  const std::int64_t first = wall - 60'000;
  for (int s = 0; s < 60; ++s) {
    // "u0" every 20 s, another item otherwise.
    const std::string value = fmt::format(R"({{"user":{{"id":"u{}"}}}})", s % 20 == 0 ? 0 : s);
    message_view m;
    m.value = value;
    p.begin_batch();
    run.verdicts.push_back(p.process(m, first + s * 1000, wall + 3));
    (void)p.end_batch(wall + 3);
  }
  run.window_items = p.summary().window_items;
  return run;
}

// With clock: event, a backlog is counted at its own times even when the run's first
// batches are empty: the windows (10 s here) do not start at the wall time of an empty
// batch, where every older event would fall into one slice and one generation.
TEST(Pipeline, EventClockHoldsStillUntilTheFirstItem) {
  const std::int64_t wall = 1'790'000'000'000;
  pipeline p(json_config());
  const backlog_run run = read_backlog(p, wall);
  // u0 at 0, 20 and 40 s: 20 s apart, beyond the 10 s dedup window, so first seen each time.
  for (int s : {0, 20, 40}) EXPECT_EQ(run.verdicts[s], verdict::first_seen) << "u0 at " << s;
  // The heavy-hitter window holds the last 10 s (5 slices of 2 s, the current one open):
  // from 8 to 10 of the 60 items, not all of them.
  EXPECT_GE(run.window_items, 8U);
  EXPECT_LE(run.window_items, 10U);
  EXPECT_EQ(p.clock_ms(), wall - 1000);
}

// The JSON event of user `id` (its value points into `storage`).
message_view user_event(std::string& storage, std::string_view id) {
  storage = fmt::format(R"({{"user":{{"id":"{}"}}}})", id);
  message_view m;
  m.value = storage;
  return m;
}

// The effective dedup window, and the time the heavy-hitter window stays incomplete, that
// the pipeline exports, in seconds.
double effective_window_seconds(const pipeline& p) {
  return test_support::pipeline_gauge(p, "sketchd_bloom_effective_window_seconds");
}
double incomplete_seconds(const pipeline& p) {
  return test_support::pipeline_gauge(p, "sketchd_cms_window_incomplete_seconds");
}

// Partitions taken over from another member: the window (10 s) misses their earlier items
// until a whole window and a slice (2 s: a backlog read after the take-over lands in the
// slices from there on) have passed on the pipeline's clock from the next batch on; on the
// event clock, "the next batch" is the first that has a time (an item).
TEST(Pipeline, ATakeOverLeavesTheWindowIncompleteForAWindow) {
  for (const clock_kind clock : {clock_kind::wall, clock_kind::event}) {
    SCOPED_TRACE(to_string(clock));
    pipeline_config c = json_config();
    c.clock = clock;
    pipeline p(c);
    const std::int64_t t = 1'790'000'000'000;
    std::string value;
    const message_view m = user_event(value, "u0");
    const auto batch = [&](std::int64_t at, bool with_item) {
      p.begin_batch();
      if (with_item) (void)p.process(m, at, at);
      (void)p.end_batch(at);
    };
    batch(t, true);
    EXPECT_EQ(incomplete_seconds(p), 0.0) << "before any take-over";
    p.partitions_taken_over();
    EXPECT_EQ(incomplete_seconds(p), 12.0) << "pending: a whole window and a slice";
    batch(t + 2'000, true);
    EXPECT_EQ(incomplete_seconds(p), 12.0);
    batch(t + 9'000, true);
    EXPECT_EQ(incomplete_seconds(p), 5.0);
    batch(t + 13'000, true);
    EXPECT_EQ(incomplete_seconds(p), 1.0);
    batch(t + 14'000, true);
    EXPECT_EQ(incomplete_seconds(p), 0.0);
  }
  // An event clock that has seen nothing has no time yet: the window counts from the first
  // item.
  pipeline fresh(json_config());
  fresh.partitions_taken_over();
  fresh.begin_batch();
  (void)fresh.end_batch(1'790'000'000'000);
  EXPECT_EQ(incomplete_seconds(fresh), 12.0);
  // Without heavy_hitters there is nothing to say.
  pipeline_config dedup_only = json_config();
  dedup_only.heavy_hitters.reset();
  pipeline d(dedup_only);
  d.partitions_taken_over();
  std::vector<prometheus::MetricFamily> families;
  d.collect(families);
  for (const auto& f : families) EXPECT_NE(f.name, "sketchd_cms_window_incomplete_seconds");
}

// The saved state of a pipeline that has seen u0 at `t` (on both clocks).
std::string state_after_u0_at(std::int64_t t) {
  pipeline p(json_config());
  std::string value;
  const message_view m = user_event(value, "u0");
  p.begin_batch();
  (void)p.process(m, t, t);
  (void)p.end_batch(t);
  return p.save_state();
}

// `state` with its library records (magic "SKCH") of structure type `type`, and the records
// nested in them, in format version 2, their checksums resealed: what a sketchd writing
// version 2 saved (the records' contents are the same in both versions).
std::string as_version_2(std::string state, std::uint16_t type) {
  struct record {
    std::size_t at;
    std::uint64_t length;
  };
  std::vector<record> records;
  for (std::size_t at = state.find("SKCH"); at != std::string::npos;
       at = state.find("SKCH", at + 1)) {
    std::uint64_t length = 0;
    std::memcpy(&length, state.data() + at + 16, 8);
    records.push_back({at, length});
  }
  std::vector<bool> older(records.size(), false);
  for (std::size_t i = 0; i < records.size(); ++i) {
    std::uint16_t t = 0;
    std::memcpy(&t, state.data() + records[i].at + 6, 2);
    if (t != type) continue;
    const std::size_t end = records[i].at + 24 + records[i].length;
    for (std::size_t j = i; j < records.size() && records[j].at < end; ++j) older[j] = true;
  }
  // Innermost first: an outer checksum covers the records inside it.
  for (std::size_t i = records.size(); i-- > 0;) {
    if (!older[i]) continue;
    const std::uint16_t version = 2;
    std::memcpy(state.data() + records[i].at + 4, &version, 2);
  }
  for (std::size_t i = records.size(); i-- > 0;) {
    const std::size_t covered = 24 + records[i].length;
    const std::uint64_t sum = XXH64(state.data() + records[i].at, covered, 0);
    std::memcpy(state.data() + records[i].at + covered, &sum, 8);
  }
  return state;
}

// A state of the previous library format (version 2): its heavy-hitter window cannot be
// read (the Count-Min rows were hashed otherwise), its dedup window can (the blocked
// filters' format did not change). The heavy window starts empty, the dedup window is
// restored, so the items it had seen are still duplicates: an upgrade forwards nothing
// again.
TEST(Pipeline, AHeavyHitterWindowOfTheOlderFormatStartsEmptyAndTheDedupWindowIsKept) {
  const std::int64_t wall = 1'790'000'000'000;
  const std::string state =
      as_version_2(as_version_2(state_after_u0_at(wall - 1'000), 6), 7);  // both sections
  pipeline after(json_config());
  after.restore_state(state);
  ASSERT_TRUE(after.heavy_window_dropped().has_value());
  EXPECT_NE(after.heavy_window_dropped()->find("format version 2"), std::string::npos)
      << *after.heavy_window_dropped();
  EXPECT_EQ(after.summary().window_items, 0U);
  std::string value;
  const message_view m = user_event(value, "u0");
  after.begin_batch();
  EXPECT_EQ(after.process(m, wall, wall), verdict::duplicate);
  (void)after.end_batch(wall);
  EXPECT_EQ(after.summary().window_items, 1U);
  // The current format restores both, and says nothing.
  pipeline again(json_config());
  again.restore_state(state_after_u0_at(wall - 1'000));
  EXPECT_FALSE(again.heavy_window_dropped().has_value());
  EXPECT_EQ(again.summary().window_items, 1U);
}

// The same after a restart from a snapshot: the restored clock holds still until an item
// moves it, so that the backlog of the downtime lands at its own times.
TEST(Pipeline, RestoredEventClockHoldsStillUntilTheFirstItem) {
  const std::int64_t wall = 1'790'000'000'000;
  pipeline after(json_config());
  after.restore_state(state_after_u0_at(wall - 3'600'000));  // stopped an hour before
  const backlog_run run = read_backlog(after, wall);
  for (int s : {0, 20, 40}) EXPECT_EQ(run.verdicts[s], verdict::first_seen) << "u0 at " << s;
  EXPECT_GE(run.window_items, 8U);
  EXPECT_LE(run.window_items, 10U);
}

// An idle event-time stream still slides its windows by the wall time since its last
// item, and the effective dedup window is measured at that time, not at the last item's.
TEST(Pipeline, IdleEventClockSlidesByTheWallClock) {
  const std::int64_t wall = 1'790'000'000'000;
  pipeline p(json_config());
  std::string value;
  const message_view m = user_event(value, "u0");
  p.begin_batch();
  EXPECT_EQ(p.process(m, wall, wall), verdict::first_seen);
  (void)p.end_batch(wall);
  p.begin_batch();
  (void)p.end_batch(wall + 60'000);  // a minute without input
  EXPECT_EQ(p.summary().window_items, 0U);
  // The generations cover the last window (10 s), not the 0 s after the last item's.
  EXPECT_GE(effective_window_seconds(p), 10.0);
  p.begin_batch();
  EXPECT_EQ(p.process(m, wall + 60'000, wall + 60'000), verdict::first_seen);
  (void)p.end_batch(wall + 60'000);
}

// A dedup-only pipeline on the event clock: a window of an hour in 3 slices of 20 minutes
// (4 generations), each generation holding 10 items (capacity 30).
pipeline_config small_dedup_config() {
  pipeline_config c = json_config();
  c.heavy_hitters.reset();
  c.dedup = dedup_config{.window = std::chrono::hours(1),
                         .capacity = 30,
                         .fpr = 0.001,
                         .generations = 4,
                         .output_topic = {},
                         .duplicates_topic = {}};
  return c;
}

// A late message that fills the newest generation: the next generation starts at the
// pipeline's clock, not at the late message's time. Started at that earlier time, it was
// rotated out one slice early, and x, seen 40 minutes before within an hour's horizon, was
// first-seen again.
TEST(Pipeline, ALateMessageFillingAGenerationKeepsTheHorizon) {
  const std::int64_t wall = 1'790'000'000'000;
  const std::int64_t t0 = wall - 7'200'000;  // a backlog two hours old
  constexpr std::int64_t kMinute = 60'000;
  pipeline p(small_dedup_config());
  std::string value;
  const auto feed = [&](std::string_view id, std::int64_t t) {
    return p.process(user_event(value, id), t, wall);
  };
  p.begin_batch();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(feed(fmt::format("a{}", i), t0), verdict::first_seen);
  EXPECT_EQ(feed("x", t0 + 20 * kMinute - 1000), verdict::first_seen);
  // The tenth item of the generation, from a partition behind the others: it fills it.
  EXPECT_EQ(feed("late", t0), verdict::first_seen);
  EXPECT_EQ(feed("b1", t0 + 40 * kMinute), verdict::first_seen);
  EXPECT_EQ(feed("b2", t0 + 59 * kMinute), verdict::first_seen);
  // 40 minutes and 2 seconds after x: within the horizon of an hour.
  EXPECT_EQ(feed("x", t0 + 60 * kMinute + 1000), verdict::duplicate);
  (void)p.end_batch(wall);
}

// On the event clock, a message without a timestamp, or with one far in the future, counts
// at the pipeline's clock: in a backlog, it used to jump the clock to the wall time (or
// the wall time + 60 s), expiring the whole window, so that the backlog's next repeat of
// an item was first-seen again.
TEST(Pipeline, AMessageWithoutAUsableTimestampDoesNotMoveTheEventClock) {
  const std::int64_t wall = 1'790'000'000'000;
  const std::int64_t t0 = wall - 7'200'000;  // a backlog two hours old, window 10 s
  pipeline p(json_config());
  std::string value;
  // One message per batch (the batch holds the pipeline's lock, which clock_ms() takes).
  const auto feed = [&](std::string_view id, std::int64_t t) {
    p.begin_batch();
    const verdict v = p.process(user_event(value, id), t, wall);
    (void)p.end_batch(wall);
    return v;
  };
  EXPECT_EQ(feed("x", t0), verdict::first_seen);
  EXPECT_EQ(feed("y", -1), verdict::first_seen);
  EXPECT_EQ(p.clock_ms(), t0);
  EXPECT_EQ(feed("x", t0 + 1000), verdict::duplicate);
  EXPECT_EQ(feed("z", wall + 36'000'000), verdict::first_seen);
  EXPECT_EQ(p.clock_ms(), t0 + 1000);
  EXPECT_EQ(feed("x", t0 + 2000), verdict::duplicate);
  EXPECT_EQ(feed("y", t0 + 3000), verdict::duplicate);
  // Before any timestamp, such a message takes the wall time.
  pipeline fresh(json_config());
  fresh.begin_batch();
  EXPECT_EQ(fresh.process(user_event(value, "y"), -1, wall), verdict::first_seen);
  (void)fresh.end_batch(wall);
  EXPECT_EQ(fresh.clock_ms(), wall);
}

// After a restore, the first item may be older than the restored clock (read again since
// the snapshot): the clock stays where it was, and from then on an idle stream slides it by
// the wall time since that item, not by the time since the snapshot was written.
TEST(Pipeline, RestoredEventClockSlidesFromTheFirstItemReadAgain) {
  const std::int64_t wall = 1'790'000'000'000;
  const std::int64_t last = wall - 3'600'000;  // snapshot an hour ago
  pipeline after(json_config());
  after.restore_state(state_after_u0_at(last));
  std::string value;
  const message_view m = user_event(value, "u0");
  after.begin_batch();
  EXPECT_EQ(after.process(m, last - 1000, wall), verdict::duplicate);  // read again
  (void)after.end_batch(wall);
  EXPECT_EQ(after.clock_ms(), last);
  after.begin_batch();
  (void)after.end_batch(wall + 4000);  // 4 s idle: the 10 s windows still hold both u0
  EXPECT_EQ(after.summary().window_items, 2U);
  after.begin_batch();
  (void)after.end_batch(wall + 20'000);  // 20 s idle: they no longer do
  EXPECT_EQ(after.summary().window_items, 0U);
}

// After a restore, the first item without a usable timestamp (-1) counts at the restored
// clock itself: the wall time since the snapshot (another run's wall clock) is not added, so
// an hour of downtime does not expire the restored windows. From that item on, the clock is
// live: later items without a timestamp count at the restored clock plus the wall time
// since that first one, and end_batch() slides the windows by it; clock_ms(), the newest
// event time seen, stays the restored one.
TEST(Pipeline, RestoredEventClockStartsAtTheRestoredTimeForAMessageWithoutATimestamp) {
  const std::int64_t wall = 1'790'000'000'000;
  const std::int64_t last = wall - 3'600'000;  // snapshot an hour ago, on a 10 s window
  pipeline after(json_config());
  after.restore_state(state_after_u0_at(last));
  std::string value;
  const auto batch = [&](std::string_view id, std::int64_t at_wall) {
    after.begin_batch();
    const verdict v = after.process(user_event(value, id), -1, at_wall);
    (void)after.end_batch(at_wall);
    return v;
  };
  // Counted at `last`: u0, seen at `last` before the restart, is still a duplicate, and both
  // are in the heavy-hitter window.
  EXPECT_EQ(batch("u0", wall), verdict::duplicate);
  EXPECT_EQ(after.clock_ms(), last);
  EXPECT_EQ(after.summary().window_items, 2U);
  // 4 s of wall time later: counted at last + 4 s, within the 10 s windows of both u0.
  EXPECT_EQ(batch("u1", wall + 4'000), verdict::first_seen);
  EXPECT_EQ(after.clock_ms(), last);
  EXPECT_EQ(after.summary().window_items, 3U);
  EXPECT_EQ(batch("u0", wall + 5'000), verdict::duplicate);
  EXPECT_EQ(after.summary().window_items, 4U);
  // 20 s after the first item: the windows have slid past last + 5 s (the heavy-hitter
  // window holds the last 10 s in slices of 2 s; the dedup horizon is at most 13.4 s).
  EXPECT_EQ(batch("u0", wall + 20'000), verdict::first_seen);
  EXPECT_EQ(after.summary().window_items, 1U);
  EXPECT_EQ(after.clock_ms(), last);
}

// A restored event clock holds still for at most pipeline::kHoldStillMs: when no item comes
// (the stream stayed idle over the restart), the windows slide from the snapshot's time on,
// and what was in them expires as if sketchd had been running without input.
TEST(Pipeline, RestoredEventClockOfAnIdleStreamSlidesAfterAWhile) {
  const std::int64_t wall = 1'790'000'000'000;
  pipeline after(json_config());
  after.restore_state(state_after_u0_at(wall - 3'600'000));
  after.begin_batch();
  (void)after.end_batch(wall);
  after.begin_batch();
  (void)after.end_batch(wall + pipeline::kHoldStillMs - 1000);
  EXPECT_EQ(after.summary().window_items, 1U);  // still held
  after.begin_batch();
  (void)after.end_batch(wall + pipeline::kHoldStillMs);
  EXPECT_EQ(after.summary().window_items, 0U);
  EXPECT_FALSE(after.seen("u0").value().seen);
}

// A stream whose messages all lack a usable timestamp still slides its windows by the wall
// time (they count at the clock plus the wall time since its last move): x, repeated every
// second for two minutes on a 10 s window, is first-seen again after each horizon, and the
// heavy-hitter window holds about its last 10 s, not all 120 items.
TEST(Pipeline, AStreamWithoutTimestampsStillSlides) {
  const std::int64_t wall = 1'790'000'000'000;
  for (const std::int64_t stamp : {std::int64_t{-1}, wall + 3'600'000}) {
    pipeline p(json_config());
    std::string value;
    int first_seen = 0;
    for (int s = 0; s < 120; ++s) {
      const std::int64_t now = wall + 1000 * s;
      // A timestamp an hour ahead of each message's wall time, or none.
      const std::int64_t event = stamp < 0 ? -1 : stamp + 1000 * s;
      p.begin_batch();
      first_seen += p.process(user_event(value, "x"), event, now) == verdict::first_seen;
      (void)p.end_batch(now);
    }
    // The horizon is between 10 and 13.4 s (G·S with S = ⌈10 s / 3⌉): 120 s hold 9 to 12.
    EXPECT_GE(first_seen, 9) << stamp;
    EXPECT_LE(first_seen, 12) << stamp;
    EXPECT_GE(p.summary().window_items, 8U) << stamp;
    EXPECT_LE(p.summary().window_items, 11U) << stamp;
  }
}

// In the daemon, the restored clock's hold-still time counts from the group's first
// assignment: after a crash, the group may take longer than kHoldStillMs to hand the
// partitions back, and until then the windows wait for the backlog.
TEST(Pipeline, RestoredEventClockHoldsStillUntilTheAssignmentAndAWhileAfter) {
  const std::int64_t wall = 1'790'000'000'000;
  pipeline after(json_config());
  after.restore_state(state_after_u0_at(wall - 3'600'000));
  after.hold_until_assigned();
  after.begin_batch();
  (void)after.end_batch(wall);
  after.begin_batch();
  (void)after.end_batch(wall + 2 * pipeline::kHoldStillMs);  // the group is still joining
  EXPECT_EQ(after.summary().window_items, 1U);
  after.input_assigned();
  after.begin_batch();
  (void)after.end_batch(wall + 3 * pipeline::kHoldStillMs - 1000);
  EXPECT_EQ(after.summary().window_items, 1U);  // still held
  after.begin_batch();
  (void)after.end_batch(wall + 3 * pipeline::kHoldStillMs);
  EXPECT_EQ(after.summary().window_items, 1U);  // kHoldStillMs after the first batch assigned
  after.begin_batch();
  (void)after.end_batch(wall + 4 * pipeline::kHoldStillMs);
  EXPECT_EQ(after.summary().window_items, 0U);
}

// The effective dedup window of a restored pipeline whose generations an idle stream had
// slid past its last item: at least the window (measured from the newest generation's
// start, which the state keeps), not 0.
TEST(Pipeline, RestoredEffectiveWindowCountsTheIdleSlide) {
  const std::int64_t wall = 1'790'000'000'000;
  pipeline before(json_config());
  before.restore_state(state_after_u0_at(wall));
  std::string value;
  const message_view m = user_event(value, "u1");
  before.begin_batch();
  (void)before.process(m, wall, wall);
  (void)before.end_batch(wall);
  before.begin_batch();
  (void)before.end_batch(wall + 60'000);  // a minute idle: the generations move on
  ASSERT_GE(effective_window_seconds(before), 10.0);
  pipeline after(json_config());
  after.restore_state(before.save_state());
  EXPECT_GE(effective_window_seconds(after), 10.0);
}

}  // namespace
}  // namespace sketchd
