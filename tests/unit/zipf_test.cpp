#include "sketch/zipf.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace sketch {
namespace {

// P(rank r) = (r + 1)^{-s} / H(n, s), with H(n, s) the sum of (i + 1)^{-s} over the n ranks;
// the probabilities sum to 1.
TEST(Zipf, ProbabilitiesAreThePowerLawNormalised) {
  for (const double s : {0.5, 1.0, 1.1, 2.0}) {
    constexpr std::uint64_t kN = 1000;
    const zipf_distribution z(kN, s);
    ASSERT_EQ(z.size(), kN);
    double h = 0;
    for (std::uint64_t i = 0; i < kN; ++i) h += std::pow(static_cast<double>(i + 1), -s);
    double total = 0;
    for (std::uint64_t r = 0; r < kN; ++r) {
      const double expected = std::pow(static_cast<double>(r + 1), -s) / h;
      EXPECT_NEAR(z.probability(r), expected, 1e-12 + 1e-9 * expected) << "s " << s << " r " << r;
      total += z.probability(r);
    }
    EXPECT_NEAR(total, 1.0, 1e-12) << s;
    EXPECT_EQ(z.probability(kN), 0.0);
  }
}

// rank_of(u) inverts the CDF: u in (F(r − 1), F(r)] gives r, so u = 0 gives rank 0, u = 1
// the last rank, and the boundaries fall on the right side.
TEST(Zipf, RankOfInvertsTheCumulativeDistribution) {
  const zipf_distribution z(100, 1.1);
  EXPECT_EQ(z.rank_of(0.0), 0u);
  EXPECT_EQ(z.rank_of(1.0), 99u);
  double cdf = 0;
  for (std::uint64_t r = 0; r + 1 < z.size(); ++r) {
    cdf += z.probability(r);
    // The CDF as the distribution holds it, rebuilt from the probabilities up to rounding:
    // just under it is rank r, just over it rank r + 1.
    EXPECT_EQ(z.rank_of(cdf * (1 - 1e-9)), r) << r;
    EXPECT_EQ(z.rank_of(cdf * (1 + 1e-9)), r + 1) << r;
  }
  const zipf_distribution one(1, 1.1);
  EXPECT_EQ(one.rank_of(0.5), 0u);
  EXPECT_EQ(one.probability(0), 1.0);
}

// Draws follow the distribution: 100,000 draws (fixed seed) over n = 1,000, s = 1.1, counted
// for the ranks 0–9 one by one and the other 990 together; a chi-square test with 10
// degrees of freedom against its 99.9% quantile, 29.59.
TEST(Zipf, DrawsFollowTheDistribution) {
  const zipf_distribution z(1000, 1.1);
  std::mt19937_64 rng(42);
  constexpr int kDraws = 100'000;
  std::array<int, 11> counts{};
  for (int i = 0; i < kDraws; ++i) {
    const std::uint64_t r = z(rng);
    ASSERT_LT(r, z.size());
    ++counts[std::min<std::uint64_t>(r, 10)];
  }
  double rest = 1;
  double chi2 = 0;
  for (std::uint64_t r = 0; r < 11; ++r) {
    const double p = r < 10 ? z.probability(r) : rest;
    if (r < 10) rest -= p;
    const double expected = kDraws * p;
    chi2 += (counts[r] - expected) * (counts[r] - expected) / expected;
  }
  EXPECT_LT(chi2, 29.59);
}

TEST(Zipf, RefusesAnEmptyRangeAndANonPositiveExponent) {
  EXPECT_THROW(zipf_distribution(0, 1.1), std::invalid_argument);
  EXPECT_THROW(zipf_distribution(10, 0.0), std::invalid_argument);
  EXPECT_THROW(zipf_distribution(10, -1.0), std::invalid_argument);
  EXPECT_THROW(zipf_distribution(10, std::numeric_limits<double>::quiet_NaN()),
               std::invalid_argument);
}

}  // namespace
}  // namespace sketch
