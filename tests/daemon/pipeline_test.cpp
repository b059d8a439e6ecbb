#include "sketchd/pipeline/pipeline.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <span>
#include <string>
#include <vector>

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
  EXPECT_EQ(batched.topk_json(), single.topk_json());
  const pipeline_counters a = batched.counters();
  const pipeline_counters b = single.counters();
  EXPECT_EQ(a.items, b.items);
  EXPECT_EQ(a.first_seen, b.first_seen);
  EXPECT_EQ(a.duplicates, b.duplicates);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_GT(a.failures[static_cast<std::size_t>(extract_failure::invalid_json)], 0U);
  EXPECT_GT(a.duplicates, 0U);
}

}  // namespace
}  // namespace sketchd
