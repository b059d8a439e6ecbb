#include "sketch/hash.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>

#include "sketch/serialize.h"

namespace sketch {
namespace {

TEST(Hash, SameItemAndSeedGiveSameHash) {
  EXPECT_EQ(hash_item("hello", 1), hash_item("hello", 1));
  EXPECT_NE(hash_item("hello", 1), hash_item("hello", 2));
  EXPECT_NE(hash_item("hello", 1), hash_item("hellp", 1));
}

TEST(Hash, ReduceStaysInRange) {
  for (std::uint64_t n : {1ULL, 2ULL, 3ULL, 1000ULL, (1ULL << 40) + 7}) {
    for (std::uint64_t x : {0ULL, 1ULL, ~0ULL, 0x8000000000000000ULL, 12345678901234ULL}) {
      EXPECT_LT(reduce(x, n), n);
    }
  }
  EXPECT_EQ(reduce(~0ULL, 10), 9u);
  EXPECT_EQ(reduce(0, 10), 0u);
}

// Every residue of a small range is hit about equally often: a chi-square test with
// fixed items, 7 bins, 70,000 draws; the 99.9% quantile of chi-square(6) is 22.46.
TEST(Hash, IndicesAreUniform) {
  constexpr int kBins = 7;
  std::array<int, kBins> counts{};
  for (int i = 0; i < 10000; ++i) {
    index_sequence seq(hash_item(std::to_string(i), kDefaultSeed), kBins);
    for (int j = 0; j < 7; ++j) ++counts[seq.next()];
  }
  const double expected = 70000.0 / kBins;
  double chi2 = 0;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 22.46);
}

TEST(Hash, EnhancedDoubleHashingGivesDistinctIndicesInALargeRange) {
  index_sequence seq(hash_item("item", 7), 1ULL << 32);
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 16; ++i) seen.insert(seq.next());
  EXPECT_EQ(seen.size(), 16u);
}

TEST(Serialize, RoundTripAndCorruptionDetected) {
  detail::record_writer w(structure_type::count_min_sketch, 42);
  w.u32(7);
  w.f64(0.5);
  w.str("abc");
  const std::string rec = std::move(w).finish();

  detail::record_reader r(rec, structure_type::count_min_sketch);
  EXPECT_EQ(r.seed(), 42u);
  EXPECT_EQ(r.u32(), 7u);
  EXPECT_EQ(r.f64(), 0.5);
  EXPECT_EQ(r.str(), "abc");
  r.done();

  std::string corrupt = rec;
  corrupt[kHeaderSize] ^= 1;
  EXPECT_THROW(detail::record_reader(corrupt, structure_type::count_min_sketch), format_error);
  EXPECT_THROW(
      detail::record_reader(rec.substr(0, rec.size() - 1), structure_type::count_min_sketch),
      format_error);
  EXPECT_THROW(detail::record_reader(rec, structure_type::bloom_filter), format_error);
  EXPECT_THROW(
      detail::record_reader("garbage that is long enough to be read", structure_type::top_k),
      format_error);
}

}  // namespace
}  // namespace sketch
