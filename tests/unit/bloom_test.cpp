#include "sketch/bloom.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "sketch/bloom_math.h"
#include "sketch/counting_bloom.h"
#include "sketch/hash.h"
#include "sketch/serialize.h"

namespace sketch {
namespace {

using ::testing::HasSubstr;

// Item i of a test: the hash of its 8 bytes, as the daemon hashes an item's bytes.
// Inserted items use i < 2^62, absent ones i >= 2^62, so the two sets never meet.
hash128 item(std::uint64_t i) { return hash_bytes(&i, sizeof i, kDefaultSeed); }
constexpr std::uint64_t kAbsent = std::uint64_t{1} << 62;

std::uint64_t popcount(const bloom_filter& f) {
  std::uint64_t set = 0;
  for (const std::uint64_t w : f.words()) set += static_cast<std::uint64_t>(std::popcount(w));
  return set;
}

void insert_range(bloom_filter& f, std::uint64_t begin, std::uint64_t end) {
  for (std::uint64_t i = begin; i < end; ++i) f.insert(item(i));
}

TEST(BloomFilter, ConstructorRejectsBadParameters) {
  EXPECT_THAT([] { bloom_filter(0, 3); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("bits")));
  EXPECT_THAT([] { bloom_filter(bloom_filter::kMaxBits + 1, 3); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("bits")));
  EXPECT_THAT([] { bloom_filter(1000, 0); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("hashes")));
  EXPECT_THAT([] { bloom_filter(1000, 65); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("hashes")));
  EXPECT_NO_THROW(bloom_filter(1, 1));
  EXPECT_NO_THROW(bloom_filter(1000, 64));
}

TEST(BloomFilter, ForCapacityUsesTheSuggestedSizing) {
  const bloom_filter f = bloom_filter::for_capacity(100'000, 0.01, 42);
  const bloom_math::sizing s = bloom_math::suggest_classic(100'000, 0.01);
  EXPECT_EQ(f.bits(), s.bits);
  EXPECT_EQ(f.hashes(), s.hashes);
  EXPECT_EQ(f.seed(), 42u);
  EXPECT_EQ(f.size_bytes(), (s.bits + 63) / 64 * 8);
  EXPECT_THROW((void)bloom_filter::for_capacity(0, 0.01), std::invalid_argument);
  EXPECT_THROW((void)bloom_filter::for_capacity(100, 1.0), std::invalid_argument);
}

TEST(BloomFilter, EmptyFilterContainsNothing) {
  const bloom_filter f(10'000, 7);
  for (std::uint64_t i = 0; i < 10'000; ++i) ASSERT_FALSE(f.contains(item(i)));
  EXPECT_EQ(f.bits_set(), 0u);
  EXPECT_EQ(f.fill_ratio(), 0.0);
  EXPECT_EQ(f.estimated_fpr(), 0.0);
  EXPECT_EQ(f.estimated_items(), 0.0);
}

// 200,000 items into filters from heavily overloaded (1 bit per item) to roomy, including
// sizes that are not a multiple of 64: every inserted item is found.
TEST(BloomFilter, NeverGivesAFalseNegative) {
  constexpr std::uint64_t kItems = 200'000;
  for (const std::uint64_t bits : {kItems, 4 * kItems + 13, 10 * kItems}) {
    bloom_filter f(bits, bloom_math::optimal_hashes(static_cast<double>(bits) / kItems));
    insert_range(f, 0, kItems);
    for (std::uint64_t i = 0; i < kItems; ++i) ASSERT_TRUE(f.contains(item(i))) << bits << " " << i;
  }
}

// Any m >= 1 works, the bits from m up stay zero, and the count of set bits is exact.
TEST(BloomFilter, AnySizeWorks) {
  for (const std::uint64_t bits : {1, 2, 63, 64, 65, 1000}) {
    bloom_filter f(bits, 3);
    insert_range(f, 0, 100);
    for (std::uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(f.contains(item(i)));
    EXPECT_LE(f.bits_set(), bits);
    EXPECT_EQ(f.bits_set(), popcount(f));
    EXPECT_EQ(f.size_bytes(), (bits + 63) / 64 * 8);
    if (bits % 64 != 0) {
      EXPECT_EQ(f.words().back() >> (bits % 64), 0u) << bits;
    }
  }
  bloom_filter one(1, 5);
  one.insert(item(0));
  EXPECT_TRUE(one.contains(item(kAbsent)));  // a single set bit answers yes to everything
  EXPECT_EQ(one.fill_ratio(), 1.0);
  EXPECT_EQ(one.estimated_items(), std::numeric_limits<double>::infinity());
}

// The measured false-positive rate against fpr_exact, for m/n = 8, 10, 16, n from 10,000
// to 200,000, at half and full load, 10^6 absent queries each.
// Tolerance, summed because each part is a bound of its own:
//  - query sampling: given the filter, each absent query is a false positive
//    independently with the filter's own rate, so the count is binomial; 5 standard
//    deviations, 5·sqrt(p(1-p)/Q);
//  - the filter's own randomness: its fill f has sd at most sqrt(q(1-q)/m) (q = 1 - f;
//    the empty-bit indicators are negatively associated, so the variance of their sum is
//    at most m·q(1-q)); its rate f^k moves by k·p·sd(f)/f per unit of sd(f); 5 sd;
//  - model error, 1% of p: fpr_exact assumes k independent indices, ours come from
//    one hash by enhanced double hashing, each value mixed (sketch/hash.h; Kirsch &
//    Mitzenmacher 2006: double hashing has the same asymptotic rate, the gap O(1/m)), and an item's
//    own indices coincide with probability about k^2/(2m), at most 5e-4 here; E[f^k] differs from
//    E[f]^k by O(k^2·var(f)) relative, below 1e-4 here. 1% bounds all of them with room.
// The fill itself is checked against 1 - (1 - 1/m)^{kn} within 5·sqrt(q(1-q)/m) + 1/m.
// The rate is checked where Q·p ≥ 100 false positives are expected, so that the tolerance
// is under half of p: everywhere but m/n = 16 at half load (p = 1.3e-6, about one false
// positive in 10^6 queries), where only the fill is.
TEST(BloomFilter, MeasuredFalsePositiveRateMatchesTheFormula) {
  constexpr std::uint64_t kQueries = 1'000'000;
  struct config {
    std::uint64_t items;
    std::uint64_t bits_per_item;
  };
  std::uint64_t next_query = kAbsent;
  for (const config c : {config{10'000, 8}, config{50'000, 10}, config{200'000, 16}}) {
    const std::uint64_t m = c.items * c.bits_per_item;
    const std::uint32_t k = bloom_math::optimal_hashes(static_cast<double>(c.bits_per_item));
    bloom_filter f(m, k);
    std::uint64_t inserted = 0;
    for (const std::uint64_t load : {c.items / 2, c.items}) {
      insert_range(f, inserted, load);
      inserted = load;
      SCOPED_TRACE(testing::Message() << "m = " << m << ", k = " << k << ", n = " << load);

      const auto md = static_cast<double>(m);
      const double q = std::exp(k * static_cast<double>(load) * std::log1p(-1.0 / md));
      const double fill_sd = std::sqrt(q * (1 - q) / md);
      EXPECT_NEAR(f.fill_ratio(), 1 - q, 5 * fill_sd + 1 / md);

      const double p = bloom_math::fpr_exact(md, static_cast<double>(load), k);
      if (p * kQueries < 100) continue;
      std::uint64_t false_positives = 0;
      for (std::uint64_t i = 0; i < kQueries; ++i) {
        false_positives += f.contains(item(next_query++)) ? 1 : 0;
      }
      const double measured = static_cast<double>(false_positives) / kQueries;
      const double tolerance =
          5 * std::sqrt(p * (1 - p) / kQueries) + 5 * k * p * fill_sd / (1 - q) + 0.01 * p;
      EXPECT_NEAR(measured, p, tolerance) << "false positives: " << false_positives;
    }
  }
}

// Small filters, where the index sequence shows: plain double hashing with multiply-shift
// reduction gives the items whose b lies near p/q · 2^64 (q <= k) only about q distinct
// indices, about k/m of all items, and measured 1.46e-3 here for a target of 1e-3 (+46%).
// R = 1,000 filters of m = 720, k = 10, n = 50 (fpr_exact = 9.94e-4), Q = 10,000 absent
// queries each. Tolerance, summed:
//  - query sampling over R·Q queries: 5·sqrt(p/(R·Q)), 5% of p;
//  - the filters' own randomness: one filter's rate f^k moves by k·sd(f)/f relative, with
//    sd(f) <= sqrt(q(1-q)/m) (as above), 0.37 here; the mean of R filters, 5 sd of it,
//    5 · 0.37/sqrt(R) = 5.9% of p;
//  - E[f^k] >= E[f]^k: above it by at most C(k,2)·var(f)/f^2 relative (second order),
//    6.3% here, allowed on the upper side only.
TEST(BloomFilter, SmallFiltersKeepTheirFalsePositiveRate) {
  constexpr std::uint64_t kBits = 720;
  constexpr std::uint32_t kHashes = 10;
  constexpr std::uint64_t kItems = 50;
  constexpr std::uint64_t kFilters = 1'000;
  constexpr std::uint64_t kQueriesEach = 10'000;
  std::uint64_t next_item = 0;
  std::uint64_t next_query = kAbsent;
  std::uint64_t false_positives = 0;
  for (std::uint64_t r = 0; r < kFilters; ++r) {
    bloom_filter f(kBits, kHashes);
    insert_range(f, next_item, next_item + kItems);
    next_item += kItems;
    for (std::uint64_t i = 0; i < kQueriesEach; ++i) {
      false_positives += f.contains(item(next_query++)) ? 1 : 0;
    }
  }
  const double queries = static_cast<double>(kFilters * kQueriesEach);
  const double measured = static_cast<double>(false_positives) / queries;
  const double p = bloom_math::fpr_exact(kBits, kItems, kHashes);
  const double q = std::exp(kHashes * static_cast<double>(kItems) * std::log1p(-1.0 / kBits));
  const double fill_var = q * (1 - q) / kBits;
  const double per_filter_sd = kHashes * std::sqrt(fill_var) / (1 - q);
  const double spread =
      5 * std::sqrt(p / queries) + 5 * p * per_filter_sd / std::sqrt(static_cast<double>(kFilters));
  const double second_order = p * (kHashes * (kHashes - 1) / 2.0) * fill_var / ((1 - q) * (1 - q));
  EXPECT_GE(measured, p - spread) << "false positives: " << false_positives;
  EXPECT_LE(measured, p + second_order + spread) << "false positives: " << false_positives;
}

TEST(BloomFilter, TestAndInsertReportsWhetherTheItemWasPresent) {
  bloom_filter f(10'000, 7);
  EXPECT_FALSE(f.test_and_insert(item(1)));
  EXPECT_TRUE(f.test_and_insert(item(1)));
  EXPECT_TRUE(f.contains(item(1)));
  EXPECT_FALSE(f.test_and_insert("apple"));
  EXPECT_TRUE(f.test_and_insert("apple"));
  EXPECT_TRUE(f.contains("apple"));
}

// test_and_insert is exactly contains() followed by insert(), including false positives:
// a small filter (4 bits per item) is driven through both and must agree at every step.
TEST(BloomFilter, TestAndInsertEqualsContainsThenInsert) {
  bloom_filter fused(80'000, 3);
  bloom_filter separate(80'000, 3);
  std::uint64_t already_present = 0;
  for (std::uint64_t i = 0; i < 20'000; ++i) {
    const hash128 h = item(i % 15'000);  // the last 5,000 are repeats
    const bool expected = separate.contains(h);
    separate.insert(h);
    ASSERT_EQ(fused.test_and_insert(h), expected) << i;
    already_present += expected ? 1 : 0;
  }
  EXPECT_EQ(fused, separate);
  EXPECT_GT(already_present, 5'000u);  // the repeats, plus some false positives
}

// The incrementally kept count of set bits equals a rescan of the array, through inserts
// (with repeats), set operations and clear.
TEST(BloomFilter, FillRatioEqualsARescan) {
  bloom_filter f(100'003, 5);
  for (std::uint64_t i = 0; i < 30'000; ++i) {
    f.insert(item(i % 20'000));
    if (i % 997 == 0) {
      ASSERT_EQ(f.bits_set(), popcount(f)) << i;
    }
  }
  EXPECT_EQ(f.bits_set(), popcount(f));
  EXPECT_DOUBLE_EQ(f.fill_ratio(), static_cast<double>(popcount(f)) / 100'003);
  EXPECT_DOUBLE_EQ(f.estimated_fpr(), std::pow(f.fill_ratio(), 5));
  f.clear();
  EXPECT_EQ(f.bits_set(), 0u);
  EXPECT_EQ(popcount(f), 0u);
  EXPECT_FALSE(f.contains(item(1)));
}

// n̂ = -(m/k) ln(Z/m), Z the number of zero bits. By the delta method,
// sd(n̂) = (m/k)·sd(Z)/E[Z] <= (m/k)·sqrt(m q(1-q))/(m q) = sqrt(m (1-q)/q)/k, with
// q = (1 - 1/m)^{kn}; the bias -(m/k)·kn·ln(1 - 1/m) - n = n/(2m) + ... is below one item.
// Tolerance 5 sd + 1: for m = 10^6, k = 7 that is about 0.7% of n at n = 10^5 and 0.6% at
// 2·10^5, well within "a few percent". Repeated items do not move the estimate.
TEST(BloomFilter, EstimatedItemsIsCloseToTheDistinctCount) {
  constexpr std::uint64_t kBits = 1'000'000;
  constexpr std::uint32_t kHashes = 7;
  bloom_filter f(kBits, kHashes);
  std::uint64_t inserted = 0;
  for (const std::uint64_t n : {25'000, 100'000, 200'000}) {
    insert_range(f, inserted, n);
    inserted = n;
    const double q = std::exp(kHashes * static_cast<double>(n) * std::log1p(-1.0 / kBits));
    const double sd = std::sqrt(kBits * (1 - q) / q) / kHashes;
    EXPECT_NEAR(f.estimated_items(), static_cast<double>(n), 5 * sd + 1) << n;
  }
  const double before = f.estimated_items();
  insert_range(f, 0, 50'000);
  EXPECT_EQ(f.estimated_items(), before);
}

// Lecture 002: F_M ∨ F_N = F_{M ∪ N}, bit for bit.
TEST(BloomFilter, UnionIsTheFilterOfBothSets) {
  bloom_filter a(300'000, 7, 9);
  bloom_filter b(300'000, 7, 9);
  bloom_filter both(300'000, 7, 9);
  insert_range(a, 0, 20'000);
  insert_range(b, 10'000, 40'000);
  insert_range(both, 0, 40'000);
  ASSERT_TRUE(a.compatible(b));
  a.union_with(b);
  for (std::uint64_t i = 0; i < 40'000; ++i) ASSERT_TRUE(a.contains(item(i))) << i;
  EXPECT_EQ(a, both);
  EXPECT_EQ(a.bits_set(), popcount(a));
}

// Lecture 002: F_M ∧ F_N ⊇ F_{M ∩ N}: every common item is contained, and every bit of the
// filter built from the common items alone is set in the intersection.
TEST(BloomFilter, IntersectionContainsTheCommonItems) {
  bloom_filter a(300'000, 7);
  bloom_filter b(300'000, 7);
  bloom_filter common(300'000, 7);
  insert_range(a, 0, 30'000);
  insert_range(b, 20'000, 50'000);
  insert_range(common, 20'000, 30'000);
  a.intersect_with(b);
  for (std::uint64_t i = 20'000; i < 30'000; ++i) ASSERT_TRUE(a.contains(item(i))) << i;
  EXPECT_EQ(a.bits_set(), popcount(a));
  EXPECT_GE(a.bits_set(), common.bits_set());
  for (std::size_t w = 0; w < a.words().size(); ++w) {
    ASSERT_EQ(common.words()[w] & ~a.words()[w], 0u) << "word " << w;
  }
}

TEST(BloomFilter, IncompatibleSetOperationsThrowAndLeaveTheFilterUnchanged) {
  bloom_filter f(1024, 5, 1);
  insert_range(f, 0, 100);
  const bloom_filter before = f;
  const bloom_filter other_bits(2048, 5, 1);
  const bloom_filter other_hashes(1024, 6, 1);
  const bloom_filter other_seed(1024, 5, 2);
  EXPECT_FALSE(f.compatible(other_bits));
  EXPECT_FALSE(f.compatible(other_hashes));
  EXPECT_FALSE(f.compatible(other_seed));
  EXPECT_THAT([&] { f.union_with(other_bits); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("bits differ")));
  EXPECT_THAT([&] { f.union_with(other_hashes); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("hashes differ")));
  EXPECT_THAT([&] { f.intersect_with(other_seed); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("seeds differ")));
  EXPECT_THAT([&] { f.intersect_with(other_bits); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("bits differ")));
  EXPECT_EQ(f, before);
}

// With multiply-shift reduction, index = reduce(g, m) = the top log2(m) bits of g, so for
// m a power of two reduce(g, m/2) == reduce(g, m) >> 1: halving folds adjacent bit pairs.
// Every item of the full filter stays contained, and the halved filter equals the filter
// built directly at m/2 from the same items, bit for bit, twice in a row.
TEST(BloomFilter, HalvingEqualsTheFilterBuiltAtHalfTheSize) {
  for (const std::uint64_t g : {0ULL, 1ULL, ~0ULL, 0x8000000000000000ULL, 0x123456789abcdefULL}) {
    for (const std::uint64_t m : {2ULL, 128ULL, 1ULL << 20, 1ULL << 40}) {
      EXPECT_EQ(reduce(g, m / 2), reduce(g, m) >> 1) << g << " " << m;
    }
  }

  constexpr std::uint64_t kBits = std::uint64_t{1} << 16;
  bloom_filter full(kBits, 7, 5);
  insert_range(full, 0, 5'000);
  const bloom_filter half = full.halved();
  EXPECT_EQ(half.bits(), kBits / 2);
  EXPECT_EQ(half.hashes(), 7u);
  EXPECT_EQ(half.seed(), 5u);
  EXPECT_EQ(half.bits_set(), popcount(half));
  for (std::uint64_t i = 0; i < 5'000; ++i) ASSERT_TRUE(half.contains(item(i))) << i;

  bloom_filter direct(kBits / 2, 7, 5);
  insert_range(direct, 0, 5'000);
  EXPECT_EQ(half, direct);

  bloom_filter direct_quarter(kBits / 4, 7, 5);
  insert_range(direct_quarter, 0, 5'000);
  EXPECT_EQ(half.halved(), direct_quarter);

  // The smallest case: 128 bits fold into one word.
  bloom_filter small(128, 2, 5);
  bloom_filter small_direct(64, 2, 5);
  insert_range(small, 0, 10);
  insert_range(small_direct, 0, 10);
  EXPECT_EQ(small.halved(), small_direct);
}

TEST(BloomFilter, HalvingNeedsAPowerOfTwoOfAtLeast128Bits) {
  for (const std::uint64_t bits : {1000ULL, 64ULL, 1ULL, 192ULL}) {
    EXPECT_THAT([bits] { (void)bloom_filter(bits, 3).halved(); },
                testing::ThrowsMessage<std::invalid_argument>(HasSubstr("power of two")))
        << bits;
  }
}

TEST(BloomFilter, SerializationRoundTripsEmptyAndFullFilters) {
  bloom_filter empty(1000, 4, 77);
  const bloom_filter empty_back = bloom_filter::deserialize(empty.serialize());
  EXPECT_EQ(empty_back, empty);
  EXPECT_EQ(empty_back.seed(), 77u);
  EXPECT_EQ(empty_back.bits_set(), 0u);

  bloom_filter full = bloom_filter::for_capacity(20'000, 0.01, 77);
  insert_range(full, 0, 20'000);
  const std::string record = full.serialize();
  const bloom_filter back = bloom_filter::deserialize(record);
  EXPECT_EQ(back, full);
  EXPECT_EQ(back.bits(), full.bits());
  EXPECT_EQ(back.hashes(), full.hashes());
  EXPECT_EQ(back.seed(), 77u);
  EXPECT_EQ(back.bits_set(), full.bits_set());
  EXPECT_EQ(back.fill_ratio(), full.fill_ratio());
  EXPECT_EQ(back.serialize(), record);
  for (std::uint64_t i = 0; i < 40'000; ++i) {
    const std::uint64_t key = i < 20'000 ? i : kAbsent + i;
    ASSERT_EQ(back.contains(item(key)), full.contains(item(key))) << i;
  }
  // Header + payload (8 + 4 + 8 + words) + checksum.
  EXPECT_EQ(record.size(), kHeaderSize + 20 + full.size_bytes() + kTrailerSize);
}

TEST(BloomFilter, CorruptOrTruncatedRecordIsAFormatError) {
  bloom_filter f(1000, 4);
  insert_range(f, 0, 100);
  const std::string record = f.serialize();
  for (const std::size_t at :
       {std::size_t{0}, std::size_t{6}, std::size_t{9}, kHeaderSize, kHeaderSize + 8,
        kHeaderSize + 12, kHeaderSize + 40, record.size() - 1}) {
    std::string corrupt = record;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x10);
    EXPECT_THROW((void)bloom_filter::deserialize(corrupt), format_error) << "byte " << at;
  }
  for (const std::size_t size : {std::size_t{0}, std::size_t{10}, kHeaderSize + kTrailerSize,
                                 record.size() / 2, record.size() - 1}) {
    EXPECT_THROW((void)bloom_filter::deserialize(record.substr(0, size)), format_error) << size;
  }
  EXPECT_THROW((void)bloom_filter::deserialize(record + '\0'), format_error);
  const counting_bloom_filter other(1000, 4);
  EXPECT_THROW((void)bloom_filter::deserialize(other.serialize()), format_error);
}

// Records with a valid checksum but parameters or data the filter cannot hold.
TEST(BloomFilter, RecordWithAWrongParameterIsAFormatError) {
  struct fields {
    std::uint64_t bits = 100;
    std::uint32_t hashes = 3;
    std::uint64_t bits_set = 1;
    std::vector<std::uint64_t> words = {1, 0};
  };
  const auto record_of = [](const fields& v) {
    detail::record_writer out(structure_type::bloom_filter, kDefaultSeed);
    out.u64(v.bits);
    out.u32(v.hashes);
    out.u64(v.bits_set);
    out.bytes(v.words.data(), v.words.size() * sizeof(std::uint64_t));
    return std::move(out).finish();
  };
  const bloom_filter good = bloom_filter::deserialize(record_of(fields{}));
  EXPECT_EQ(good.bits_set(), 1u);
  EXPECT_TRUE(good.words()[0] == 1);

  const auto expect_rejected = [&](const fields& v, const char* why) {
    EXPECT_THAT([&] { (void)bloom_filter::deserialize(record_of(v)); },
                testing::ThrowsMessage<format_error>(HasSubstr(why)));
  };
  fields v;
  v.hashes = 0;
  expect_rejected(v, "hashes");
  v = fields{};
  v.hashes = 65;
  expect_rejected(v, "hashes");
  v = fields{};
  v.bits = 0;
  v.words = {};
  v.bits_set = 0;
  expect_rejected(v, "bits 0");
  v = fields{};
  v.bits = bloom_filter::kMaxBits + 1;  // announces 16 GiB, holds 16 bytes
  expect_rejected(v, "bits");
  v = fields{};
  v.bits_set = 2;
  expect_rejected(v, "bits_set");
  v = fields{};
  v.words = {1};
  expect_rejected(v, "bit array");
  v = fields{};
  v.words = {1, 0, 0};
  expect_rejected(v, "bit array");
  v = fields{};
  v.words = {1, std::uint64_t{1} << 36};  // bit 100, beyond m = 100
  v.bits_set = 2;
  expect_rejected(v, "beyond");
}

TEST(BloomFilter, StringItemsAreHashedWithTheFilterSeed) {
  bloom_filter f(10'000, 5, 1234);
  f.insert("apple");
  EXPECT_TRUE(f.contains("apple"));
  EXPECT_TRUE(f.contains(hash_item("apple", 1234)));
  EXPECT_FALSE(f.contains("pear"));
}

}  // namespace
}  // namespace sketch
