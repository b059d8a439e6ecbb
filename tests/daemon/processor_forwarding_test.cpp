// The processor's forwarding rules, with a fake forwarder in place of Kafka's producer:
// which verdict goes to which output topic, when an input offset may be stored, what a
// failed delivery, a full queue and a stop do, that a partition read again is not
// forwarded, and the alert events sent to heavy_hitters.alerts_topic. The shell tests
// (dedup_forward, forward_failure, delivery_faults, forward_large) check the same against
// a broker.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fake_forwarder.h"
#include "sketchd/processor/kafka_forwarder.h"
#include "sketchd/processor/processor.h"

namespace sketchd {
namespace {

using kafka::error_code;
using std::chrono::minutes;
using test_support::fake_forwarder;

constexpr std::int64_t kWallMs = 1'763'841'600'123;  // 2025-11-22T20:00:00.123Z

pipeline_config dedup_pipeline(std::string name, std::optional<std::string> output_topic,
                               std::optional<std::string> duplicates_topic) {
  pipeline_config p;
  p.name = std::move(name);
  p.topics = {"events"};
  p.item.from = item_source::key;
  p.clock = clock_kind::wall;
  p.dedup = dedup_config{.window = minutes(60),
                         .capacity = 10000,
                         .fpr = 0.001,
                         .output_topic = std::move(output_topic),
                         .duplicates_topic = std::move(duplicates_topic)};
  return p;
}

pipeline_config alerting_pipeline() {
  pipeline_config p;
  p.name = "hot";
  p.topics = {"events"};
  p.item.from = item_source::key;
  p.clock = clock_kind::wall;
  p.heavy_hitters = heavy_hitters_config{.window = minutes(5),
                                         .buckets = 5,
                                         .epsilon = 0.001,
                                         .delta = 0.01,
                                         .top_k = 10,
                                         .threshold = 0.05,
                                         .alerts_topic = "alerts"};
  return p;
}

config one_dedup_pipeline() {
  config c;
  c.pipelines.push_back(dedup_pipeline("orders", "unique", "dups"));
  return c;
}

// Lines the "pipeline" and "kafka" loggers write while it lives.
class captured_log {
 public:
  captured_log() {
    for (const char* name : {"pipeline", "kafka"}) {
      spdlog::drop(name);
      spdlog::register_logger(std::make_shared<spdlog::logger>(
          name, std::make_shared<spdlog::sinks::ostream_sink_st>(lines_)));
    }
  }
  ~captured_log() {
    spdlog::drop("pipeline");
    spdlog::drop("kafka");
  }
  captured_log(const captured_log&) = delete;
  captured_log& operator=(const captured_log&) = delete;
  [[nodiscard]] std::string text() const { return lines_.str(); }
  [[nodiscard]] std::size_t count(std::string_view what) const {
    const std::string s = lines_.str();
    std::size_t n = 0;
    for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  }

 private:
  std::ostringstream lines_;
};

// A processor of topic "events" (partitions 0 and 1 assigned) with the fake forwarder.
struct fixture {
  explicit fixture(config c = one_dedup_pipeline()) : cfg(std::move(c)) {
    std::vector<pipeline*> writers;
    for (const pipeline_config& pc : cfg.pipelines) {
      pipes.push_back(std::make_unique<pipeline>(pc));
      writers.push_back(pipes.back().get());
    }
    auto fake = std::make_unique<fake_forwarder>(output_topics(cfg));
    out = fake.get();
    proc = std::make_unique<processor>(cfg, writers, std::vector<std::string>{"events"},
                                       std::move(fake), [this] {
                                         ++stop_asked;
                                         return stop_asked >= give_up_at;
                                       });
    proc->assignment_begins();
    proc->assigned({0, 0}, std::nullopt);
    proc->assigned({0, 1}, std::nullopt);
  }

  // Processes one message of `partition` per item (its key), at offsets from `from`;
  // the records live as long as the fixture.
  const std::vector<kafka::record>& process(std::int32_t partition, std::int64_t from,
                                            const std::vector<std::string>& items) {
    std::vector<kafka::record>& batch = batches.emplace_back();
    for (const std::string& item : items) {
      const std::string& key = keys.emplace_back(item);
      kafka::record r;
      r.partition = partition;
      r.offset = from + static_cast<std::int64_t>(batch.size());
      r.timestamp_ms = kWallMs - 1000;
      r.view.key = key;
      r.view.value = values.emplace_back(fmt::format("{{\"n\":{}}}", r.offset));
      r.view.has_key = true;
      batch.push_back(r);
    }
    proc->process(batch, kWallMs);
    return batch;
  }
  // Processes one message of `partition` per (key, value), at offsets from `from`; nullopt is
  // a null key or value (a tombstone), as Kafka has them.
  using raw = std::pair<std::optional<std::string>, std::optional<std::string>>;
  const std::vector<kafka::record>& process_raw(std::int32_t partition, std::int64_t from,
                                                const std::vector<raw>& messages) {
    std::vector<kafka::record>& batch = batches.emplace_back();
    for (const auto& [key, value] : messages) {
      kafka::record r;
      r.partition = partition;
      r.offset = from + static_cast<std::int64_t>(batch.size());
      r.timestamp_ms = kWallMs - 1000 + r.offset;
      r.view.has_key = key.has_value();
      if (key) r.view.key = keys.emplace_back(*key);
      r.view.has_value = value.has_value();
      if (value) r.view.value = values.emplace_back(*value);
      batch.push_back(r);
    }
    proc->process(batch, kWallMs);
    return batch;
  }
  // The offsets stored by a poll now, as (partition, next offset).
  std::vector<std::pair<std::int32_t, std::int64_t>> stored() {
    std::vector<kafka::partition_offset> offsets;
    proc->poll(offsets);
    std::vector<std::pair<std::int32_t, std::int64_t>> out;
    for (const auto& o : offsets) out.emplace_back(o.partition, o.next_offset);
    return out;
  }
  // A metric of the processor's collector (the first sample of the family).
  double metric(std::string_view name) const {
    std::vector<prometheus::MetricFamily> families;
    proc->collect(families);
    for (const auto& f : families) {
      if (f.name == name) return metrics::value_of(f.metric.at(0), f.type);
    }
    ADD_FAILURE() << "no " << name;
    return -1;
  }
  // The series of a metric family of the processor's collector, by their last label's value.
  std::map<std::string, double> series(std::string_view name) const {
    std::vector<prometheus::MetricFamily> families;
    proc->collect(families);
    std::map<std::string, double> out;
    for (const auto& f : families) {
      if (f.name != name) continue;
      for (const auto& m : f.metric) out[m.label.back().value] = metrics::value_of(m, f.type);
    }
    return out;
  }

  config cfg;
  std::vector<std::unique_ptr<pipeline>> pipes;
  fake_forwarder* out = nullptr;  // owned by proc
  int stop_asked = 0;
  int give_up_at = 1'000'000;  // the stop check says to give up from its nth call on
  std::unique_ptr<processor> proc;
  std::deque<std::string> keys;
  std::deque<std::string> values;
  std::deque<std::vector<kafka::record>> batches;
};

using pairs = std::vector<std::pair<std::int32_t, std::int64_t>>;

TEST(ProcessorForwarding, FirstSeenEventsGoToTheOutputTopicAndDuplicatesToTheDuplicatesTopic) {
  fixture f;
  const auto& batch = f.process(0, 0, {"a", "b", "a", "c", "b", "a"});
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{0, 1, 3}));
  EXPECT_EQ(f.out->offsets("dups"), (std::vector<std::int64_t>{2, 4, 5}));
  // The consumed message itself is handed over: Kafka's forwarder copies its key, value,
  // headers and timestamp and adds its provenance headers from it (see kafka_sink_test,
  // which runs the processor with Kafka's forwarder on the mock cluster).
  for (const auto& m : f.out->messages) {
    EXPECT_EQ(m.record, &batch[static_cast<std::size_t>(m.record->offset)]);
    EXPECT_EQ(m.key, batch[static_cast<std::size_t>(m.record->offset)].view.key);
  }
  f.out->acknowledge_all();
  EXPECT_EQ(f.stored(), (pairs{{0, 6}}));
  f.process(0, 6, {});  // the pipelines publish their counters with a batch
  EXPECT_EQ(f.pipes[0]->counters().forwarded, 3u);
  EXPECT_EQ(f.pipes[0]->counters().forward_failures, 0u);
  EXPECT_EQ(f.metric("sketchd_dedup_duplicates_forwarded_total"), 3.0);
}

TEST(ProcessorForwarding, OnlyTheTopicsConfiguredAreForwardedTo) {
  config c;
  c.pipelines.push_back(dedup_pipeline("orders", std::nullopt, "dups"));
  fixture f(c);
  (void)f.process(0, 0, {"a", "a", "b"});
  EXPECT_EQ(f.out->offsets("dups"), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(f.out->messages.size(), 1u);
  // Offsets without outputs are storable at once, up to the one waiting for its output.
  EXPECT_EQ(f.stored(), (pairs{{0, 1}}));
  f.out->acknowledge_all();
  EXPECT_EQ(f.stored(), (pairs{{0, 3}}));
}

TEST(ProcessorForwarding,
     AnOffsetIsStoredOnlyOnceTheOutputsOfItsMessageAndOfEveryEarlierOneAreAcknowledged) {
  fixture f;
  (void)f.process(0, 10, {"a", "b", "c", "d"});
  EXPECT_EQ(f.out->in_flight(), 4u);
  EXPECT_EQ(f.metric("sketchd_producer_queue_messages"), 4.0);
  f.out->report(2);
  f.out->report(3);
  EXPECT_TRUE(f.stored().empty());  // 10 and 11 are not acknowledged
  f.out->report(0);
  EXPECT_EQ(f.stored(), (pairs{{0, 11}}));
  EXPECT_FALSE(f.proc->quiescent());
  f.out->report(1);
  EXPECT_EQ(f.stored(), (pairs{{0, 14}}));
  EXPECT_TRUE(f.proc->quiescent());
}

TEST(ProcessorForwarding, PartitionsAreStoredEachInItsOwnOrder) {
  fixture f;
  (void)f.process(0, 0, {"a", "b"});
  (void)f.process(1, 0, {"c", "d"});
  f.out->report(2);
  f.out->report(3);
  EXPECT_EQ(f.stored(), (pairs{{1, 2}}));
  f.out->report(1);
  EXPECT_TRUE(f.stored().empty());
  f.out->report(0);
  EXPECT_EQ(f.stored(), (pairs{{0, 2}}));
}

// Two pipelines of one topic forward the same message: its offset waits for both outputs.
TEST(ProcessorForwarding, AMessageForwardedByTwoPipelinesWaitsForBothOutputs) {
  config c = one_dedup_pipeline();
  c.pipelines.push_back(dedup_pipeline("orders-copy", "copy", std::nullopt));
  fixture f(c);
  (void)f.process(0, 0, {"a"});
  ASSERT_EQ(f.out->messages.size(), 2u);
  EXPECT_EQ(f.out->messages[0].topic, "unique");
  EXPECT_EQ(f.out->messages[1].topic, "copy");
  f.out->report(1);
  EXPECT_TRUE(f.stored().empty());
  f.out->report(0);
  EXPECT_EQ(f.stored(), (pairs{{0, 1}}));
}

TEST(ProcessorForwarding, AFailedDeliveryStopsConsumptionWithItsReason) {
  captured_log log;
  fixture f;
  (void)f.process(0, 0, {"a", "b", "c"});
  f.out->report(0);
  f.out->report(1, error_code::msg_timed_out, "Local: Message timed out");
  f.out->report(2);
  EXPECT_EQ(f.stored(), (pairs{{0, 1}}));  // never past the failed message
  EXPECT_TRUE(f.proc->failed());
  EXPECT_FALSE(f.proc->quiescent());
  const std::string reason =
      "forwarding to topic unique failed (_MSG_TIMED_OUT: Local: Message timed out); "
      "consumption stopped at topic events partition 0 offset 1, which will be read again after "
      "a restart";
  EXPECT_EQ(f.proc->failure_reason(), "pipeline orders: " + reason);
  EXPECT_EQ(log.count("orders: " + reason), 1u) << log.text();
  // Nothing more is forwarded: what follows is read again after a restart.
  (void)f.process(0, 3, {"d", "e"});
  EXPECT_EQ(f.out->messages.size(), 3u);
  EXPECT_TRUE(f.stored().empty());
  EXPECT_EQ(f.pipes[0]->counters().forward_failures, 1u);
  EXPECT_EQ(f.metric("sketchd_consumption_stopped"), 0.0);
  f.proc->consumption_stopped();
  EXPECT_EQ(f.metric("sketchd_consumption_stopped"), 1.0);
}

// A message the forwarder refuses at once (the producer's message.max.bytes, an unknown
// topic) stops consumption as a failed delivery does; the messages after it in the batch
// are not forwarded.
TEST(ProcessorForwarding, AMessageRefusedAtOnceStopsConsumptionAndNothingAfterItIsForwarded) {
  captured_log log;
  fixture f;
  (void)f.process(0, 0, {"a"});
  f.out->refuse = error_code::msg_size_too_large;
  (void)f.process(0, 1, {"b", "c"});
  f.out->refuse.reset();
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(f.proc->failure_reason(),
            "pipeline orders: forwarding to topic unique failed (MSG_SIZE_TOO_LARGE: Broker: "
            "Message size too large); consumption stopped at topic events partition 0 offset 1, "
            "which will be read again after a restart");
  f.out->acknowledge_all();
  EXPECT_EQ(f.stored(), (pairs{{0, 1}}));
}

// The producer's close at the stop drops what is still queued: counted as a forward
// failure, but its own lines say why, so it is not reported as a failure of its own.
TEST(ProcessorForwarding, AMessagePurgedAtTheCloseIsNotReportedAsAFailureOfItsOwn) {
  captured_log log;
  fixture f;
  (void)f.process(0, 0, {"a"});
  f.out->report(0, error_code::purge_queue, "Local: Purged in queue");
  EXPECT_TRUE(f.stored().empty());
  EXPECT_EQ(f.proc->failure_reason(), "");
  EXPECT_EQ(log.count("failed"), 0u) << log.text();
  (void)f.process(0, 1, {});
  EXPECT_EQ(f.pipes[0]->counters().forward_failures, 1u);
}

// While the queue is full the processor waits, asking its stop check between tries; the
// message is queued once there is room.
TEST(ProcessorForwarding, AFullQueueIsWaitedOnWhileTheStopCheckSaysSo) {
  fixture f;
  f.out->full_tries = 5;
  (void)f.process(0, 0, {"a", "b"});
  EXPECT_EQ(f.stop_asked, 5);
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{0, 1}));
  EXPECT_FALSE(f.proc->failed());
}

// A stop with the queue full gives up: the message is not a failure, it stays undelivered
// and its offset is never stored (it is read again after the restart), and nothing after it
// is forwarded, since that would be delivered again after the restart, and ahead of it.
TEST(ProcessorForwarding, AStopWithTheQueueFullAbandonsTheRestWithoutAFailure) {
  fixture f;
  (void)f.process(0, 0, {"a"});
  f.out->full_tries = 100;
  f.give_up_at = 3;
  (void)f.process(0, 1, {"b", "c"});
  EXPECT_EQ(f.stop_asked, 3);
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{0}));
  f.out->full_tries = 0;
  (void)f.process(0, 3, {"d"});
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{0}));
  EXPECT_FALSE(f.proc->failed());
  EXPECT_EQ(f.proc->failure_reason(), "");
  f.out->acknowledge_all();
  EXPECT_EQ(f.stored(), (pairs{{0, 1}}));
  EXPECT_FALSE(f.proc->quiescent());  // what was abandoned is not delivered
}

// A partition restored behind the group's committed offset is read into the windows again
// up to it: its messages there are not forwarded (their outputs were delivered before) and
// their offsets not stored (the group's commit would move back).
TEST(ProcessorForwarding, APartitionReadAgainIsNotForwardedBeforeTheCommittedOffset) {
  captured_log log;
  fixture f;
  f.proc->restore_positions({{0, 2, 100}}, std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  const kafka::topic_partition tp{0, 2};
  f.proc->assigned(tp, f.proc->take_restored_position(tp));
  ASSERT_TRUE(f.proc->start_behind_commit(tp, 100, 105));
  (void)f.process(2, 100, {"a", "b", "a"});
  EXPECT_TRUE(f.out->messages.empty());
  EXPECT_TRUE(f.stored().empty());
  // Across the committed offset: forwarded from there on, stored from there on.
  (void)f.process(2, 103, {"a", "c", "d", "a"});
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{105}));
  EXPECT_EQ(f.out->offsets("dups"), (std::vector<std::int64_t>{106}));
  EXPECT_EQ(f.stored(), (pairs{{2, 105}}));
  EXPECT_EQ(
      log.count("partition events [2]: read again up to offset 105; forwarding from there on"), 1u)
      << log.text();
  f.out->acknowledge_all();
  EXPECT_EQ(f.stored(), (pairs{{2, 107}}));
}

// A restart after a crash: the outputs found forwarded after the snapshot (output_replay)
// are not forwarded again; the messages' other outputs are, and every offset is stored.
TEST(ProcessorForwarding, OutputsForwardedBeforeACrashAreNotForwardedAgain) {
  config c = one_dedup_pipeline();
  c.pipelines.push_back(dedup_pipeline("orders-copy", "copy", std::nullopt));
  fixture f(c);
  EXPECT_EQ(f.proc->replayable_outputs(), (std::vector<std::string>{"unique", "dups", "copy"}));
  const kafka::topic_partition tp{0, 2};
  f.proc->restore_positions({{0, 2, 100}}, 0);
  // The crashed run forwarded 100 and 101 to "unique" and 102 to "dups", and 100 to "copy"
  // (101's copy was still in flight when it died).
  f.proc->forwarded_before("unique", tp, 100);
  f.proc->forwarded_before("unique", tp, 101);
  f.proc->forwarded_before("dups", tp, 102);
  f.proc->forwarded_before("copy", tp, 100);
  f.proc->forwarded_before("elsewhere", tp, 103);  // not an output: ignored
  EXPECT_EQ(f.proc->forwarded_before_left(), 4u);
  f.proc->assigned(tp, f.proc->take_restored_position(tp));
  // Once the partition is the consumer's, the restored position is stored (what is before
  // it was delivered).
  std::vector<kafka::partition_offset> started;
  f.proc->take_started(started);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(std::make_pair(started[0].partition, started[0].next_offset), std::make_pair(2, 100L));
  (void)f.process(2, 100, {"a", "b", "a", "c"});
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{103}));
  EXPECT_EQ(f.out->offsets("dups"), (std::vector<std::int64_t>{}));
  EXPECT_EQ(f.out->offsets("copy"), (std::vector<std::int64_t>{101, 103}));
  EXPECT_EQ(f.proc->forwarded_before_left(), 0u);
  // 100 has no output left to wait for, and 101 waits for its copy.
  EXPECT_EQ(f.stored(), (pairs{{2, 101}}));
  f.out->acknowledge_all();
  EXPECT_EQ(f.stored(), (pairs{{2, 104}}));
  EXPECT_EQ(f.pipes[0]->counters().first_seen, 3u);  // the items are in the windows
}

// A copy found is delivered, whoever reads its message next: what was found of a partition
// assigned without its restored start (one this instance got after the snapshot) is kept
// from where its reading starts, and dropped when the partition is revoked.
TEST(ProcessorForwarding, OutputsForwardedBeforeACrashAreKeptFromWhereTheReadingStarts) {
  fixture f;
  const kafka::topic_partition tp{0, 2};
  f.proc->forwarded_before("unique", tp, 99);
  f.proc->forwarded_before("unique", tp, 100);
  f.proc->forwarded_before("unique", {0, 3}, 7);
  f.proc->assigned(tp, std::nullopt);
  f.proc->start_known(tp, 100);  // the group's commit
  EXPECT_EQ(f.proc->forwarded_before_left(), 2u);
  (void)f.process(2, 100, {"a", "b"});
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{101}));
  const kafka::topic_partition revoked[] = {{0, 3}};
  f.proc->revoked(revoked);
  EXPECT_EQ(f.proc->forwarded_before_left(), 0u);
}

// Each commit carries where the replayable outputs stood when the messages from its offset on
// were still to be forwarded (processor/output_checkpoints.h), for whoever takes the
// partition over after a crash.
TEST(ProcessorForwarding, EachCommitCarriesWhereTheOutputsStoodBeforeItsMessages) {
  fixture f;
  const std::size_t unique = f.out->topic_index("unique");
  const std::size_t dups = f.out->topic_index("dups");
  f.out->output_ends = {{unique, 0, 50}, {unique, 1, 40}, {dups, 0, 7}};
  (void)f.process(0, 0, {"a", "b", "a"});
  const auto commit = [&](std::int32_t partition, std::int64_t offset) {
    std::vector<kafka::commit_offset> offsets{{0, partition, offset, {}}};
    f.proc->commit_metadata(offsets);
    return offsets[0].metadata;
  };
  const std::string first = "sketchd-outputs/1 dups=0:7;unique=0:50,1:40";
  EXPECT_EQ(commit(0, 3), first);
  // Two more messages forwarded, the outputs further on; the commit is still at 3 (their
  // deliveries unacknowledged): it carries the checkpoint before them, not the new one.
  f.out->output_ends = {{unique, 0, 52}, {unique, 1, 40}, {dups, 0, 7}};
  (void)f.process(0, 3, {"c", "d"});
  EXPECT_EQ(commit(0, 3), first);
  EXPECT_EQ(commit(0, 5), "sketchd-outputs/1 dups=0:7;unique=0:52,1:40");
  EXPECT_EQ(commit(1, 10), "") << "a partition never read here";
  // A revoked partition's commit finds where it stood just before the revocation.
  const kafka::topic_partition revoked[] = {{0, 0}};
  f.out->output_ends = {{unique, 0, 60}, {unique, 1, 40}, {dups, 0, 9}};
  f.proc->revoked(revoked);
  EXPECT_EQ(commit(0, 5), "sketchd-outputs/1 dups=0:9;unique=0:60,1:40");
}

// Two pipelines writing one topic cannot tell whose copy it holds: not replayed.
TEST(ProcessorForwarding, AnOutputTopicOfTwoRoutesIsNotReplayable) {
  config c = one_dedup_pipeline();
  c.pipelines.push_back(dedup_pipeline("orders-copy", "unique", std::nullopt));
  fixture f(c);
  EXPECT_EQ(f.proc->replayable_outputs(), (std::vector<std::string>{"dups"}));
}

TEST(ProcessorForwarding, FlushWaitsForTheOutputsAndStoresTheirOffsets) {
  fixture f;
  (void)f.process(0, 0, {"a", "b"});
  std::vector<kafka::partition_offset> offsets;
  EXPECT_FALSE(f.proc->flush(std::chrono::milliseconds(10), offsets));
  EXPECT_TRUE(offsets.empty());
  f.out->flush_acknowledges = true;
  EXPECT_TRUE(f.proc->flush(std::chrono::milliseconds(10), offsets));
  ASSERT_EQ(offsets.size(), 1u);
  EXPECT_EQ(offsets[0].next_offset, 2);
  EXPECT_TRUE(f.proc->quiescent());
}

TEST(ProcessorForwarding, AFatalForwarderErrorIsPassedOn) {
  fixture f;
  EXPECT_EQ(f.proc->fatal_error(), std::nullopt);
  f.out->fatal = "Fatal idempotent producer error (OUT_OF_ORDER_SEQUENCE_NUMBER)";
  EXPECT_EQ(f.proc->fatal_error(), f.out->fatal);
}

TEST(ProcessorForwarding, AnOutputTopicWithoutAForwarderIsRefused) {
  const config c = one_dedup_pipeline();
  pipeline p(c.pipelines[0]);
  EXPECT_THROW(processor(c, {&p}, {"events"}, nullptr, {}), std::invalid_argument);
}

// 20 messages of "hot": it enters the heavy set (an estimate of 10, the tracker's minimum,
// is 100% of the window) and its event goes to the alerts topic, keyed by the item.
struct alert_fixture : fixture {
  alert_fixture() : fixture(alerts_config()) {}
  static config alerts_config() {
    config c;
    c.pipelines.push_back(alerting_pipeline());
    return c;
  }
  void send_hot() { (void)process(0, 0, std::vector<std::string>(20, "hot")); }
};

TEST(ProcessorForwarding, AHeavyHitterEventIsSentAsJsonToTheAlertsTopic) {
  alert_fixture f;
  f.send_hot();
  ASSERT_EQ(f.out->messages.size(), 1u);
  const auto& m = f.out->messages[0];
  EXPECT_EQ(m.topic, "alerts");
  EXPECT_EQ(m.key, "hot");
  EXPECT_EQ(m.timestamp_ms, kWallMs);
  const nlohmann::json e = nlohmann::json::parse(m.value);
  EXPECT_EQ(e.size(), 10u) << m.value;
  EXPECT_EQ(e["pipeline"], "hot");
  EXPECT_EQ(e["event"], "enter");
  EXPECT_EQ(e["item"], "hot");
  EXPECT_EQ(e["estimate"], 10);
  EXPECT_EQ(e["window_items"], 10);
  EXPECT_EQ(e["ratio"], 1.0);
  EXPECT_EQ(e["threshold"], 0.05);
  // ε·N with the sketch's ε = e/w, w = ⌈e/0.001⌉ = 2719.
  EXPECT_DOUBLE_EQ(e["error_bound"].get<double>(), std::numbers::e / 2719.0 * 10);
  EXPECT_EQ(e["time"], "2025-11-22T20:00:00.123Z");
  EXPECT_EQ(e["timestamp_ms"], kWallMs);
  // Alert events take no part in the input offsets.
  EXPECT_EQ(f.stored(), (pairs{{0, 20}}));
  f.out->report(0);
  (void)f.stored();
  EXPECT_EQ(f.metric("sketchd_heavy_hitter_alerts_sent_total"), 1.0);
}

// An alert event that cannot be sent is counted and warned about (one line every 10 s at
// most, the others told at the stop); consumption goes on.
TEST(ProcessorForwarding, AnAlertEventNotSentIsWarnedAboutWithoutStoppingConsumption) {
  captured_log log;
  alert_fixture f;
  f.send_hot();
  f.out->report(0, error_code::topic_authorization_failed, "Broker: Topic authorization failed");
  (void)f.stored();
  EXPECT_FALSE(f.proc->failed());
  EXPECT_EQ(f.metric("sketchd_heavy_hitter_alert_failures_total"), 1.0);
  EXPECT_EQ(log.count("hot: a heavy-hitter event could not be sent to topic alerts: Broker: Topic "
                      "authorization failed (1 event(s) of all pipelines not sent since the last "
                      "such line)"),
            1u)
      << log.text();
  // Refused at once, the next one is held back, and told at the stop.
  f.out->refuse = error_code::msg_size_too_large;
  (void)f.process(0, 20, std::vector<std::string>(10, "other"));
  EXPECT_EQ(f.metric("sketchd_heavy_hitter_alert_failures_total"), 2.0);
  EXPECT_EQ(log.count("a heavy-hitter event could not be sent"), 1u) << log.text();
  f.proc->log_held_back_warnings();
  EXPECT_EQ(log.count("1 more heavy-hitter event(s) of all pipelines could not be sent"), 1u)
      << log.text();
}

// Messages without a usable item are warned about once per 10 s per pipeline, with the
// count by reason and one such message's place; what is held back is told at the stop.
TEST(ProcessorForwarding, SkippedMessagesAreWarnedAboutOnceAnIntervalWithAnExample) {
  captured_log log;
  config c;
  c.pipelines.push_back(dedup_pipeline("orders", std::nullopt, std::nullopt));
  c.pipelines[0].item.from = item_source::json;
  c.pipelines[0].item.path = "/id";
  fixture f(c);
  (void)f.process(0, 0, {"a", "b", "c"});  // values {"n":…}: no /id
  EXPECT_EQ(log.count("orders: skipped 3 message(s) without a usable item (3 missing_field); one "
                      "is at topic events partition 0 offset 0"),
            1u)
      << log.text();
  (void)f.process(0, 3, {"d", "e"});
  EXPECT_EQ(log.count("skipped"), 1u);
  f.proc->log_held_back_warnings();
  EXPECT_EQ(log.count("orders: skipped 2 message(s) without a usable item (2 missing_field); one "
                      "is at topic events partition 0 offset 3"),
            1u)
      << log.text();
}

// Dead letters (dead_letter_topic): a message a pipeline skips goes there as it was read, with
// the reason and the pipeline as headers; a tombstone does not.
config dead_letter_pipeline(item_source from) {
  config c;
  c.pipelines.push_back(dedup_pipeline("orders", "unique", std::nullopt));
  c.pipelines[0].item.from = from;
  c.pipelines[0].item.path = from == item_source::json ? "/id" : "";
  c.pipelines[0].dead_letter_topic = "orders.dlq";
  return c;
}

using headers = std::vector<std::pair<std::string, std::string>>;

TEST(ProcessorDeadLetters, ASkippedMessageIsSentAsItWasWithItsReasonAndPipeline) {
  fixture f(dead_letter_pipeline(item_source::json));
  const auto& batch = f.process_raw(0, 0,
                                    {{"k0", R"({"id":"a"})"},
                                     {"k1", R"({"n":1})"},
                                     {std::nullopt, "not json"},
                                     {"k3", std::nullopt}});  // a tombstone: not sent
  EXPECT_EQ(f.out->offsets("unique"), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(f.out->offsets("orders.dlq"), (std::vector<std::int64_t>{1, 2}));
  ASSERT_EQ(f.out->messages.size(), 3u);
  const auto& missing = f.out->messages[1];
  EXPECT_EQ(missing.record, &batch[1]);  // the consumed message itself: its headers, timestamp
  EXPECT_EQ(missing.key, "k1");
  EXPECT_EQ(missing.value, R"({"n":1})");
  EXPECT_EQ(missing.timestamp_ms, batch[1].timestamp_ms);
  EXPECT_EQ(missing.extra,
            (headers{{"sketchd-error-reason", "missing_field"}, {"sketchd-pipeline", "orders"}}));
  EXPECT_EQ(f.out->messages[2].extra,
            (headers{{"sketchd-error-reason", "invalid_json"}, {"sketchd-pipeline", "orders"}}));
  EXPECT_EQ(f.pipes[0]->counters().failures[static_cast<std::size_t>(extract_failure::tombstone)],
            1u);
}

// The input offset waits for the dead letter's acknowledgement, as for any output; the
// counter counts dead letters delivered, by reason, every reason at 0 from the start.
TEST(ProcessorDeadLetters, TheOffsetIsStoredOnlyOnceTheDeadLetterIsAcknowledged) {
  fixture f(dead_letter_pipeline(item_source::json));
  const std::map<std::string, double> zero{{"empty_item", 0},    {"invalid_json", 0},
                                           {"missing_field", 0}, {"not_scalar", 0},
                                           {"null_key", 0},      {"oversized", 0}};
  EXPECT_EQ(f.series("sketchd_dead_letters_total"), zero);
  EXPECT_EQ(f.metric("sketchd_dead_letter_failures_total"), 0.0);
  (void)f.process_raw(0, 0, {{"k0", "[1"}, {"k1", R"({"id":"b"})"}, {"k2", R"({"id":[]})"}});
  f.out->report(1);
  EXPECT_TRUE(f.stored().empty());  // offset 0's dead letter is in flight
  f.out->report(0);
  EXPECT_EQ(f.stored(), (pairs{{0, 2}}));
  f.out->report(2);
  EXPECT_EQ(f.stored(), (pairs{{0, 3}}));
  std::map<std::string, double> counted = zero;
  counted["invalid_json"] = 1;
  counted["not_scalar"] = 1;
  EXPECT_EQ(f.series("sketchd_dead_letters_total"), counted);
  EXPECT_TRUE(f.proc->quiescent());
}

// Under from: key a null key is data the pipeline could not key: a dead letter (null_key);
// a tombstone is a deletion marker, whatever its key: counted, not sent.
TEST(ProcessorDeadLetters, ANullKeyIsSentAndATombstoneIsNot) {
  fixture f(dead_letter_pipeline(item_source::key));
  (void)f.process_raw(0, 0,
                      {{std::nullopt, "v0"}, {std::nullopt, std::nullopt}, {"k2", std::nullopt}});
  EXPECT_EQ(f.out->offsets("orders.dlq"), (std::vector<std::int64_t>{0}));
  ASSERT_EQ(f.out->messages.size(), 1u);
  EXPECT_EQ(f.out->messages[0].extra,
            (headers{{"sketchd-error-reason", "null_key"}, {"sketchd-pipeline", "orders"}}));
  f.out->acknowledge_all();
  EXPECT_EQ(f.stored(), (pairs{{0, 3}}));
  EXPECT_EQ(f.series("sketchd_dead_letters_total")["null_key"], 1.0);
}

// A dead letter that cannot be delivered stops consumption as a failed forward does: the
// offset stays before it, and nothing after it is sent.
TEST(ProcessorDeadLetters, AFailedDeadLetterStopsConsumptionLikeAFailedForward) {
  captured_log log;
  fixture f(dead_letter_pipeline(item_source::json));
  (void)f.process_raw(0, 0, {{"k0", R"({"id":"a"})"}, {"k1", "{"}, {"k2", R"({"id":"c"})"}});
  f.out->report(0);
  f.out->report(1, error_code::topic_authorization_failed, "Broker: Topic authorization failed");
  f.out->report(2);
  EXPECT_EQ(f.stored(), (pairs{{0, 1}}));
  EXPECT_TRUE(f.proc->failed());
  const std::string reason =
      "sending a dead letter to topic orders.dlq failed (TOPIC_AUTHORIZATION_FAILED: Broker: "
      "Topic authorization failed); consumption stopped at topic events partition 0 offset 1, "
      "which will be read again after a restart";
  EXPECT_EQ(f.proc->failure_reason(), "pipeline orders: " + reason);
  EXPECT_EQ(log.count("orders: " + reason), 1u) << log.text();
  (void)f.process_raw(0, 3, {{"k3", "{"}});
  EXPECT_EQ(f.out->messages.size(), 3u);
  EXPECT_EQ(f.pipes[0]->counters().forward_failures, 0u);
  f.proc->consumption_stopped();
  EXPECT_EQ(f.metric("sketchd_dead_letter_failures_total"), 1.0);
  EXPECT_EQ(f.series("sketchd_dead_letters_total")["invalid_json"], 0.0);
  EXPECT_EQ(f.metric("sketchd_consumption_stopped"), 1.0);
}

// A dead letter sent again after a crash is a duplicate at-least-once allows: the dead-letter
// topic is not read back at a restart.
TEST(ProcessorDeadLetters, TheDeadLetterTopicIsNotReplayable) {
  fixture f(dead_letter_pipeline(item_source::json));
  EXPECT_EQ(f.proc->replayable_outputs(), (std::vector<std::string>{"unique"}));
}

}  // namespace
}  // namespace sketchd
