#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "sketchd/config/yaml_positions.h"

namespace sketchd::config_detail {
namespace {

// Where the positions place a YAML::Mark, 1-based, as "LINE:COL".
std::string at(const YAML::Mark& mark) {
  const source_position p = position_of(mark);
  return std::to_string(p.line) + ":" + std::to_string(p.column);
}

// A mark at a 0-based line and column of `text` (no byte order mark).
YAML::Mark mark_at(const std::string& text, int line, int column) {
  YAML::Mark mark;
  std::size_t pos = 0;
  for (int l = 0; l < line; ++l) pos = text.find('\n', pos) + 1;
  mark.pos = static_cast<int>(pos) + column;
  mark.line = line;
  mark.column = column;
  return mark;
}

TEST(YamlPositions, PositionsAreOneBasedAndANullMarkHasNone) {
  EXPECT_EQ(at(mark_at("ab\ncd\n", 1, 1)), "2:2");
  const source_position none = position_of(YAML::Mark::null_mark());
  EXPECT_EQ(none.line, 0);
  EXPECT_EQ(none.column, 0);
}

// yaml-cpp gives a null entry the mark of the token after it; the `-` is found by going back
// over blank lines and comments.
TEST(YamlPositions, ANullListEntryIsPlacedAtItsDash) {
  const std::string text =
      "list:\n"            // 1
      "  - a\n"            // 2
      "  -\n"              // 3
      "\n"                 // 4
      "  # a comment\n"    // 5
      "  - b\n"            // 6
      "  -   # nothing\n"  // 7
      "next: 1\n";         // 8
  const YAML::Node list = YAML::Load(text)["list"];
  yaml_positions positions(text);
  ASSERT_TRUE(list[1].IsNull());
  EXPECT_EQ(at(list[1].Mark()), "6:3");  // yaml-cpp's: the next entry
  EXPECT_EQ(at(positions.null_entry_mark(list[1].Mark())), "3:3");
  ASSERT_TRUE(list[3].IsNull());
  EXPECT_EQ(at(positions.null_entry_mark(list[3].Mark())), "7:3");
  // The same entry again (through an alias, say): the same answer.
  EXPECT_EQ(at(positions.null_entry_mark(list[1].Mark())), "3:3");
}

TEST(YamlPositions, ANullEntryAtTheEndOfTheFileIsPlacedAtItsDash) {
  const std::string text = "list:\n  - a\n  -\n";
  const YAML::Node list = YAML::Load(text)["list"];
  yaml_positions positions(text);
  ASSERT_TRUE(list[1].IsNull());
  EXPECT_EQ(at(positions.null_entry_mark(list[1].Mark())), "3:3");
}

TEST(YamlPositions, AnExplicitNullOrAnythingButALoneDashKeepsItsMark) {
  const std::string text = "list:\n  - ~\n  - null\nkey: value\nother: 1\n";
  const YAML::Node list = YAML::Load(text)["list"];
  yaml_positions positions(text);
  EXPECT_EQ(at(positions.null_entry_mark(list[0].Mark())), "2:5");
  EXPECT_EQ(at(positions.null_entry_mark(list[1].Mark())), "3:5");
  // Before this mark, "key: value": not a `-`.
  EXPECT_EQ(at(positions.null_entry_mark(mark_at(text, 4, 0))), "5:1");
  // "a-" ends in a dash that is part of a word.
  const std::string word = "k: a-\nb: 1\n";
  yaml_positions word_positions(word);
  EXPECT_EQ(at(word_positions.null_entry_mark(mark_at(word, 1, 0))), "2:1");
}

TEST(YamlPositions, ANullEntryAfterAByteOrderMarkIsPlacedAtItsDash) {
  const std::string text = "\xEF\xBB\xBF-\n- a\n";
  const YAML::Node list = YAML::Load(text);
  yaml_positions positions(text);
  ASSERT_TRUE(list[0].IsNull());
  const YAML::Mark mark = positions.null_entry_mark(list[0].Mark());
  EXPECT_EQ(at(mark), "1:1");
  EXPECT_EQ(mark.pos, 0);  // yaml-cpp's pos leaves the byte order mark out too
}

// The n-th "${" of the value is the n-th of the file from the scalar's start.
TEST(YamlPositions, ADollarBraceIsFoundInEveryScalarStyle) {
  const std::string text =
      "a: \"x ${B} ${C}\"\n"  // 1
      "b: 'it''s ${X}'\n"     // 2
      "c: >\n"                // 3
      "  x\n"                 // 4
      "  ${X}\n";             // 5
  const YAML::Node root = YAML::Load(text);
  yaml_positions positions(text);
  const auto find = [&](const char* key, std::size_t offset) {
    const YAML::Node value = root[key];
    return at(positions.mark_in_scalar(value.Mark(), value.Scalar(), offset));
  };
  EXPECT_EQ(find("a", 2), "1:7");
  EXPECT_EQ(find("a", 7), "1:12");
  EXPECT_EQ(find("b", 5), "2:11");  // after a doubled quote
  EXPECT_EQ(find("c", 2), "5:3");   // on a later line of a folded block
  // An offset that is no "${" of the value: the scalar's own mark.
  EXPECT_EQ(find("a", 0), "1:4");
}

// An escaped line break between "$" and "{" makes a "${" the file does not hold: the search
// stops at the scalar's closing quote, or at the next node for a plain scalar, and the
// variable's name must match.
TEST(YamlPositions, ADollarBraceIsNeverLookedForOutsideItsScalar) {
  const std::string text =
      "a: \"$\\\n"         // 1
      "  {UNSET}\"\n"      // 2
      "b: \"${UNSET}\"\n"  // 3
      "c: plain\n"         // 4
      "d: ${Y}\n";         // 5
  const YAML::Node root = YAML::Load(text);
  yaml_positions positions(text);
  const YAML::Node a = root["a"];
  ASSERT_EQ(a.Scalar(), "${UNSET}");
  EXPECT_EQ(at(positions.mark_in_scalar(a.Mark(), a.Scalar(), 0)), "1:4");

  // Without the nodes' starts a plain scalar runs to the end of the file.
  const YAML::Node c = root["c"];
  EXPECT_EQ(at(positions.mark_in_scalar(c.Mark(), "${Y}", 0)), "5:4");
  std::vector<int> starts;
  for (auto it = root.begin(); it != root.end(); ++it) {
    starts.push_back(it->first.Mark().pos);
    starts.push_back(it->second.Mark().pos);
  }
  positions.set_node_starts(starts);
  EXPECT_EQ(at(positions.mark_in_scalar(c.Mark(), "${Y}", 0)), "4:4");
  // A "${" of another variable is not the one the value is about.
  const YAML::Node d = root["d"];
  EXPECT_EQ(at(positions.mark_in_scalar(d.Mark(), "${Z}", 0)), "5:4");
}

TEST(YamlPositions, TheByteAtAMarkSkipsAByteOrderMark) {
  const std::string text = "ab\ncd";
  const yaml_positions positions(text);
  EXPECT_EQ(positions.byte_at(mark_at(text, 1, 1)), 'd');
  EXPECT_EQ(positions.byte_at(mark_at(text, 1, 5)), '\0');
  EXPECT_EQ(positions.byte_at(mark_at(text, 3, 0)), '\0');
  const std::string bom = "\xEF\xBB\xBF,x";
  EXPECT_EQ(yaml_positions(bom).byte_at(YAML::Mark()), ',');
}

TEST(YamlPositions, TheFirstLineIndentedWithATabIsNamed) {
  EXPECT_EQ(yaml_positions("a:\n  b: 1\n\tc: 2\n\td: 3\n").first_tab_indented_line(), 3u);
  EXPECT_EQ(yaml_positions("a:\n  \tb: 1\n").first_tab_indented_line(), 2u);
  EXPECT_EQ(yaml_positions("a: \"x\ty\"\n").first_tab_indented_line(), std::nullopt);
  EXPECT_EQ(yaml_positions("").first_tab_indented_line(), std::nullopt);
}

}  // namespace
}  // namespace sketchd::config_detail
