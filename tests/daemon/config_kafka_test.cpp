// The kafka section of the configuration: brokers, the embedded cluster, and the librdkafka
// properties judged one by one and together for each client, each error at its position.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "sketchd/config/config.h"
#include "sketchd/config/sections.h"

namespace sketchd {
namespace {

using test_support::errors_of;
using test_support::kMinimal;
using test_support::load;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

TEST(Config, EmbeddedClusterTakesItsSizes) {
  const auto r = load(std::string("kafka:\n  embedded: { brokers: 3, partitions: 16 }\n") +
                      std::string(kMinimal.substr(kMinimal.find("pipelines"))));
  ASSERT_TRUE(r.value) << ::testing::PrintToString(errors_of(r));
  EXPECT_EQ(r.value->kafka.embedded->brokers, 3);
  EXPECT_EQ(r.value->kafka.embedded->partitions, 16);
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

TEST(ConfigErrors, BrokerListIsChecked) {
  const auto broker_errors = [](std::string_view brokers) {
    std::string yaml(kMinimal);
    yaml.replace(yaml.find("localhost:9092"), 14, fmt::format("\"{}\"", brokers));
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

// The broker list's parser alone: the first bad entry, as the file has it, and why.
TEST(ConfigKafka, ABrokerListProblemNamesItsFirstBadEntry) {
  using config_detail::broker_list_problem;
  EXPECT_EQ(broker_list_problem("k1:9092, SSL://[::1]:9093,k3"), std::nullopt);
  EXPECT_EQ(broker_list_problem("k1:9092, k2:0 ,k3:x"),
            "\"k2:0\": the port must be a number in [1, 65535]");
  EXPECT_EQ(broker_list_problem("k1,,k2"), "an empty entry (HOST[:PORT],HOST[:PORT]…)");
  EXPECT_EQ(broker_list_problem("tcp://k1"),
            "\"tcp://k1\": unknown protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)");
  EXPECT_EQ(broker_list_problem("[::1]x"), "\"[::1]x\": expected \":PORT\" after \"]\"");
}

}  // namespace
}  // namespace sketchd
