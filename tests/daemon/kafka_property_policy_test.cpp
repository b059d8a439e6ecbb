#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "sketchd/kafka/properties.h"
#include "sketchd/kafka/property_policy.h"

namespace sketchd::kafka {
namespace {

using outcome = property_verdict::outcome;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(KafkaPropertyPolicy, SecretPropertiesAreRedactedForLogging) {
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

// What sketchd sets from its own keys, or relies on being left alone, is reserved whatever
// the value; librdkafka's other name of bootstrap.servers too.
TEST(KafkaPropertyPolicy, ReservedPropertiesSayWhatToSetInstead) {
  EXPECT_EQ(reserved_property("bootstrap.servers"), "set kafka.brokers instead");
  EXPECT_EQ(reserved_property("metadata.broker.list"), "set kafka.brokers instead");
  EXPECT_EQ(reserved_property("group.id"), "set kafka.group_id instead");
  EXPECT_THAT(std::string(reserved_property("enable.auto.offset.store").value_or("")),
              StartsWith("sketchd stores offsets itself"));
  EXPECT_THAT(std::string(reserved_property("transactional.id").value_or("")),
              StartsWith("sketchd's producer is idempotent, not transactional"));
  EXPECT_FALSE(reserved_property("client.id"));
  EXPECT_FALSE(reserved_property("enable.auto.commit"));  // judged by its value instead
}

TEST(KafkaPropertyPolicy, AnAcceptedPropertyHasNoReason) {
  const property_verdict v = judge_property("linger.ms", "5", false);
  EXPECT_EQ(v.result, outcome::accepted);
  EXPECT_EQ(v.reason, "");
}

TEST(KafkaPropertyPolicy, AnUnknownPropertyNamesTheLibrdkafkaVersion) {
  const property_verdict v = judge_property("no.such.property", "1", false);
  EXPECT_EQ(v.result, outcome::unknown);
  EXPECT_EQ(v.reason, "librdkafka " + std::string(librdkafka_version()) + " has no such property");
}

// librdkafka reads a boolean as true from true, t or 1 in any case: the refusal is judged
// from its reading, not from the text.
TEST(KafkaPropertyPolicy, SettingsThatUndoWhatSketchdReliesOnAreRefusedAsLibrdkafkaReadsThem) {
  for (const std::string value : {"false", "F", "0"}) {
    const property_verdict v = judge_property("enable.auto.commit", value, false);
    EXPECT_EQ(v.result, outcome::refused) << value;
    EXPECT_THAT(v.reason, StartsWith("must stay true: sketchd commits the offsets")) << value;
  }
  for (const std::string value : {"true", "T", "1"}) {
    EXPECT_EQ(judge_property("enable.auto.commit", value, false).result, outcome::accepted)
        << value;
  }
  EXPECT_EQ(judge_property("enable.idempotence", "False", false).result, outcome::refused);
  EXPECT_EQ(judge_property("delivery.report.only.error", "true", false).result, outcome::refused);
  EXPECT_EQ(judge_property("auto.commit.interval.ms", "0", false).result, outcome::refused);
  EXPECT_EQ(judge_property("statistics.interval.ms", "0", false).result, outcome::refused);
  EXPECT_THAT(judge_property("auto.offset.reset", "ERROR", false).reason,
              StartsWith("error is not supported"));
  EXPECT_EQ(judge_property("auto.commit.interval.ms", "1000", false).result, outcome::accepted);
}

// librdkafka's message quotes the value; a secret's, or one from the environment, is
// redacted, whatever the value is.
TEST(KafkaPropertyPolicy, AValueLibrdkafkaRefusesIsQuotedOnlyWhenWrittenInTheFile) {
  const property_verdict written = judge_property("security.protocol", "bogus", false);
  EXPECT_EQ(written.result, outcome::refused);
  EXPECT_THAT(written.reason, HasSubstr("\"bogus\""));
  const property_verdict substituted = judge_property("security.protocol", "bogus", true);
  EXPECT_EQ(substituted.result, outcome::refused);
  EXPECT_THAT(substituted.reason, AllOf(HasSubstr("\"<redacted>\""), Not(HasSubstr("bogus"))));
  // Java's "none" for auto.offset.reset is explained with librdkafka's choices instead.
  EXPECT_THAT(judge_property("auto.offset.reset", "none", false).reason,
              StartsWith("invalid value \"none\": librdkafka takes earliest"));
}

}  // namespace
}  // namespace sketchd::kafka
