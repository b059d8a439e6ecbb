#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "config_test_support.h"
#include "sketchd/config/checker.h"

namespace sketchd::config_detail {
namespace {

using std::chrono::milliseconds;
using test_support::env_map;
using test_support::fake_env;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A document and its checker: fields by top-level key, errors as check-config prints them.
class document {
 public:
  explicit document(std::string yaml, env_map env = {})
      : text_(std::move(yaml)),
        getenv_(fake_env(std::move(env))),
        checker_("t.yaml", text_, getenv_),
        root_(YAML::Load(text_)) {}

  checker& c() { return checker_; }

  // The value at `key` of the root mapping, as a section reader sees it.
  [[nodiscard]] field at(const std::string& key, bool secret = false) const {
    for (auto it = root_.begin(); it != root_.end(); ++it) {
      if (it->first.Scalar() == key) return field{it->second, it->first.Mark(), key, secret};
    }
    ADD_FAILURE() << "no key " << key;
    return {};
  }

  [[nodiscard]] std::vector<std::string> errors() {
    std::vector<std::string> out;
    for (const config_error& e : checker_.take_errors()) out.push_back(e.to_string());
    return out;
  }

 private:
  std::string text_;
  getenv_function getenv_;
  checker checker_;
  YAML::Node root_;
};

YAML::Mark mark(int line, int column) {
  YAML::Mark m;
  m.line = line;
  m.column = column;
  return m;
}

TEST(ConfigChecker, ErrorsComeSortedByPositionInTheOrderFoundAtEach) {
  document d("a: 1\n");
  d.c().error(mark(2, 0), "third");
  d.c().error(mark(0, 4), "first");
  d.c().error(mark(0, 4), "second");
  d.c().error(YAML::Mark::null_mark(), "no position");
  EXPECT_FALSE(d.c().ok());
  EXPECT_THAT(d.errors(), ElementsAre("t.yaml: no position", "t.yaml:1:5: first",
                                      "t.yaml:1:5: second", "t.yaml:3:1: third"));
}

TEST(ConfigChecker, AValueErrorIsAtTheValueAfterItsPath) {
  document d("n: 5x\nempty:\n");
  EXPECT_FALSE(d.c().count(d.at("n"), 1, 10));
  // A null value has no position of its own: its key's.
  EXPECT_FALSE(d.c().text(d.at("empty")));
  EXPECT_THAT(d.errors(), ElementsAre("t.yaml:1:4: n: unknown count suffix \"x\" (use k, M or G), "
                                      "got \"5x\"",
                                      "t.yaml:2:1: empty: expected a string, got nothing"));
}

TEST(ConfigChecker, RangesAreStatedAsTheyAreChecked) {
  document d("c: 1\nd: 5ms\nr: 0\nbounded: 2\n");
  EXPECT_FALSE(d.c().count(d.at("c"), 2, kNoLimit));
  EXPECT_FALSE(d.c().duration(d.at("d"), milliseconds(1000), kNoDurationLimit));
  EXPECT_FALSE(d.c().real(d.at("r"), kOpenUnit));
  EXPECT_FALSE(d.c().count(d.at("bounded"), 3, 4));
  EXPECT_THAT(d.errors(), ElementsAre("t.yaml:1:4: c: must be at least 2, got 1",
                                      "t.yaml:2:4: d: must be at least 1s, got 5ms",
                                      "t.yaml:3:4: r: must be in (0, 1), got 0",
                                      "t.yaml:4:10: bounded: must be in [3, 4], got 2"));
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  EXPECT_EQ((real_range{0, true, 1, false}.describe()), "must be in (0, 1]");
  EXPECT_EQ((real_range{0, false, kInfinity, false}.describe()), "must be at least 0");
  EXPECT_EQ((real_range{0, true, kInfinity, false}.describe()), "must be greater than 0");
  EXPECT_TRUE((real_range{0, true, 1, false}.contains(1)));
  EXPECT_FALSE((real_range{0, true, 1, false}.contains(0)));
}

TEST(ConfigChecker, BooleansTakeYesNoOnAndOffInAnyCase) {
  document d("a: YES\nb: off\nc: True\nd: maybe\n");
  EXPECT_EQ(d.c().boolean(d.at("a")), true);
  EXPECT_EQ(d.c().boolean(d.at("b")), false);
  EXPECT_EQ(d.c().boolean(d.at("c")), true);
  EXPECT_EQ(d.c().boolean(d.at("d")), std::nullopt);
  EXPECT_THAT(d.errors(), ElementsAre("t.yaml:4:4: d: expected true or false, got \"maybe\""));
}

TEST(ConfigChecker, AChoiceTakesItsNamesAndItsAliases) {
  document d("a: warning\nb: json\nc: loud\n");
  const std::vector<log_level> levels{log_level::info, log_level::warn};
  EXPECT_EQ(d.c().choice(d.at("a"), levels, {{"warning", log_level::warn}}), log_level::warn);
  EXPECT_EQ(d.c().choice(d.at("b"), std::vector{log_format::text, log_format::json}),
            log_format::json);
  EXPECT_EQ(d.c().choice(d.at("c"), levels), std::nullopt);
  EXPECT_THAT(d.errors(), ElementsAre("t.yaml:3:4: c: expected one of info, warn, got \"loud\""));
}

// A secret's text never shows; the name of a variable it refers to does (a reference).
TEST(ConfigChecker, ASecretsTextStaysOutOfItsSubstitutionErrors) {
  document d("s: \"pa${ss w0rd}\"\nt: \"${UNSET}\"\n");
  EXPECT_FALSE(d.c().text(d.at("s", /*secret=*/true)));
  EXPECT_FALSE(d.c().text(d.at("t", /*secret=*/true)));
  EXPECT_THAT(d.errors(),
              ElementsAre("t.yaml:1:7: s: invalid \"${…}\" in the value (not shown: a secret): a "
                          "variable name is letters, digits and _, not starting with a digit; "
                          "\"$$\" is a literal \"$\"",
                          "t.yaml:2:5: t: environment variable UNSET is not set (write "
                          "${UNSET:-default} to give a default)"));
}

TEST(ConfigChecker, OnlyAScalarThatSubstitutesToNothingIsEmpty) {
  document d("a: \"\"\nb: \"${X:-}\"\nc: \"${X}\"\nd: \"${\"\ne: []\nf: x\n", {{"X", ""}});
  EXPECT_TRUE(d.c().empty_after_substitution(d.at("a")));
  EXPECT_TRUE(d.c().empty_after_substitution(d.at("b")));
  EXPECT_TRUE(d.c().empty_after_substitution(d.at("c")));
  EXPECT_FALSE(d.c().empty_after_substitution(d.at("d")));  // reading it says why
  EXPECT_FALSE(d.c().empty_after_substitution(d.at("e")));
  EXPECT_FALSE(d.c().empty_after_substitution(d.at("f")));
  EXPECT_THAT(d.errors(), IsEmpty());
}

TEST(ConfigChecker, AListGivesEachElementItsPathAndADashForANullEntry) {
  document d("l:\n  - a\n  -\n  - b\n");
  const auto elements = d.c().list(d.at("l"));
  ASSERT_TRUE(elements);
  ASSERT_EQ(elements->size(), 3u);
  EXPECT_EQ((*elements)[0].path, "l[0]");
  EXPECT_EQ((*elements)[2].path, "l[2]");
  EXPECT_EQ(position_of(mark_of((*elements)[1])).line, 3);
  EXPECT_EQ(position_of(mark_of((*elements)[1])).column, 3);
}

TEST(ConfigMapping, UnknownAndDuplicateKeysAreReportedAtTheKey) {
  document d("s:\n  windw: 1\n  metrics: 2\n  top_k: 3\n  top_k: 4\n");
  const mapping m(d.c(), d.at("s"), {"window", "top_k"});
  EXPECT_TRUE(m.valid());
  EXPECT_EQ(m.entries().size(), 1u);
  EXPECT_THAT(d.errors(),
              ElementsAre("t.yaml:2:3: unknown key \"windw\" in s (did you mean \"window\"?)",
                          "t.yaml:3:3: unknown key \"metrics\" in s (known keys: window, top_k)",
                          "t.yaml:5:3: duplicate key \"top_k\" in s (first at line 4)"));
}

TEST(ConfigMapping, ASectionWithoutBodyIsAValidEmptyMapping) {
  document d("s:\nt: [1]\n");
  const mapping empty(d.c(), d.at("s"), {"a"});
  EXPECT_TRUE(empty.valid());
  EXPECT_TRUE(empty.entries().empty());
  const mapping list(d.c(), d.at("t"), {"a"});
  EXPECT_FALSE(list.valid());
  EXPECT_THAT(d.errors(), ElementsAre("t.yaml:2:4: t: expected a mapping, got a list"));
}

// kafka.properties: any key, quoted in the path, and secret when its name says so.
TEST(ConfigMapping, AnyKeyMappingQuotesItsKeysAndMarksSecrets) {
  document d("p:\n  client.id: me\n  sasl.password: pw\n");
  const mapping m(d.c(), d.at("p"), {}, /*any_key=*/true);
  ASSERT_EQ(m.entries().size(), 2u);
  EXPECT_EQ(m.entries()[0].second.path, "p[\"client.id\"]");
  EXPECT_FALSE(m.entries()[0].second.secret);
  EXPECT_EQ(m.entries()[1].second.path, "p[\"sasl.password\"]");
  EXPECT_TRUE(m.entries()[1].second.secret);
  EXPECT_THAT(d.errors(), IsEmpty());
}

TEST(ConfigMapping, AMissingRequiredKeyIsAtTheMappingAndANullValueAtItsKey) {
  document d("s:\n  a: 1\nt:\n  a:\n");
  EXPECT_FALSE(mapping(d.c(), d.at("s"), {"a", "b"}).require("b"));
  EXPECT_FALSE(mapping(d.c(), d.at("t"), {"a"}).require("a"));
  EXPECT_THAT(d.errors(), ElementsAre("t.yaml:2:3: s: missing required key \"b\"",
                                      "t.yaml:4:3: t.a: needs a value"));
}

TEST(ConfigMapping, ReadKeepsTheDefaultForAMissingOrEmptyValue) {
  document d("s:\n  a: \"\"\n  b: 7\n  c: x\n  d:\n");
  const mapping m(d.c(), d.at("s"), {"a", "b", "c", "d", "e"});
  int a = 1;
  int b = 1;
  int c = 1;
  int d_value = 1;
  int e = 1;
  EXPECT_TRUE(m.read("a", a, counts(d.c(), 0)));
  EXPECT_TRUE(m.read("b", b, counts(d.c(), 0)));
  EXPECT_FALSE(m.read("c", c, counts(d.c(), 0)));
  EXPECT_TRUE(m.read("d", d_value, counts(d.c(), 0)));
  EXPECT_TRUE(m.read("e", e, counts(d.c(), 0)));
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 7);
  EXPECT_EQ(c, 1);
  EXPECT_EQ(d_value, 1);
  EXPECT_EQ(e, 1);
  EXPECT_THAT(d.errors(), ElementsAre(::testing::StartsWith("t.yaml:4:6: s.c: expected a count")));
}

TEST(ConfigKeys, OnlyACloseKeyIsSuggested) {
  const std::vector<std::string_view> known{"window", "epsilon", "log", "top_k"};
  EXPECT_EQ(suggest("epsilson", known), "epsilon");
  EXPECT_EQ(suggest("lgo", known), "log");  // a transposition is one edit
  EXPECT_EQ(suggest("logs", known), "log");
  EXPECT_EQ(suggest("metrics", known), std::nullopt);
  EXPECT_EQ(suggest(std::string(1000, 'w'), known), std::nullopt);
}

TEST(ConfigKeys, ALongKeyIsShownCutBeforeAUtf8Character) {
  EXPECT_EQ(shown_key("short"), "short");
  EXPECT_EQ(shown_key(std::string(64, 'k')), std::string(64, 'k'));
  EXPECT_EQ(shown_key(std::string(65, 'k')), std::string(64, 'k') + "…");
  EXPECT_EQ(shown_key(std::string(63, 'k') + "é" + "tail"), std::string(63, 'k') + "…");
}

TEST(ConfigKeys, CountsAreGroupedByThousands) {
  EXPECT_EQ(grouped(0), "0");
  EXPECT_EQ(grouped(999), "999");
  EXPECT_EQ(grouped(1000), "1,000");
  EXPECT_EQ(grouped(27'182'818'285), "27,182,818,285");
}

}  // namespace
}  // namespace sketchd::config_detail
