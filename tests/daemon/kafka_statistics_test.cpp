// librdkafka's statistics JSON as the source reads it, without a broker: from a fixture
// captured from a consumer of librdkafka 2.0.2 (Debian 12's) on a mock cluster of three
// brokers, one of them down, trimmed to a few fields besides those read; and from small
// hand-written documents for the rules the capture does not show.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "sketchd/kafka/statistics.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

std::string fixture() {
  const std::string path =
      std::string(SKETCHD_SOURCE_DIR) + "/tests/daemon/fixtures/librdkafka_statistics.json";
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A statistics document with one topic "t" whose partition 0 has the members `partition`
// (besides "partition": 0).
std::string with_partition(const std::string& partition) {
  return R"({"topics":{"t":{"topic":"t","partitions":{"0":{"partition":0,)" + partition + "}}}}}";
}

partition_statistics only_partition(const std::string& json, bool from_earliest = true) {
  const auto stats = parse_statistics(json, from_earliest);
  EXPECT_TRUE(stats && stats->partitions && stats->partitions->size() == 1) << json;
  if (!stats || !stats->partitions || stats->partitions->size() != 1) return {};
  return stats->partitions->front();
}

TEST(KafkaStatistics, TheCapturedStatisticsGiveTheAssignedPartitionsAndTheBrokersUp) {
  const auto stats = parse_statistics(fixture(), /*from_earliest=*/true);
  ASSERT_TRUE(stats);
  // Three brokers with a node id, one of them trying to connect; the bootstrap entries and
  // the group coordinator's are not brokers of their own.
  EXPECT_EQ(stats->brokers_up, 2);
  ASSERT_TRUE(stats->partitions);
  // librdkafka's placeholder partition (-1) of each topic is left out.
  ASSERT_EQ(stats->partitions->size(), 4U);
  const partition_statistics& clicks = (*stats->partitions)[0];
  EXPECT_EQ(clicks.topic, "clicks");
  EXPECT_EQ(clicks.partition, 0);
  EXPECT_EQ(clicks.consumer_lag, std::nullopt) << "nothing committed: unknown";
  EXPECT_EQ(clicks.read_offset, 75);
  EXPECT_EQ(clicks.stored_offset, -1001);
  EXPECT_EQ(clicks.committed_offset, -1001);
  EXPECT_EQ(clicks.low_offset, 0);
  EXPECT_EQ(clicks.uncommitted, 75) << "from the log's first offset, without a commit";
  const partition_statistics& events = (*stats->partitions)[1];
  EXPECT_EQ(events.topic, "events");
  EXPECT_EQ(events.partition, 0);
  EXPECT_EQ(events.consumer_lag, 15);
  EXPECT_EQ(events.read_offset, 75);
  EXPECT_EQ(events.stored_offset, 60);
  EXPECT_EQ(events.committed_offset, 60);
  EXPECT_EQ(events.uncommitted, 15);
  EXPECT_EQ((*stats->partitions)[2].partition, 1);
  EXPECT_EQ((*stats->partitions)[3].partition, 2);
  EXPECT_EQ(stats->uncommitted_messages(), 75 + 15 + 15 + 75);
}

TEST(KafkaStatistics, WithoutACommitNothingIsUncommittedWhenReadingFromTheLogsEnd) {
  // A crash would start at the log's end: nothing read would be read again.
  const auto stats = parse_statistics(fixture(), /*from_earliest=*/false);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->uncommitted_messages(), 15 + 15);
}

TEST(KafkaStatistics, AnUnknownLagIsNone) {
  EXPECT_EQ(only_partition(with_partition(R"("consumer_lag":-1)")).consumer_lag, std::nullopt);
  EXPECT_EQ(only_partition(with_partition(R"("app_offset":3)")).consumer_lag, std::nullopt);
  EXPECT_EQ(only_partition(with_partition(R"("consumer_lag":0)")).consumer_lag, 0);
}

TEST(KafkaStatistics, PartitionsNoLongerAssignedAreLeftOut) {
  const std::string json = R"({"topics":{"t":{"partitions":{
      "0":{"partition":0,"fetch_state":"active","desired":true,"consumer_lag":1},
      "1":{"partition":1,"fetch_state":"stopped","desired":false,"consumer_lag":2},
      "2":{"partition":2,"fetch_state":"none","consumer_lag":3},
      "-1":{"partition":-1,"consumer_lag":4}}}}})";
  const auto stats = parse_statistics(json, true);
  ASSERT_TRUE(stats && stats->partitions);
  ASSERT_EQ(stats->partitions->size(), 1U);
  EXPECT_EQ(stats->partitions->front().partition, 0);
}

TEST(KafkaStatistics, UncommittedMessagesCountFromTheCommitToTheFurthestReadOrStored) {
  // Stored beyond what the statistics say was read (handed over).
  EXPECT_EQ(only_partition(
                with_partition(
                    R"("app_offset":-1001,"stored_offset":50,"committed_offset":40,"lo_offset":0)"))
                .uncommitted,
            10);
  EXPECT_EQ(only_partition(
                with_partition(
                    R"("app_offset":70,"stored_offset":50,"committed_offset":40,"lo_offset":0)"))
                .uncommitted,
            30);
  // Committed up to what was read: nothing.
  EXPECT_EQ(only_partition(with_partition(R"("app_offset":40,"committed_offset":40)")).uncommitted,
            0);
  // Nothing read yet; or no committed offset in the statistics at all.
  EXPECT_EQ(
      only_partition(with_partition(R"("app_offset":-1001,"committed_offset":-1001,"lo_offset":0)"))
          .uncommitted,
      0);
  EXPECT_EQ(only_partition(with_partition(R"("app_offset":9,"lo_offset":0)")).uncommitted, 0);
  // Without a commit and without the log's first offset, nothing can be counted.
  EXPECT_EQ(
      only_partition(with_partition(R"("app_offset":9,"committed_offset":-1001)")).uncommitted, 0);
}

// A partition started at a restored position: librdkafka's statistics know no committed
// offset until it commits there; the group's, read at the assignment, counts instead of the
// log's first offset.
TEST(KafkaStatistics, TheCommitReadAtTheAssignmentCountsWhereTheStatisticsHaveNone) {
  const std::string json =
      with_partition(R"("app_offset":10000,"committed_offset":-1001,"lo_offset":0)");
  const auto at_5000 = [](std::string_view topic, std::int32_t partition) {
    return topic == "t" && partition == 0 ? std::optional<std::int64_t>(5000) : std::nullopt;
  };
  const auto stats = parse_statistics(json, /*from_earliest=*/true, at_5000);
  ASSERT_TRUE(stats && stats->partitions && stats->partitions->size() == 1);
  EXPECT_EQ(stats->partitions->front().uncommitted, 5000);
  EXPECT_EQ(only_partition(json).uncommitted, 10000) << "without it, from the log's start";
  // The statistics' own committed offset wins.
  const auto committed = parse_statistics(
      with_partition(R"("app_offset":10000,"committed_offset":9000,"lo_offset":0)"), true, at_5000);
  EXPECT_EQ(committed->partitions->front().uncommitted, 1000);
}

TEST(KafkaStatistics, OnlyBrokersWithANodeIdAreCountedAndNeitherLogicalNorInternalOnes) {
  const std::string json = R"({"brokers":{
      "b:9092/bootstrap":{"nodeid":-1,"source":"configured","state":"UP"},
      "b:9092/1":{"nodeid":1,"source":"learned","state":"UP"},
      "c:9092/2":{"nodeid":2,"source":"learned","state":"DOWN"},
      "GroupCoordinator":{"nodeid":1,"source":"logical","state":"UP"},
      ":0/internal":{"nodeid":0,"source":"internal","state":"UP"},
      "d:9092/3":{"source":"learned","state":"UP"}}})";
  const auto stats = parse_statistics(json, true);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->brokers_up, 1);
  EXPECT_EQ(stats->partitions, std::nullopt) << "no topics in these statistics";
}

TEST(KafkaStatistics, WhatTheStatisticsLackIsNotGiven) {
  const auto none = parse_statistics(R"({"topics":{}})", true);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->brokers_up, std::nullopt);
  ASSERT_TRUE(none->partitions);
  EXPECT_TRUE(none->partitions->empty());
  EXPECT_EQ(none->uncommitted_messages(), 0);
  EXPECT_EQ(parse_statistics(R"({"brokers":{}})", true)->brokers_up, 0);
  EXPECT_EQ(parse_statistics("{\"topics\":", true), std::nullopt);
  EXPECT_EQ(parse_statistics("", true), std::nullopt);
}

TEST(BrokerOutage, TellsHowLongNoBrokerWasUpOnceOneIsAgain) {
  broker_outage outage;
  const broker_outage::clock::time_point t0{1h};
  EXPECT_EQ(outage.update(0, t0), std::nullopt) << "none up yet: not an outage";
  EXPECT_EQ(outage.update(2, t0 + 1s), std::nullopt);
  EXPECT_EQ(outage.update(0, t0 + 2s), std::nullopt);
  EXPECT_EQ(outage.update(0, t0 + 5s), std::nullopt);
  EXPECT_EQ(outage.update(1, t0 + 9s),
            std::chrono::duration_cast<broker_outage::clock::duration>(7s))
      << "from the first statistics with none up";
  EXPECT_EQ(outage.update(3, t0 + 10s), std::nullopt) << "told once";
}

}  // namespace
}  // namespace sketchd::kafka
