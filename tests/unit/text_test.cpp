#include "sketch/text.h"

#include <gtest/gtest.h>

#include <string>

namespace sketch {
namespace {

TEST(EscapeControls, KeepsPrintableTextAndUtf8) {
  EXPECT_EQ(escape_controls("plain text"), "plain text");
  EXPECT_EQ(escape_controls("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(escape_controls("\xff\xfe"), "\xff\xfe");  // invalid UTF-8 is kept
  EXPECT_EQ(escape_controls("a\\b"), "a\\b");
  EXPECT_EQ(escape_controls("a\\b", true), "a\\\\b");
}

TEST(EscapeControls, EscapesTheAsciiControls) {
  EXPECT_EQ(escape_controls("a\nb\tc"), "a\\nb\\tc");
  EXPECT_EQ(escape_controls(std::string("\x1b[2J\x00\x7f", 6)), "\\x1b[2J\\x00\\x7f");
}

// Characters that a terminal acts on (U+009B is CSI in xterm and VTE), or that reorder
// what is shown around them (a filename-style "invoice\u202Egpj.exe").
TEST(EscapeControls, EscapesC1ControlsSeparatorsAndBidirectionalControls) {
  EXPECT_EQ(escape_controls("\xc2\x9b"
                            "2J"),
            "\\u009b2J");
  EXPECT_EQ(escape_controls("\xc2\x80\xc2\x9f\xc2\xa0"), "\\u0080\\u009f\xc2\xa0");
  EXPECT_EQ(escape_controls("a\xe2\x80\xa8"
                            "b\xe2\x80\xa9"),
            "a\\u2028b\\u2029");
  EXPECT_EQ(escape_controls("invoice\xe2\x80\xae"
                            "gpj.exe"),
            "invoice\\u202egpj.exe");
  EXPECT_EQ(escape_controls("\xe2\x80\xaa\xe2\x81\xa6\xe2\x81\xa9\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c"),
            "\\u202a\\u2066\\u2069\\u200e\\u200f\\u061c");
  // Neighbours that are ordinary text stay.
  EXPECT_EQ(escape_controls("\xe2\x80\x94\xe2\x80\xaf\xe2\x81\xa5"),
            "\xe2\x80\x94\xe2\x80\xaf\xe2\x81\xa5");
  // A truncated sequence is kept as it is.
  EXPECT_EQ(escape_controls("x\xe2\x80"), "x\xe2\x80");
  EXPECT_EQ(escape_controls("x\xc2"), "x\xc2");
}

}  // namespace
}  // namespace sketch
