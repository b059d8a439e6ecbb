#include "sketchd/util/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace sketchd::utf8 {
namespace {

TEST(Utf8Cleaning, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(clean("plain"), "plain");
  EXPECT_EQ(clean("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(clean("a\xff"
                  "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(clean("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");                  // overlong '/'
  EXPECT_EQ(clean("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
  EXPECT_EQ(clean("\xf4\x90\x80\x80"),                                       // above U+10FFFF
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(clean("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // emoji
  // A sequence cut short is one U+FFFD per byte, as any other invalid byte.
  EXPECT_EQ(clean("x\xe2\x82"), "x\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(clean(std::string("a\0b", 3)), std::string("a\0b", 3));  // NUL is valid UTF-8
}

TEST(Utf8Cleaning, CutsAtMostMaxBytesOnACharacterBoundary) {
  const std::string long_ascii(300, 'a');
  EXPECT_EQ(clean(long_ascii, 128).size(), 128u);
  EXPECT_EQ(clean(long_ascii).size(), 300u);  // no limit by default
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xe2\x82\xac";  // 3 bytes each
  const std::string cut = clean(euros, 128);
  EXPECT_EQ(cut.size(), 126u);  // 42 whole characters; a 43rd would make 129 bytes
  EXPECT_EQ(clean(cut, 128), cut);
  // A replacement is a character of 3 bytes too.
  EXPECT_EQ(clean("ab\xff", 4), "ab");
  EXPECT_EQ(clean("ab\xff", 5), "ab\xef\xbf\xbd");
}

TEST(Utf8Validity, AcceptsWhatCleaningKeeps) {
  for (const std::string s : {"plain", "caf\xc3\xa9", "\xf0\x9f\x98\x80", ""}) {
    EXPECT_TRUE(valid(s)) << s;
    EXPECT_EQ(clean(s), s);
  }
  for (const std::string s :
       {"a\xff", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "x\xe2\x82"}) {
    EXPECT_FALSE(valid(s)) << s;
    EXPECT_TRUE(valid(clean(s))) << s;
    EXPECT_NE(clean(s), s);
  }
}

}  // namespace
}  // namespace sketchd::utf8
