// The table of outputs a crashed run forwarded (processor/forwarded_outputs.h): each copy
// is taken once, per output and input partition, and dropped with its partition.
#include "sketchd/processor/forwarded_outputs.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace sketchd {
namespace {

TEST(ForwardedOutputs, EachCopyIsTakenOncePerOutputAndPartition) {
  forwarded_outputs f;
  EXPECT_TRUE(f.empty());
  f.add(0, 0, 1, 64);
  f.add(0, 0, 1, 64);  // once
  f.add(0, 0, 1, 127);
  f.add(1, 0, 1, 64);
  f.add(0, 1, 1, 64);
  f.add(0, 0, 1, std::int64_t{1} << 60);  // far away: one word, not a bitmap up to it
  EXPECT_EQ(f.size(), 5u);
  EXPECT_FALSE(f.take(0, 0, 1, 63));
  EXPECT_FALSE(f.take(0, 0, 2, 64));
  EXPECT_TRUE(f.take(0, 0, 1, 64));
  EXPECT_FALSE(f.take(0, 0, 1, 64));
  EXPECT_TRUE(f.take(1, 0, 1, 64));
  EXPECT_TRUE(f.take(0, 0, 1, std::int64_t{1} << 60));
  EXPECT_EQ(f.size(), 2u);
  f.forget(0, 1);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_FALSE(f.take(0, 0, 1, 127));
  EXPECT_TRUE(f.take(0, 1, 1, 64));
  EXPECT_TRUE(f.empty());
}

TEST(ForwardedOutputs, ForgetBeforeDropsTheEarlierOffsetsOfOnePartition) {
  forwarded_outputs f;
  for (std::int64_t o = 0; o < 300; o += 3) f.add(0, 0, 0, o);  // 100 copies
  for (std::int64_t o = 0; o < 300; o += 3) f.add(1, 0, 0, o);
  f.add(0, 0, 1, 5);
  f.forget_before(0, 0, 100);  // 0, 3, …, 99: 34 of each output
  EXPECT_EQ(f.size(), 2 * 66u + 1);
  EXPECT_FALSE(f.take(0, 0, 0, 99));
  EXPECT_TRUE(f.take(0, 0, 0, 102));
  EXPECT_TRUE(f.take(1, 0, 0, 297));
  f.forget_before(0, 0, 1'000);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_TRUE(f.take(0, 0, 1, 5));
  EXPECT_TRUE(f.empty());
}

}  // namespace
}  // namespace sketchd
