// The outputs' positions committed with each input offset (processor/output_checkpoints.h):
// the text, and which checkpoint a commit carries.
#include "sketchd/processor/output_checkpoints.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace sketchd {
namespace {

TEST(OutputEnds, TheTextRoundTripsAndIsCompact) {
  const std::vector<output_end> ends = {
      {"unique", 1, 1187}, {"dups.v2", 0, 40}, {"unique", 0, 1200}};
  const std::string text = encode_output_ends(ends, 4000);
  EXPECT_EQ(text, "sketchd-outputs/1 dups.v2=0:40;unique=0:1200,1:1187");
  const auto parsed = parse_output_ends(text);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, (std::vector<output_end>{
                         {"dups.v2", 0, 40}, {"unique", 0, 1200}, {"unique", 1, 1187}}));
}

TEST(OutputEnds, NoEndsOrTooLongATextIsNoText) {
  EXPECT_EQ(encode_output_ends({}, 4000), "");
  std::vector<output_end> many;
  for (std::int32_t p = 0; p < 1000; ++p) many.push_back({"unique", p, 1'000'000'000});
  EXPECT_EQ(encode_output_ends(many, 4000), "");
  EXPECT_FALSE(encode_output_ends(many, 100'000).empty());
}

// Another client's metadata, or a damaged one, is not taken for positions.
TEST(OutputEnds, OtherTextsAreNotPositions) {
  for (const char* text :
       {"", "sketchd-outputs/1 ", "sketchd-outputs/2 unique=0:1", "kafka-streams 1234",
        "sketchd-outputs/1 unique", "sketchd-outputs/1 unique=", "sketchd-outputs/1 unique=0",
        "sketchd-outputs/1 unique=0:", "sketchd-outputs/1 unique=-1:5",
        "sketchd-outputs/1 unique=0:-5", "sketchd-outputs/1 uni que=0:5",
        "sketchd-outputs/1 unique=0:5;", "sketchd-outputs/1 =0:5", "sketchd-outputs/1 unique=0:5x",
        "sketchd-outputs/1 unique=0:99999999999999999999"}) {
    EXPECT_FALSE(parse_output_ends(text)) << text;
  }
}

// A partition assigned when a checkpoint is taken (the assignment's) is forwarded from after
// its ends: a first commit far past what the next checkpoint saw still carries them. Found by
// group_moves under AddressSanitizer: a member read a new partition's first 90 messages in one
// batch before any checkpoint, committed without metadata, stopped, and the next owner
// forwarded 6 of them again.
TEST(OutputCheckpoints, APartitionAssignedAtACheckpointCommitsWithItsEnds) {
  output_checkpoints c;
  c.started(0, 4);  // no checkpoint yet: nothing to carry
  EXPECT_EQ(c.metadata(0, 4, 324), "");
  c.take({{0, 3, 500}}, {{"unique", 0, 100}});  // the assignment's
  c.started(0, 4);
  c.take({{0, 3, 520}, {0, 4, 414}}, {{"unique", 0, 140}});  // read 324..413 at once
  const std::string assignment = encode_output_ends({{"unique", 0, 100}}, 4000);
  EXPECT_EQ(c.metadata(0, 4, 407), assignment);
  EXPECT_EQ(c.metadata(0, 4, 414), encode_output_ends({{"unique", 0, 140}}, 4000));
  EXPECT_EQ(c.metadata(0, 3, 510), assignment);  // other partitions as before
}

// A commit of partition p at C carries the latest checkpoint from which every message at C or
// after was still to be processed (its next offset ≤ C); none when p was processed past C at
// every checkpoint kept, or not at all.
TEST(OutputCheckpoints, ACommitCarriesTheLatestCheckpointBeforeItsMessages) {
  output_checkpoints c;
  EXPECT_EQ(c.metadata(0, 3, 700), "");
  c.take({{0, 3, 500}, {0, 4, 10}}, {{"unique", 0, 100}});
  c.take({{0, 3, 900}, {0, 4, 10}}, {{"unique", 0, 180}});
  const std::string first = encode_output_ends({{"unique", 0, 100}}, 4000);
  const std::string second = encode_output_ends({{"unique", 0, 180}}, 4000);
  EXPECT_EQ(c.metadata(0, 3, 700), first);
  EXPECT_EQ(c.metadata(0, 3, 500), first);
  EXPECT_EQ(c.metadata(0, 3, 900), second);
  EXPECT_EQ(c.metadata(0, 3, 499), "");
  EXPECT_EQ(c.metadata(0, 4, 10), second);  // an idle partition: the latest
  EXPECT_EQ(c.metadata(1, 3, 10'000), "");  // never processed here
}

TEST(OutputCheckpoints, OnlyTheLastOnesAreKept) {
  output_checkpoints c;
  for (std::int64_t i = 0; i < 100; ++i) c.take({{0, 0, i * 10}}, {{"unique", 0, i}});
  EXPECT_EQ(c.metadata(0, 0, 99 * 10), encode_output_ends({{"unique", 0, 99}}, 4000));
  const std::int64_t oldest = 100 - static_cast<std::int64_t>(output_checkpoints::kMaxKept);
  EXPECT_EQ(c.metadata(0, 0, oldest * 10), encode_output_ends({{"unique", 0, oldest}}, 4000));
  EXPECT_EQ(c.metadata(0, 0, oldest * 10 - 1), "");
}

TEST(OutputCheckpoints, ACheckpointTooLongToSendIsCountedAndCarriesNothing) {
  output_checkpoints c;
  std::vector<output_end> many;
  for (std::int32_t p = 0; p < 1000; ++p) many.push_back({"unique", p, 1'000'000'000});
  c.take({{0, 0, 5}}, many);
  EXPECT_EQ(c.too_long(), 1U);
  EXPECT_EQ(c.metadata(0, 0, 5), "");
}

}  // namespace
}  // namespace sketchd
