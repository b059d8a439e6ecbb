// The value syntax of the configuration: ${VAR} substitution, durations, counts, reals,
// topic names, and how values and errors print.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "config_test_support.h"
#include "sketchd/config/config.h"

namespace sketchd {
namespace {

using std::chrono::milliseconds;
using test_support::errors_of;
using test_support::fake_env;
using test_support::load;
using ::testing::ElementsAre;

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

TEST(ConfigValues, EnumsFormatWithTheirConfigurationNames) {
  EXPECT_EQ(fmt::format("{} {} {} {} {}", item_source::header, clock_kind::wall,
                        generator_format::json, log_level::warn, log_format::text),
            "header wall json warn text");
  EXPECT_EQ(fmt::format("{}", config_error{"f.yaml", 3, 7, "bad"}), "f.yaml:3:7: bad");
}

}  // namespace
}  // namespace sketchd
