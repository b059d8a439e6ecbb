#include "sketch/bloom_math.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sketch {
namespace {

using ::testing::HasSubstr;

// Half a unit of the last printed digit of a decimal as the lecture prints it: "0.0804"
// has 4 decimals, so any value in [0.08035, 0.08045] prints the same.
double half_unit_of_last_digit(std::string_view printed) {
  const auto point = printed.find('.');
  const auto decimals = static_cast<int>(printed.size() - point - 1);
  return 0.5 * std::pow(10.0, -decimals);
}

// The table "False positive rate under various m/n and k combinations" of lecture 004,
// row by row as printed: m/n, the optimal k column, then the FPR for k = 1, 2, ...
struct table_row {
  int bits_per_item;
  std::string_view optimal_k;
  std::vector<std::string_view> fpr;
};

const std::vector<table_row>& lecture_004_table() {
  static const std::vector<table_row> rows = {
      {2, "1.39", {"0.393", "0.400"}},
      {3, "2.08", {"0.283", "0.237", "0.253"}},
      {4, "2.77", {"0.221", "0.155", "0.147", "0.160"}},
      {5, "3.46", {"0.181", "0.109", "0.092", "0.092", "0.101"}},
      {6, "4.16", {"0.154", "0.0804", "0.0609", "0.0561", "0.0578", "0.0638"}},
      {7, "4.85", {"0.133", "0.0618", "0.0423", "0.0359", "0.0347", "0.0364"}},
      {8, "5.55", {"0.118", "0.0489", "0.0306", "0.024", "0.0217", "0.0216", "0.0229"}},
      {9, "6.24", {"0.105", "0.0397", "0.0228", "0.0166", "0.0141", "0.0133", "0.0135", "0.0145"}},
      {10,
       "6.93",
       {"0.0952", "0.0329", "0.0174", "0.0118", "0.00943", "0.00844", "0.00819", "0.00846"}},
      {11,
       "7.62",
       {"0.0869", "0.0276", "0.0136", "0.00864", "0.0065", "0.00552", "0.00513", "0.00509"}},
      {12,
       "8.32",
       {"0.08", "0.0236", "0.0108", "0.00646", "0.00459", "0.00371", "0.00329", "0.00314"}},
      {13,
       "9.01",
       {"0.074", "0.0203", "0.00875", "0.00492", "0.00332", "0.00255", "0.00217", "0.00199"}},
  };
  return rows;
}

// Every printed FPR is (1 - e^{-k/(m/n)})^k rounded: the formula lands within half a unit
// of the last printed digit (the lecture drops trailing zeros, e.g. "0.024" for 0.02397,
// so the unit is read from each printed value).
TEST(BloomMath, ReproducesTheFalsePositiveTableOfLecture004) {
  int checked = 0;
  for (const table_row& row : lecture_004_table()) {
    for (std::size_t i = 0; i < row.fpr.size(); ++i) {
      const double k = static_cast<double>(i + 1);
      const std::string printed(row.fpr[i]);
      EXPECT_NEAR(bloom_math::fpr(row.bits_per_item, 1.0, k), std::stod(printed),
                  half_unit_of_last_digit(printed))
          << "m/n = " << row.bits_per_item << ", k = " << k;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 73);  // every printed entry
}

// The FPR depends on m and n only through m/n in the approximation of the table.
TEST(BloomMath, ApproximateRateDependsOnlyOnBitsPerItem) {
  EXPECT_DOUBLE_EQ(bloom_math::fpr(8e6, 1e6, 5), bloom_math::fpr(8, 1, 5));
}

// The column "k" of the table is (m/n) ln 2 to two decimals. The lecture rounds every
// entry except m/n = 5, where 5 ln 2 = 3.4657 is printed 3.46 (truncated); that entry is
// checked against one unit instead of half a unit.
TEST(BloomMath, OptimalHashColumnIsBitsPerItemTimesLn2) {
  for (const table_row& row : lecture_004_table()) {
    const std::string printed(row.optimal_k);
    const double tolerance = row.bits_per_item == 5 ? 0.01 : half_unit_of_last_digit(printed);
    EXPECT_NEAR(row.bits_per_item * std::log(2.0), std::stod(printed), tolerance)
        << "m/n = " << row.bits_per_item;
  }
}

// optimal_hashes rounds (m/n) ln 2, and that integer is where each row of the table (the
// formula for k = 1..64) is smallest.
TEST(BloomMath, OptimalHashesIsTheMinimumOfEachRow) {
  const std::vector<std::uint32_t> expected = {1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 8, 9};
  for (int ratio = 2; ratio <= 13; ++ratio) {
    const std::uint32_t k = bloom_math::optimal_hashes(ratio);
    EXPECT_EQ(k, expected[static_cast<std::size_t>(ratio - 2)]) << "m/n = " << ratio;
    for (std::uint32_t other = 1; other <= 64; ++other) {
      EXPECT_LE(bloom_math::fpr(ratio, 1, k), bloom_math::fpr(ratio, 1, other))
          << "m/n = " << ratio << ", k = " << other;
    }
  }
  EXPECT_EQ(bloom_math::optimal_hashes(0.1), 1u);  // at least one
  EXPECT_EQ(bloom_math::optimal_hashes(0.0), 1u);
  EXPECT_EQ(bloom_math::optimal_hashes(std::nan("")), 1u);
  // At most what a filter takes: 100 bits per item would want 69.
  EXPECT_EQ(bloom_math::optimal_hashes(92), 64u);
  EXPECT_EQ(bloom_math::optimal_hashes(100), bloom_math::kMaxHashes);
  EXPECT_EQ(bloom_math::optimal_hashes(1e300), bloom_math::kMaxHashes);
}

// At the optimal real k the rate is (1/2)^k = (0.6185)^{m/n} (lectures 000 and 004); the
// lecture prints 4 decimals, so the base is within 0.00005 of 0.6185.
TEST(BloomMath, OptimalRateIsPoint6185ToTheBitsPerItem) {
  const double ln2 = std::log(2.0);
  EXPECT_NEAR(std::pow(0.5, ln2), 0.6185, 0.00005);
  for (double ratio : {4.0, 9.585, 16.0}) {
    EXPECT_NEAR(bloom_math::fpr(ratio, 1, ratio * ln2), std::pow(0.5, ratio * ln2), 1e-15);
  }
}

// Lecture 003: k = 30 vectors of m = 2,500,000 bits, n = 5,000,000 items, FPR 1.28%.
// (1 - (1 - 1/m)^n)^30 = (1 - e^{-2.0000004})^30 = 0.0127477; the lecture's "1.28%" is
// that value rounded twice (1.2748% → 1.275% → 1.28%), so the printed figure is checked
// to within one unit of its last digit (0.0001) and the value itself to 1e-6.
TEST(BloomMath, PartitionedExampleOfLecture003) {
  const double rate = bloom_math::fpr_partitioned(2'500'000, 5'000'000, 30);
  EXPECT_NEAR(rate, 0.0128, 0.0001);
  EXPECT_NEAR(rate, std::pow(1.0 - std::exp(-2.0), 30), 1e-6);
  // The classic layout with the same total bits (k·m) and k: (1 - e^{-kn/(km)})^k equals
  // the partitioned rate up to the 1/m corrections.
  EXPECT_NEAR(bloom_math::fpr_exact(30.0 * 2'500'000, 5'000'000, 30), rate, 1e-6);
}

// Lecture 000: /usr/dict/words, 25K words in a 25 KB filter, 8 bits per word, 5 hash
// functions, false positives "about 2%": (1 - e^{-5/8})^5 = 0.021679, printed 0.0217 in
// lecture 004's table (half a unit of the 4th decimal).
TEST(BloomMath, SpellCheckExampleOfLecture000) {
  EXPECT_NEAR(bloom_math::fpr(8, 1, 5), 0.0217, 0.00005);
  EXPECT_NEAR(bloom_math::fpr_exact(25'000 * 8, 25'000, 5), 0.0217, 0.00005);
  EXPECT_EQ(bloom_math::optimal_hashes(8), 6u);  // 5.55 rounds to 6; 5 is the lecture's
  EXPECT_LT(bloom_math::fpr(8, 1, 6), bloom_math::fpr(8, 1, 5));  // and 6 is indeed lower
}

// m/n = -ln p / (ln 2)^2: 9.585 bits per item for 1%, 14.38 for 0.1% (to the digits
// quoted, half a unit of the last one); linear in n.
TEST(BloomMath, OptimalBitsPerItem) {
  EXPECT_NEAR(bloom_math::optimal_bits(1, 0.01), 9.585, 0.0005);
  EXPECT_NEAR(bloom_math::optimal_bits(1, 0.001), 14.38, 0.005);
  EXPECT_DOUBLE_EQ(bloom_math::optimal_bits(1e6, 0.01), 1e6 * bloom_math::optimal_bits(1, 0.01));
  // Plugging m and the real optimal k back gives p again.
  const double m = bloom_math::optimal_bits(1000, 0.01);
  EXPECT_NEAR(bloom_math::fpr(m, 1000, m / 1000 * std::log(2.0)), 0.01, 1e-12);
}

// (1 - 1/m)^{kn} <= e^{-kn/m}, so the exact rate is never below the table's
// approximation, and the two agree to O(k^2 n / m^2) for large m.
TEST(BloomMath, ExactRateIsSlightlyAboveTheApproximation) {
  for (double m : {100.0, 1e4, 1e6}) {
    for (double k : {1.0, 3.0, 7.0}) {
      const double n = m / 10;
      EXPECT_GE(bloom_math::fpr_exact(m, n, k), bloom_math::fpr(m, n, k));
    }
  }
  EXPECT_NEAR(bloom_math::fpr_exact(1e6, 1e5, 7) / bloom_math::fpr(1e6, 1e5, 7), 1.0, 1e-4);
  // Against the textbook expression evaluated directly where it is still accurate.
  EXPECT_NEAR(bloom_math::fpr_exact(100, 10, 3), std::pow(1.0 - std::pow(1.0 - 1.0 / 100, 30), 3),
              1e-14);
}

TEST(BloomMath, EdgeCasesOfTheRates) {
  EXPECT_EQ(bloom_math::fpr_exact(1000, 0, 5), 0.0);  // empty filter
  EXPECT_EQ(bloom_math::fpr_exact(1, 1, 3), 1.0);     // a single bit, set
  EXPECT_EQ(bloom_math::fpr_partitioned(1000, 0, 5), 0.0);
  EXPECT_DOUBLE_EQ(bloom_math::fpr_from_fill(0.5, 3), 0.125);
  EXPECT_EQ(bloom_math::fpr_from_fill(0.0, 3), 0.0);
  EXPECT_EQ(bloom_math::fpr_from_fill(1.0, 3), 1.0);
}

// n̂ = -(m/k) ln(1 - fill) inverts the expected fill 1 - e^{-kn/m} exactly.
TEST(BloomMath, EstimatedItemsInvertsTheExpectedFill) {
  for (double n : {1.0, 1000.0, 123456.0}) {
    const double m = 1e6;
    const double k = 7;
    const double fill = -std::expm1(-k * n / m);
    EXPECT_NEAR(bloom_math::estimated_items(m, k, fill), n, n * 1e-12);
  }
  EXPECT_EQ(bloom_math::estimated_items(1000, 3, 0.0), 0.0);
  EXPECT_EQ(bloom_math::estimated_items(1000, 3, 1.0), std::numeric_limits<double>::infinity());
}

// suggest_classic meets its target with the exact formula, uses no fewer bits than the
// closed form, and no more than needed: one bit less would miss p with every k <= 64.
// The minimality check allows a relative 1e-9 for floating-point rounding of fpr_exact.
TEST(BloomMath, SuggestClassicMeetsTheTargetWithTheLeastBits) {
  const std::vector<std::pair<std::uint64_t, double>> cases = {
      {1, 0.5},        {10, 0.99},         {1000, 0.01},       {25'000, 0.0217},
      {100'000, 0.05}, {1'000'000, 0.001}, {10'000'000, 1e-6}, {1'000'000'000, 0.01},
      {1000, 1e-30},
  };
  for (const auto& [n, p] : cases) {
    SCOPED_TRACE(testing::Message() << "n = " << n << ", p = " << p);
    const bloom_math::sizing s = bloom_math::suggest_classic(n, p);
    const auto items = static_cast<double>(n);
    const auto bits = static_cast<double>(s.bits);
    EXPECT_LE(s.fpr, p);
    EXPECT_EQ(s.fpr, bloom_math::fpr_exact(bits, items, s.hashes));
    EXPECT_GE(bits, std::ceil(bloom_math::optimal_bits(items, p)));
    EXPECT_GE(s.hashes, 1u);
    EXPECT_LE(s.hashes, bloom_math::kMaxHashes);
    for (std::uint32_t k = 1; k <= bloom_math::kMaxHashes; ++k) {
      EXPECT_GT(bloom_math::fpr_exact(bits - 1, items, k), p * (1 - 1e-9)) << "k = " << k;
    }
    const double real_k = bits / items * std::log(2.0);
    if (real_k <= bloom_math::kMaxHashes) {
      // k re-chosen at the final m is an integer next to (m/n) ln 2.
      EXPECT_LE(std::abs(s.hashes - real_k), 1.0);
    } else {
      EXPECT_EQ(s.hashes, bloom_math::kMaxHashes);
    }
  }
}

TEST(BloomMath, SuggestClassicRejectsBadArguments) {
  EXPECT_THAT([] { (void)bloom_math::suggest_classic(0, 0.01); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("items n")));
  for (double p : {0.0, 1.0, -0.5, 2.0, std::nan("")}) {
    EXPECT_THAT([p] { (void)bloom_math::suggest_classic(100, p); },
                testing::ThrowsMessage<std::invalid_argument>(HasSubstr("rate p")));
  }
  EXPECT_THAT([] { (void)bloom_math::suggest_classic(~std::uint64_t{0}, 1e-300); },
              testing::ThrowsMessage<std::invalid_argument>(HasSubstr("2^63")));
}

// Lecture 002's table of compressed filters (Mitzenmacher 2002): array bits per item b,
// hashes k, transmitted bits per item b·H(e^{−k/b}) and FPR (1 − e^{−k/b})^k. The FPRs within
// 1% relative (the table rounds to three significant digits), the transmitted bits within
// 0.02 (the table rounds to two decimals).
TEST(BloomMath, CompressedFiltersReproduceTheLecturesTable) {
  struct row {
    double bits_per_item, hashes, transmitted, fpr;
  };
  for (const row r :
       {row{16, 11, 16, 0.000459}, row{28, 4, 15.84, 0.000314}, row{48, 3, 15.82, 0.000222}}) {
    EXPECT_NEAR(bloom_math::fpr(r.bits_per_item, 1, r.hashes), r.fpr, r.fpr * 0.01)
        << r.bits_per_item;
    EXPECT_NEAR(bloom_math::entropy_bits_per_item(r.bits_per_item, r.hashes), r.transmitted, 0.02)
        << r.bits_per_item;
  }
  EXPECT_DOUBLE_EQ(bloom_math::binary_entropy(0.5), 1.0);
  EXPECT_EQ(bloom_math::binary_entropy(0.0), 0.0);
  EXPECT_EQ(bloom_math::binary_entropy(1.0), 0.0);
}

// Sizing for transmission picks the table's columns back: 16 transmitted bits per item with
// at most 48 array bits gives its third column (k = 3, FPR 0.000222), and FPR 0.000314 with
// at most 28 array bits its second (k = 4, 15.84 bits).
TEST(BloomMath, SizingForTransmissionFindsTheTablesColumns) {
  const bloom_math::compressed_shape by_size = bloom_math::shape_for_transmission(16, 48);
  EXPECT_EQ(by_size.hashes, 3u);
  EXPECT_NEAR(by_size.bits_per_item, 48, 1e-6);
  EXPECT_NEAR(by_size.fpr, 0.000222, 0.000222 * 0.01);
  EXPECT_LE(by_size.transmitted_bits_per_item, 16);

  const bloom_math::compressed_shape by_fpr = bloom_math::shape_for_fpr(0.000314, 28.1);
  EXPECT_EQ(by_fpr.hashes, 4u);
  EXPECT_NEAR(by_fpr.bits_per_item, 28, 0.05);
  EXPECT_LE(by_fpr.fpr, 0.000314 * (1 + 1e-9));
  EXPECT_NEAR(by_fpr.transmitted_bits_per_item, 15.84, 0.02);

  // With the optimal filter's memory only (16 bits per item), nothing beats k = 11 at 16
  // bits: the transmitted size of the best shape at its FPR is 16 bits per item.
  const bloom_math::compressed_shape tight = bloom_math::shape_for_fpr(0.000459, 16.01);
  EXPECT_EQ(tight.hashes, 11u);
  EXPECT_NEAR(tight.transmitted_bits_per_item, 16, 0.02);
}

// The bisection's premise: for each k, b·H(e^{−k/b}) rises with b from b = k / ln 2.
TEST(BloomMath, TransmittedSizeRisesWithTheArrayAboveHalfFull) {
  for (std::uint32_t k = 1; k <= 20; ++k) {
    double previous = 0;
    for (double b = k / std::numbers::ln2; b < 4096; b *= 1.01) {
      const double z = bloom_math::entropy_bits_per_item(b, k);
      EXPECT_GT(z, previous) << k << " " << b;
      previous = z;
    }
  }
}

TEST(BloomMath, SizingForTransmissionRefusesWhatNoFilterDoes) {
  EXPECT_THROW((void)bloom_math::shape_for_transmission(1.4, 64), std::invalid_argument);
  EXPECT_THROW((void)bloom_math::shape_for_transmission(0, 64), std::invalid_argument);
  EXPECT_THROW((void)bloom_math::shape_for_transmission(16, 0.5), std::invalid_argument);
  EXPECT_THROW((void)bloom_math::shape_for_fpr(1e-9, 16), std::invalid_argument);
  EXPECT_THROW((void)bloom_math::shape_for_fpr(0, 64), std::invalid_argument);
  EXPECT_THROW((void)bloom_math::shape_for_fpr(0.5, 0), std::invalid_argument);
}

}  // namespace
}  // namespace sketch
