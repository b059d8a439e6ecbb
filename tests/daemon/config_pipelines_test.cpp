// The pipelines section of the configuration: names, items, the sketch sizes within the
// library's limits, and the checks between pipelines, each error at its position.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_test_support.h"
#include "sketchd/config/config.h"

namespace sketchd {
namespace {

using test_support::errors_of;
using test_support::kMinimal;
using test_support::load;
using test_support::pipeline_errors;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

TEST(ConfigErrors, DuplicatePipelineNameIsAnError) {
  const auto r = load(std::string(kMinimal) +
                      "  - name: p\n"
                      "    topics: [u]\n"
                      "    item: { from: value }\n"
                      "    dedup: { capacity: 1 }\n");
  EXPECT_THAT(errors_of(r), ElementsAre("test.yaml:8:11: pipelines[1].name: duplicate pipeline "
                                        "name \"p\" (first at line 4)"));
}

// Every size the sketch library would refuse is an error of the file, at its key, so that
// `check-config` and `run` agree.
TEST(ConfigErrors, CountMinSizesStayWithinTheLibrarysLimits) {
  EXPECT_THAT(
      pipeline_errors("    heavy_hitters: { epsilon: 1e-10, delta: 1e-300 }\n"),
      ElementsAre("test.yaml:7:31: pipelines[0].heavy_hitters.epsilon: 1e-10 needs a Count-Min "
                  "width of 27,182,818,285 counters (⌈e/ε⌉), over the maximum of 268,435,456: "
                  "use an epsilon of at least 1.0127e-08",
                  "test.yaml:7:45: pipelines[0].heavy_hitters.delta: 1e-300 needs a Count-Min "
                  "depth of 691 rows (⌈ln(1/δ)⌉), over the maximum of 32: use a delta of at "
                  "least 1.2665e-14"));
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { epsilon: 1e-300 }\n"),
              ElementsAre(HasSubstr("epsilon: 1e-300 needs a Count-Min width of 2.72e+300 "
                                    "counters")));
  // The window keeps buckets + 1 sketches: at most 2^30 counters in all.
  EXPECT_THAT(
      pipeline_errors("    heavy_hitters:\n"
                      "      epsilon: 1e-7\n"),
      ElementsAre("test.yaml:8:16: pipelines[0].heavy_hitters.epsilon: epsilon 1e-07, delta 0.001 "
                  "and 10 buckets need 11 Count-Min sketches of 27,182,819 × 7 counters, "
                  "2,093,077,063 in all (7.8 GiB), over the maximum of 1,073,741,824 (4 GiB): use "
                  "a larger epsilon or delta, or fewer buckets"));
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { epsilon: 2e-6, buckets: 1000 }\n"),
              ElementsAre(StartsWith("test.yaml:7:31: pipelines[0].heavy_hitters.epsilon: epsilon "
                                     "2e-06, delta 0.001 and 1000 buckets need 1001 Count-Min "
                                     "sketches of 1,359,141 × 7 counters, 9,523,500,987 in all "
                                     "(35.5 GiB)")));
  // The printed bounds themselves pass.
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { epsilon: 1.0127e-08, delta: 0.5, buckets: 1, "
                              "threshold: 0.5 }\n"),
              ::testing::IsEmpty());
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { delta: 1.2665e-14 }\n"), ::testing::IsEmpty());
}

TEST(ConfigErrors, BloomSizesStayWithinTheLibrarysLimits) {
  EXPECT_THAT(
      pipeline_errors("    dedup: { capacity: 18446744073709551615 }\n"),
      ElementsAre("test.yaml:7:24: pipelines[0].dedup.capacity: 18,446,744,073,709,551,615 items "
                  "at fpr 0.001 need Bloom filters of more than the maximum of 2^40 bits (128 "
                  "GiB) in all, over 4 generations: at this fpr capacity can be at most "
                  "37,312,796,664 (or use a larger fpr)"));
  // The bound is exact: one more item needs one more per generation.
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 37312796664 }\n"), ::testing::IsEmpty());
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 37312796665 }\n"),
              ElementsAre(HasSubstr("capacity can be at most 37,312,796,664")));
  // The generations together stay within 2^40 bits.
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 100G, generations: 64 }\n"),
              ElementsAre(HasSubstr("over 64 generations: at this fpr capacity can be at most "
                                    "28,790,737,227")));
  // A rate too small for the capacity is reported at fpr, with the least that fits.
  EXPECT_THAT(
      pipeline_errors("    dedup: { capacity: 1G, fpr: 1e-300 }\n"),
      ElementsAre("test.yaml:7:33: pipelines[0].dedup.fpr: 1e-300 is too small: 1,000,000,000 "
                  "items at this fpr need Bloom filters of more than the maximum of 2^40 bits "
                  "(128 GiB) in all, over 4 generations; use an fpr of at least 4.5189e-10"));
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1G, fpr: 4.5189e-10 }\n"),
              ::testing::IsEmpty());
  // 4.9e-324 makes the rate of each generation 0.
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1000, fpr: 4.9e-324 }\n"),
              ElementsAre("test.yaml:7:35: pipelines[0].dedup.fpr: 5e-324 is too small: 1,000 "
                          "items at this fpr need Bloom filters of more than the maximum of 2^40 "
                          "bits (128 GiB) in all, over 4 generations; use an fpr of at least "
                          "2.9084e-16"));
  // Both at fault: each is reported.
  EXPECT_THAT(
      pipeline_errors("    dedup: { capacity: 18446744073709551615, fpr: 1e-300 }\n"),
      ElementsAre("test.yaml:7:24: pipelines[0].dedup.capacity: 18,446,744,073,709,551,615 items "
                  "need Bloom filters of more than the maximum of 2^40 bits (128 GiB) in all, "
                  "over 4 generations at any fpr below 0.5",
                  "test.yaml:7:51: pipelines[0].dedup.fpr: 1e-300 is too small: even one item "
                  "per generation at this fpr would need Bloom filters of more than the maximum "
                  "of 2^40 bits (128 GiB) in all, over 4 generations; use an fpr of at least "
                  "8.7075e-19"));
}

// sizing: transmission sizes the generations for a lower rate, with up to twice the memory:
// a capacity that fits sized for memory may not fit sized for transmission, and is then
// reported at sizing. An unknown sizing names the two.
TEST(ConfigErrors, TransmissionSizingStaysWithinTheLibrarysLimits) {
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 37312796664, sizing: transmission }\n"),
              ElementsAre(StartsWith(
                  "test.yaml:7:45: pipelines[0].dedup.sizing: 37,312,796,664 items at fpr 0.001 "
                  "sized for transmission (a window rate of 0.000394) need Bloom filters of more "
                  "than the maximum of 2^40 bits (128 GiB) in all, over 4 generations; use "
                  "sizing: memory, or a smaller capacity")));
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 30G, sizing: transmission }\n"),
              ::testing::IsEmpty());
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1000, sizing: bytes }\n"),
              ElementsAre("test.yaml:7:38: pipelines[0].dedup.sizing: expected one of memory, "
                          "transmission, got \"bytes\""));
}

// A pipeline reading its own heavy-hitter alerts would count every alert as an item, and
// alert on its alerts: the alerts topic may be none of its input topics (the second here).
TEST(ConfigErrors, AlertsTopicThatIsOneOfThePipelinesInputsIsRejected) {
  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n"
                             "pipelines:\n"
                             "  - name: p\n"
                             "    topics: [t, u]\n"
                             "    item: { from: key }\n"
                             "    heavy_hitters: { alerts_topic: u }\n")),
              ElementsAre("test.yaml:6:36: pipelines[0].heavy_hitters.alerts_topic: must not be "
                          "one of the pipeline's topics (the pipeline would read its own alerts)"));
}

// A pipeline's dead letters are messages it could not read: reading them again from its own
// input would skip them again, and send them again, for ever.
TEST(ConfigErrors, DeadLetterTopicThatIsOneOfThePipelinesInputsIsRejected) {
  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n"
                             "pipelines:\n"
                             "  - name: p\n"
                             "    topics: [t, u]\n"
                             "    item: { from: key }\n"
                             "    dead_letter_topic: t\n"
                             "    heavy_hitters: {}\n")),
              ElementsAre("test.yaml:6:24: pipelines[0].dead_letter_topic: must not be one of the "
                          "pipeline's topics (the pipeline would read its own dead letters, and "
                          "skip them again)"));
}

TEST(Config, DeadLetterTopicIsReadAndCountsAsAnOutputTopic) {
  const auto r = load(
      "kafka: { brokers: b }\n"
      "pipelines:\n"
      "  - name: p\n"
      "    topics: [t]\n"
      "    item: { from: json, path: /id }\n"
      "    dead_letter_topic: p.dlq\n"
      "    dedup: { capacity: 9, output_topic: o }\n");
  ASSERT_THAT(errors_of(r), IsEmpty());
  const pipeline_config& p = r.value->pipelines.at(0);
  EXPECT_EQ(p.dead_letter_topic, "p.dlq");
  EXPECT_THAT(output_topics_of(p), ElementsAre("o", "p.dlq"));
  // Optional: absent without the key.
  EXPECT_FALSE(load(std::string(kMinimal)).value->pipelines.at(0).dead_letter_topic);
}

// Dead letters are a kind of event of their own: another pipeline's first-seen events may not
// share their topic, and pipelines feeding each other through one make a loop.
TEST(ConfigErrors, DeadLetterTopicHoldsDeadLettersOnlyAndMakesNoLoop) {
  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n"
                             "pipelines:\n"
                             "  - { name: a, topics: [t], item: { from: key }, "
                             "dedup: { capacity: 9, output_topic: x } }\n"
                             "  - { name: b, topics: [u], item: { from: key }, "
                             "dead_letter_topic: x, heavy_hitters: {} }\n")),
              ElementsAre(StartsWith("test.yaml:4:69: pipelines[1].dead_letter_topic: topic x "
                                     "already receives the first-seen events of pipeline a")));
  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n"
                             "pipelines:\n"
                             "  - { name: a, topics: [t], item: { from: key }, "
                             "dead_letter_topic: u, heavy_hitters: {} }\n"
                             "  - { name: b, topics: [u], item: { from: key }, "
                             "dead_letter_topic: t, heavy_hitters: {} }\n")),
              ElementsAre(HasSubstr("pipelines feed each other in a loop (a → topic u → b → "
                                    "topic t → a)")));
}

// The processor tells outputs apart by 8 bits of each delivery's tag: 256 outputs over all
// pipelines are taken, the 257th is refused where it is written (not only by `run`).
TEST(ConfigErrors, MoreThan256OutputsAreRejectedAtTheFirstTooMany) {
  const auto pipelines = [](int n) {
    std::string yaml = "kafka: { brokers: b }\npipelines:\n";
    for (int i = 0; i < n; ++i) {
      yaml += fmt::format(
          "  - {{ name: p{0}, topics: [i{0}], item: {{ from: key }}, "
          "dedup: {{ capacity: 10, output_topic: o{0} }} }}\n",
          i);
    }
    return yaml;
  };
  EXPECT_THAT(errors_of(load(pipelines(256))), IsEmpty());
  const std::string yaml = pipelines(257);
  const std::size_t line_start = yaml.find("  - { name: p256,");
  const std::size_t column = yaml.find("o256", line_start) - line_start + 1;
  EXPECT_THAT(errors_of(load(yaml)),
              ElementsAre(fmt::format("test.yaml:259:{}: pipelines[256].dedup.output_topic: at "
                                      "most 256 outputs (output_topic, duplicates_topic, "
                                      "alerts_topic and dead_letter_topic) over all pipelines; "
                                      "this is output 257",
                                      column)));
}

// The rolling Bloom filter's generations each cover at least 1 ms of the window.
TEST(ConfigErrors, DedupWindowShorterThanOneMillisecondPerGenerationIsRejected) {
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1000, window: 3ms, generations: 4 }\n"),
              ElementsAre("test.yaml:7:38: pipelines[0].dedup.window: must be at least 1ms per "
                          "generation (4 generations), got 3ms"));
  // 1 ms per generation is enough.
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1000, window: 4ms, generations: 4 }\n"),
              IsEmpty());
}

// scope: instance (the default) or partition; anything else is an error at the value. With
// partition, epsilon defaults to threshold/10 (each shard is a whole Count-Min sketch).
TEST(ConfigErrors, ScopeIsInstanceOrPartition) {
  const auto scoped = [](std::string_view scope) {
    return load(std::string(kMinimal.substr(0, kMinimal.rfind("    dedup"))) +
                "    scope: " + std::string(scope) + "\n    dedup: { capacity: 1000 }\n");
  };
  ASSERT_THAT(errors_of(scoped("partition")), IsEmpty());
  EXPECT_EQ(scoped("partition").value->pipelines[0].scope, state_scope::partition);
  EXPECT_EQ(load(std::string(kMinimal)).value->pipelines[0].scope, state_scope::instance);
  // Each partition's shard is a whole Count-Min sketch: epsilon defaults to threshold/10.
  const auto sharded = load(std::string(kMinimal.substr(0, kMinimal.rfind("    dedup"))) +
                            "    scope: partition\n    heavy_hitters: { threshold: 0.02 }\n");
  ASSERT_THAT(errors_of(sharded), IsEmpty());
  EXPECT_DOUBLE_EQ(sharded.value->pipelines[0].heavy_hitters->epsilon, 0.002);
  const auto written = load(std::string(kMinimal.substr(0, kMinimal.rfind("    dedup"))) +
                            "    scope: partition\n    heavy_hitters: { epsilon: 0.0001 }\n");
  EXPECT_DOUBLE_EQ(written.value->pipelines[0].heavy_hitters->epsilon, 0.0001);
  EXPECT_DOUBLE_EQ(
      load(std::string(kMinimal.substr(0, kMinimal.rfind("    dedup"))) + "    heavy_hitters: {}\n")
          .value->pipelines[0]
          .heavy_hitters->epsilon,
      0.0001);
  EXPECT_THAT(errors_of(scoped("shard")),
              ElementsAre(AllOf(StartsWith("test.yaml:7:12: pipelines[0].scope: "),
                                HasSubstr("instance"), HasSubstr("partition"))));
}

// state.topic keeps one shard per input partition: the scope is partition (by default, and
// scope: instance is refused), and the topic is none of the pipelines' or the generator's.
TEST(ConfigErrors, AStateTopicNeedsPartitionScopeAndATopicOfItsOwn) {
  const std::string head = "kafka:\n  brokers: localhost:9092\nstate:\n  topic: ";
  const std::string pipelines =
      "\npipelines:\n  - name: p\n    topics: [t]\n    item: { from: key }\n";
  const auto with = [&](std::string_view topic, std::string_view tail) {
    return load(head + std::string(topic) + pipelines + std::string(tail));
  };
  const auto ok = with("st", "    dedup: { capacity: 1000, output_topic: out }\n");
  ASSERT_THAT(errors_of(ok), IsEmpty());
  EXPECT_EQ(ok.value->state.topic, "st");
  EXPECT_EQ(ok.value->state.topic_partitions, 0);
  EXPECT_EQ(ok.value->pipelines[0].scope, state_scope::partition);
  EXPECT_THAT(errors_of(with("st", "    scope: instance\n    dedup: { capacity: 1000 }\n")),
              ElementsAre(AllOf(StartsWith("test.yaml:9:12: pipelines[0].scope: "),
                                HasSubstr("state.topic"), HasSubstr("partition"))));
  EXPECT_THAT(errors_of(with("t", "    dedup: { capacity: 1000 }\n")),
              ElementsAre(AllOf(StartsWith("test.yaml:4:10: state.topic: "),
                                HasSubstr("an input of pipeline p"))));
  EXPECT_THAT(errors_of(with("out", "    dedup: { capacity: 1000, output_topic: out }\n")),
              ElementsAre(AllOf(StartsWith("test.yaml:4:10: state.topic: "),
                                HasSubstr("an output of pipeline p"))));
  EXPECT_THAT(errors_of(load(head + "st\n  topic_partitions: 0" + pipelines +
                             "    dedup: { capacity: 1000 }\n")),
              ElementsAre(StartsWith("test.yaml:5:21: state.topic_partitions: ")));
}

TEST(ConfigErrors, ItemSourcesNeedTheirParameters) {
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1 }\n").size(), 0u);
  const auto errors =
      errors_of(load("kafka: { brokers: b }\n"
                     "pipelines:\n"
                     "  - name: a\n"
                     "    topics: [t]\n"
                     "    item: { from: json, path: user.id }\n"
                     "    dedup: { capacity: 1 }\n"
                     "  - name: b\n"
                     "    topics: [t]\n"
                     "    item: { from: header }\n"
                     "    dedup: { capacity: 1 }\n"
                     "  - name: c\n"
                     "    topics: [t]\n"
                     "    item: { from: json, path: \"/a~2\" }\n"
                     "    dedup: { capacity: 1 }\n"));
  EXPECT_THAT(errors,
              ElementsAre("test.yaml:5:31: pipelines[0].item.path: expected a JSON pointer "
                          "such as /user/id (RFC 6901), got \"user.id\"",
                          "test.yaml:9:11: pipelines[1].item: missing required key \"name\"",
                          "test.yaml:13:31: pipelines[2].item.path: expected a JSON pointer "
                          "such as /user/id (RFC 6901), got \"/a~2\""));
}

// A header name is required non-empty: written empty, or empty after substitution, it is
// an error at the value (not a missing key, not an item source that finds nothing).
TEST(ConfigErrors, EmptyHeaderNameIsAnErrorAtItsValue) {
  for (const std::string name : {"\"\"", "\"${HEADER:-}\""}) {
    std::string yaml(kMinimal);
    yaml.replace(yaml.find("item: { from: key }"), 19,
                 "item: { from: header, name: " + name + " }");
    EXPECT_THAT(errors_of(load(yaml)),
                ElementsAre("test.yaml:6:33: pipelines[0].item.name: must not be empty"))
        << yaml;
  }
}

// A topic sketchd writes to holds one kind of event, whichever pipelines write it: a sink
// of first-seen events must not meet duplicates or alerts among them.
TEST(ConfigErrors, EachOutputTopicHoldsOneKindOfEvent) {
  const std::string head = "kafka: { brokers: k }\npipelines:\n";
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1, output_topic: o, duplicates_topic: o }\n"),
              ElementsAre("test.yaml:7:62: pipelines[0].dedup.duplicates_topic: topic o already "
                          "receives the first-seen events of pipeline p "
                          "(pipelines[0].dedup.output_topic): a topic sketchd writes to holds one "
                          "kind of event (first-seen events, duplicates, heavy-hitter alerts, "
                          "dead letters or the generator's stream)"));
  EXPECT_THAT(
      errors_of(load(head +
                     "  - { name: A, topics: [a], item: { from: key }, dedup: { capacity: 9, "
                     "output_topic: o } }\n"
                     "  - { name: B, topics: [b], item: { from: key }, heavy_hitters: { "
                     "alerts_topic: o }, dedup: { capacity: 9, output_topic: o2, "
                     "duplicates_topic: o } }\n"
                     "generator: { topic: o2 }\n")),
      ElementsAre(
          AllOf(StartsWith("test.yaml:4:81: pipelines[1].heavy_hitters.alerts_topic: topic o "
                           "already receives the first-seen events of pipeline A "
                           "(pipelines[0].dedup.output_topic)"),
                EndsWith("kind of event (first-seen events, duplicates, heavy-hitter alerts, "
                         "dead letters or the generator's stream)")),
          StartsWith("test.yaml:4:144: pipelines[1].dedup.duplicates_topic: topic o already "
                     "receives the first-seen events of pipeline A"),
          StartsWith("test.yaml:5:21: generator.topic: topic o2 already receives the first-seen "
                     "events of pipeline B (pipelines[1].dedup.output_topic)")));
  // The same kind from several pipelines: one topic of first-seen events, one of alerts.
  EXPECT_THAT(
      errors_of(load(head + "  - { name: A, topics: [a], item: { from: key }, heavy_hitters: { "
                            "alerts_topic: h }, dedup: { capacity: 9, output_topic: o } }\n"
                            "  - { name: B, topics: [b], item: { from: key }, heavy_hitters: { "
                            "alerts_topic: h }, dedup: { capacity: 9, output_topic: o } }\n"
                            "generator: { topic: a }\n")),
      ::testing::IsEmpty());
}

TEST(ConfigErrors, PipelinesFeedingEachOtherInALoopAreRejected) {
  const std::string head = "kafka: { brokers: k }\npipelines:\n";
  // A's duplicates go to B, B's to C, C's alerts back to A: a loop, reported once, at A.
  EXPECT_THAT(errors_of(load(head + "  - { name: A, topics: [ta], item: { from: key }, dedup: { "
                                    "capacity: 9, duplicates_topic: tb } }\n"
                                    "  - { name: B, topics: [tb], item: { from: key }, dedup: { "
                                    "capacity: 9, duplicates_topic: tc } }\n"
                                    "  - { name: C, topics: [tc], item: { from: key }, "
                                    "heavy_hitters: { alerts_topic: ta } }\n")),
              ElementsAre("test.yaml:3:5: pipelines[0]: pipelines feed each other in a loop (A → "
                          "topic tb → B → topic tc "
                          "→ C → topic ta → A): every event would go round again and again"));
  // A chain, and two pipelines writing the same topic, are no loop.
  EXPECT_THAT(errors_of(load(head + "  - { name: A, topics: [ta], item: { from: key }, dedup: { "
                                    "capacity: 9, output_topic: tb } }\n"
                                    "  - { name: B, topics: [tb], item: { from: key }, dedup: { "
                                    "capacity: 9, output_topic: tc } }\n"
                                    "  - { name: C, topics: [ta], item: { from: key }, dedup: { "
                                    "capacity: 9, output_topic: tc } }\n")),
              ::testing::IsEmpty());
}

TEST(ConfigErrors, PipelineNamesAURLCannotCarryAreRejected) {
  std::string yaml(kMinimal);
  yaml.replace(yaml.find("name: p"), 7, "name: \"..\"");
  EXPECT_THAT(
      errors_of(load(yaml)),
      ElementsAre(
          "test.yaml:4:11: pipelines[0].name: \"..\" cannot name a pipeline: a URL cannot carry "
          "it (/api/v1/pipelines/../…)"));
}

}  // namespace
}  // namespace sketchd
