#include "sketchd/config/config.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sketchd/commands.h"
#include "sketchd/kafka/property_policy.h"

namespace sketchd {
namespace {

using std::chrono::milliseconds;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

using env_map = std::map<std::string, std::string, std::less<>>;

getenv_function fake_env(env_map env) {
  return [env = std::move(env)](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

load_result load(std::string_view yaml, env_map env = {}) {
  return load_config_string(yaml, "test.yaml", fake_env(std::move(env)));
}

std::vector<std::string> errors_of(const load_result& r) {
  std::vector<std::string> out;
  for (const config_error& e : r.errors) out.push_back(e.to_string());
  return out;
}

// The smallest valid configuration; tests append to it or replace parts of it.
constexpr std::string_view kMinimal =
    "kafka:\n"                          // 1
    "  brokers: localhost:9092\n"       // 2
    "pipelines:\n"                      // 3
    "  - name: p\n"                     // 4
    "    topics: [t]\n"                 // 5
    "    item: { from: key }\n"         // 6
    "    dedup: { capacity: 1000 }\n";  // 7

// The errors of kMinimal with its line 7 (dedup) replaced by `tail`, indented by the caller.
std::vector<std::string> pipeline_errors(std::string_view tail) {
  return errors_of(
      load(std::string(kMinimal.substr(0, kMinimal.rfind("    dedup"))) + std::string(tail)));
}

TEST(Config, FullConfigurationParsesToTheRightValues) {
  const auto r = load(R"(kafka:
  brokers: "${BROKERS:-a:1}"
  group_id: group
  properties:
    client.id: me
    linger.ms: 5
    enable.idempotence: true
  batch_size: 5k
  poll_timeout: 250ms
http:
  listen: "[::1]:0"
state:
  dir: /tmp/state
  snapshot_interval: 1m
  discard_incompatible_snapshot: yes
pipelines:
  - name: clicks.v2
    topics: [events, more-events]
    item: { from: json, path: /user/id }
    clock: wall
    max_item_bytes: 2k
    heavy_hitters:
      window: 10m
      buckets: 20
      epsilon: 1e-5
      delta: 0.01
      top_k: 100
      threshold: 0.05
      conservative: false
      alerts_topic: clicks.heavy
    dedup:
      window: 2h
      capacity: 2.5M
      fpr: 0.0001
      generations: 8
      output_topic: clicks.unique
      duplicates_topic: clicks.dups
  - name: by_header
    topics: [events]
    item: { from: header, name: user }
    heavy_hitters: {}
generator:
  topic: events
  rate: 20k
  distinct: 1M
  zipf: 1.3
  key: false
  format: text
log:
  level: debug
  format: json
  summary_interval: 0
)",
                      {{"BROKERS", "b1:9092,b2:9092"}});
  ASSERT_TRUE(r.errors.empty()) << ::testing::PrintToString(errors_of(r));
  ASSERT_TRUE(r.value);
  const config& c = *r.value;

  EXPECT_EQ(c.kafka.brokers, "b1:9092,b2:9092");
  EXPECT_FALSE(c.kafka.embedded);
  EXPECT_EQ(c.kafka.group_id, "group");
  EXPECT_EQ(c.kafka.properties,
            (std::map<std::string, std::string>{
                {"client.id", "me"}, {"enable.idempotence", "true"}, {"linger.ms", "5"}}));
  EXPECT_EQ(c.kafka.batch_size, 5000u);
  EXPECT_EQ(c.kafka.poll_timeout, milliseconds(250));

  EXPECT_EQ(c.http.listen, "[::1]:0");
  EXPECT_EQ(c.http.host, "::1");
  EXPECT_EQ(c.http.port, 0);

  EXPECT_EQ(c.state.dir, "/tmp/state");
  EXPECT_EQ(c.state.snapshot_interval, std::chrono::minutes(1));
  EXPECT_TRUE(c.state.discard_incompatible_snapshot);

  ASSERT_EQ(c.pipelines.size(), 2u);
  const pipeline_config& p = c.pipelines[0];
  EXPECT_EQ(p.name, "clicks.v2");
  EXPECT_THAT(p.topics, ElementsAre("events", "more-events"));
  EXPECT_EQ(p.item.from, item_source::json);
  EXPECT_EQ(p.item.path, "/user/id");
  EXPECT_EQ(p.clock, clock_kind::wall);
  EXPECT_EQ(p.max_item_bytes, 2000u);
  ASSERT_TRUE(p.heavy_hitters);
  EXPECT_EQ(p.heavy_hitters->window, std::chrono::minutes(10));
  EXPECT_EQ(p.heavy_hitters->buckets, 20u);
  EXPECT_DOUBLE_EQ(p.heavy_hitters->epsilon, 1e-5);
  EXPECT_DOUBLE_EQ(p.heavy_hitters->delta, 0.01);
  EXPECT_EQ(p.heavy_hitters->top_k, 100u);
  EXPECT_DOUBLE_EQ(p.heavy_hitters->threshold, 0.05);
  EXPECT_FALSE(p.heavy_hitters->conservative);
  EXPECT_EQ(p.heavy_hitters->alerts_topic, "clicks.heavy");
  ASSERT_TRUE(p.dedup);
  EXPECT_EQ(p.dedup->window, std::chrono::hours(2));
  EXPECT_EQ(p.dedup->capacity, 2'500'000u);
  EXPECT_DOUBLE_EQ(p.dedup->fpr, 0.0001);
  EXPECT_EQ(p.dedup->generations, 8u);
  EXPECT_EQ(p.dedup->output_topic, "clicks.unique");
  EXPECT_EQ(p.dedup->duplicates_topic, "clicks.dups");

  const pipeline_config& q = c.pipelines[1];
  EXPECT_EQ(q.item.from, item_source::header);
  EXPECT_EQ(q.item.header, "user");
  ASSERT_TRUE(q.heavy_hitters);
  EXPECT_EQ(q.heavy_hitters->top_k, 20u);
  EXPECT_FALSE(q.dedup);

  ASSERT_TRUE(c.generator);
  EXPECT_EQ(c.generator->topic, "events");
  EXPECT_EQ(c.generator->rate, 20'000u);
  EXPECT_EQ(c.generator->distinct, 1'000'000u);
  EXPECT_DOUBLE_EQ(c.generator->zipf, 1.3);
  EXPECT_FALSE(c.generator->key);
  EXPECT_EQ(c.generator->format, generator_format::text);

  EXPECT_EQ(c.log.level, log_level::debug);
  EXPECT_EQ(c.log.format, log_format::json);
  EXPECT_EQ(c.log.summary_interval, milliseconds(0));
}

TEST(Config, LeftOutKeysTakeTheirDefaults) {
  const auto r = load(kMinimal);
  ASSERT_TRUE(r.value) << ::testing::PrintToString(errors_of(r));
  const config& c = *r.value;
  EXPECT_EQ(c.kafka.group_id, "sketchd");
  EXPECT_TRUE(c.kafka.properties.empty());
  EXPECT_EQ(c.kafka.batch_size, 5000u);
  EXPECT_EQ(c.kafka.poll_timeout, milliseconds(100));
  EXPECT_EQ(c.http.host, "127.0.0.1");
  EXPECT_EQ(c.http.port, 9464);
  EXPECT_FALSE(c.state.dir);
  EXPECT_EQ(c.state.snapshot_interval, std::chrono::seconds(30));
  EXPECT_FALSE(c.state.discard_incompatible_snapshot);
  const pipeline_config& p = c.pipelines.at(0);
  EXPECT_EQ(p.item.from, item_source::key);
  EXPECT_EQ(p.clock, clock_kind::event);
  EXPECT_EQ(p.max_item_bytes, 1024u);
  EXPECT_FALSE(p.heavy_hitters);
  ASSERT_TRUE(p.dedup);
  EXPECT_EQ(p.dedup->window, std::chrono::hours(1));
  EXPECT_EQ(p.dedup->capacity, 1000u);
  EXPECT_DOUBLE_EQ(p.dedup->fpr, 0.001);
  EXPECT_EQ(p.dedup->generations, 4u);
  EXPECT_FALSE(p.dedup->output_topic);
  EXPECT_FALSE(c.generator);
  EXPECT_EQ(c.log.level, log_level::info);
  EXPECT_EQ(c.log.format, log_format::text);
  EXPECT_EQ(c.log.summary_interval, std::chrono::seconds(10));
}

// An optional key whose value is empty after substitution (`""`, `${VAR:-}`, a variable set
// to nothing) keeps its default, as if it were left out (config.h); a required one that is
// empty is still an error.
TEST(Config, EmptyOptionalValuesKeepTheirDefaults) {
  const auto r = load(
      "kafka:\n"
      "  brokers: b:1\n"
      "  group_id: \"${GROUP:-}\"\n"
      "  batch_size: \"${BATCH:-}\"\n"
      "  poll_timeout: \"\"\n"
      "http:\n"
      "  listen: \"${LISTEN:-}\"\n"
      "state: { dir: \"\", snapshot_interval: \"\", discard_incompatible_snapshot: \"${D}\" }\n"
      "pipelines:\n"
      "  - name: p\n"
      "    topics: [t]\n"
      "    item: { from: key }\n"
      "    clock: \"\"\n"
      "    max_item_bytes: \"${EMPTY}\"\n"
      "    heavy_hitters: { window: \"\", buckets: \"\", epsilon: \"\", delta: \"\", top_k: \"\",\n"
      "                     threshold: \"\", conservative: \"\", alerts_topic: \"\" }\n"
      "    dedup: { capacity: 1000, window: \"\", fpr: \"\", generations: \"\",\n"
      "             output_topic: \"\", duplicates_topic: \"\" }\n"
      "generator: { topic: g, rate: \"\", distinct: \"\", zipf: \"\", key: \"\", format: \"\" }\n"
      "log: { level: \"\", format: \"\", summary_interval: \"${EMPTY:-}\" }\n",
      {{"EMPTY", ""}, {"D", ""}});
  ASSERT_TRUE(r.value) << ::testing::PrintToString(errors_of(r));
  const config& c = *r.value;
  const config defaults;
  EXPECT_EQ(c.kafka.group_id, defaults.kafka.group_id);
  EXPECT_EQ(c.kafka.batch_size, defaults.kafka.batch_size);
  EXPECT_EQ(c.kafka.poll_timeout, defaults.kafka.poll_timeout);
  EXPECT_EQ(c.http.listen, defaults.http.listen);
  EXPECT_EQ(c.http.host, defaults.http.host);
  EXPECT_EQ(c.http.port, defaults.http.port);
  EXPECT_FALSE(c.state.dir);
  EXPECT_EQ(c.state.snapshot_interval, defaults.state.snapshot_interval);
  EXPECT_EQ(c.state.discard_incompatible_snapshot, defaults.state.discard_incompatible_snapshot);
  const pipeline_config& p = c.pipelines.at(0);
  EXPECT_EQ(p.clock, clock_kind::event);
  EXPECT_EQ(p.max_item_bytes, pipeline_config{}.max_item_bytes);
  const heavy_hitters_config hh;
  ASSERT_TRUE(p.heavy_hitters);
  EXPECT_EQ(p.heavy_hitters->window, hh.window);
  EXPECT_EQ(p.heavy_hitters->buckets, hh.buckets);
  EXPECT_EQ(p.heavy_hitters->epsilon, hh.epsilon);
  EXPECT_EQ(p.heavy_hitters->delta, hh.delta);
  EXPECT_EQ(p.heavy_hitters->top_k, hh.top_k);
  EXPECT_EQ(p.heavy_hitters->threshold, hh.threshold);
  EXPECT_EQ(p.heavy_hitters->conservative, hh.conservative);
  EXPECT_FALSE(p.heavy_hitters->alerts_topic);
  const dedup_config d;
  ASSERT_TRUE(p.dedup);
  EXPECT_EQ(p.dedup->window, d.window);
  EXPECT_EQ(p.dedup->fpr, d.fpr);
  EXPECT_EQ(p.dedup->generations, d.generations);
  EXPECT_FALSE(p.dedup->output_topic);
  EXPECT_FALSE(p.dedup->duplicates_topic);
  const generator_config g;
  ASSERT_TRUE(c.generator);
  EXPECT_EQ(c.generator->rate, g.rate);
  EXPECT_EQ(c.generator->distinct, g.distinct);
  EXPECT_EQ(c.generator->zipf, g.zipf);
  EXPECT_EQ(c.generator->key, g.key);
  EXPECT_EQ(c.generator->format, g.format);
  EXPECT_EQ(c.log.level, defaults.log.level);
  EXPECT_EQ(c.log.format, defaults.log.format);
  EXPECT_EQ(c.log.summary_interval, defaults.log.summary_interval);

  const auto embedded = load("kafka: { embedded: { brokers: \"\", partitions: \"${P:-}\" } }\n" +
                             std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  ASSERT_TRUE(embedded.value) << ::testing::PrintToString(errors_of(embedded));
  ASSERT_TRUE(embedded.value->kafka.embedded);
  EXPECT_EQ(embedded.value->kafka.embedded->brokers, embedded_kafka_config{}.brokers);
  EXPECT_EQ(embedded.value->kafka.embedded->partitions, embedded_kafka_config{}.partitions);

  // Required keys have no default to keep.
  EXPECT_THAT(errors_of(load("kafka:\n"
                             "  brokers: \"${BROKERS:-}\"\n"
                             "pipelines:\n"
                             "  - name: \"\"\n"
                             "    topics: [\"${T:-}\"]\n"
                             "    item: { from: \"\" }\n"
                             "    dedup: { capacity: \"\" }\n"
                             "generator: { topic: \"\" }\n")),
              ElementsAre("test.yaml:2:12: kafka.brokers: must not be empty (or give embedded for "
                          "an in-process cluster)",
                          "test.yaml:4:11: pipelines[0].name: must be 1 to 128 letters, digits, "
                          "\"_\", \".\" or \"-\", got \"\"",
                          "test.yaml:5:14: pipelines[0].topics[0]: not a valid Kafka topic name "
                          "(1 to 249 letters, digits, \".\", \"_\" or \"-\"), got \"\"",
                          "test.yaml:6:19: pipelines[0].item.from: expected one of key, value, "
                          "json, header, got \"\"",
                          "test.yaml:7:24: pipelines[0].dedup.capacity: expected a count (a whole "
                          "number, optionally with k, M or G), got \"\"",
                          "test.yaml:8:21: generator.topic: not a valid Kafka topic name (1 to "
                          "249 letters, digits, \".\", \"_\" or \"-\"), got \"\""));
}

TEST(Config, SectionWithoutBodyIsPresentWithItsDefaults) {
  const auto r = load(
      "kafka:\n"
      "  embedded:\n"
      "pipelines:\n"
      "  - name: p\n"
      "    topics: [t]\n"
      "    item: { from: value }\n"
      "    heavy_hitters:\n");
  ASSERT_TRUE(r.value) << ::testing::PrintToString(errors_of(r));
  ASSERT_TRUE(r.value->kafka.embedded);
  EXPECT_EQ(r.value->kafka.embedded->brokers, 1);
  EXPECT_EQ(r.value->kafka.embedded->partitions, 4);
  EXPECT_TRUE(r.value->kafka.brokers.empty());
  ASSERT_TRUE(r.value->pipelines.at(0).heavy_hitters);
  EXPECT_EQ(r.value->pipelines[0].heavy_hitters->window, std::chrono::minutes(5));
}

TEST(Config, EmbeddedClusterTakesItsSizes) {
  const auto r = load(std::string("kafka:\n  embedded: { brokers: 3, partitions: 16 }\n") +
                      std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  ASSERT_TRUE(r.value) << ::testing::PrintToString(errors_of(r));
  EXPECT_EQ(r.value->kafka.embedded->brokers, 3);
  EXPECT_EQ(r.value->kafka.embedded->partitions, 16);
}

// --- One test per kind of error, with its exact position. ---------------------------------

TEST(ConfigErrors, UnknownKeyIsReportedAtTheKeyWithASuggestion) {
  EXPECT_THAT(pipeline_errors("    heavy_hitters:\n"
                              "      epsilson: 0.1\n"),
              ElementsAre("test.yaml:8:7: unknown key \"epsilson\" in pipelines[0].heavy_hitters "
                          "(did you mean \"epsilon\"?)"));
}

TEST(ConfigErrors, UnknownKeyWithoutCloseMatchListsTheKnownKeys) {
  const auto r = load(std::string(kMinimal) + "metrics: {}\n");
  EXPECT_THAT(errors_of(r), ElementsAre("test.yaml:8:1: unknown key \"metrics\" at the top level "
                                        "(known keys: kafka, http, state, pipelines, generator, "
                                        "log)"));
}

// A key of megabytes: the "did you mean" search skips known keys of another length (the
// distance is at least the difference), and messages and paths show its first 64 bytes.
// The distance of a 15 MB key took 17 s and 3.3 GB.
TEST(ConfigErrors, AVeryLongKeyIsShownCutAndNotComparedWithShortOnes) {
  const std::string key(1'000'000, 'k');
  EXPECT_THAT(errors_of(load("? " + key + "\n: 1\n" + std::string(kMinimal))),
              ElementsAre("test.yaml:1:3: unknown key \"" + std::string(64, 'k') +
                          "…\" at the top level (known keys: kafka, http, state, pipelines, "
                          "generator, log)"));
  // Cut before a UTF-8 character, not inside it; in a property's path too.
  const std::string accented = std::string(63, 'k') + "é" + key;
  const std::string property = "    ? " + accented + "\n    : 1\n";
  EXPECT_THAT(errors_of(load("kafka:\n  brokers: b\n  properties:\n" + property +
                             std::string(kMinimal.substr(kMinimal.find("pipelines"))))),
              ElementsAre(AllOf(StartsWith("test.yaml:4:7: kafka.properties[\"" +
                                           std::string(63, 'k') + "…\"]: librdkafka "),
                                EndsWith(" has no such property"))));
  // A close key of another length is still suggested.
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "logs: {}\n")),
              ElementsAre("test.yaml:8:1: unknown key \"logs\" at the top level (did you mean "
                          "\"log\"?)"));
}

TEST(ConfigErrors, WrongTypeNamesWhatWasExpected) {
  const auto r = load(
      "kafka:\n"
      "  brokers: b\n"
      "  batch_size: [1]\n"
      "pipelines:\n"
      "  - name: p\n"
      "    topics: t\n"
      "    item: key\n"
      "    dedup: { capacity: 1 }\n");
  EXPECT_THAT(errors_of(r),
              ElementsAre("test.yaml:3:15: kafka.batch_size: expected a count, got a list",
                          "test.yaml:6:13: pipelines[0].topics: expected a list, got a scalar",
                          "test.yaml:7:11: pipelines[0].item: expected a mapping, got a scalar"));
}

TEST(ConfigErrors, MissingRequiredKeyPointsAtTheParentMapping) {
  const auto r = load(
      "kafka:\n"
      "  brokers: b\n"
      "pipelines:\n"
      "  - topics: [t]\n"
      "    item: { from: key }\n"
      "    dedup:\n"
      "      window: 1h\n");
  EXPECT_THAT(errors_of(r),
              ElementsAre("test.yaml:4:5: pipelines[0]: missing required key \"name\"",
                          "test.yaml:7:7: pipelines[0].dedup: missing required key \"capacity\""));

  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n")),
              ElementsAre("test.yaml:1:1: missing required key \"pipelines\""));
  EXPECT_THAT(errors_of(load("log: {}\npipelines: []\n")),
              ElementsAre("test.yaml:1:1: missing required key \"kafka\"",
                          "test.yaml:2:12: pipelines: needs at least one pipeline"));
}

TEST(ConfigErrors, OutOfRangeValueShowsTheRange) {
  EXPECT_THAT(
      pipeline_errors("    heavy_hitters:\n"
                      "      epsilon: 1.5\n"
                      "      top_k: 0\n"
                      "      threshold: 1.01\n"),
      ElementsAre("test.yaml:8:16: pipelines[0].heavy_hitters.epsilon: must be in (0, 1), "
                  "got 1.5",
                  "test.yaml:9:14: pipelines[0].heavy_hitters.top_k: must be in [1, 1000], "
                  "got 0",
                  "test.yaml:10:18: pipelines[0].heavy_hitters.threshold: must be in (0, 1], "
                  "got 1.01"));
}

TEST(ConfigErrors, DurationWithoutUnitIsAnError) {
  EXPECT_THAT(pipeline_errors("    dedup:\n"
                              "      capacity: 10\n"
                              "      window: 3600\n"),
              ElementsAre("test.yaml:9:15: pipelines[0].dedup.window: duration needs a unit (ms, "
                          "s, m, h, d), got \"3600\""));
}

TEST(ConfigErrors, BadCountIsAnError) {
  EXPECT_THAT(pipeline_errors("    dedup:\n"
                              "      capacity: 10X\n"),
              ElementsAre("test.yaml:8:17: pipelines[0].dedup.capacity: unknown count suffix \"X\" "
                          "(use k, M or G), got \"10X\""));
}

TEST(ConfigErrors, UnsetEnvironmentVariableIsAnErrorAtItsReference) {
  const auto r = load(
      "kafka:\n"
      "  brokers: \"${KAFKA_BROKERS}\"\n"
      "  group_id: ${GROUP:-sketchd}\n" +
      std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  EXPECT_THAT(errors_of(r),
              ElementsAre("test.yaml:2:13: kafka.brokers: environment variable KAFKA_BROKERS is "
                          "not set (write ${KAFKA_BROKERS:-default} to give a default)"));
}

TEST(ConfigErrors, SubstitutionErrorsPointAtTheirDollarBraceInEveryScalarStyle) {
  const auto r = load(
      "kafka:\n"                                            // 1
      "  brokers: b\n"                                      // 2
      "  group_id: g-${A:-x}-${UNSET}\n"                    // 3  the second reference
      "  properties:\n"                                     // 4
      "    client.id: 'it''s ${UNSET}'\n"                   // 5  '' before it
      "    client.rack: \"a\\tb ${UNSET}\"\n"               // 6  an escape before it
      "pipelines:\n"                                        // 7
      "  - name: p\n"                                       // 8
      "    topics: [\"${T:-t}\", \"${1X}\", \"${OPEN\"]\n"  // 9  in a flow list
      "    item: { from: key }\n"                           // 10
      "    dedup:\n"                                        // 11
      "      capacity: \"${CAP}\"\n"                        // 12 a bad value: the scalar
      "      output_topic: >\n"                             // 13
      "        out\n"                                       // 14
      "        ${UNSET}\n",                                 // 15 folded block
      {{"CAP", "lots"}});
  EXPECT_THAT(
      errors_of(r),
      ElementsAre(
          "test.yaml:3:23: kafka.group_id: environment variable UNSET is not set (write "
          "${UNSET:-default} to give a default)",
          "test.yaml:5:23: kafka.properties[\"client.id\"]: environment variable UNSET is not "
          "set (write ${UNSET:-default} to give a default)",
          "test.yaml:6:24: kafka.properties[\"client.rack\"]: environment variable UNSET is not "
          "set (write ${UNSET:-default} to give a default)",
          "test.yaml:9:26: pipelines[0].topics[1]: invalid variable name \"1X\" in \"${1X}\" "
          "(letters, digits and _, not starting with a digit)",
          "test.yaml:9:35: pipelines[0].topics[2]: unterminated \"${\" (write \"$$\" for a "
          "literal \"$\")",
          "test.yaml:12:17: pipelines[0].dedup.capacity: expected a count (a whole number, "
          "optionally with k, M or G), got \"lots\"",
          "test.yaml:15:9: pipelines[0].dedup.output_topic: environment variable UNSET is not "
          "set (write ${UNSET:-default} to give a default)"));
}

TEST(ConfigErrors, EverySubstitutionErrorOfAValueIsReported) {
  const auto r = load(
      "kafka:\n"
      "  brokers: \"a${UNSET_X}b${UNSET_Y}c${1X}d${OPEN\"\n" +
      std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  EXPECT_THAT(errors_of(r),
              ElementsAre(StartsWith("test.yaml:2:14: kafka.brokers: environment variable UNSET_X "
                                     "is not set"),
                          StartsWith("test.yaml:2:25: kafka.brokers: environment variable UNSET_Y "
                                     "is not set"),
                          StartsWith("test.yaml:2:36: kafka.brokers: invalid variable name \"1X\""),
                          StartsWith("test.yaml:2:42: kafka.brokers: unterminated \"${\"")));
}

// yaml-cpp gives a list entry without a value (a `-` alone) the position of the token after
// it: the next entry, another key's line, or a line past the end of the file. The error is
// at the `-`.
TEST(ConfigErrors, NullListEntryIsReportedAtItsDash) {
  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n"          // 1
                             "pipelines:\n"                     // 2
                             "  - name: p\n"                    // 3
                             "    topics: [t]\n"                // 4
                             "    item: { from: key }\n"        // 5
                             "    dedup: { capacity: 1000 }\n"  // 6
                             "  -\n"                            // 7
                             "\n"                               // 8
                             "\n"                               // 9
                             "# the end\n")),                   // 10
              ElementsAre("test.yaml:7:3: pipelines[1]: an empty entry: a pipeline needs name, "
                          "topics, item, and heavy_hitters, dedup or both"));
  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n"          // 1
                             "pipelines:\n"                     // 2
                             "  - name: p\n"                    // 3
                             "    item: { from: key }\n"        // 4
                             "    dedup: { capacity: 1000 }\n"  // 5
                             "    topics:\n"                    // 6
                             "      - a\n"                      // 7
                             "      -   # nothing\n"            // 8  before an entry
                             "      - ~\n"                      // 9  explicit: its own
                             "      -\r\n"                      // 10 before a key
                             "log: {}\n")),                     // 11
              ElementsAre("test.yaml:8:7: pipelines[0].topics[1]: expected a topic name, got "
                          "nothing",
                          "test.yaml:9:9: pipelines[0].topics[2]: expected a topic name, got "
                          "nothing",
                          "test.yaml:10:7: pipelines[0].topics[3]: expected a topic name, got "
                          "nothing"));
}

// The n-th `${` of a value is looked for in the file within its scalar only: an escaped line
// break between "$" and "{" (a "${" that the file does not hold) sent the error to the next
// "${" of the file, on another key's line.
TEST(ConfigErrors, SubstitutionErrorIsNeverPlacedOutsideItsScalar) {
  EXPECT_THAT(errors_of(load("kafka:\n"
                             "  brokers: \"$\\\n"
                             "    {UNSET}\"\n"
                             "  group_id: \"${UNSET}\"\n" +
                             std::string(kMinimal.substr(kMinimal.find("pipelines"))))),
              ElementsAre(StartsWith("test.yaml:2:12: kafka.brokers: environment variable UNSET "
                                     "is not set"),
                          StartsWith("test.yaml:4:14: kafka.group_id: environment variable UNSET "
                                     "is not set")));
  // Nor in a comment after the last scalar of the file.
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "log: { level: \"$\\\n"
                                                     "  {UNSET}\" }  # ${UNSET}\n")),
              ElementsAre(StartsWith("test.yaml:8:15: log.level: environment variable UNSET is "
                                     "not set")));
}

TEST(ConfigErrors, SubstitutionErrorOnTheFirstLineAfterAByteOrderMark) {
  // yaml-cpp's columns leave the mark's 3 bytes out; so does the column of a `${`.
  for (const std::string bom : {"", "\xEF\xBB\xBF"}) {
    const auto r = load(bom + "kafka: {brokers: \"${UNSET}\", bogus: 1}\n" +
                        std::string(kMinimal.substr(kMinimal.find("pipelines"))));
    EXPECT_THAT(errors_of(r),
                ElementsAre(StartsWith("test.yaml:1:19: kafka.brokers: environment variable"),
                            StartsWith("test.yaml:1:30: unknown key \"bogus\" in kafka")))
        << (bom.empty() ? "without" : "with") << " a byte order mark";
  }
}

TEST(ConfigErrors, NestedVariableInADefaultIsAnErrorAtTheInnerReference) {
  const auto r = load(
      "kafka:\n"
      "  brokers: \"${UNSET_A:-${UNSET_B}}\"\n" +
          std::string(kMinimal.substr(kMinimal.find("pipelines"))),
      {{"UNSET_B", "set:9092"}});
  EXPECT_THAT(errors_of(r),
              ElementsAre("test.yaml:2:24: kafka.brokers: nested \"${…}\" in the default of "
                          "${UNSET_A} is not supported (a default is plain text; \"$$\" in it is "
                          "a literal \"$\")"));
  // Also when the variable is set: whether a file is valid does not depend on it.
  EXPECT_THAT(errors_of(load("kafka:\n"
                             "  brokers: ${A:-x${B:-y}}\n" +
                                 std::string(kMinimal.substr(kMinimal.find("pipelines"))),
                             {{"A", "a:1"}})),
              ElementsAre(StartsWith("test.yaml:2:18: kafka.brokers: nested \"${…}\" in the "
                                     "default of ${A} is not supported")));
}

TEST(ConfigErrors, YamlSyntaxErrorIsReportedWithItsPosition) {
  const auto r = load(
      "kafka:\n"
      "  brokers: [a, b\n"
      "pipelines: []\n");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_FALSE(r.value);
  EXPECT_EQ(r.errors[0].line, 3);
  EXPECT_EQ(r.errors[0].column, 10);
  EXPECT_THAT(r.errors[0].message, HasSubstr("invalid YAML: "));
}

TEST(ConfigErrors, DuplicatePipelineNameIsAnError) {
  const auto r = load(std::string(kMinimal) +
                      "  - name: p\n"
                      "    topics: [u]\n"
                      "    item: { from: value }\n"
                      "    dedup: { capacity: 1 }\n");
  EXPECT_THAT(errors_of(r), ElementsAre("test.yaml:8:11: pipelines[1].name: duplicate pipeline "
                                        "name \"p\" (first at line 4)"));
}

TEST(ConfigErrors, BadEnumValueListsTheChoices) {
  EXPECT_THAT(pipeline_errors("    clock: processing\n"
                              "    dedup: { capacity: 1 }\n"),
              ElementsAre("test.yaml:7:12: pipelines[0].clock: expected one of event, wall, got "
                          "\"processing\""));
  const auto r = load(std::string(kMinimal) + "log: { level: verbose }\n");
  EXPECT_THAT(errors_of(r), ElementsAre("test.yaml:8:15: log.level: expected one of trace, debug, "
                                        "info, warn, error, critical, off, got \"verbose\""));
}

// "warning" is how the log lines name the level; the configuration takes it too.
TEST(Config, LogLevelWarningIsWarn) {
  const auto r = load(std::string(kMinimal) + "log: { level: warning }\n");
  ASSERT_TRUE(r.value) << testing::PrintToString(errors_of(r));
  EXPECT_EQ(r.value->log.level, log_level::warn);
}

TEST(ConfigErrors, DuplicateKeyIsAnError) {
  const auto r = load(
      "kafka:\n"
      "  brokers: a\n"
      "  brokers: b\n" +
      std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  EXPECT_THAT(errors_of(r),
              ElementsAre("test.yaml:3:3: duplicate key \"brokers\" in kafka (first at line 2)"));
}

TEST(ConfigErrors, EveryErrorOfTheFileIsReportedInOrder) {
  const auto r = load(
      "kafka:\n"                             // 1
      "  brokers: b\n"                       // 2
      "  poll_timeout: 5\n"                  // 3  no unit
      "http:\n"                              // 4
      "  listen: \"localhost:70000\"\n"      // 5  port out of range
      "pipelines:\n"                         // 6
      "  - name: \"bad name\"\n"             // 7  invalid name
      "    topics: [t, t]\n"                 // 8  listed twice
      "    item: { from: json }\n"           // 9  json needs a path
      "    heavy_hitters:\n"                 // 10
      "      buckets: 2000\n"                // 11 out of range
      "      conservative: maybe\n"          // 12 not a boolean
      "  - name: q\n"                        // 13 needs heavy_hitters or dedup
      "    topics: [u]\n"                    // 14
      "    item: { from: key, path: /x }\n"  // 15 path only with json
      "log:\n"                               // 16
      "  summary_interval: 10 s\n");         // 17
  EXPECT_THAT(
      errors_of(r),
      ElementsAre(
          "test.yaml:3:17: kafka.poll_timeout: duration needs a unit (ms, s, m, h, d), got \"5\"",
          "test.yaml:5:11: http.listen: the port must be a number in [0, 65535] (0: any free "
          "port), got \"localhost:70000\"",
          "test.yaml:7:11: pipelines[0].name: must be 1 to 128 letters, digits, \"_\", \".\" or "
          "\"-\", got \"bad name\"",
          "test.yaml:8:17: pipelines[0].topics[1]: topic \"t\" is listed twice (first at line 8)",
          "test.yaml:9:11: pipelines[0].item: missing required key \"path\"",
          "test.yaml:11:16: pipelines[0].heavy_hitters.buckets: must be in [1, 1000], got 2000",
          "test.yaml:12:21: pipelines[0].heavy_hitters.conservative: expected true or false, got "
          "\"maybe\"",
          "test.yaml:13:5: pipelines[1]: needs heavy_hitters, dedup or both",
          "test.yaml:15:24: pipelines[1].item.path: only used with from: json",
          "test.yaml:17:21: log.summary_interval: unknown duration unit \" s\" (use ms, s, m, h, "
          "d), got \"10 s\""));
  EXPECT_FALSE(r.value);
}

TEST(ConfigErrors, WindowsAndIntervalsHaveAnUpperBound) {
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { window: 365d }\n"
                              "    dedup: { capacity: 1, window: 365d }\n"),
              ::testing::IsEmpty());
  EXPECT_THAT(
      pipeline_errors("    heavy_hitters: { window: 106751991166d }\n"
                      "    dedup: { capacity: 1, window: 366d }\n"),
      ElementsAre("test.yaml:7:30: pipelines[0].heavy_hitters.window: must be in [1ms, 365d], got "
                  "106751991166d",
                  "test.yaml:8:35: pipelines[0].dedup.window: must be in [1ms, 365d], got 366d"));
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "state: { snapshot_interval: 25h }\n"
                                                     "log: { summary_interval: 2d }\n")),
              ElementsAre("test.yaml:8:29: state.snapshot_interval: must be in [1ms, 1d], got 25h",
                          "test.yaml:9:26: log.summary_interval: must be in [0s, 1d], got 2d"));
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

TEST(ConfigErrors, GeneratorSizeAndRateHaveAnUpperBound) {
  EXPECT_THAT(errors_of(load(std::string(kMinimal) +
                             "generator: { topic: g, distinct: 1000000000000000000 }\n")),
              ElementsAre("test.yaml:8:34: generator.distinct: must be in [1, 1000000000], got "
                          "1000000000000000000"));
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "generator: { topic: g, rate: 1G }\n")),
              ElementsAre("test.yaml:8:30: generator.rate: must be in [1, 100000000], got 1G"));
}

TEST(ConfigErrors, CrossFieldRulesAreChecked) {
  // φ ≤ ε: the Count-Min error alone could make every item look heavy.
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { epsilon: 0.01, threshold: 0.01 }\n"),
              ElementsAre("test.yaml:7:48: pipelines[0].heavy_hitters.threshold: must be greater "
                          "than epsilon (0.01), since an estimate may exceed the true count by "
                          "epsilon times the window's items, got 0.01"));
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { window: 5ms, buckets: 10 }\n"),
              ElementsAre("test.yaml:7:30: pipelines[0].heavy_hitters.window: must be at least 1ms "
                          "per bucket (10 buckets), got 5ms"));
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1, output_topic: t }\n"),
              ElementsAre("test.yaml:7:41: pipelines[0].dedup.output_topic: must not be one of the "
                          "pipeline's topics (the pipeline would read its own output)"));
  // One of the two left out: said of the one written, with the other's default.
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { epsilon: 0.5 }\n"),
              ElementsAre("test.yaml:7:31: pipelines[0].heavy_hitters.epsilon: must be less "
                          "than threshold (0.01, its default), since an estimate may exceed the "
                          "true count by epsilon times the window's items, got 0.5"));
  EXPECT_THAT(pipeline_errors("    heavy_hitters: { threshold: 0.00005 }\n"),
              ElementsAre("test.yaml:7:33: pipelines[0].heavy_hitters.threshold: must be greater "
                          "than epsilon (0.0001, its default), since an estimate may exceed the "
                          "true count by epsilon times the window's items, got 5e-05"));
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1, output_topic: __consumer_offsets }\n"),
              ElementsAre("test.yaml:7:41: pipelines[0].dedup.output_topic: __consumer_offsets is "
                          "one of Kafka's internal topics: sketchd does not write to it"));
  EXPECT_THAT(errors_of(load(std::string("kafka: { brokers: b, embedded: {} }\n") +
                             std::string(kMinimal.substr(kMinimal.find("pipelines"))))),
              ElementsAre("test.yaml:1:22: kafka: give either brokers or embedded, not both"));
  EXPECT_THAT(errors_of(load(std::string("kafka:\n  group_id: g\n") +
                             std::string(kMinimal.substr(kMinimal.find("pipelines"))))),
              ElementsAre("test.yaml:2:3: kafka: missing required key \"brokers\" (or "
                          "\"embedded\" for an in-process cluster)"));
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
                                      "most 256 outputs (output_topic, duplicates_topic and "
                                      "alerts_topic) over all pipelines; this is output 257",
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

TEST(ConfigErrors, PropertiesSetElsewhereAreRejected) {
  const auto r = load(
      "kafka:\n"
      "  brokers: b\n"
      "  properties:\n"
      "    group.id: other\n"
      "    sasl.password: \"${PASSWORD}\"\n" +
          std::string(kMinimal.substr(kMinimal.find("pipelines"))),
      {{"PASSWORD", "hunter2"}});
  EXPECT_THAT(errors_of(r), ElementsAre("test.yaml:4:5: kafka.properties[\"group.id\"]: set "
                                        "kafka.group_id instead"));
}

// What at-least-once forwarding depends on cannot be turned off: offsets committed in the
// background, and an idempotent producer that is not transactional (a transactional one
// refuses every message sent outside a transaction).
TEST(ConfigErrors, PropertiesThatWouldBreakDeliveryAreRejected) {
  const auto r = load(
      "kafka:\n"
      "  brokers: b\n"
      "  properties:\n"
      "    enable.auto.commit: false\n"
      "    transactional.id: tx\n"
      "    enable.idempotence: \"False\"\n"
      "    delivery.report.only.error: true\n" +
      std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  EXPECT_THAT(errors_of(r),
              ElementsAre("test.yaml:4:25: kafka.properties[\"enable.auto.commit\"]: must stay "
                          "true: sketchd commits the offsets it has stored in the background "
                          "(every auto.commit.interval.ms)",
                          "test.yaml:5:5: kafka.properties[\"transactional.id\"]: sketchd's "
                          "producer is idempotent, not transactional (a transactional producer "
                          "refuses every message sent outside a transaction)",
                          "test.yaml:6:25: kafka.properties[\"enable.idempotence\"]: must stay "
                          "true: sketchd's producer is idempotent, so that a delivery retried "
                          "after a lost acknowledgement is not written twice to an output topic",
                          "test.yaml:7:33: kafka.properties[\"delivery.report.only.error\"]: must "
                          "stay false: sketchd stores an input offset once every output of its "
                          "message is acknowledged, which takes a report of every delivery"));
  EXPECT_TRUE(errors_of(load("kafka:\n"
                             "  brokers: b\n"
                             "  properties: { enable.auto.commit: true, enable.idempotence: true, "
                             "delivery.report.only.error: false }\n" +
                             std::string(kMinimal.substr(kMinimal.find("pipelines")))))
                  .empty());
}

// sketchd stores an offset once every output of its message is delivered; librdkafka's
// automatic store would store offsets as messages are handed over (at-most-once forwarding
// after a crash). Refused whatever its value, at the key.
TEST(ConfigErrors, EnableAutoOffsetStoreIsRefusedWhateverItsValue) {
  for (const std::string value : {"false", "true"}) {
    EXPECT_THAT(
        errors_of(load("kafka:\n"
                       "  brokers: b\n"
                       "  properties:\n"
                       "    enable.auto.offset.store: " +
                       value + "\n" + std::string(kMinimal.substr(kMinimal.find("pipelines"))))),
        ElementsAre("test.yaml:4:5: kafka.properties[\"enable.auto.offset.store\"]: "
                    "sketchd stores offsets itself, once a message's outputs are "
                    "delivered"))
        << value;
  }
}

// librdkafka's message shows a value written in the file as it is (not a secret's); one
// from the environment may be a secret in the wrong key, and is redacted.
TEST(ConfigErrors, PropertiesAreCheckedByLibrdkafkaShowingOnlyValuesWrittenInTheFile) {
  const auto r = load(
      "kafka:\n"
      "  brokers: b\n"
      "  properties:\n"
      "    no.such.property: 1\n"
      "    fetch.wait.max.ms: soon\n"
      "    compression.codec: \"${CODEC}\"\n"
      "    sasl.password: \"${PASSWORD}\"\n"
      "    session.timeout.ms: 6000\n"
      "    security.protocol: bogus\n" +
          std::string(kMinimal.substr(kMinimal.find("pipelines"))),
      {{"PASSWORD", "hunter2"}, {"CODEC", "hunter3"}});
  EXPECT_THAT(
      errors_of(r),
      ElementsAre(
          AllOf(StartsWith("test.yaml:4:5: kafka.properties[\"no.such.property\"]: librdkafka "),
                EndsWith(" has no such property")),
          "test.yaml:5:24: kafka.properties[\"fetch.wait.max.ms\"]: Invalid value for "
          "configuration property \"fetch.wait.max.ms\"",
          "test.yaml:6:24: kafka.properties[\"compression.codec\"]: Invalid value "
          "\"<redacted>\" for configuration property \"compression.codec\"",
          "test.yaml:9:24: kafka.properties[\"security.protocol\"]: Invalid value \"bogus\" for "
          "configuration property \"security.protocol\""));
}

// The value of a secret property never shows in a message, whatever the problem; the name
// of a variable it refers to does (a reference, by the syntax, not the value).
TEST(ConfigErrors, SecretValuesNeverAppearInMessages) {
  const auto r = load(
      "kafka:\n"
      "  brokers: b\n"
      "  properties:\n"
      "    sasl.password: \"pa${ss w0rd}\"\n"
      "    ssl.key.password: \"${KEY_PASSWORD}\"\n"
      "    sasl.oauthbearer.client.secret: [s3cret]\n"
      "    ssl.key.pem: \"${PEM:-pemtext${OTHER}}\"\n"
      "    sasl.oauthbearer.config: \"x${OPEN\"\n"
      "    client.id: \"pa${ss w0rd}\"\n" +
      std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  const auto errors = errors_of(r);
  EXPECT_THAT(
      errors,
      ElementsAre(
          "test.yaml:4:23: kafka.properties[\"sasl.password\"]: invalid \"${…}\" in the value "
          "(not shown: a secret): a variable name is letters, digits and _, not starting with a "
          "digit; \"$$\" is a literal \"$\"",
          "test.yaml:5:24: kafka.properties[\"ssl.key.password\"]: environment variable "
          "KEY_PASSWORD is not set (write ${KEY_PASSWORD:-default} to give a default)",
          "test.yaml:6:37: kafka.properties[\"sasl.oauthbearer.client.secret\"]: expected a "
          "string, got a list",
          StartsWith("test.yaml:7:33: kafka.properties[\"ssl.key.pem\"]: nested \"${…}\" in the "
                     "default of ${PEM} is not supported"),
          "test.yaml:8:32: kafka.properties[\"sasl.oauthbearer.config\"]: unterminated \"${\" "
          "(write \"$$\" for a literal \"$\")",
          // Not a secret: the message quotes it.
          StartsWith("test.yaml:9:19: kafka.properties[\"client.id\"]: invalid variable name "
                     "\"ss w0rd\" in \"${ss w0rd}\"")));
  for (std::size_t i = 0; i + 1 < errors.size(); ++i) {
    EXPECT_THAT(errors[i],
                AllOf(::testing::Not(HasSubstr("w0rd")), ::testing::Not(HasSubstr("s3cret")),
                      ::testing::Not(HasSubstr("pemtext")), ::testing::Not(HasSubstr("x$"))));
  }
}

// librdkafka reads a boolean as true from true, t or 1 in any case: so does the check that
// enable.auto.commit stays true, from librdkafka's own reading of the value.
// Values librdkafka accepts that would turn off the background commits, the statistics
// behind the lag and broker metrics (and their alerts), or consumption of a partition
// without a committed offset — each as librdkafka reads the value.
TEST(ConfigErrors, PropertiesThatWouldQuietlyUndoWhatSketchdReliesOnAreRejected) {
  const auto errors = [](std::string_view properties) {
    return errors_of(
        load("kafka:\n"
             "  brokers: b\n"
             "  properties: { " +
             std::string(properties) + " }\n" +
             std::string(kMinimal.substr(kMinimal.find("pipelines")))));
  };
  EXPECT_THAT(
      errors("auto.commit.interval.ms: 0, statistics.interval.ms: \"0\", "
             "auto.offset.reset: ERROR"),
      ElementsAre("test.yaml:3:42: kafka.properties[\"auto.commit.interval.ms\"]: must be above "
                  "0: 0 turns off the background commits of the offsets sketchd has stored (a "
                  "restart would read everything since the start again)",
                  "test.yaml:3:69: kafka.properties[\"statistics.interval.ms\"]: must be above 0: "
                  "librdkafka's statistics feed sketchd_kafka_consumer_lag_messages and "
                  "sketchd_kafka_brokers_up, and with them the alerts SketchdKafkaUnreachable and "
                  "SketchdConsumerLagGrowing",
                  "test.yaml:3:93: kafka.properties[\"auto.offset.reset\"]: error is not "
                  "supported: a partition without a committed offset would stop being consumed, "
                  "with nothing to show it; use earliest (sketchd's default) or latest"));
  // Java's spelling of "error" is named with librdkafka's choices (not a secret: shown).
  EXPECT_THAT(errors("auto.offset.reset: none"),
              ElementsAre("test.yaml:3:36: kafka.properties[\"auto.offset.reset\"]: invalid "
                          "value \"none\": librdkafka takes earliest (smallest, beginning) or "
                          "latest (largest, end); Java's none is librdkafka's error, which "
                          "sketchd does not support"));
  EXPECT_THAT(errors("auto.commit.interval.ms: 1000, statistics.interval.ms: 60000, "
                     "auto.offset.reset: latest"),
              IsEmpty());
}

TEST(ConfigErrors, EnableAutoCommitIsJudgedAsLibrdkafkaReadsIt) {
  const auto auto_commit_errors = [](std::string_view value) {
    return errors_of(
        load("kafka:\n"
             "  brokers: b\n"
             "  properties:\n"
             "    enable.auto.commit: " +
             std::string(value) + "\n" + std::string(kMinimal.substr(kMinimal.find("pipelines")))));
  };
  for (const std::string_view value : {"true", "True", "TRUE", "t", "T", "\"1\""}) {
    EXPECT_THAT(auto_commit_errors(value), IsEmpty()) << value;
  }
  for (const std::string_view value : {"false", "False", "f", "0"}) {
    EXPECT_THAT(auto_commit_errors(value),
                ElementsAre("test.yaml:4:25: kafka.properties[\"enable.auto.commit\"]: must stay "
                            "true: sketchd commits the offsets it has stored in the background "
                            "(every auto.commit.interval.ms)"))
        << value;
  }
  // Neither: librdkafka's own refusal.
  EXPECT_THAT(auto_commit_errors("yes please"),
              ElementsAre(StartsWith("test.yaml:4:25: kafka.properties[\"enable.auto.commit\"]: "
                                     "Expected bool value for \"enable.auto.commit\"")));
}

// librdkafka's metadata.broker.list is its other name of bootstrap.servers: set there, it
// would silently replace kafka.brokers.
TEST(ConfigErrors, MetadataBrokerListIsRefusedLikeBootstrapServers) {
  EXPECT_THAT(errors_of(load("kafka:\n"
                             "  brokers: b\n"
                             "  properties: {metadata.broker.list: \"x:9092\", "
                             "bootstrap.servers: \"y:9092\"}\n" +
                             std::string(kMinimal.substr(kMinimal.find("pipelines"))))),
              ElementsAre("test.yaml:3:16: kafka.properties[\"metadata.broker.list\"]: set "
                          "kafka.brokers instead",
                          "test.yaml:3:48: kafka.properties[\"bootstrap.servers\"]: set "
                          "kafka.brokers instead"));
}

// librdkafka's checks across properties, which it only makes when a client is created:
// check-config makes them too, for the consumer and, when a pipeline writes to a topic, for
// the idempotent producer, at the first property the reason names.
TEST(ConfigErrors, PropertiesAreCheckedTogetherForEachClientSketchdCreates) {
  const auto with_properties = [](std::string_view properties, std::string_view dedup) {
    return load(std::string("kafka:\n"
                            "  brokers: b\n"
                            "  properties:\n") +
                std::string(properties) +
                "pipelines:\n"
                "  - name: p\n"
                "    topics: [t]\n"
                "    item: { from: key }\n" +
                std::string(dedup));
  };
  constexpr std::string_view kConsumeOnly = "    dedup: { capacity: 1000 }\n";
  constexpr std::string_view kForwarding = "    dedup: { capacity: 1000, output_topic: out }\n";

  EXPECT_THAT(
      errors_of(with_properties("    session.timeout.ms: 6000\n"
                                "    max.poll.interval.ms: 1000\n",
                                kConsumeOnly)),
      ElementsAre(
          "test.yaml:5:5: kafka.properties[\"max.poll.interval.ms\"]: librdkafka refuses these "
          "properties for the consumer: `max.poll.interval.ms`must be >= `session.timeout.ms`"));
  EXPECT_THAT(
      errors_of(with_properties("    fetch.max.bytes: 1000\n", kConsumeOnly)),
      ElementsAre("test.yaml:4:5: kafka.properties[\"fetch.max.bytes\"]: librdkafka refuses these "
                  "properties for the consumer: `fetch.max.bytes` must be >= `message.max.bytes`"));
  // A reason that names no property given points at the section.
  EXPECT_THAT(errors_of(with_properties(
                  "    partition.assignment.strategy: range,cooperative-sticky\n", kConsumeOnly)),
              ElementsAre(AllOf(
                  StartsWith("test.yaml:3:3: kafka.properties: librdkafka refuses these properties "
                             "for the consumer: All partition.assignment.strategy"),
                  HasSubstr("same protocol type"))));

  // acks only matters to the producer, which sketchd makes idempotent: only a pipeline that
  // writes to a topic needs acks=all.
  EXPECT_THAT(errors_of(with_properties("    acks: 1\n", kConsumeOnly)), IsEmpty());
  EXPECT_THAT(
      errors_of(with_properties("    acks: 1\n", kForwarding)),
      ElementsAre(
          "test.yaml:4:5: kafka.properties[\"acks\"]: librdkafka refuses these properties for "
          "the producer, which is idempotent (forwarding loses and repeats nothing): `acks` must "
          "be set to `all` when `enable.idempotence` is true"));
  EXPECT_THAT(
      errors_of(with_properties("    linger.ms: 2000\n"
                                "    message.timeout.ms: 1000\n",
                                kForwarding)),
      ElementsAre(HasSubstr("kafka.properties[\"message.timeout.ms\"]: librdkafka refuses these "
                            "properties for the producer")));

  // Security settings read this machine's files when a client is created: left to `run`.
  EXPECT_THAT(errors_of(with_properties("    security.protocol: ssl\n"
                                        "    ssl.ca.location: /nonexistent/ca.pem\n",
                                        kForwarding)),
              IsEmpty());
  // sketchd's own settings pass, alone and with common tuning.
  EXPECT_THAT(errors_of(with_properties("    session.timeout.ms: 6000\n"
                                        "    fetch.max.bytes: 104857600\n"
                                        "    message.max.bytes: 10000000\n"
                                        "    compression.type: zstd\n",
                                        kForwarding)),
              IsEmpty());
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

TEST(ConfigErrors, EmptyAndMultiDocumentFilesAreErrors) {
  EXPECT_THAT(errors_of(load("")),
              ElementsAre("test.yaml:1:1: the configuration is empty: it needs at least kafka and "
                          "pipelines"));
  EXPECT_THAT(errors_of(load("# only a comment\n")), ::testing::SizeIs(1));
  EXPECT_THAT(errors_of(load("- a\n- b\n")),
              ElementsAre("test.yaml:1:1: expected a mapping of sections (kafka, pipelines, …), "
                          "got a list"));
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "---\nkafka: {}\n")),
              ElementsAre("test.yaml:9:1: only one YAML document is allowed (remove the \"---\")"));
  // An empty first document: the second document is the problem, not emptiness.
  EXPECT_THAT(errors_of(load("---\n---\n" + std::string(kMinimal))),
              ElementsAre(HasSubstr("only one YAML document is allowed")));
}

// yaml-cpp 0.7's parser returns empty documents forever on a stray ',' outside any flow
// collection, without reading on; loading every document filled memory until the process
// was killed. It is an error at the comma. Found by fuzzing (tests/fuzz/config_fuzz.cpp).
TEST(ConfigErrors, StrayCommaIsAnErrorNotAnEndlessLoad) {
  EXPECT_THAT(errors_of(load(",")), ElementsAre("test.yaml:1:1: invalid YAML: unexpected ','"));
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "...\n,\n")),
              ElementsAre("test.yaml:9:1: invalid YAML: unexpected ','"));
  EXPECT_THAT(errors_of(load("  ,\n")), ElementsAre("test.yaml:1:3: invalid YAML: unexpected ','"));
  // After a byte order mark, which the parser does not count.
  EXPECT_THAT(errors_of(load("\xEF\xBB\xBF,")),
              ElementsAre("test.yaml:1:1: invalid YAML: unexpected ','"));
}

// An empty second document is reported at its "---": the position yaml-cpp gives its root is
// the next token's, here a line past the end of the file.
TEST(ConfigErrors, AnEmptySecondDocumentIsReportedAtItsDashes) {
  EXPECT_THAT(errors_of(load("kafka: {embedded: {}}\n---\n")),
              ElementsAre("test.yaml:1:1: missing required key \"pipelines\"",
                          "test.yaml:2:1: only one YAML document is allowed (remove the \"---\")"));
  EXPECT_THAT(errors_of(load(std::string(kMinimal) + "--- # more\n\n# nothing\n")),
              ElementsAre("test.yaml:8:1: only one YAML document is allowed (remove the \"---\")"));
}

// Aliases of aliases multiply what the checker visits: a 77 KB file that repeated a pipeline
// of 6,000 topics 6,000 times took 19 s and 2 GB, and a few hundred bytes can stand for
// billions of nodes. What the aliases repeat is counted from the parser's events, without
// expanding anything, and past 1,000,000 nodes the file is one error, at the alias that
// went past.
TEST(ConfigErrors, AliasesRepeatingTooMuchAreOneErrorAtTheAlias) {
  constexpr std::string_view kTooMany =
      "with this alias, the aliases of the file repeat more than 1,000,000 nodes or 64 MiB of "
      "values of their anchors: no configuration is that large (is an alias repeated by "
      "mistake?)";
  // Ten times more at each level: a5's eighth *a4 (of 111,111 nodes) goes past.
  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 8; ++i) {
    laughs +=
        fmt::format("a{}: &a{} [{}]\n", i, i,
                    fmt::join(std::vector<std::string>(10, fmt::format("*a{}", i - 1)), ", "));
  }
  EXPECT_THAT(errors_of(load(laughs)), ElementsAre(fmt::format("test.yaml:6:45: {}", kTooMany)));

  // The reviewer's file, smaller: each *p repeats 2,013 nodes (its 2,000 topics through *t),
  // after the 2,001 of *t in p itself, so the 496th goes past.
  std::vector<std::string> topics;
  for (int i = 0; i < 2000; ++i) topics.push_back(fmt::format("t{}", i));
  std::string yaml = fmt::format(
      "kafka: {{brokers: b}}\n"
      "x: &t [{}]\n"
      "pipelines:\n"
      "  - &p {{name: p, topics: *t, item: {{from: key}}, dedup: {{capacity: 1}}}}\n",
      fmt::join(topics, ","));
  for (int i = 0; i < 1000; ++i) yaml += "  - *p\n";
  EXPECT_THAT(errors_of(load(yaml)), ElementsAre(fmt::format("test.yaml:500:5: {}", kTooMany)));

  // An alias inside its own anchor would repeat forever.
  EXPECT_THAT(errors_of(load("kafka: &k {brokers: *k}\n")),
              ElementsAre("test.yaml:1:21: this alias is inside the node its anchor names: it "
                          "would repeat it forever"));
  // What a configuration does with aliases is far below the limit.
  EXPECT_THAT(errors_of(load("kafka: { brokers: b }\n"
                             "pipelines:\n"
                             "  - &p { name: a, topics: &t [t], item: { from: key }, dedup: "
                             "&d { capacity: 1 } }\n"
                             "  - { name: b, topics: *t, item: { from: key }, dedup: *d }\n")),
              IsEmpty());
}

TEST(ConfigErrors, ATabInAnIndentationIsNamed) {
  EXPECT_THAT(errors_of(load("kafka:\n  brokers: b\npipelines:\n  - name: p\n\t topics: [t]\n")),
              ElementsAre(::testing::MatchesRegex(
                  "test\\.yaml:[0-9]+:[0-9]+: invalid YAML: .* \\(line 5 is indented with a tab: "
                  "YAML indents with spaces only\\)")));
}

TEST(ConfigErrors, DeepNestingIsNamed) {
  EXPECT_THAT(errors_of(load("a: " + std::string(3000, '[') + std::string(3000, ']') + "\n")),
              ElementsAre(::testing::MatchesRegex(
                  "test\\.yaml:1:[0-9]+: invalid YAML: nested too deeply")));
}

TEST(ConfigErrors, HttpListenAddressIsChecked) {
  const auto listen_errors = [](std::string_view listen) {
    return errors_of(
        load(std::string(kMinimal) + "http: { listen: \"" + std::string(listen) + "\" }\n"));
  };
  EXPECT_THAT(listen_errors("0.0.0.0:9464"), ::testing::IsEmpty());
  EXPECT_THAT(listen_errors("[::]:65535"), ::testing::IsEmpty());
  EXPECT_THAT(listen_errors("9464"), ElementsAre(HasSubstr("expected HOST:PORT")));
  EXPECT_THAT(listen_errors(":9464"), ElementsAre(HasSubstr("needs a host")));
  EXPECT_THAT(listen_errors("::1:9464"), ElementsAre(HasSubstr("needs brackets")));
  EXPECT_THAT(listen_errors("localhost:http"), ElementsAre(HasSubstr("the port must be")));
  EXPECT_THAT(listen_errors("localhost:65536"), ElementsAre(HasSubstr("the port must be")));
  EXPECT_THAT(listen_errors("localhost:9464"), ::testing::IsEmpty());
  EXPECT_THAT(listen_errors("999.1.1.1:9464"), ElementsAre(HasSubstr("not an IPv4 address")));
  EXPECT_THAT(listen_errors("127.0.0:9464"), ElementsAre(HasSubstr("not an IPv4 address")));
  EXPECT_THAT(listen_errors("[::g]:9464"), ElementsAre(HasSubstr("not an IPv6 address")));
  EXPECT_THAT(listen_errors("http://127.0.0.1:9464"),
              ElementsAre("test.yaml:8:17: http.listen: expected HOST:PORT such as "
                          "127.0.0.1:9464, not a URL, got \"http://127.0.0.1:9464\""));
}

TEST(ConfigErrors, BrokerListIsChecked) {
  const auto broker_errors = [](std::string_view brokers) {
    std::string yaml(kMinimal);
    yaml.replace(yaml.find("localhost:9092"), 14, "\"" + std::string(brokers) + "\"");
    return errors_of(load(yaml));
  };
  for (const char* good : {"localhost:9092", "k1:9092,k2:9092", "k1, k2", "SSL://k1:9093",
                           "[::1]:9092", "10.0.0.1", "broker-1.example.com:9092"}) {
    EXPECT_THAT(broker_errors(good), ::testing::IsEmpty()) << good;
  }
  EXPECT_THAT(
      broker_errors(","),
      ElementsAre("test.yaml:2:12: kafka.brokers: an empty entry (HOST[:PORT],HOST[:PORT]…)"));
  EXPECT_THAT(broker_errors("k1:9092,"), ElementsAre(HasSubstr("an empty entry")));
  EXPECT_THAT(
      broker_errors("a:99999"),
      ElementsAre(
          "test.yaml:2:12: kafka.brokers: \"a:99999\": the port must be a number in [1, 65535]"));
  EXPECT_THAT(broker_errors("a:-1"), ElementsAre(HasSubstr("the port must be")));
  EXPECT_THAT(broker_errors("a:"), ElementsAre(HasSubstr("no port after")));
  EXPECT_THAT(broker_errors(":9092"), ElementsAre(HasSubstr("not a host name or address")));
  EXPECT_THAT(broker_errors("host with space:9092"),
              ElementsAre(HasSubstr("not a host name or address")));
  EXPECT_THAT(broker_errors("[::1:9092"), ElementsAre(HasSubstr("closing \"]\"")));
  EXPECT_THAT(broker_errors("::1:9092"),
              ElementsAre(HasSubstr("an IPv6 address goes in brackets")));
  EXPECT_THAT(broker_errors("SASL_SSL://k1:9093,plaintext://k2:9092"), ::testing::IsEmpty());
  EXPECT_THAT(broker_errors("https://k1:9093"), ElementsAre(HasSubstr("unknown protocol")));
  EXPECT_THAT(broker_errors("SSL://"), ElementsAre(HasSubstr("no host after the protocol")));
  EXPECT_THAT(broker_errors("[]:9092"), ElementsAre(HasSubstr("not an IPv6 address")));
  // Digits and dots are an IPv4 address, brackets an IPv6 address, as in http.listen.
  EXPECT_THAT(
      broker_errors("999.1.1.1:9092"),
      ElementsAre("test.yaml:2:12: kafka.brokers: \"999.1.1.1:9092\": not an IPv4 address"));
  EXPECT_THAT(broker_errors("1.2.3:9092"), ElementsAre(HasSubstr("not an IPv4 address")));
  EXPECT_THAT(broker_errors("[::g]:9092"), ElementsAre(HasSubstr("not an IPv6 address")));
  EXPECT_THAT(
      broker_errors("[fe80::1%eth0]:9092"),
      ElementsAre(HasSubstr("not an IPv6 address (a zone such as %eth0 is not supported)")));
  EXPECT_THAT(broker_errors("[fe80::1]:9092,127.0.0.1:9092"), ::testing::IsEmpty());
  EXPECT_THAT(broker_errors("["), ElementsAre(HasSubstr("closing \"]\"")));
}

// A topic sketchd writes to holds one kind of event, whichever pipelines write it: a sink
// of first-seen events must not meet duplicates or alerts among them.
TEST(ConfigErrors, EachOutputTopicHoldsOneKindOfEvent) {
  const std::string head = "kafka: { brokers: k }\npipelines:\n";
  EXPECT_THAT(pipeline_errors("    dedup: { capacity: 1, output_topic: o, duplicates_topic: o }\n"),
              ElementsAre("test.yaml:7:62: pipelines[0].dedup.duplicates_topic: topic o already "
                          "receives the first-seen events of pipeline p "
                          "(pipelines[0].dedup.output_topic): a topic sketchd writes to holds one "
                          "kind of event (first-seen events, duplicates, heavy-hitter alerts or "
                          "the generator's stream)"));
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
                EndsWith("kind of event (first-seen events, duplicates, heavy-hitter alerts or "
                         "the generator's stream)")),
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

TEST(ConfigErrors, ControlCharactersOfValuesAreEscapedSoEachErrorIsOneLine) {
  std::string yaml(kMinimal);
  yaml.replace(yaml.find("name: p"), 7, "name: \"a\\nb\\e[31m\\tc\"");
  EXPECT_THAT(
      errors_of(load(yaml)),
      ElementsAre(
          "test.yaml:4:11: pipelines[0].name: must be 1 to 128 letters, digits, \"_\", \".\" or "
          "\"-\", got \"a\\nb\\x1b[31m\\tc\""));
}

TEST(ConfigErrors, ADeviceOrAHugeFileIsRefusedNotReadWhole) {
  const auto r = load_config_file("/dev/zero");
  EXPECT_FALSE(r.value);
  EXPECT_THAT(errors_of(r),
              ElementsAre("/dev/zero: is larger than 16 MiB: not a configuration file"));
}

TEST(ConfigErrors, MissingFileIsOneClearError) {
  const auto r = load_config_file("/nonexistent/sketchd.yaml");
  EXPECT_FALSE(r.value);
  EXPECT_THAT(errors_of(r), ElementsAre("/nonexistent/sketchd.yaml: cannot read the file: No such "
                                        "file or directory"));
}

TEST(ConfigErrors, ADirectoryGivenAsTheConfigurationIsOneClearError) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const auto r = load_config_file(dir);
  EXPECT_FALSE(r.value);
  EXPECT_THAT(errors_of(r), ElementsAre(dir + ": is a directory, not a file"));
}

// Unreadable for its permissions. Root reads any file: the case is skipped when run as root.
TEST(ConfigErrors, AnUnreadableFileIsOneClearError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their permissions";
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("sketchd-unreadable-{}.yaml", ::getpid()))
                               .string();
  std::ofstream(path) << kMinimal;
  std::filesystem::permissions(path, std::filesystem::perms::none);
  const auto r = load_config_file(path);
  std::filesystem::remove(path);
  EXPECT_FALSE(r.value);
  EXPECT_THAT(errors_of(r), ElementsAre(path + ": cannot read the file: Permission denied"));
}

// A file that opens but fails while it is read (/proc/self/mem at offset 0, which is not
// mapped: EIO) is one error with the system's reason, not an empty configuration.
TEST(ConfigErrors, AReadErrorIsOneClearError) {
  const auto r = load_config_file("/proc/self/mem");
  EXPECT_FALSE(r.value);
  EXPECT_THAT(errors_of(r),
              ElementsAre("/proc/self/mem: cannot read the file: Input/output error"));
}

// --- Values. ---------------------------------------------------------------------------

TEST(ConfigValues, SubstitutionUsesTheEnvironmentOrTheDefault) {
  const auto env = fake_env({{"HOST", "kafka"}, {"EMPTY", ""}});
  EXPECT_EQ(substitute_variables("${HOST}:9092", env), "kafka:9092");
  EXPECT_EQ(substitute_variables("${HOST:-localhost}", env), "kafka");
  EXPECT_EQ(substitute_variables("${PORT:-9092}", env), "9092");
  EXPECT_EQ(substitute_variables("${EMPTY:-fallback}", env), "fallback");
  EXPECT_EQ(substitute_variables("${EMPTY}", env), "");
  EXPECT_EQ(substitute_variables("${UNSET:-}", env), "");
  EXPECT_EQ(substitute_variables("${UNSET:-a:-b}", env), "a:-b");
  EXPECT_EQ(substitute_variables("cost: $$5 and $${HOST}", env), "cost: $5 and ${HOST}");
  EXPECT_EQ(substitute_variables("$HOST $ 5$", env), "$HOST $ 5$");
  EXPECT_EQ(substitute_variables("${HOST}${HOST}", env), "kafkakafka");
  // A default is plain text up to the first "}", where "$$" is a literal "$" too.
  EXPECT_EQ(substitute_variables("${UNSET:-a$$b$c$}", env), "a$b$c$");
  EXPECT_EQ(substitute_variables("${UNSET:-$${x}", env), "${x");
  EXPECT_EQ(substitute_variables("${UNSET:-{x}}", env), "{x}");
}

TEST(ConfigValues, SubstitutionErrorsGiveTheOffsetOfTheirDollarBrace) {
  const auto env = fake_env({{"HOST", "kafka"}});
  const std::tuple<std::string_view, std::size_t, std::string_view> bad[] = {
      {"a ${UNSET}", 2,
       "environment variable UNSET is not set (write ${UNSET:-default} to give a default)"},
      {"${HOST}-${HOST", 8, "unterminated \"${\" (write \"$$\" for a literal \"$\")"},
      {"$${HOST} ${1X}", 9,
       "invalid variable name \"1X\" in \"${1X}\" (letters, digits and _, not starting with a "
       "digit)"},
      {"${}", 0,
       "invalid variable name \"\" in \"${}\" (letters, digits and _, not starting with a digit)"},
      {"${UNSET_A:-${UNSET_B}}", 11,
       "nested \"${…}\" in the default of ${UNSET_A} is not supported (a default is plain "
       "text; \"$$\" in it is a literal \"$\")"},
      {"${HOST:-x$$${B}}", 11,
       "nested \"${…}\" in the default of ${HOST} is not supported (a default is plain "
       "text; \"$$\" in it is a literal \"$\")"}};
  for (const auto& [text, offset, message] : bad) {
    try {
      (void)substitute_variables(text, env);
      ADD_FAILURE() << "no error for \"" << text << "\"";
    } catch (const substitution_error& e) {
      EXPECT_EQ(e.offset(), offset) << text;
      EXPECT_EQ(e.what(), message) << text;
      EXPECT_EQ(e.problems().size(), 1u) << text;
    }
  }
  // Every problem of a text, in order; an unterminated `${` ends it.
  try {
    (void)substitute_variables("${UNSET_A}-${HOST:-${X}}-${9}-${HOST}-${UNSET_B}-${OPEN", env);
    ADD_FAILURE() << "no error";
  } catch (const substitution_error& e) {
    std::vector<std::size_t> offsets;
    for (const auto& p : e.problems()) offsets.push_back(p.offset);
    EXPECT_THAT(offsets, ElementsAre(0, 19, 25, 38, 49));
    EXPECT_EQ(e.offset(), 0u);
  }
}

TEST(ConfigValues, SubstitutionAppliesToEveryKindOfValue) {
  const auto r = load(
      "kafka:\n"
      "  brokers: ${B}\n"
      "  batch_size: ${BATCH:-2k}\n"
      "state:\n"
      "  dir: \"${STATE_DIR:-}\"\n"
      "pipelines:\n"
      "  - name: ${NAME}\n"
      "    topics: [\"${TOPIC}\"]\n"
      "    item: { from: \"${FROM}\" }\n"
      "    dedup: { capacity: \"${CAP}\", window: \"${W:-2h}\", output_topic: \"${OUT:-}\" }\n",
      {{"B", "k:1"}, {"NAME", "n"}, {"TOPIC", "tt"}, {"FROM", "value"}, {"CAP", "1M"}});
  ASSERT_TRUE(r.value) << ::testing::PrintToString(errors_of(r));
  EXPECT_EQ(r.value->kafka.brokers, "k:1");
  EXPECT_EQ(r.value->kafka.batch_size, 2000u);
  EXPECT_FALSE(r.value->state.dir);
  EXPECT_EQ(r.value->pipelines[0].name, "n");
  EXPECT_THAT(r.value->pipelines[0].topics, ElementsAre("tt"));
  EXPECT_EQ(r.value->pipelines[0].item.from, item_source::value);
  EXPECT_EQ(r.value->pipelines[0].dedup->capacity, 1'000'000u);
  EXPECT_EQ(r.value->pipelines[0].dedup->window, std::chrono::hours(2));
  EXPECT_FALSE(r.value->pipelines[0].dedup->output_topic);
}

TEST(ConfigValues, DurationsTakeAnIntegerAndAUnit) {
  const std::pair<std::string_view, std::int64_t> good[] = {
      {"0", 0},           {"0s", 0},        {"1ms", 1},        {"500ms", 500},
      {"30s", 30'000},    {"5m", 300'000},  {"1h", 3'600'000}, {"7d", 604'800'000},
      {"90m", 5'400'000}, {"0010s", 10'000}};
  for (const auto& [text, ms] : good) {
    EXPECT_EQ(parse_duration(text), milliseconds(ms)) << text;
  }
  const std::pair<std::string_view, std::string_view> bad[] = {
      {"30", "duration needs a unit (ms, s, m, h, d)"},
      {"1.5h", "a duration is a whole number of its unit (write 90m, not 1.5h)"},
      {"5 m", "unknown duration unit \" m\" (use ms, s, m, h, d)"},
      {"5min", "unknown duration unit \"min\" (use ms, s, m, h, d)"},
      {"-5s", "a duration cannot be negative"},
      {"", "expected a duration such as 500ms, 30s, 5m, 1h or 7d"},
      {"s", "expected a duration such as 500ms, 30s, 5m, 1h or 7d"},
      {"200000000000d", "duration is too large"},
      {"99999999999999999999ms", "duration is too large"}};
  for (const auto& [text, message] : bad) {
    try {
      (void)parse_duration(text);
      ADD_FAILURE() << "no error for \"" << text << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(e.what(), message) << text;
    }
  }
}

TEST(ConfigValues, CountsTakeDecimalSuffixes) {
  const std::pair<std::string_view, std::uint64_t> good[] = {
      {"0", 0},
      {"1000", 1000},
      {"10k", 10'000},
      {"10M", 10'000'000},
      {"2G", 2'000'000'000},
      {"1.5k", 1500},
      {"2.25M", 2'250'000},
      {"0.001G", 1'000'000},
      {"3.000", 3},
      {"18446744073709551615", 18446744073709551615ULL}};
  for (const auto& [text, n] : good) {
    EXPECT_EQ(parse_count(text), n) << text;
  }
  const std::pair<std::string_view, std::string_view> bad[] = {
      {"1.5", "a count must be a whole number"},
      {"1.0001k", "a count must be a whole number"},
      {"10m", "unknown count suffix \"m\" (use k, M or G)"},
      {"10 k", "unknown count suffix \" k\" (use k, M or G)"},
      {"-1", "a count cannot be negative"},
      {"", "expected a count (a whole number, optionally with k, M or G)"},
      {"k", "expected a count (a whole number, optionally with k, M or G)"},
      {"1e6", "a count has no exponent: 1000000 or 1M, not 1e6"},
      {"1E6", "a count has no exponent: 1000000 or 1M, not 1e6"},
      {"1e", "unknown count suffix \"e\" (use k, M or G)"},
      {"18446744073709551616", "count is too large"},
      {"18446744073709552k", "count is too large"}};
  for (const auto& [text, message] : bad) {
    try {
      (void)parse_count(text);
      ADD_FAILURE() << "no error for \"" << text << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(e.what(), message) << text;
    }
  }
}

TEST(ConfigValues, RealsTakeDecimalAndScientificNotation) {
  EXPECT_DOUBLE_EQ(parse_real("0.001"), 0.001);
  EXPECT_DOUBLE_EQ(parse_real("1e-3"), 0.001);
  EXPECT_DOUBLE_EQ(parse_real("+2.5E2"), 250);
  EXPECT_DOUBLE_EQ(parse_real("-1"), -1);
  EXPECT_DOUBLE_EQ(parse_real(".5"), 0.5);
  for (std::string_view text : {"", "abc", "1.5x", "nan", "inf", "1e999", "+-1", "0x10"}) {
    EXPECT_THROW((void)parse_real(text), std::invalid_argument) << text;
  }
}

TEST(ConfigValues, DurationsPrintInTheirShortestExactUnit) {
  EXPECT_EQ(format_duration(milliseconds(0)), "0s");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(90'000)), "90s");
  EXPECT_EQ(format_duration(milliseconds(5'400'000)), "90m");
  EXPECT_EQ(format_duration(std::chrono::hours(48)), "2d");
}

TEST(ConfigValues, TopicNamesFollowKafkasRules) {
  EXPECT_TRUE(is_valid_topic_name("clicks.unique-v2_x"));
  EXPECT_TRUE(is_valid_topic_name(std::string(249, 'a')));
  EXPECT_FALSE(is_valid_topic_name(std::string(250, 'a')));
  EXPECT_FALSE(is_valid_topic_name(""));
  EXPECT_FALSE(is_valid_topic_name("."));
  EXPECT_FALSE(is_valid_topic_name(".."));
  EXPECT_FALSE(is_valid_topic_name("a b"));
  EXPECT_FALSE(is_valid_topic_name("a:1"));
}

TEST(ConfigValues, SecretPropertiesAreRedactedForLogging) {
  EXPECT_TRUE(kafka::is_secret_property("sasl.password"));
  EXPECT_TRUE(kafka::is_secret_property("SASL.PASSWORD"));
  EXPECT_TRUE(kafka::is_secret_property("sasl.oauthbearer.client.secret"));
  EXPECT_TRUE(kafka::is_secret_property("sasl.jaas.config"));
  EXPECT_TRUE(kafka::is_secret_property("ssl.key.password"));
  EXPECT_TRUE(kafka::is_secret_property("ssl.key.pem"));
  EXPECT_TRUE(kafka::is_secret_property("ssl_key"));
  // It may carry tokens or extensions; librdkafka redacts it in its own dumps too.
  EXPECT_TRUE(kafka::is_secret_property("sasl.oauthbearer.config"));
  EXPECT_FALSE(kafka::is_secret_property("sasl.username"));
  EXPECT_FALSE(kafka::is_secret_property("ssl.ca.location"));
  EXPECT_EQ(kafka::redact_property("sasl.password", "hunter2"), "<redacted>");
  EXPECT_EQ(kafka::redact_property("client.id", "me"), "me");
}

TEST(ConfigValues, EnumsFormatWithTheirConfigurationNames) {
  EXPECT_EQ(fmt::format("{} {} {} {} {}", item_source::header, clock_kind::wall,
                        generator_format::json, log_level::warn, log_format::text),
            "header wall json warn text");
  EXPECT_EQ(fmt::format("{}", config_error{"f.yaml", 3, 7, "bad"}), "f.yaml:3:7: bad");
}

// --- Files. ----------------------------------------------------------------------------

TEST(ConfigFiles, ExampleConfigurationIsValid) {
  const std::string path = std::string(SKETCHD_SOURCE_DIR) + "/config/example.yaml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto r = load_config_string(text, path, fake_env({}));
  ASSERT_TRUE(r.value) << ::testing::PrintToString(errors_of(r));
  EXPECT_EQ(r.value->kafka.brokers, "localhost:9092");
  EXPECT_EQ(r.value->state.dir, "/var/lib/sketchd");
  EXPECT_EQ(r.value->pipelines.size(), 2u);
  EXPECT_EQ(r.value->pipelines[0].dedup->capacity, 10'000'000u);
}

class CheckConfigCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             fmt::format("sketchd-config-test-{}.yaml",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void write(std::string_view text) const { std::ofstream(path_) << text; }

  std::string path_;
};

TEST_F(CheckConfigCommand, ValidFilePrintsOkAndExitsZero) {
  write(kMinimal);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(check_config_command(path_), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), path_ + ": ok (1 pipeline)\n");
}

TEST_F(CheckConfigCommand, InvalidFilePrintsEveryErrorAndExitsOne) {
  write("kafka: { brokers: b, batch_size: 0 }\npipelines: []\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(check_config_command(path_), 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            path_ + ":1:34: kafka.batch_size: must be in [1, 100000], got 0\n" + path_ +
                ":2:12: pipelines: needs at least one pipeline\n");
}

}  // namespace
}  // namespace sketchd
