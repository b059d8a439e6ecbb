// Building librdkafka clients from the user's properties, and the errors that come out:
// messages name the property and the context, never a property's value.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/error.h"

namespace sketchd::kafka {
namespace {

constexpr std::string_view kSecret = "hunter2-s3cret";

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The kafka_error that `f` throws; fails the test when it throws nothing.
template <typename F>
kafka_error error_of(F&& f) {
  try {
    f();
  } catch (const kafka_error& e) {
    return e;
  }
  ADD_FAILURE() << "no kafka_error thrown";
  return kafka_error("nothing", error_code::no_error);
}

TEST(ClientConfig, ValidPropertiesCreateAClient) {
  client_config config(property_map{
      {"client.id", "test"}, {"linger.ms", "5"}, {"sasl.password", std::string(kSecret)}});
  const handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
  EXPECT_NE(producer, nullptr);
}

TEST(ClientConfig, UnknownPropertyIsNamedButItsValueIsNot) {
  const kafka_error e = error_of([] {
    client_config config(property_map{{"no.such.property", std::string(kSecret)}});
  });
  EXPECT_EQ(e.code(), error_code::invalid_arg);
  EXPECT_TRUE(contains(e.what(), "no.such.property")) << e.what();
  EXPECT_FALSE(contains(e.what(), kSecret)) << e.what();
}

TEST(ClientConfig, RejectedValueIsNotEchoed) {
  // librdkafka's message quotes the value: Invalid value "…" for configuration property.
  const kafka_error e = error_of([] {
    client_config config(property_map{{"security.protocol", std::string(kSecret)}});
  });
  EXPECT_TRUE(contains(e.what(), "security.protocol")) << e.what();
  EXPECT_FALSE(contains(e.what(), kSecret)) << e.what();
  EXPECT_TRUE(contains(e.what(), "<redacted>")) << e.what();
}

TEST(ClientConfig, RangeErrorKeepsTheBoundsAndHidesTheValue) {
  const kafka_error e = error_of([] {
    client_config config(property_map{{"message.max.bytes", "1"}});
  });
  EXPECT_TRUE(contains(e.what(), "message.max.bytes")) << e.what();
  EXPECT_TRUE(contains(e.what(), "1000..1000000000")) << e.what();
  EXPECT_TRUE(contains(e.what(), "value <redacted> is outside")) << e.what();
}

TEST(ClientConfig, CreationFailureHidesPropertyValues) {
  // Accepted by rd_kafka_conf_set(), refused by rd_kafka_new() with the value quoted.
  client_config config(property_map{{"partition.assignment.strategy", std::string(kSecret)}});
  const kafka_error e =
      error_of([&config] { static_cast<void>(std::move(config).create(RD_KAFKA_CONSUMER)); });
  EXPECT_EQ(e.code(), error_code::invalid_arg);
  EXPECT_TRUE(contains(e.what(), "partition.assignment.strategy")) << e.what();
  EXPECT_FALSE(contains(e.what(), kSecret)) << e.what();
}

// SASL without sasl.mechanisms is Kerberos to librdkafka: its refusal is explained.
TEST(ClientConfig, SaslWithoutAMechanismSaysItMeansKerberos) {
  const kafka_error e = error_of([] {
    client_config c(property_map{{"security.protocol", "SASL_PLAINTEXT"}});
    (void)std::move(c).create(RD_KAFKA_CONSUMER);
  });
  EXPECT_TRUE(contains(e.what(), "sasl.kerberos")) << e.what();
  EXPECT_TRUE(contains(e.what(), "set sasl.mechanisms to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))
      << e.what();
  // With a mechanism, no such refusal.
  client_config plain(property_map{{"security.protocol", "SASL_PLAINTEXT"},
                                   {"sasl.mechanisms", "PLAIN"},
                                   {"sasl.username", "u"},
                                   {"sasl.password", std::string(kSecret)}});
  EXPECT_NE(std::move(plain).create(RD_KAFKA_PRODUCER), nullptr);
}

TEST(Redact, HidesWholeValuesLongestFirstAndSparesLongerWords) {
  EXPECT_EQ(redact("a=abcdef b=\"abc\"", {"abc", "abcdef"}), "a=<redacted> b=\"<redacted>\"");
  EXPECT_EQ(redact("value 1 is outside allowed range 1000..1000000000", {"1"}),
            "value <redacted> is outside allowed range 1000..1000000000");
  EXPECT_EQ(redact("nothing to hide", {"", "secret"}), "nothing to hide");
}

// librdkafka's warnings and errors: one line per facility and broker every interval, then
// the next says how many were held back; other brokers and facilities are not held up.
TEST(LogLimiter, OneLinePerFacilityAndBrokerPerInterval) {
  using namespace std::chrono_literals;
  log_limiter limiter(10s);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  const std::string_view a = "sasl_ssl://127.0.0.1:9092/bootstrap";
  const auto line = [&](std::string_view broker, std::string_view why) {
    return std::string(broker) + ": " + std::string(why);
  };
  EXPECT_EQ(limiter.admit("FAIL", line(a, "SASL authentication error"), t0), 0u);
  // The same broker failing another way, then the first way again: held back.
  EXPECT_EQ(limiter.admit("FAIL", line(a, "Disconnected while requesting ApiVersion"), t0 + 1s),
            std::nullopt);
  EXPECT_EQ(limiter.admit("FAIL", line(a, "SASL authentication error"), t0 + 2s), std::nullopt);
  // Another broker, or another facility of the same one: shown.
  EXPECT_EQ(limiter.admit("FAIL", line("sasl_ssl://127.0.0.1:9093/2", "refused"), t0 + 2s), 0u);
  EXPECT_EQ(limiter.admit("REQTMOUT", line(a, "timed out"), t0 + 2s), 0u);
  // After the interval: shown, with the two held back.
  EXPECT_EQ(limiter.admit("FAIL", line(a, "SASL authentication error"), t0 + 10s), 2u);
  EXPECT_EQ(limiter.admit("FAIL", line(a, "SASL authentication error"), t0 + 11s), std::nullopt);
  // A line without a broker is its own key.
  EXPECT_EQ(limiter.admit("CONFWARN", "Configuration property x is deprecated", t0), 0u);
}

// Lines held back and then silence (the broker recovered): told once the interval has
// passed, by the last of them, with the count; nothing when nothing was held back.
TEST(LogLimiter, TellsHeldLinesOnceTheIntervalPassesWithoutAnother) {
  using namespace std::chrono_literals;
  log_limiter limiter(10s);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  EXPECT_EQ(limiter.admit("FAIL", "b1: refused", t0, 3), 0u);
  EXPECT_EQ(limiter.admit("FAIL", "b1: timed out", t0 + 1s, 4), std::nullopt);
  EXPECT_EQ(limiter.admit("FAIL", "b1: refused", t0 + 2s, 3), std::nullopt);
  EXPECT_EQ(limiter.admit("CONFWARN", "deprecated", t0 + 2s, 4), 0u);
  EXPECT_TRUE(limiter.take_overdue(t0 + 9s).empty());
  const auto held = limiter.take_overdue(t0 + 12s);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].facility, "FAIL");
  EXPECT_EQ(held[0].text, "b1: refused");
  EXPECT_EQ(held[0].level, 3);
  EXPECT_EQ(held[0].held, 2u);
  EXPECT_EQ(held[0].over, 12s);
  EXPECT_EQ(held[0].ago, 10s);  // it came at t0 + 2 s: said late, and the line says so
  // Told once; they count as shown then, so the next line waits a whole interval again.
  EXPECT_TRUE(limiter.take_overdue(t0 + 12s).empty());
  EXPECT_EQ(limiter.admit("FAIL", "b1: refused", t0 + 13s, 3), std::nullopt);
  EXPECT_EQ(limiter.admit("FAIL", "b1: refused", t0 + 22s, 3), 1u);
}

TEST(KafkaError, MessageNamesOperationContextAndCode) {
  const kafka_error e("commit offsets", error_code::rebalance_in_progress,
                      error_context("events", 2, 17));
  EXPECT_STREQ(e.what(),
               "commit offsets [topic events, partition 2, offset 17]: Broker: Group rebalance in "
               "progress (REBALANCE_IN_PROGRESS)");
  EXPECT_EQ(e.context().partition, 2);
  EXPECT_EQ(e.context().offset, 17);

  const kafka_error bare("poll", error_code::transport, {}, "connection reset");
  EXPECT_STREQ(bare.what(), "poll: connection reset (_TRANSPORT)");
}

TEST(KafkaError, ThrowIfErrorThrowsOnlyOnErrors) {
  EXPECT_NO_THROW(throw_if_error(RD_KAFKA_RESP_ERR_NO_ERROR, "flush"));
  const kafka_error e = error_of(
      [] { throw_if_error(RD_KAFKA_RESP_ERR__TIMED_OUT, "flush", error_context("events")); });
  EXPECT_EQ(e.code(), error_code::timed_out);
  EXPECT_EQ(e.context().topic, "events");
  EXPECT_EQ(to_string(error_code::timed_out), "_TIMED_OUT");
  EXPECT_NO_THROW(throw_if_error(static_cast<rd_kafka_error_t*>(nullptr), "commit"));
}

}  // namespace
}  // namespace sketchd::kafka
