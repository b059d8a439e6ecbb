#include "sketch/blocked_bloom.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sketch/serialize.h"

namespace sketch {
namespace {

constexpr std::uint64_t kSeed = 0x1234abcdULL;
constexpr std::uint64_t kAbsent = std::uint64_t{1} << 40;  // keys from here on are never inserted

// The hash of integer key i: distinct keys give independent uniform hashes.
hash128 key(std::uint64_t i) { return hash_bytes(&i, sizeof i, kSeed); }

std::uint64_t popcount_rescan(const blocked_bloom_filter& f) {
  std::uint64_t set = 0;
  for (const std::uint32_t w : f.words()) set += static_cast<std::uint64_t>(std::popcount(w));
  return set;
}

// Fraction of `queries` absent keys that the filter reports present.
double measured_fpr(const blocked_bloom_filter& f, std::uint64_t queries) {
  std::uint64_t hits = 0;
  for (std::uint64_t i = 0; i < queries; ++i) hits += f.contains(key(kAbsent + i)) ? 1 : 0;
  return static_cast<double>(hits) / static_cast<double>(queries);
}

// Standard deviation of a measured FPR around fpr(bits, n), from two independent sources:
//  * the queries: given the filter, hits are binomial, variance p(1 − p)/Q;
//  * the filter: its own rate is the mean over B blocks of the block rates h_b, and a block
//    with load X and c_i set bits in word i answers with h = Π_i c_i/32. With Poisson(λ)
//    loads, independent blocks and words independent given X (each item picks its bit in
//    every word independently), Var = (E[h²] − E[h]²)/B with
//        E[h²] = Σ_x Pois(x; λ) · (E[(c/32)² | x])^8,
//        E[c | x] = 32(1 − q^x),  E[c(c−1) | x] = 32·31·(1 − 2q^x + (30/32)^x),  q = 31/32.
// (Poisson loads overstate the variance of a fixed n a little: the bound is conservative.)
double fpr_sigma(std::uint64_t bits, std::uint64_t n, std::uint64_t queries) {
  const double p = blocked_bloom_filter::fpr(static_cast<double>(bits), static_cast<double>(n));
  const double blocks = static_cast<double>(bits / blocked_bloom_filter::kBlockBits);
  const double lambda = static_cast<double>(n) / blocks;
  const double q = 31.0 / 32.0;
  double second = 0.0;
  const int top = static_cast<int>(lambda + 40.0 * std::sqrt(lambda) + 100.0);
  for (int x = 0; x <= top; ++x) {
    const double pois = std::exp(-lambda + x * std::log(lambda) - std::lgamma(x + 1.0));
    const double ec = 32.0 * (1.0 - std::pow(q, x));
    const double ecc = 32.0 * 31.0 * (1.0 - 2.0 * std::pow(q, x) + std::pow(30.0 / 32.0, x));
    second += pois * std::pow((ec + ecc) / 1024.0, 8);
  }
  const double filter_var = (second - p * p) / blocks;
  const double query_var = p * (1.0 - p) / static_cast<double>(queries);
  return std::sqrt(filter_var + query_var);
}

// ---- layout -----------------------------------------------------------------------------

// The Parquet split-block layout, pinned by hand-computed values: key 1 sets in word i the
// bit SALT[i] >> 27, and h.high = 2^63 selects block reduce(2^63, 4) = 2.
TEST(BlockedBloom, SetsTheParquetBitsInTheSelectedBlock) {
  blocked_bloom_filter f(4 * 256, kSeed);
  f.insert(hash128{1, std::uint64_t{1} << 63});
  const int expected_bits[8] = {8, 8, 17, 20, 14, 5, 19, 11};
  for (std::uint64_t w = 0; w < f.words().size(); ++w) {
    const std::uint32_t want = w / 8 == 2 ? std::uint32_t{1} << expected_bits[w % 8] : 0;
    EXPECT_EQ(f.words()[w], want) << "word " << w;
  }
  // Key 0x9e3779b9: (key · SALT[i] mod 2^32) >> 27 computed by hand.
  blocked_bloom_filter g(256, kSeed);
  g.insert(hash128{0x9e3779b9, 0});
  const int golden[8] = {31, 7, 4, 25, 4, 24, 22, 1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(g.words()[i], std::uint32_t{1} << golden[i]);
  EXPECT_EQ(g.bits_set(), 8u);
}

TEST(BlockedBloom, RoundsBitsUpToWholeBlocks) {
  EXPECT_EQ(blocked_bloom_filter(1).bits(), 256u);
  EXPECT_EQ(blocked_bloom_filter(256).bits(), 256u);
  EXPECT_EQ(blocked_bloom_filter(257).bits(), 512u);
  EXPECT_EQ(blocked_bloom_filter(257).blocks(), 2u);
  EXPECT_EQ(blocked_bloom_filter(1000).size_bytes(), 128u);
  EXPECT_EQ(blocked_bloom_filter(1000).hashes(), 8u);
  EXPECT_EQ(blocked_bloom_filter(1000, 77).seed(), 77u);
  EXPECT_THROW(blocked_bloom_filter(0), std::invalid_argument);
  EXPECT_THROW(blocked_bloom_filter(blocked_bloom_filter::kMaxBits + 1), std::invalid_argument);
}

TEST(BlockedBloom, StorageIs32ByteAligned) {
  for (std::uint64_t bits : {256ULL, 512ULL, 1000ULL, 65536ULL}) {
    const blocked_bloom_filter f(bits);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(f.words().data()) % 32, 0u);
    const blocked_bloom_filter copy = f;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(copy.words().data()) % 32, 0u);
  }
}

// Arrays of a huge page or more start on a huge-page boundary (so MADV_HUGEPAGE covers
// whole huge pages), copies too.
TEST(BlockedBloom, LargeStorageIsHugePageAligned) {
  const blocked_bloom_filter f(std::uint64_t{8} * detail::kHugePageBytes);
  ASSERT_EQ(f.size_bytes(), detail::kHugePageBytes);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(f.words().data()) % detail::kHugePageBytes, 0u);
  const blocked_bloom_filter copy = f;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(copy.words().data()) % detail::kHugePageBytes, 0u);
  EXPECT_TRUE(copy == f);
}

// ---- membership -------------------------------------------------------------------------

TEST(BlockedBloom, HasNoFalseNegatives) {
  // A deliberately overfull filter (2 bits per item) still finds every inserted item.
  for (const simd_path path : {simd_path::automatic, simd_path::scalar}) {
    blocked_bloom_filter f(20000 * 2, kSeed, path);
    for (std::uint64_t i = 0; i < 20000; ++i) f.insert(key(i));
    for (std::uint64_t i = 0; i < 20000; ++i) ASSERT_TRUE(f.contains(key(i))) << i;
  }
  blocked_bloom_filter g(1 << 16, kSeed);
  for (int i = 0; i < 1000; ++i) g.insert("item-" + std::to_string(i));
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(g.contains("item-" + std::to_string(i)));
  EXPECT_TRUE(g.contains(hash_item("item-7", kSeed)));
}

TEST(BlockedBloom, TestAndInsertReportsPresenceThenInserts) {
  blocked_bloom_filter f(1 << 16, kSeed);
  EXPECT_FALSE(f.test_and_insert("a"));
  EXPECT_TRUE(f.contains("a"));
  const std::uint64_t set = f.bits_set();
  EXPECT_TRUE(f.test_and_insert("a"));
  EXPECT_EQ(f.bits_set(), set);  // a present item changes nothing
  EXPECT_FALSE(f.test_and_insert(key(5)));
  EXPECT_TRUE(f.test_and_insert(key(5)));
  f.insert(key(6));
  EXPECT_TRUE(f.test_and_insert(key(6)));
}

// ---- false-positive rate ----------------------------------------------------------------

TEST(BlockedBloom, FprIsThePoissonMixture) {
  // Against a direct sum of the series with lgamma, far past the mode, plus λ·2^-32 for the
  // queries whose 32 key bits equal an item's of their block.
  for (const double lambda : {0.25, 2.0, 25.6, 40.0, 200.0}) {
    double direct = lambda * 0x1p-32;
    for (int i = 1; i < 4000; ++i) {
      direct += std::exp(-lambda + i * std::log(lambda) - std::lgamma(i + 1.0)) *
                std::pow(1.0 - std::pow(31.0 / 32.0, i), 8);
    }
    EXPECT_NEAR(blocked_bloom_filter::fpr(256 * 1000, lambda * 1000), direct, 1e-12 * direct)
        << lambda;
  }
  EXPECT_EQ(blocked_bloom_filter::fpr(1 << 20, 0), 0.0);
  EXPECT_EQ(blocked_bloom_filter::fpr(256, 1e7), 1.0);
  // Partial blocks count as whole ones, as in the constructor.
  EXPECT_EQ(blocked_bloom_filter::fpr(300, 10), blocked_bloom_filter::fpr(512, 10));
  // Falls as bits grow, rises as items grow.
  double last = 1.0;
  for (double bits = 256 * 100; bits < 256 * 10000; bits *= 1.7) {
    const double p = blocked_bloom_filter::fpr(bits, 10000);
    EXPECT_LT(p, last);
    last = p;
  }
}

TEST(BlockedBloom, FprIsAboveTheClassicRateAtEqualBits) {
  // Uneven block loads cost accuracy: at 8..32 bits per item the blocked rate exceeds the
  // classic (1 − e^{−kn/m})^k with k = 8, which is also fill^8.
  for (const double bits_per_item : {8.0, 10.0, 16.0, 32.0}) {
    const double n = 100000;
    const double m = bits_per_item * n;
    const double classic = std::pow(1.0 - std::exp(-8.0 * n / m), 8);
    EXPECT_GT(blocked_bloom_filter::fpr(m, n), classic * 1.2) << bits_per_item;
  }
}

struct fpr_case {
  std::uint64_t bits;
  std::vector<std::uint64_t> fill_levels;  // items inserted before each measurement
  std::uint64_t queries;
};

// Measured FPR of absent keys against fpr(bits, n), at several sizes and fill levels:
// 16, 10 and 8 bits per item at n = 20k..400k, with 3·10^5 or 10^6 queries; the tolerance
// is 5 standard deviations of fpr_sigma (query binomial plus filter-to-filter variance).
TEST(BlockedBloom, MeasuredFprMatchesFormula) {
  const std::vector<fpr_case> cases = {
      {320000, {20000, 32000, 40000}, 300000},
      {3200000, {200000, 320000, 400000}, 1000000},
  };
  for (const fpr_case& c : cases) {
    blocked_bloom_filter f(c.bits, kSeed);
    std::uint64_t inserted = 0;
    for (const std::uint64_t n : c.fill_levels) {
      for (; inserted < n; ++inserted) f.insert(key(inserted));
      const double expected =
          blocked_bloom_filter::fpr(static_cast<double>(f.bits()), static_cast<double>(n));
      const double sigma = fpr_sigma(f.bits(), n, c.queries);
      const double measured = measured_fpr(f, c.queries);
      EXPECT_NEAR(measured, expected, 5 * sigma)
          << "bits " << f.bits() << ", n " << n << " ("
          << static_cast<double>(f.bits()) / static_cast<double>(n) << " bits per item)";
    }
  }
}

// for_capacity(n, p) holds the rate at n items: measured <= p + 5σ, σ from fpr_sigma at p's
// sizing (the filter's exact rate is at most p by construction).
TEST(BlockedBloom, ForCapacityMeetsTheTargetRate) {
  struct target {
    std::uint64_t n;
    double p;
    std::uint64_t queries;
  };
  for (const target t : {target{100000, 0.01, 500000}, target{100000, 0.001, 1000000}}) {
    blocked_bloom_filter f = blocked_bloom_filter::for_capacity(t.n, t.p, kSeed);
    EXPECT_LE(blocked_bloom_filter::fpr(static_cast<double>(f.bits()), static_cast<double>(t.n)),
              t.p);
    for (std::uint64_t i = 0; i < t.n; ++i) f.insert(key(i));
    const double measured = measured_fpr(f, t.queries);
    EXPECT_LE(measured, t.p + 5 * fpr_sigma(f.bits(), t.n, t.queries)) << t.p;
  }
}

TEST(BlockedBloom, SizingIsMinimalAndNeedsMoreThanTheClassicOptimum) {
  for (const std::uint64_t n : {1ULL, 1000ULL, 100000ULL, 10000000ULL}) {
    for (const double p : {0.1, 0.01, 0.001, 1e-6}) {
      const std::uint64_t bits = blocked_bloom_filter::suggest_bits(n, p);
      const auto nd = static_cast<double>(n);
      EXPECT_EQ(bits % 256, 0u);
      EXPECT_LE(blocked_bloom_filter::fpr(static_cast<double>(bits), nd), p);
      if (bits > 256) {
        EXPECT_GT(blocked_bloom_filter::fpr(static_cast<double>(bits - 256), nd), p);
      }
      // Classic optimum m = −n ln p / (ln 2)^2 (lecture 004): the blocked layout needs more.
      const double classic = -nd * std::log(p) / (std::log(2.0) * std::log(2.0));
      if (n >= 1000) {
        EXPECT_GT(static_cast<double>(bits), classic) << n << " " << p;
      }
    }
  }
  // Known figures: 1% needs 10.5 bits per item (classic 9.6), 0.1% needs 16.9 (classic 14.4).
  EXPECT_NEAR(static_cast<double>(blocked_bloom_filter::suggest_bits(1000000, 0.01)) / 1e6, 10.53,
              0.01);
  EXPECT_NEAR(static_cast<double>(blocked_bloom_filter::suggest_bits(1000000, 0.001)) / 1e6, 16.89,
              0.01);
}

TEST(BlockedBloom, SizingRejectsBadArguments) {
  EXPECT_THROW((void)blocked_bloom_filter::suggest_bits(0, 0.01), std::invalid_argument);
  EXPECT_THROW((void)blocked_bloom_filter::suggest_bits(10, 0.0), std::invalid_argument);
  EXPECT_THROW((void)blocked_bloom_filter::suggest_bits(10, 1.0), std::invalid_argument);
  EXPECT_THROW((void)blocked_bloom_filter::suggest_bits(10, std::nan("")), std::invalid_argument);
  EXPECT_THROW((void)blocked_bloom_filter::suggest_bits(std::uint64_t{1} << 40, 0.01),
               std::invalid_argument);
  EXPECT_THROW((void)blocked_bloom_filter::for_capacity(0, 0.01), std::invalid_argument);
}

// ---- SIMD ---------------------------------------------------------------------------------

// The AVX2 and scalar paths set identical bits and give identical answers. When the CPU has
// no AVX2 both filters run the scalar code and the test only checks determinism.
TEST(BlockedBloom, Avx2AndScalarPathsAreBitIdentical) {
  blocked_bloom_filter fast(1 << 18, kSeed, simd_path::automatic);
  blocked_bloom_filter slow(1 << 18, kSeed, simd_path::scalar);
  EXPECT_FALSE(slow.uses_avx2());
  if (!fast.uses_avx2()) std::fprintf(stderr, "note: this CPU has no AVX2; scalar only\n");
  for (std::uint64_t i = 0; i < 30000; ++i) {
    if (i % 3 == 0) {
      fast.insert(key(i));
      slow.insert(key(i));
    } else {
      // Every fifth key repeats an earlier one, so both answers occur.
      const std::uint64_t k = i % 5 == 0 ? i / 2 : i;
      ASSERT_EQ(fast.test_and_insert(key(k)), slow.test_and_insert(key(k))) << i;
    }
    ASSERT_EQ(fast.bits_set(), slow.bits_set()) << i;
  }
  EXPECT_TRUE(fast == slow);
  EXPECT_TRUE(std::equal(fast.words().begin(), fast.words().end(), slow.words().begin()));
  for (std::uint64_t i = 0; i < 200000; ++i) {
    const hash128 h = key(i % 2 == 0 ? i : kAbsent + i);
    ASSERT_EQ(fast.contains(h), slow.contains(h)) << i;
  }
}

// The batch call gives the answers and bits of the single calls, on both paths, for batches
// shorter and longer than the prefetch distance, with duplicates inside a batch, for a filter
// small enough to run without prefetching and one large enough to prefetch, and processes
// only as many items as `present` has room for.
TEST(BlockedBloom, BatchTestAndInsertEqualsSingleCalls) {
  const std::uint64_t large_bits = 2 * 8 * sketch::detail::batch_prefetch_above_bytes();
  for (const auto& [path, bits] :
       {std::pair{simd_path::automatic, std::uint64_t{1} << 16},
        std::pair{simd_path::scalar, std::uint64_t{1} << 16},
        std::pair{simd_path::automatic, large_bits}, std::pair{simd_path::scalar, large_bits}}) {
    blocked_bloom_filter single(bits, kSeed, path);
    blocked_bloom_filter batched(bits, kSeed, path);
    ASSERT_EQ(batched.size_bytes() > sketch::detail::batch_prefetch_above_bytes(),
              bits == large_bits);
    std::uint64_t next = 0;
    for (const std::size_t length : {0, 1, 5, 16, 17, 100, 1000, 3000}) {
      std::vector<hash128> hashes;
      for (std::size_t i = 0; i < length; ++i) {
        // Every third item repeats an earlier one, some from this very batch.
        hashes.push_back(key(i % 3 == 0 && next > 0 ? next / 2 : next++));
      }
      std::unique_ptr<bool[]> present(new bool[length + 1]);
      batched.test_and_insert(hashes, std::span<bool>(present.get(), length));
      for (std::size_t i = 0; i < length; ++i) {
        ASSERT_EQ(present[i], single.test_and_insert(hashes[i]))
            << bits << " bits, " << length << " " << i;
      }
      ASSERT_TRUE(batched == single) << bits << " bits, " << length;
    }
    // `present` shorter than `hashes`: the rest is left alone.
    const std::vector<hash128> hashes = {key(kAbsent), key(kAbsent + 1), key(kAbsent + 2)};
    bool two[2] = {true, true};
    batched.test_and_insert(hashes, two);
    EXPECT_FALSE(two[0]);
    EXPECT_FALSE(two[1]);
    EXPECT_TRUE(batched.contains(key(kAbsent + 1)));
    EXPECT_FALSE(batched.contains(key(kAbsent + 2)));
  }
}

// ---- fill and estimates -------------------------------------------------------------------

TEST(BlockedBloom, FillMatchesAPopcountRescan) {
  for (const simd_path path : {simd_path::automatic, simd_path::scalar}) {
    blocked_bloom_filter f(1 << 14, kSeed, path);
    EXPECT_EQ(f.bits_set(), 0u);
    for (std::uint64_t i = 0; i < 3000; ++i) {
      if (i % 2 == 0) {
        f.insert(key(i % 1700));
      } else {
        (void)f.test_and_insert(key(i % 1700));
      }
      if (i % 250 == 0) {
        ASSERT_EQ(f.bits_set(), popcount_rescan(f)) << i;
      }
    }
    EXPECT_EQ(f.bits_set(), popcount_rescan(f));
    EXPECT_DOUBLE_EQ(f.fill_ratio(), static_cast<double>(popcount_rescan(f)) / (1 << 14));
    f.clear();
    EXPECT_EQ(f.bits_set(), 0u);
    EXPECT_EQ(popcount_rescan(f), 0u);
    EXPECT_FALSE(f.contains(key(1)));
  }
}

// A single test_and_insert leaves the count to be taken when read; inserts, batches, a
// recount and serialization around it keep it exact.
TEST(BlockedBloom, TheCountStaysExactAcrossSingleCallsBatchesAndRecounts) {
  for (const simd_path path : {simd_path::automatic, simd_path::scalar}) {
    blocked_bloom_filter f(1 << 14, kSeed, path);
    std::vector<hash128> batch;
    for (std::uint64_t i = 0; i < 400; ++i) batch.push_back(key(5000 + i));
    std::vector<std::uint8_t> answers(batch.size());
    std::span<bool> present(reinterpret_cast<bool*>(answers.data()), answers.size());
    for (std::uint64_t round = 0; round < 4; ++round) {
      for (std::uint64_t i = 0; i < 300; ++i) (void)f.test_and_insert(key(round * 300 + i));
      ASSERT_EQ(f.bits_set(), popcount_rescan(f)) << round;
      f.test_and_insert(std::span<const hash128>(batch).subspan(round * 100, 100),
                        present.subspan(0, 100));
      ASSERT_EQ(f.bits_set(), popcount_rescan(f)) << round;
      f.insert(key(9000 + round));
      ASSERT_EQ(f.bits_set(), popcount_rescan(f)) << round;
      if (round % 2 == 1) f.recount_bits();
      ASSERT_EQ(f.bits_set(), popcount_rescan(f)) << round;
      const blocked_bloom_filter copy = blocked_bloom_filter::deserialize(f.serialize());
      ASSERT_EQ(copy, f) << round;
      ASSERT_EQ(copy.bits_set(), f.bits_set()) << round;
    }
  }
}

// n̂ = −(m/8) ln(1 − fill) against the true n. Its standard deviation, from the variance of
// the zero-bit fraction z (per block of 256 bits with Poisson(λ) load, bits of one word are
// independent — Poisson splitting — and bits of different words covary through the load):
//   Var(zeros of a block) = 256·z(1 − z) + 256·224·(e^{λ(q² − 1)} − z²),  z = e^{−λ/32},
//   Var(z̄) = Var(block) / (256² · B),   sd(n̂) = 32·B · sd(z̄) / z   (delta method).
// Tolerance 5 sd.
TEST(BlockedBloom, EstimatedItemsIsWithinStatisticalTolerance) {
  const double q = 31.0 / 32.0;
  for (const std::uint64_t n : {5000ULL, 50000ULL, 150000ULL}) {
    blocked_bloom_filter f(1000000, kSeed);
    for (std::uint64_t i = 0; i < n; ++i) f.insert(key(i));
    const double blocks = static_cast<double>(f.blocks());
    const double lambda = static_cast<double>(n) / blocks;
    const double z = std::exp(-lambda / 32.0);
    const double block_var =
        256.0 * z * (1.0 - z) + 256.0 * 224.0 * (std::exp(lambda * (q * q - 1.0)) - z * z);
    const double sd = 32.0 * blocks * std::sqrt(block_var / (65536.0 * blocks)) / z;
    const double nd = static_cast<double>(n);
    EXPECT_NEAR(f.estimated_items(), nd, 5 * sd) << n;
    // The estimated FPR is the formula at the estimated load, so within the same band.
    EXPECT_GE(f.estimated_fpr(),
              blocked_bloom_filter::fpr(static_cast<double>(f.bits()), nd - 5 * sd));
    EXPECT_LE(f.estimated_fpr(),
              blocked_bloom_filter::fpr(static_cast<double>(f.bits()), nd + 5 * sd));
    // And it is above fill^8, which underestimates a blocked filter.
    EXPECT_GT(f.estimated_fpr(), std::pow(f.fill_ratio(), 8));
  }
  blocked_bloom_filter empty(1 << 12);
  EXPECT_EQ(empty.estimated_items(), 0.0);
  EXPECT_EQ(empty.estimated_fpr(), 0.0);
  blocked_bloom_filter full(256);
  for (std::uint64_t i = 0; i < 5000; ++i) full.insert(key(i));
  EXPECT_EQ(full.fill_ratio(), 1.0);
  EXPECT_TRUE(std::isinf(full.estimated_items()));
  EXPECT_EQ(full.estimated_fpr(), 1.0);
}

// ---- union, intersection, halving ---------------------------------------------------------

TEST(BlockedBloom, UnionEqualsTheFilterOfBothSets) {
  blocked_bloom_filter a(1 << 16, kSeed), b(1 << 16, kSeed), both(1 << 16, kSeed);
  for (std::uint64_t i = 0; i < 3000; ++i) {
    a.insert(key(i));
    both.insert(key(i));
  }
  for (std::uint64_t i = 2000; i < 5000; ++i) {
    b.insert(key(i));
    both.insert(key(i));
  }
  a.union_with(b);
  EXPECT_TRUE(a == both);
  EXPECT_EQ(a.bits_set(), popcount_rescan(a));
}

TEST(BlockedBloom, IntersectionContainsTheCommonItems) {
  blocked_bloom_filter a(1 << 16, kSeed), b(1 << 16, kSeed), common(1 << 16, kSeed);
  for (std::uint64_t i = 0; i < 3000; ++i) a.insert(key(i));
  for (std::uint64_t i = 2000; i < 5000; ++i) b.insert(key(i));
  for (std::uint64_t i = 2000; i < 3000; ++i) common.insert(key(i));
  blocked_bloom_filter and_ab = a;
  and_ab.intersect_with(b);
  EXPECT_EQ(and_ab.bits_set(), popcount_rescan(and_ab));
  for (std::uint64_t i = 2000; i < 3000; ++i) ASSERT_TRUE(and_ab.contains(key(i)));
  // F_M ∧ F_N ⊇ F_{M ∩ N}, and ⊆ each operand.
  for (std::size_t w = 0; w < a.words().size(); ++w) {
    EXPECT_EQ(and_ab.words()[w] & common.words()[w], common.words()[w]);
    EXPECT_EQ(and_ab.words()[w] & ~a.words()[w], 0u);
    EXPECT_EQ(and_ab.words()[w] & ~b.words()[w], 0u);
  }
}

TEST(BlockedBloom, MergingIncompatibleFiltersNamesTheParameter) {
  blocked_bloom_filter a(1 << 12, 1);
  const blocked_bloom_filter other_size(1 << 13, 1);
  const blocked_bloom_filter other_seed(1 << 12, 2);
  EXPECT_TRUE(a.compatible(blocked_bloom_filter(1 << 12, 1)));
  EXPECT_FALSE(a.compatible(other_size));
  EXPECT_FALSE(a.compatible(other_seed));
  // Both operations refuse both differences, and leave the filter as it was.
  a.insert(hash_item("kept", 1));
  const blocked_bloom_filter before = a;
  for (const bool union_op : {true, false}) {
    for (const auto& [other, why] :
         {std::pair{&other_size, "bits differ"}, std::pair{&other_seed, "seeds differ"}}) {
      try {
        if (union_op) {
          a.union_with(*other);
        } else {
          a.intersect_with(*other);
        }
        ADD_FAILURE() << "no exception: " << (union_op ? "union" : "intersection") << ", " << why;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      }
      EXPECT_EQ(a, before);
    }
  }
}

// reduce(x, B/2) == reduce(x, B) >> 1 for even B, so folding block pairs gives exactly the
// filter built at half size: checked for a power of two (1024 → 512 blocks) and for an even
// count that is not one (96 → 48 blocks), and repeatedly down to one block.
TEST(BlockedBloom, HalvedEqualsTheFilterBuiltAtHalfSize) {
  for (const std::uint64_t blocks : {1024ULL, 96ULL}) {
    blocked_bloom_filter f(blocks * 256, kSeed);
    blocked_bloom_filter direct(blocks * 128, kSeed);
    for (std::uint64_t i = 0; i < blocks * 10; ++i) {
      f.insert(key(i));
      direct.insert(key(i));
    }
    const blocked_bloom_filter half = f.halved();
    EXPECT_EQ(half.blocks(), blocks / 2);
    EXPECT_TRUE(half == direct);
    EXPECT_EQ(half.bits_set(), popcount_rescan(half));
    for (std::uint64_t i = 0; i < blocks * 10; ++i) ASSERT_TRUE(half.contains(key(i)));
  }
  blocked_bloom_filter g(1024 * 256, kSeed);
  for (std::uint64_t i = 0; i < 300; ++i) g.insert(key(i));
  while (g.blocks() > 1) g = g.halved();
  blocked_bloom_filter one(256, kSeed);
  for (std::uint64_t i = 0; i < 300; ++i) one.insert(key(i));
  EXPECT_TRUE(g == one);
}

TEST(BlockedBloom, HalvingNeedsAnEvenBlockCount) {
  EXPECT_THROW((void)blocked_bloom_filter(256).halved(), std::invalid_argument);
  EXPECT_THROW((void)blocked_bloom_filter(3 * 256).halved(), std::invalid_argument);
  EXPECT_NO_THROW((void)blocked_bloom_filter(2 * 256).halved());
}

// ---- serialization ------------------------------------------------------------------------

// Recomputes the trailing checksum of a record, so that a test can change a field and reach
// the parameter checks behind the checksum.
std::string reseal(std::string record) {
  const std::size_t body = record.size() - kTrailerSize;
  const std::uint64_t sum = XXH64(record.data(), body, 0);
  std::memcpy(record.data() + body, &sum, sizeof sum);
  return record;
}

TEST(BlockedBloom, SerializationRoundTripsEmptyAndFullFilters) {
  const blocked_bloom_filter empty(5000, kSeed);
  const blocked_bloom_filter empty_back = blocked_bloom_filter::deserialize(empty.serialize());
  EXPECT_TRUE(empty_back == empty);
  EXPECT_EQ(empty_back.seed(), kSeed);

  blocked_bloom_filter full = blocked_bloom_filter::for_capacity(20000, 0.01, kSeed);
  for (std::uint64_t i = 0; i < 20000; ++i) full.insert(key(i));
  const std::string rec = full.serialize();
  EXPECT_EQ(rec.size(), kHeaderSize + 20 + full.size_bytes() + kTrailerSize);
  for (const simd_path path : {simd_path::automatic, simd_path::scalar}) {
    const blocked_bloom_filter back = blocked_bloom_filter::deserialize(rec, path);
    EXPECT_TRUE(back == full);
    EXPECT_EQ(back.bits_set(), full.bits_set());
    for (std::uint64_t i = 0; i < 40000; ++i)
      ASSERT_EQ(back.contains(key(i)), full.contains(key(i)));
  }
}

// prefetch() is a hint: it leaves an empty and a full filter byte for byte as they were.
TEST(BlockedBloom, PrefetchChangesNothing) {
  for (const std::uint64_t inserted : {std::uint64_t{0}, std::uint64_t{20000}}) {
    blocked_bloom_filter f = blocked_bloom_filter::for_capacity(20000, 0.01, kSeed);
    for (std::uint64_t i = 0; i < inserted; ++i) f.insert(key(i));
    const std::string bytes = f.serialize();
    for (std::uint64_t i = 0; i < 40000; ++i) f.prefetch(key(i));
    EXPECT_EQ(f.serialize(), bytes);
  }
}

TEST(BlockedBloom, CorruptTruncatedOrForeignInputIsAFormatError) {
  blocked_bloom_filter f(4096, kSeed);
  for (std::uint64_t i = 0; i < 100; ++i) f.insert(key(i));
  const std::string rec = f.serialize();

  std::string flipped = rec;
  flipped[kHeaderSize + 40] ^= 0x10;
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(flipped), format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(rec.substr(0, rec.size() - 3)),
               format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(rec.substr(0, 10)), format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(""), format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(rec + "x"), format_error);

  // A record of another structure type.
  detail::record_writer foreign(structure_type::bloom_filter, kSeed);
  foreign.u64(4096);
  foreign.u32(8);
  foreign.u64(0);
  foreign.bytes(std::string(512, '\0').data(), 512);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(std::move(foreign).finish()), format_error);

  // Valid checksums over bad parameters (payload offsets: bits 0, hashes 8, bits_set 12).
  const auto patched = [&](std::size_t offset, const void* value, std::size_t size) {
    std::string r = rec;
    std::memcpy(r.data() + kHeaderSize + offset, value, size);
    return reseal(r);
  };
  const std::uint64_t odd_bits = 4000;    // not a multiple of 256
  const std::uint64_t fewer_bits = 2048;  // does not match the array that follows
  const std::uint64_t no_bits = 0;
  const std::uint32_t seven = 7;
  const std::uint64_t wrong_count = f.bits_set() + 1;
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(patched(0, &odd_bits, 8)), format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(patched(0, &fewer_bits, 8)), format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(patched(0, &no_bits, 8)), format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(patched(8, &seven, 4)), format_error);
  EXPECT_THROW((void)blocked_bloom_filter::deserialize(patched(12, &wrong_count, 8)), format_error);
  // The untouched record still reads (the patch helper itself is sound).
  EXPECT_TRUE(blocked_bloom_filter::deserialize(reseal(rec)) == f);
}

}  // namespace
}  // namespace sketch
