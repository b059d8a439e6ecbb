// Where a partition's log reaches a point in time (sketchd/kafka/time_lookup.h): the search
// and the confirmation of the broker's answer on a fake log, then time_lookup on the
// embedded mock cluster, whose ListOffsets answers every timestamp with -1 (librdkafka
// 2.0.2), so that the search is what finds a timestamp inside a log there.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/time_lookup.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------
// A log in memory: offset → timestamp, with gaps where offsets hold no message.
class fake_log {
 public:
  explicit fake_log(std::map<std::int64_t, std::int64_t> messages, std::int64_t low,
                    std::int64_t high)
      : messages_(std::move(messages)), low_(low), high_(high) {}

  // Consecutive offsets from `low` with these timestamps.
  static fake_log of(const std::vector<std::int64_t>& timestamps, std::int64_t low = 0) {
    std::map<std::int64_t, std::int64_t> m;
    for (std::size_t i = 0; i < timestamps.size(); ++i)
      m[low + static_cast<std::int64_t>(i)] = timestamps[i];
    return fake_log(m, low, low + static_cast<std::int64_t>(timestamps.size()));
  }

  [[nodiscard]] probe_reader reader() const {
    return [this](std::int64_t offset) {
      probe_read r;
      const auto it = messages_.lower_bound(offset);
      if (it != messages_.end() && it->first < high_)
        r.message = message_time{it->first, it->second};
      return r;
    };
  }
  [[nodiscard]] std::int64_t low() const { return low_; }
  [[nodiscard]] std::int64_t high() const { return high_; }
  [[nodiscard]] const std::map<std::int64_t, std::int64_t>& messages() const { return messages_; }

 private:
  std::map<std::int64_t, std::int64_t> messages_;
  std::int64_t low_;
  std::int64_t high_;
};

search_outcome search(const fake_log& log, std::int64_t t) {
  return search_first_at_or_after(log.low(), log.high(), t, log.reader());
}

int log2_bound(std::int64_t n) {
  return static_cast<int>(std::ceil(std::log2(static_cast<double>(n) + 1)));
}

TEST(TimeSearch, FindsTheExactFirstOffsetOfAMonotonicLog) {
  const fake_log log = fake_log::of({100, 110, 110, 120, 130, 130, 130, 140, 150, 160}, 40);
  EXPECT_EQ(search(log, 110).offset, 41);
  EXPECT_EQ(search(log, 111).offset, 43);
  EXPECT_EQ(search(log, 130).offset, 44);
  EXPECT_EQ(search(log, 160).offset, 49);
  for (std::int64_t t = 90; t <= 170; ++t) {
    const search_outcome s = search(log, t);
    std::int64_t expected = log.high();
    for (const auto& [offset, ts] : log.messages()) {
      if (ts >= t) {
        expected = offset;
        break;
      }
    }
    EXPECT_EQ(s.offset, expected) << "t " << t;
    EXPECT_LE(s.reads, log2_bound(10)) << "t " << t;
    EXPECT_FALSE(s.error);
  }
}

TEST(TimeSearch, BeforeTheFirstMessageIsTheLowWatermarkAfterTheLastTheHigh) {
  const fake_log log = fake_log::of({100, 200, 300}, 7);
  EXPECT_EQ(search(log, 0).offset, 7);
  EXPECT_EQ(search(log, 301).offset, 10);
}

TEST(TimeSearch, AnEmptyLogIsItsHighWatermarkWithoutARead) {
  const fake_log log = fake_log::of({}, 12);
  const search_outcome s = search(log, 5);
  EXPECT_EQ(s.offset, 12);
  EXPECT_EQ(s.reads, 0);
}

TEST(TimeSearch, GapsOfACompactedLogGiveTheOffsetOfTheMessageFound) {
  // Offsets 3-5 and 9 compacted away, 12-13 transaction markers at the end.
  const fake_log log({{0, 10}, {1, 20}, {2, 30}, {6, 40}, {7, 50}, {8, 60}, {10, 70}, {11, 80}}, 0,
                     14);
  EXPECT_EQ(search(log, 31).offset, 6);
  EXPECT_EQ(search(log, 61).offset, 10);
  EXPECT_EQ(search(log, 80).offset, 11);
  EXPECT_EQ(search(log, 81).offset, 14);
  EXPECT_EQ(search(log, 0).offset, 0);
  // A start at a marker: the first message.
  const fake_log starts_late({{5, 10}, {6, 20}}, 3, 7);
  EXPECT_EQ(search(starts_late, 0).offset, 5);
}

// The guarantee of the header on random non-monotonic logs: the result is the high
// watermark or a message at or after t; the message before it is before t, or there is
// none; O(log n) reads.
TEST(TimeSearch, OnANonMonotonicLogTheResultIsACrossingOfTheTarget) {
  std::mt19937_64 random(40);
  for (int round = 0; round < 2000; ++round) {
    std::uniform_int_distribution<int> size(0, 200);
    std::uniform_int_distribution<std::int64_t> ts(0, 1000);
    std::bernoulli_distribution gap(0.2);
    std::map<std::int64_t, std::int64_t> messages;
    const int n = size(random);
    for (int i = 0; i < n; ++i)
      if (!gap(random)) messages[i] = ts(random);
    const fake_log log(messages, 0, n);
    const std::int64_t t = ts(random);
    const search_outcome s = search(log, t);
    ASSERT_FALSE(s.error);
    ASSERT_LE(s.reads, log2_bound(n));
    const auto at = messages.find(s.offset);
    if (s.offset != n) {
      ASSERT_NE(at, messages.end()) << "round " << round << ": no message at " << s.offset;
      EXPECT_GE(at->second, t) << "round " << round;
    }
    const auto next = messages.lower_bound(s.offset);
    if (next != messages.begin()) {
      EXPECT_LT(std::prev(next)->second, t) << "round " << round;
    }
  }
}

TEST(TimeSearch, AReadErrorEndsTheSearchWithIt) {
  int reads = 0;
  const probe_reader failing = [&reads](std::int64_t offset) {
    ++reads;
    return probe_read{std::nullopt, kafka_error("read a message", error_code::transport,
                                                error_context("events", 0, offset))};
  };
  const search_outcome s = search_first_at_or_after(0, 100, 5, failing);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->code(), error_code::transport);
  EXPECT_EQ(s.reads, 1);
  EXPECT_EQ(reads, 1);
}

TEST(BrokerAnswer, ACorrectOffsetIsConfirmedWithTwoReads) {
  const fake_log log = fake_log::of({100, 200, 300, 400}, 10);
  const confirmation c = confirm_broker_answer(10, 14, 250, 12, log.reader());
  EXPECT_TRUE(c.confirmed);
  EXPECT_EQ(c.reads, 2);
  // At the log's start, one read.
  const confirmation first = confirm_broker_answer(10, 14, 50, 10, log.reader());
  EXPECT_TRUE(first.confirmed);
  EXPECT_EQ(first.reads, 1);
}

TEST(BrokerAnswer, NoneIsConfirmedWhenTheLastMessageIsOlder) {
  const fake_log log = fake_log::of({100, 200, 300}, 0);
  EXPECT_TRUE(confirm_broker_answer(0, 3, 301, -1, log.reader()).confirmed);
  EXPECT_TRUE(confirm_broker_answer(0, 3, 301, 3, log.reader()).confirmed);    // the high watermark
  EXPECT_FALSE(confirm_broker_answer(0, 3, 300, -1, log.reader()).confirmed);  // the mock's -1
  EXPECT_FALSE(confirm_broker_answer(0, 3, 0, -1, log.reader()).confirmed);
  // An empty log, without a read.
  const confirmation empty = confirm_broker_answer(5, 5, 1, -1, fake_log::of({}, 5).reader());
  EXPECT_TRUE(empty.confirmed);
  EXPECT_EQ(empty.reads, 0);
  // A trailing transaction marker hides the last message: not confirmed, searched.
  const fake_log marker({{0, 100}, {1, 200}}, 0, 3);
  EXPECT_FALSE(confirm_broker_answer(0, 3, 500, -1, marker.reader()).confirmed);
}

TEST(BrokerAnswer, WrongOffsetsAreRefused) {
  const fake_log log = fake_log::of({100, 200, 300, 400}, 10);
  const auto confirmed = [&](std::int64_t t, std::int64_t answer) {
    return confirm_broker_answer(10, 14, t, answer, log.reader()).confirmed;
  };
  EXPECT_FALSE(confirmed(250, 11));  // the message there is older
  EXPECT_FALSE(confirmed(250, 13));  // the one before is not older
  EXPECT_FALSE(confirmed(250, 10));  // the log's start, always answered
  EXPECT_FALSE(confirmed(250, 9));   // below the log
  EXPECT_FALSE(confirmed(250, 15));  // above it
  EXPECT_FALSE(confirmed(250, -2));
  // A gap right before the answer: the answer stands.
  const fake_log gap({{0, 100}, {3, 300}}, 0, 4);
  EXPECT_TRUE(confirm_broker_answer(0, 4, 250, 3, gap.reader()).confirmed);
}

// ---------------------------------------------------------------------------------------
// On the mock cluster.

constexpr int kFlushTimeoutMs = 10000;
constexpr std::int64_t kBase = 1'700'000'000'000;  // the first message's timestamp (ms)

handle_ptr make_producer(const mock_cluster& cluster) {
  client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()},
                                    {"enable.idempotence", "true"},
                                    {"linger.ms", "5"}});
  return std::move(config).create(RD_KAFKA_PRODUCER);
}

// Produces one message per timestamp to topic/partition, in order (idempotent: the
// partition's offsets follow that order from its current end).
void produce(const mock_cluster& cluster, const std::string& topic, std::int32_t partition,
             const std::vector<std::int64_t>& timestamps, std::size_t value_bytes = 16) {
  const handle_ptr producer = make_producer(cluster);
  const std::string value(value_bytes, 'v');
  for (const std::int64_t ts : timestamps) {
    throw_if_error(
        rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
                          RD_KAFKA_V_PARTITION(partition), RD_KAFKA_V_TIMESTAMP(ts),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
        "produce", error_context(topic, partition));
    rd_kafka_poll(producer.get(), 0);
  }
  ASSERT_EQ(rd_kafka_flush(producer.get(), kFlushTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
}

// kBase, kBase + 10, … : one message every 10 ms.
std::vector<std::int64_t> every_10ms(int count) {
  std::vector<std::int64_t> ts;
  for (int i = 0; i < count; ++i) ts.push_back(kBase + 10 * i);
  return ts;
}

class TimeLookupOnMock : public ::testing::Test {
 protected:
  TimeLookupOnMock() { cluster_.create_topic(kTopic, 4); }

  time_answer find_one(std::int32_t partition, std::int64_t timestamp_ms) {
    time_lookup lookup(cluster_.bootstrap_servers(), {});
    const std::vector<time_query> queries{{kTopic, partition, timestamp_ms}};
    std::vector<time_answer> answers = lookup.find(queries, std::chrono::steady_clock::now() + 20s);
    EXPECT_EQ(answers.size(), 1u);
    return answers.at(0);
  }

  static constexpr const char* kTopic = "events";
  mock_cluster cluster_{1};
};

TEST_F(TimeLookupOnMock, FindsTheFirstOffsetInsideAMonotonicLogBySearching) {
  produce(cluster_, kTopic, 0, every_10ms(1000));
  for (const std::int64_t t : {kBase + 5000, kBase + 5001, kBase + 9990, kBase + 1}) {
    const time_answer a = find_one(0, t);
    ASSERT_TRUE(a.ok()) << a.error->what();
    EXPECT_EQ(a.offset, (t - kBase + 9) / 10) << "t " << t;
    EXPECT_EQ(a.how, found_by::search);
    EXPECT_LE(a.reads, 1 + log2_bound(1000));  // the broker's -1 refused, then the search
  }
}

TEST_F(TimeLookupOnMock, BeforeTheFirstMessageIsTheLowWatermark) {
  produce(cluster_, kTopic, 1, every_10ms(50));
  const time_answer a = find_one(1, kBase - 60'000);
  ASSERT_TRUE(a.ok()) << a.error->what();
  EXPECT_EQ(a.offset, 0);
  EXPECT_EQ(a.how, found_by::search);
}

TEST_F(TimeLookupOnMock, AfterTheLastMessageIsTheHighWatermarkConfirmedByOneRead) {
  produce(cluster_, kTopic, 2, every_10ms(50));
  const time_answer a = find_one(2, kBase + 60'000);
  ASSERT_TRUE(a.ok()) << a.error->what();
  EXPECT_EQ(a.offset, 50);
  EXPECT_EQ(a.how, found_by::broker);  // the mock's -1 holds here
  EXPECT_EQ(a.reads, 1);
}

TEST_F(TimeLookupOnMock, AnEmptyPartitionIsItsHighWatermarkWithoutARead) {
  const time_answer a = find_one(3, kBase);
  ASSERT_TRUE(a.ok()) << a.error->what();
  EXPECT_EQ(a.offset, 0);
  EXPECT_EQ(a.reads, 0);
}

TEST_F(TimeLookupOnMock, AnswersSeveralPartitionsAtOnceInTheirOrder) {
  produce(cluster_, kTopic, 0, every_10ms(200));
  produce(cluster_, kTopic, 1, every_10ms(300));
  produce(cluster_, kTopic, 2, every_10ms(10));
  time_lookup lookup(cluster_.bootstrap_servers(), {});
  const std::vector<time_query> queries{{kTopic, 2, kBase + 50},
                                        {kTopic, 0, kBase + 1000},
                                        {kTopic, 3, kBase},
                                        {kTopic, 1, kBase + 2995}};
  const std::vector<time_answer> answers =
      lookup.find(queries, std::chrono::steady_clock::now() + 30s);
  ASSERT_EQ(answers.size(), 4u);
  const std::vector<std::int64_t> expected{5, 100, 0, 300};
  for (std::size_t i = 0; i < answers.size(); ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].error->what();
    EXPECT_EQ(answers[i].topic, kTopic);
    EXPECT_EQ(answers[i].partition, queries[i].partition);
    EXPECT_EQ(answers[i].offset, expected[i]) << "partition " << queries[i].partition;
  }
  // The same client answers again.
  const std::vector<time_answer> again = lookup.find(
      std::vector<time_query>{{kTopic, 0, kBase + 1500}}, std::chrono::steady_clock::now() + 20s);
  ASSERT_TRUE(again.at(0).ok());
  EXPECT_EQ(again.at(0).offset, 150);
}

TEST_F(TimeLookupOnMock, OnANonMonotonicLogTheAnswerIsACrossingOfTheTarget) {
  std::mt19937_64 random(7);
  std::uniform_int_distribution<std::int64_t> jitter(-5000, 5000);
  std::vector<std::int64_t> ts;
  for (int i = 0; i < 500; ++i) ts.push_back(kBase + 100 * i + jitter(random));
  produce(cluster_, kTopic, 0, ts);
  for (const std::int64_t t : {kBase + 10'000, kBase + 25'000, kBase + 40'000}) {
    const time_answer a = find_one(0, t);
    ASSERT_TRUE(a.ok()) << a.error->what();
    ASSERT_GE(a.offset, 0);
    ASSERT_LE(a.offset, 500);
    if (a.offset < 500) {
      EXPECT_GE(ts[a.offset], t) << "t " << t;
    }
    if (a.offset > 0) {
      EXPECT_LT(ts[a.offset - 1], t) << "t " << t;
    }
    EXPECT_LE(a.reads, 1 + log2_bound(500));
  }
}

// A broker that cannot look timestamps up at all (message format before 0.10) fails the
// whole ListOffsets request: every partition is searched.
TEST_F(TimeLookupOnMock, ALookupTheBrokerDoesNotSupportFallsBackToTheSearch) {
  produce(cluster_, kTopic, 0, every_10ms(100));
  produce(cluster_, kTopic, 1, every_10ms(100));
  const std::vector<error_code> unsupported{
      to_error_code(RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT)};
  time_lookup lookup(cluster_.bootstrap_servers(), {});
  cluster_.push_request_errors(api_key::list_offsets, unsupported);  // offsets_for_times' only
  const std::vector<time_answer> answers =
      lookup.find(std::vector<time_query>{{kTopic, 0, kBase + 455}, {kTopic, 1, kBase - 1}},
                  std::chrono::steady_clock::now() + 20s);
  ASSERT_EQ(answers.size(), 2u);
  for (const time_answer& a : answers) {
    ASSERT_TRUE(a.ok()) << a.error->what();
    EXPECT_EQ(a.how, found_by::search);
    EXPECT_LE(a.reads, log2_bound(100));  // no confirmation read: nothing to confirm
  }
  EXPECT_EQ(answers[0].offset, 46);
  EXPECT_EQ(answers[1].offset, 0);
}

// librdkafka 2.0.2's mock has no DeleteRecords; it drops a partition's oldest batches
// beyond 5 MiB, as retention would, which moves the log's start the same way.
TEST_F(TimeLookupOnMock, ALogWhoseStartWasDeletedStartsAtItsLowWatermark) {
  constexpr int kMessages = 700;  // 7 MiB of 10 KiB values
  produce(cluster_, kTopic, 0, every_10ms(kMessages), 10 * 1024);
  time_lookup lookup(cluster_.bootstrap_servers(), {});
  const std::vector<time_query> queries{{kTopic, 0, kBase - 1}, {kTopic, 1, kBase}};
  std::vector<time_answer> answers = lookup.find(queries, std::chrono::steady_clock::now() + 20s);
  ASSERT_TRUE(answers.at(0).ok()) << answers.at(0).error->what();
  const std::int64_t low = answers.at(0).offset;
  EXPECT_GT(low, 0) << "the mock kept the whole partition";
  EXPECT_LT(low, kMessages);
  // Inside what is left: exact; inside what was deleted: the new start.
  const std::int64_t inside = low + (kMessages - low) / 2;
  answers = lookup.find(std::vector<time_query>{{kTopic, 0, kBase + 10 * inside}},
                        std::chrono::steady_clock::now() + 20s);
  ASSERT_TRUE(answers.at(0).ok()) << answers.at(0).error->what();
  EXPECT_EQ(answers.at(0).offset, inside);
  answers = lookup.find(std::vector<time_query>{{kTopic, 0, kBase + 10 * (low / 2)}},
                        std::chrono::steady_clock::now() + 20s);
  ASSERT_TRUE(answers.at(0).ok()) << answers.at(0).error->what();
  EXPECT_EQ(answers.at(0).offset, low);
}

TEST_F(TimeLookupOnMock, AnUnknownPartitionIsThatPartitionsErrorOnly) {
  produce(cluster_, kTopic, 0, every_10ms(100));
  time_lookup lookup(cluster_.bootstrap_servers(), {});
  const std::vector<time_query> queries{
      {kTopic, 0, kBase + 500}, {kTopic, 9, kBase}, {kTopic, 0, kBase}, {kTopic, 1, -5}};
  const std::vector<time_answer> answers =
      lookup.find(queries, std::chrono::steady_clock::now() + 20s);
  ASSERT_EQ(answers.size(), 4u);
  ASSERT_TRUE(answers[0].ok()) << answers[0].error->what();
  EXPECT_EQ(answers[0].offset, 50);
  ASSERT_FALSE(answers[1].ok());
  EXPECT_EQ(answers[1].error->code(), error_code::unknown_partition) << answers[1].error->what();
  EXPECT_EQ(answers[1].error->context().partition, 9);
  ASSERT_FALSE(answers[2].ok());  // asked twice
  EXPECT_EQ(answers[2].error->code(), error_code::invalid_arg);
  ASSERT_FALSE(answers[3].ok());  // a negative timestamp
  EXPECT_EQ(answers[3].error->code(), error_code::invalid_arg);
}

TEST_F(TimeLookupOnMock, TheDeadlineBoundsTheLookupWhenTheBrokerIsDown) {
  produce(cluster_, kTopic, 0, every_10ms(100));
  time_lookup lookup(cluster_.bootstrap_servers(), {});
  cluster_.set_broker_down(1);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<time_answer> answers = lookup.find(
      std::vector<time_query>{{kTopic, 0, kBase + 500}, {kTopic, 1, kBase}}, start + 2s);
  const auto took = std::chrono::steady_clock::now() - start;
  // Bounded, not timed: the deadline plus a generous slack for a loaded machine.
  EXPECT_LT(took, 2s + 10s);
  for (const time_answer& a : answers) {
    ASSERT_FALSE(a.ok()) << "partition " << a.partition;
    EXPECT_EQ(a.error->code(), error_code::timed_out) << a.error->what();
    EXPECT_EQ(a.error->context().topic, kTopic);
  }
  cluster_.set_broker_up(1);
}

// No group to leave, nothing to commit: going away does not wait for a broker.
TEST_F(TimeLookupOnMock, ItIsDestroyedPromptlyWhileTheBrokerIsDown) {
  produce(cluster_, kTopic, 0, every_10ms(10));
  auto lookup = std::make_unique<time_lookup>(cluster_.bootstrap_servers(), property_map{});
  EXPECT_TRUE(lookup
                  ->find(std::vector<time_query>{{kTopic, 0, kBase}},
                         std::chrono::steady_clock::now() + 20s)
                  .at(0)
                  .ok());
  cluster_.set_broker_down(1);
  const auto start = std::chrono::steady_clock::now();
  lookup.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // bounded, not timed
  cluster_.set_broker_up(1);
}

TEST_F(TimeLookupOnMock, ADeadlineAlreadyPassedTimesEveryPartitionOut) {
  produce(cluster_, kTopic, 0, every_10ms(10));
  time_lookup lookup(cluster_.bootstrap_servers(), {});
  const std::vector<time_answer> answers = lookup.find(
      std::vector<time_query>{{kTopic, 0, kBase + 50}}, std::chrono::steady_clock::now() - 1s);
  ASSERT_FALSE(answers.at(0).ok());
  EXPECT_EQ(answers.at(0).error->code(), error_code::timed_out) << answers.at(0).error->what();
}

TEST(TimeLookup, RefusesAPropertyLibrdkafkaDoesNotKnowWithoutItsValue) {
  try {
    const time_lookup lookup("127.0.0.1:1", {{"no.such.property", "secret-value"}});
    FAIL() << "an unknown property was accepted";
  } catch (const kafka_error& e) {
    EXPECT_EQ(e.code(), error_code::invalid_arg);
    EXPECT_EQ(std::string(e.what()).find("secret-value"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sketchd::kafka
