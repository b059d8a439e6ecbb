// Building librdkafka clients from the user's properties, and the errors that come out:
// messages name the property and the context, never a property's value.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

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

// The lines the "kafka" logger receives while it lives, as "LEVEL MESSAGE".
class kafka_lines {
 public:
  kafka_lines() {
    spdlog::drop("kafka");
    auto logger = std::make_shared<spdlog::logger>(
        "kafka", std::make_shared<spdlog::sinks::ostream_sink_st>(out_));
    logger->set_pattern("%l %v");
    logger->set_level(spdlog::level::debug);
    spdlog::register_logger(logger);
  }
  ~kafka_lines() { spdlog::drop("kafka"); }
  kafka_lines(const kafka_lines&) = delete;
  kafka_lines& operator=(const kafka_lines&) = delete;

  // The lines received since the last call.
  std::vector<std::string> take() {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    out_.str({});
    return lines;
  }

 private:
  std::ostringstream out_;
};

using lines = std::vector<std::string>;

// librdkafka's warnings and errors: one line per facility and broker every interval, then
// the next says how many were held back; other brokers and facilities are not held up.
TEST(LibrdkafkaLog, OneLinePerFacilityAndBrokerPerInterval) {
  using namespace std::chrono_literals;
  kafka_lines written;
  librdkafka_log log(10s);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  const std::string a = "sasl_ssl://127.0.0.1:9092/bootstrap";
  log.write(3, "FAIL (consumer)", a + ": SASL authentication error", t0);
  EXPECT_EQ(written.take(), lines{"error FAIL (consumer): " + a + ": SASL authentication error"});
  // The same broker failing another way, then the first way again: held back.
  log.write(3, "FAIL (consumer)", a + ": Disconnected while requesting ApiVersion", t0 + 1s);
  log.write(3, "FAIL (consumer)", a + ": SASL authentication error", t0 + 2s);
  EXPECT_EQ(written.take(), lines{});
  // Another broker, another facility of the same one, or the same one's lines from the
  // other client: shown.
  log.write(3, "FAIL (consumer)", "sasl_ssl://127.0.0.1:9093/2: refused", t0 + 2s);
  log.write(4, "REQTMOUT (consumer)", a + ": timed out", t0 + 2s);
  log.write(3, "FAIL (producer)", a + ": SASL authentication error", t0 + 2s);
  EXPECT_EQ(written.take(), (lines{"error FAIL (consumer): sasl_ssl://127.0.0.1:9093/2: refused",
                                   "warning REQTMOUT (consumer): " + a + ": timed out",
                                   "error FAIL (producer): " + a + ": SASL authentication error"}));
  // After the interval: shown, with the two held back.
  log.write(3, "FAIL (consumer)", a + ": SASL authentication error", t0 + 10s);
  log.write(3, "FAIL (consumer)", a + ": SASL authentication error", t0 + 11s);
  EXPECT_EQ(written.take(), lines{"error FAIL (consumer): " + a +
                                  ": SASL authentication error (2 more such line(s) held back in "
                                  "the last 10 s)"});
  // A line without a broker is its own key; info and debug lines are never held back.
  log.write(4, "CONFWARN", "Configuration property x is deprecated", t0);
  log.write(6, "INIT", a + ": ready", t0);
  log.write(6, "INIT", a + ": ready", t0);
  EXPECT_EQ(written.take(), (lines{"warning CONFWARN: Configuration property x is deprecated",
                                   "info INIT: " + a + ": ready", "info INIT: " + a + ": ready"}));
}

// Lines held back and then silence (the broker recovered): told once the interval has
// passed, by the last of them at its level, with the count; nothing when nothing was held
// back.
TEST(LibrdkafkaLog, TellsHeldLinesOnceTheIntervalPassesWithoutAnother) {
  using namespace std::chrono_literals;
  kafka_lines written;
  librdkafka_log log(10s);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  log.write(3, "FAIL (consumer)", "b1: refused", t0);
  log.write(4, "FAIL (consumer)", "b1: timed out", t0 + 1s);
  log.write(3, "FAIL (consumer)", "b1: refused", t0 + 2s);
  log.write(4, "CONFWARN", "deprecated", t0 + 2s);
  log.tell_held(t0 + 9s);
  EXPECT_EQ(written.take(),
            (lines{"error FAIL (consumer): b1: refused", "warning CONFWARN: deprecated"}));
  log.tell_held(t0 + 12s);
  // It came at t0 + 2 s: said late, and the line says so.
  EXPECT_EQ(written.take(), lines{"error FAIL (consumer): b1: refused (said 10 s ago and held "
                                  "back, the last of 2 such line(s) in the last 12 s)"});
  log.tell_held(t0 + 12s);
  EXPECT_EQ(written.take(), lines{}) << "told once";
  // The line that told them began a new interval: the next is held back until it ends.
  log.write(4, "FAIL (consumer)", "b1: timed out", t0 + 13s);
  EXPECT_EQ(written.take(), lines{});
  log.write(3, "FAIL (consumer)", "b1: refused", t0 + 22s);
  EXPECT_EQ(written.take(), lines{"error FAIL (consumer): b1: refused (1 more such line(s) held "
                                  "back in the last 10 s)"});
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
