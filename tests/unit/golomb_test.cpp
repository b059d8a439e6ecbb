#include "sketch/golomb.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "sketch/bloom.h"
#include "sketch/bloom_math.h"

namespace {

using sketch::golomb_decode;
using sketch::golomb_encode;
using sketch::golomb_parameter;

// The expected code length per run, summed over the remainders one by one: the check of
// golomb_bits_per_run's closed form.
double expected_bits_per_run(double p, std::uint64_t m) {
  const double pm = std::pow(p, static_cast<double>(m));
  double bits = pm / (1 - pm) + 1;
  if (m > 1) {
    const int width = std::bit_width(m - 1);
    const std::uint64_t cut = (std::uint64_t{1} << width) - m;
    for (std::uint64_t j = 0; j < m; ++j) {
      const double pj = std::pow(p, static_cast<double>(j)) * (1 - p) / (1 - pm);
      bits += pj * (j < cut ? width - 1 : width);
    }
  }
  return bits;
}

// The entropy per run: H(p) bits per array bit, 1 / (1 − p) array bits per run.
double entropy_bits_per_run(double p) { return sketch::bloom_math::binary_entropy(p) / (1 - p); }

TEST(GolombCode, TheParameterIsTheLeastWithPToTheMTimesOnePlusPAtMostOne) {
  EXPECT_EQ(golomb_parameter(0.5), 1u);
  EXPECT_EQ(golomb_parameter(0.6), 1u);
  EXPECT_EQ(golomb_parameter(0.0), 1u);
  EXPECT_EQ(golomb_parameter(1.0), 1u);
  for (double p = 0.62; p < 0.9999; p += 0.0007) {
    const std::uint64_t m = golomb_parameter(p);
    EXPECT_LE(std::pow(p, static_cast<double>(m)) * (1 + p), 1.0) << p;
    if (m > 1) {
      EXPECT_GT(std::pow(p, static_cast<double>(m - 1)) * (1 + p), 1.0) << p;
    }
  }
}

// The header's guarantee: at most 1.5% over the entropy for p ≥ 0.7, exact at p = 1/2.
TEST(GolombCode, TheClosedFormLengthIsTheSumOverRemainders) {
  for (const double p : {0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97, 0.999}) {
    for (const std::uint64_t m :
         std::initializer_list<std::uint64_t>{1, 2, 3, 5, 8, 13, 100, golomb_parameter(p)}) {
      EXPECT_NEAR(sketch::golomb_bits_per_run(p, m), expected_bits_per_run(p, m), 1e-9)
          << p << " " << m;
    }
  }
}

TEST(GolombCode, ExpectedLengthIsNearTheEntropy) {
  EXPECT_NEAR(expected_bits_per_run(0.5, golomb_parameter(0.5)), entropy_bits_per_run(0.5), 1e-12);
  for (double p = 0.7; p <= 0.9995; p += 0.0005) {
    const double ratio = expected_bits_per_run(p, golomb_parameter(p)) / entropy_bits_per_run(p);
    EXPECT_GE(ratio, 1.0) << p;  // no prefix code beats the entropy
    EXPECT_LE(ratio, 1.015) << p;
  }
}

// Random arrays with each bit set with probability q, of `bits` bits in 64-bit words.
std::vector<std::uint64_t> random_array(std::uint64_t bits, double q, std::uint64_t seed) {
  std::vector<std::uint64_t> words((bits + 63) / 64, 0);
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution set(q);
  for (std::uint64_t i = 0; i < bits; ++i) {
    if (set(rng)) words[i / 64] |= std::uint64_t{1} << (i % 64);
  }
  return words;
}

std::uint64_t popcount(const std::vector<std::uint64_t>& words) {
  std::uint64_t n = 0;
  for (const auto w : words) n += static_cast<std::uint64_t>(std::popcount(w));
  return n;
}

TEST(GolombCode, RoundTripsEmptyFullAndRandomArrays) {
  for (const std::uint64_t bits : {1ULL, 63ULL, 64ULL, 65ULL, 1000ULL, 4096ULL, 100003ULL}) {
    for (const double q : {0.0, 0.01, 0.13, 0.5, 0.9, 1.0}) {
      std::vector<std::uint64_t> words = random_array(bits, q, bits * 31 + 7);
      const std::uint64_t set = popcount(words);
      for (const std::uint64_t m : {golomb_parameter(1 - q), std::uint64_t{1}, std::uint64_t{3},
                                    std::uint64_t{64}, std::uint64_t{1} << 20}) {
        std::string code;
        ASSERT_EQ(golomb_encode(words, bits, m, code), set) << bits << " " << q << " " << m;
        std::vector<std::uint64_t> back(words.size(), ~std::uint64_t{0});
        ASSERT_TRUE(golomb_decode(code, m, set, bits, back)) << bits << " " << q << " " << m;
        ASSERT_EQ(back, words) << bits << " " << q << " " << m;
      }
    }
  }
}

TEST(GolombCode, ThirtyTwoBitWordsHoldTheSameBitsAsSixtyFourBitOnes) {
  const std::vector<std::uint64_t> wide = random_array(10000, 0.1, 3);
  std::vector<std::uint32_t> narrow;
  for (const auto w : wide) {
    narrow.push_back(static_cast<std::uint32_t>(w));
    narrow.push_back(static_cast<std::uint32_t>(w >> 32));
  }
  const std::uint64_t m = golomb_parameter(0.9);
  std::string a;
  std::string b;
  ASSERT_EQ(golomb_encode(wide, 10000, m, a), golomb_encode(narrow, 10000, m, b));
  EXPECT_EQ(a, b);
  std::vector<std::uint32_t> back(narrow.size());
  ASSERT_TRUE(golomb_decode(b, m, popcount(wide), 10000, back));
  EXPECT_EQ(back, narrow);
}

TEST(GolombCode, MalformedCodesAreRefused) {
  const std::uint64_t bits = 5000;
  std::vector<std::uint64_t> words = random_array(bits, 0.1, 11);
  const std::uint64_t set = popcount(words);
  const std::uint64_t m = golomb_parameter(0.9);
  std::string code;
  golomb_encode(words, bits, m, code);
  std::vector<std::uint64_t> back(words.size());
  ASSERT_TRUE(golomb_decode(code, m, set, bits, back));
  // Truncated at every length: never accepted (the runs end early or the padding is wrong).
  for (std::size_t cut = 0; cut < code.size(); ++cut) {
    EXPECT_FALSE(golomb_decode(code.substr(0, cut), m, set, bits, back)) << cut;
  }
  EXPECT_FALSE(golomb_decode(code + '\0', m, set, bits, back));  // a byte left over
  // (A wrong count of runs is not always seen: the zero padding, or a last run coded as one
  // 0 bit, reads as a run. The count travels in the record, under its checksum.)
  EXPECT_FALSE(golomb_decode(code, m, set, bits / 2, back));                // runs past the array
  EXPECT_FALSE(golomb_decode(std::string(100, '\xff'), m, 1, bits, back));  // a run too long
}

// The seed's table (lecture 002, "Compressed Filter"): a classic filter of b bits per item
// and k hashes, filled with n random items and coded, within 2% of the entropy bound
// m·H(e^{−k/b}) and, for the sparse columns, below the 16 bits per item of the optimal
// filter. n = 200,000: the set fraction's standard deviation is about 0.1% of it, far inside
// the 2%.
TEST(GolombCode, CompressedFiltersOfTheSeedsTableReachTheBound) {
  struct column {
    double bits_per_item;
    std::uint32_t hashes;
  };
  const std::uint64_t n = 200'000;
  for (const column c : {column{16, 11}, column{28, 4}, column{48, 3}}) {
    const auto bits = static_cast<std::uint64_t>(c.bits_per_item * static_cast<double>(n));
    sketch::bloom_filter f(bits, c.hashes, 42);
    for (std::uint64_t i = 0; i < n; ++i) f.insert(sketch::hash_bytes(&i, sizeof i, 42));
    const double zero = 1 - static_cast<double>(f.bits_set()) / static_cast<double>(bits);
    std::string code;
    golomb_encode(f.words(), bits, golomb_parameter(zero), code);
    const double coded = static_cast<double>(code.size()) * 8 / static_cast<double>(n);
    const double bound = sketch::bloom_math::entropy_bits_per_item(c.bits_per_item, c.hashes);
    EXPECT_LE(coded, bound * 1.02) << c.bits_per_item;
    EXPECT_GE(coded, bound * 0.99) << c.bits_per_item;
    if (c.bits_per_item > 16) {
      EXPECT_LT(coded, 16.0) << c.bits_per_item;
    }
  }
}

}  // namespace
