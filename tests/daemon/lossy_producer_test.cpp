// The generator's producer (sketchd/kafka/lossy_producer.h): what it counts as refused and
// undelivered, and that its close drops what is queued without counting it. No broker: the
// bootstrap server is a loopback port where nothing listens.
#include "sketchd/kafka/lossy_producer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "sketchd/kafka/error.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kNobody = "127.0.0.1:1";

TEST(LossyProducer, AnEventOverTheSizeLimitIsRefusedAtOnce) {
  lossy_producer p({{"message.max.bytes", "1000"}}, kNobody);
  EXPECT_EQ(p.produce("events", std::nullopt, std::string(2000, 'x')),
            lossy_producer::produce_result::refused);
  EXPECT_EQ(p.refused(), 1u);
  EXPECT_EQ(p.undelivered(), 0u);
  EXPECT_NE(p.last_error(), "");
}

TEST(LossyProducer, AFullQueueIsToldAndNotCounted) {
  lossy_producer p({{"queue.buffering.max.messages", "1"}}, kNobody);
  EXPECT_EQ(p.produce("events", "k", "v1"), lossy_producer::produce_result::queued);
  EXPECT_EQ(p.produce("events", "k", "v2"), lossy_producer::produce_result::queue_full);
  EXPECT_EQ(p.refused(), 0u);
  EXPECT_EQ(p.undelivered(), 0u);
  EXPECT_EQ(p.last_error(), "");
}

TEST(LossyProducer, EventsNotDeliveredInTimeAreCountedWithTheReason) {
  lossy_producer p({{"message.timeout.ms", "200"}}, kNobody);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(p.produce("events", std::nullopt, "v"), lossy_producer::produce_result::queued);
  }
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (p.undelivered() < 3 && std::chrono::steady_clock::now() < deadline) p.poll(50ms);
  EXPECT_EQ(p.undelivered(), 3u);
  EXPECT_EQ(p.refused(), 0u);
  EXPECT_NE(p.last_error().find("timed out"), std::string::npos) << p.last_error();
}

TEST(LossyProducer, CloseDropsWhatIsQueuedWithoutCountingIt) {
  lossy_producer p({{"message.timeout.ms", "60000"}}, kNobody);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(p.produce("events", std::nullopt, "v"), lossy_producer::produce_result::queued);
  }
  p.close();
  p.close();  // idempotent
  EXPECT_EQ(p.undelivered(), 0u);
  EXPECT_EQ(p.refused(), 0u);
}

TEST(LossyProducer, AnUnknownPropertyIsAKafkaErrorNamingIt) {
  try {
    lossy_producer p({{"no.such.property", "secret-value"}}, kNobody);
    FAIL() << "expected kafka_error";
  } catch (const kafka_error& e) {
    EXPECT_EQ(e.code(), error_code::invalid_arg);
    EXPECT_NE(std::string(e.what()).find("no.such.property"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("secret-value"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sketchd::kafka
