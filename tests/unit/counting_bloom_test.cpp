#include "sketch/counting_bloom.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sketch/bloom.h"
#include "sketch/bloom_math.h"
#include "sketch/hash.h"
#include "sketch/serialize.h"

namespace sketch {
namespace {

using ::testing::HasSubstr;

// Item i of a test: the hash of its 8 bytes. Inserted items use i < 2^62, absent ones
// i >= 2^62.
hash128 item(std::uint64_t i) { return hash_bytes(&i, sizeof i, kDefaultSeed); }
constexpr std::uint64_t kAbsent = std::uint64_t{1} << 62;

TEST(CountingBloom, ConstructorRejectsBadParameters) {
  EXPECT_THAT([] { counting_bloom_filter(0, 3); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("counters")));
  EXPECT_THAT([] { counting_bloom_filter(counting_bloom_filter::kMaxCounters + 1, 3); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("counters")));
  EXPECT_THAT([] { counting_bloom_filter(100, 0); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("hashes")));
  EXPECT_THAT([] { counting_bloom_filter(100, 65); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("hashes")));
  EXPECT_THROW((void)counting_bloom_filter::for_capacity(0, 0.01), std::invalid_argument);
  EXPECT_THROW((void)counting_bloom_filter::for_capacity(10, 0.0), std::invalid_argument);
}

// One 4-bit counter per bit of the classic sizing, two per byte.
TEST(CountingBloom, ForCapacityHasOneCounterPerBitOfTheClassicSizing) {
  const counting_bloom_filter f = counting_bloom_filter::for_capacity(10'000, 0.01, 3);
  const bloom_math::sizing s = bloom_math::suggest_classic(10'000, 0.01);
  EXPECT_EQ(f.counters(), s.bits);
  EXPECT_EQ(f.hashes(), s.hashes);
  EXPECT_EQ(f.seed(), 3u);
  EXPECT_EQ(f.size_bytes(), (s.bits + 1) / 2);
  EXPECT_EQ(counting_bloom_filter(7, 2).size_bytes(), 4u);
}

TEST(CountingBloom, InsertedItemIsContainedAndRemovalRestoresAbsence) {
  counting_bloom_filter f(10'000, 5);
  const counting_bloom_filter empty = f;
  EXPECT_FALSE(f.contains("apple"));
  f.insert("apple");
  EXPECT_TRUE(f.contains("apple"));
  EXPECT_TRUE(f.contains(hash_item("apple", f.seed())));
  EXPECT_TRUE(f.remove("apple"));
  EXPECT_FALSE(f.contains("apple"));
  EXPECT_EQ(f, empty);  // every counter back to zero
}

// An item inserted twice needs two removals.
TEST(CountingBloom, CountsMultipleInsertions) {
  counting_bloom_filter f(10'000, 5);
  f.insert(item(1));
  f.insert(item(1));
  EXPECT_TRUE(f.remove(item(1)));
  EXPECT_TRUE(f.contains(item(1)));
  EXPECT_TRUE(f.remove(item(1)));
  EXPECT_FALSE(f.contains(item(1)));
  EXPECT_FALSE(f.remove(item(1)));
}

TEST(CountingBloom, RemovingAnAbsentItemChangesNothing) {
  counting_bloom_filter f(10'000, 5);
  for (std::uint64_t i = 0; i < 200; ++i) f.insert(item(i));
  const counting_bloom_filter before = f;
  std::uint64_t removed = 0;
  for (std::uint64_t i = 0; i < 10'000; ++i) {
    const hash128 h = item(kAbsent + i);
    if (!f.contains(h)) {
      EXPECT_FALSE(f.remove(h));
    } else {
      ++removed;  // a false positive: remove() would act; skip it
    }
  }
  EXPECT_EQ(f, before);
  EXPECT_LT(removed, 10'000u);
}

// Insert A ∪ B (20,000 items, 10 counters per item, k = 7), remove A: every item of B is
// still contained (no false negatives), and the items of A are now absent except for
// false positives of a filter holding B alone, whose rate is fpr_exact(m, |B|, k) =
// 1.96e-4 here; the count of survivors among the 10,000 items of A is binomial, so it is
// at most 10,000·p + 5·sqrt(10,000·p(1-p)) + 1% of p (the model error of the FPR test
// in bloom_test.cpp), about 9.
// Every counter is also back to what inserting B alone gives, because no counter
// saturated: a counter's load is about Poisson(kn/m = 0.7), which reaches 15 with
// probability 1.9e-15, so 4e-10 over all 200,000 counters.
TEST(CountingBloom, RemovingSomeItemsKeepsTheOthers) {
  constexpr std::uint64_t kEach = 10'000;
  constexpr std::uint64_t kCounters = 200'000;
  constexpr std::uint32_t kHashes = 7;
  counting_bloom_filter f(kCounters, kHashes);
  counting_bloom_filter only_b(kCounters, kHashes);
  for (std::uint64_t i = 0; i < 2 * kEach; ++i) f.insert(item(i));
  for (std::uint64_t i = kEach; i < 2 * kEach; ++i) only_b.insert(item(i));
  for (std::uint64_t i = 0; i < kEach; ++i) ASSERT_TRUE(f.remove(item(i))) << i;
  for (std::uint64_t i = kEach; i < 2 * kEach; ++i) ASSERT_TRUE(f.contains(item(i))) << i;
  EXPECT_EQ(f, only_b);

  std::uint64_t survivors = 0;
  for (std::uint64_t i = 0; i < kEach; ++i) survivors += f.contains(item(i)) ? 1 : 0;
  const double p = bloom_math::fpr_exact(kCounters, kEach, kHashes);
  const double n = kEach;
  EXPECT_LE(static_cast<double>(survivors), n * p + 5 * std::sqrt(n * p * (1 - p)) + 0.01 * n * p);
}

// With one counter and one hash function every item shares counter 0. After 20
// insertions it is saturated at 15 and must stay there: 20 removals leave every item
// contained. Without the rule, the 16th removal would reach zero and the items not yet
// removed would become false negatives.
TEST(CountingBloom, SaturatedCounterIsStickySoNoFalseNegativeArises) {
  counting_bloom_filter f(1, 1);
  for (std::uint64_t i = 0; i < 20; ++i) f.insert(item(i));
  for (std::uint64_t i = 0; i < 20; ++i) {
    EXPECT_TRUE(f.remove(item(i))) << i;
    for (std::uint64_t j = i + 1; j < 20; ++j) ASSERT_TRUE(f.contains(item(j))) << i << " " << j;
  }
  EXPECT_TRUE(f.contains(item(0)));  // still saturated
  const counting_bloom_filter back = counting_bloom_filter::deserialize(f.serialize());
  EXPECT_TRUE(back.contains(item(0)));
}

// Below saturation the same single counter counts exactly.
TEST(CountingBloom, CounterBelowSaturationCountsExactly) {
  counting_bloom_filter f(1, 1);
  for (std::uint64_t i = 0; i < 14; ++i) f.insert(item(i));
  for (std::uint64_t i = 0; i < 14; ++i) EXPECT_TRUE(f.remove(item(i))) << i;
  EXPECT_FALSE(f.contains(item(0)));
  EXPECT_FALSE(f.remove(item(0)));
}

// The two counters of a byte are independent: saturating one nibble never carries into or
// borrows from the other. With 2 counters and k = 1 an item's counter is
// index_sequence(h, 2).next().
TEST(CountingBloom, CountersSharingAByteAreIndependent) {
  std::uint64_t on[2] = {0, 0};
  bool found[2] = {false, false};
  for (std::uint64_t i = 0; !(found[0] && found[1]); ++i) {
    const std::uint64_t c = index_sequence(item(i), 2).next();
    if (!found[c]) {
      on[c] = i;
      found[c] = true;
    }
  }
  for (const int full : {0, 1}) {
    const int other = 1 - full;
    SCOPED_TRACE(testing::Message() << "saturated counter " << full);
    counting_bloom_filter f(2, 1);
    for (int t = 0; t < 30; ++t) f.insert(item(on[full]));
    EXPECT_TRUE(f.contains(item(on[full])));
    EXPECT_FALSE(f.contains(item(on[other])));
    f.insert(item(on[other]));
    EXPECT_TRUE(f.remove(item(on[other])));
    EXPECT_FALSE(f.contains(item(on[other])));
    EXPECT_TRUE(f.contains(item(on[full])));
  }
}

TEST(CountingBloom, SerializationRoundTripsEmptyAndFullFilters) {
  const counting_bloom_filter empty(1001, 4, 9);
  EXPECT_EQ(counting_bloom_filter::deserialize(empty.serialize()), empty);

  counting_bloom_filter full = counting_bloom_filter::for_capacity(5'000, 0.01, 9);
  for (std::uint64_t i = 0; i < 5'000; ++i) full.insert(item(i % 4'000));
  const std::string record = full.serialize();
  const counting_bloom_filter back = counting_bloom_filter::deserialize(record);
  EXPECT_EQ(back, full);
  EXPECT_EQ(back.seed(), 9u);
  EXPECT_EQ(back.serialize(), record);
  EXPECT_EQ(record.size(), kHeaderSize + 12 + full.size_bytes() + kTrailerSize);
  for (std::uint64_t i = 0; i < 8'000; ++i) {
    const std::uint64_t key = i < 4'000 ? i : kAbsent + i;
    ASSERT_EQ(back.contains(item(key)), full.contains(item(key))) << i;
  }
}

TEST(CountingBloom, CorruptTruncatedOrForeignRecordIsAFormatError) {
  counting_bloom_filter f(1001, 4);
  for (std::uint64_t i = 0; i < 50; ++i) f.insert(item(i));
  const std::string record = f.serialize();
  for (const std::size_t at : {std::size_t{0}, std::size_t{6}, kHeaderSize, kHeaderSize + 9,
                               kHeaderSize + 100, record.size() - 1}) {
    std::string corrupt = record;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x01);
    EXPECT_THROW((void)counting_bloom_filter::deserialize(corrupt), format_error) << at;
  }
  for (const std::size_t size : {std::size_t{0}, kHeaderSize, record.size() - 1}) {
    EXPECT_THROW((void)counting_bloom_filter::deserialize(record.substr(0, size)), format_error);
  }
  EXPECT_THROW((void)counting_bloom_filter::deserialize(bloom_filter(1001, 4).serialize()),
               format_error);
}

// Records with a valid checksum but parameters or data the filter cannot hold.
TEST(CountingBloom, RecordWithAWrongParameterIsAFormatError) {
  const auto record_of = [](std::uint64_t counters, std::uint32_t hashes,
                            const std::vector<std::uint8_t>& cells) {
    detail::record_writer out(structure_type::counting_bloom_filter, kDefaultSeed);
    out.u64(counters);
    out.u32(hashes);
    out.bytes(cells.data(), cells.size());
    return std::move(out).finish();
  };
  EXPECT_NO_THROW((void)counting_bloom_filter::deserialize(record_of(3, 2, {0x21, 0x0f})));
  const auto expect_rejected = [](const std::string& record, const char* why) {
    EXPECT_THAT([&] { (void)counting_bloom_filter::deserialize(record); },
                testing::ThrowsMessage<format_error>(HasSubstr(why)));
  };
  expect_rejected(record_of(0, 2, {}), "counters 0");
  expect_rejected(record_of(counting_bloom_filter::kMaxCounters + 1, 2, {0, 0}), "counters");
  expect_rejected(record_of(3, 0, {0, 0}), "hashes");
  expect_rejected(record_of(3, 65, {0, 0}), "hashes");
  expect_rejected(record_of(3, 2, {0}), "counter array");
  expect_rejected(record_of(3, 2, {0, 0, 0}), "counter array");
  expect_rejected(record_of(3, 2, {0, 0x10}), "high nibble");  // a 4th counter of 3
}

}  // namespace
}  // namespace sketch
