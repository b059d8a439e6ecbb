#include "sketch/hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

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

// Each index of a sequence, taken alone, hits every residue of a small range about equally
// often: for each of the first 7 positions, a chi-square test over 10,000 items (fixed
// strings) and 7 bins, against the 99.9% quantile of chi-square(6), 22.46. (The positions
// of one item are not independent draws, so each is tested on its own.)
TEST(Hash, EachIndexOfTheSequenceIsUniform) {
  constexpr int kBins = 7;
  constexpr int kItems = 10'000;
  std::array<std::array<int, kBins>, 7> counts{};
  for (int i = 0; i < kItems; ++i) {
    index_sequence seq(hash_item(std::to_string(i), kDefaultSeed), kBins);
    for (auto& position : counts) ++position[seq.next()];
  }
  const double expected = static_cast<double>(kItems) / kBins;
  for (std::size_t j = 0; j < counts.size(); ++j) {
    double chi2 = 0;
    for (int c : counts[j]) chi2 += (c - expected) * (c - expected) / expected;
    EXPECT_LT(chi2, 22.46) << "position " << j;
  }
}

// Calls `pair(previous, current)` for the P pairs of a chain of items x_0 … x_P, with the
// first K indices of each in [0, range).
template <int K, class F>
void for_each_chained_pair(std::uint64_t range, int pairs, F&& pair) {
  const auto indices = [range](int t) {
    std::array<std::uint64_t, K> out{};
    index_sequence seq(hash_item("item-" + std::to_string(t), kDefaultSeed), range);
    for (auto& index : out) index = seq.next();
    return out;
  };
  auto previous = indices(0);
  for (int t = 1; t <= pairs; ++t) {
    const auto current = indices(t);
    pair(previous, current);
    previous = current;
  }
}

// Count-Min's rows and a Bloom filter's probes take the positions of one sequence, so two
// positions must act as two independent hash functions on pairs of items: two items share
// their indices at positions i and j (of a range of w) with probability 1/w², not 1/w as
// positions repeating one another would give. Items x_0 … x_P in a chain, the P pairs
// (x_t, x_{t+1}); the events of two pairs are independent even when they share an item
// (all three would have to share the indices: 1/w⁴ = (1/w²)²), so each count of the 21
// pairs of positions among the first 7 is Binomial(P, 1/w²): with w = 272 and P = 2,000,000
// its mean is 27.0 and its standard deviation 5.2, and it stays within 5 standard deviations
// except with probability < 1e-5 over all 21.
TEST(Hash, TwoItemsShareTheIndicesOfTwoPositionsWithProbabilityOneOverRangeSquared) {
  constexpr std::uint64_t kRange = 272;
  constexpr int kPairs = 2'000'000;
  constexpr int kPositions = 7;
  std::array<std::array<int, kPositions>, kPositions> shared{};
  for_each_chained_pair<kPositions>(kRange, kPairs, [&](const auto& previous, const auto& current) {
    for (int i = 0; i < kPositions; ++i) {
      if (current[i] != previous[i]) continue;
      for (int j = i + 1; j < kPositions; ++j) shared[i][j] += current[j] == previous[j] ? 1 : 0;
    }
  });
  const double p = 1.0 / static_cast<double>(kRange * kRange);
  const double mean = kPairs * p;
  const double allowance = 5 * std::sqrt(kPairs * p * (1 - p));
  for (int i = 0; i < kPositions; ++i) {
    for (int j = i + 1; j < kPositions; ++j) {
      EXPECT_NEAR(shared[i][j], mean, allowance) << "positions " << i << " and " << j;
    }
  }
}

// And three positions as three: two items share their indices at positions i, j and l with
// probability 1/w³. Without index_sequence::mix the values of two items move along a line
// in i, so sharing two positions meant sharing nearly all: 25 times 1/w³ here (measured
// over 2·10^7 pairs), and Count-Min rows that failed together. Items in a chain as above (the
// events of two pairs are independent: 1/w⁶), P = 2,000,000 pairs, w = 64, the 10 triples among the
// first 5 positions: each count is Binomial(P, 1/w³), mean 7.6, standard deviation 2.8,
// and stays under mean + 5 standard deviations except with probability < 1e-5 over all 10.
TEST(Hash, TwoItemsShareTheIndicesOfThreePositionsWithProbabilityOneOverRangeCubed) {
  constexpr std::uint64_t kRange = 64;
  constexpr int kPairs = 2'000'000;
  constexpr int kPositions = 5;
  std::array<std::array<std::array<int, kPositions>, kPositions>, kPositions> shared{};
  for_each_chained_pair<kPositions>(kRange, kPairs, [&](const auto& previous, const auto& current) {
    for (int i = 0; i < kPositions; ++i) {
      for (int j = i + 1; j < kPositions; ++j) {
        for (int l = j + 1; l < kPositions; ++l) {
          const bool all =
              current[i] == previous[i] && current[j] == previous[j] && current[l] == previous[l];
          shared[i][j][l] += all ? 1 : 0;
        }
      }
    }
  });
  const double p = 1.0 / static_cast<double>(kRange * kRange * kRange);
  const double mean = kPairs * p;
  const double limit = mean + 5 * std::sqrt(kPairs * p * (1 - p));
  for (int i = 0; i < kPositions; ++i) {
    for (int j = i + 1; j < kPositions; ++j) {
      for (int l = j + 1; l < kPositions; ++l) {
        EXPECT_LE(shared[i][j][l], limit) << "positions " << i << ", " << j << ", " << l;
      }
    }
  }
}

TEST(Hash, TheSequenceGivesDistinctIndicesInALargeRange) {
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

// A record of count-min type (4) with a small payload, sealed.
std::string small_record() {
  detail::record_writer w(structure_type::count_min_sketch, 42);
  w.u32(7);
  return std::move(w).finish();
}

// The record with `size` bytes at `offset` (of the whole record) replaced, checksum recomputed.
std::string resealed(std::string record, std::size_t offset, const void* value, std::size_t size) {
  std::memcpy(record.data() + offset, value, size);
  const std::size_t body = record.size() - kTrailerSize;
  const std::uint64_t checksum = XXH64(record.data(), body, 0);
  std::memcpy(record.data() + body, &checksum, sizeof checksum);
  return record;
}

std::string error_reading(std::string_view record, structure_type expected) {
  try {
    detail::record_reader in(record, expected);
  } catch (const format_error& e) {
    return e.what();
  }
  return "(no exception)";
}

// Versions 1 and 2 placed the counters and bits at other indices (serialize.h): their
// records, and those of later versions, are refused by name rather than misread.
TEST(Serialize, OtherFormatVersionsAreRefusedNamingTheVersion) {
  ASSERT_EQ(kFormatVersion, 3);
  EXPECT_EQ(error_reading(small_record(), structure_type::count_min_sketch), "(no exception)");
  for (const std::uint16_t version : {1, 2, 4}) {
    EXPECT_EQ(
        error_reading(resealed(small_record(), 4, &version, 2), structure_type::count_min_sketch),
        "count-min sketch: format version " + std::to_string(version) +
            " is not supported (this build reads 3)");
  }
}

// One flipped bit of the type field is corruption like any other: the checksum says so
// before the type is compared (4, a count-min sketch, would read as 6, a rolling one).
TEST(Serialize, CorruptTypeIsAChecksumMismatch) {
  std::string corrupt = small_record();
  corrupt[6] ^= 0x02;
  EXPECT_EQ(error_reading(corrupt, structure_type::count_min_sketch),
            "count-min sketch: checksum mismatch (the data is corrupt)");
}

TEST(Serialize, RecordOfAnotherTypeIsNamed) {
  EXPECT_EQ(error_reading(small_record(), structure_type::rolling_count_min),
            "rolling count-min sketch: the record holds a count-min sketch (type 4)");
  const std::uint16_t unknown = 99;
  EXPECT_EQ(error_reading(resealed(small_record(), 6, &unknown, 2), structure_type::top_k),
            "top-k tracker: the record holds an unknown structure (type 99)");
}

}  // namespace
}  // namespace sketch
