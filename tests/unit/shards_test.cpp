#include "sketch/shards.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "zipf_stream.h"

namespace sketch::shards {
namespace {

using test_util::zipf_generator;

// Pr[X > c] for X ~ Binomial(n, q), summed term by term from C(n, j) in doubles: exact
// enough for n ≤ 60 to compare with the function's recurrence.
double direct_tail(int n, double q, int c) {
  double sum = 0;
  for (int j = c + 1; j <= n; ++j) {
    double binom = 1;
    for (int i = 1; i <= j; ++i) binom = binom * (n - j + i) / i;
    sum += binom * std::pow(q, j) * std::pow(1 - q, n - j);
  }
  return sum;
}

TEST(BinomialUpperTail, EqualsTheSumOfTheMassAboveC) {
  for (const auto& [n, q] : std::vector<std::pair<int, double>>{{20, 0.3}, {60, 0.05}, {7, 0.5}}) {
    for (int c = 0; c < n; ++c) {
      const double want = direct_tail(n, q, c);
      EXPECT_NEAR(binomial_upper_tail(n, q, c), want, 1e-12 + 1e-10 * want)
          << "n " << n << " q " << q << " c " << c;
    }
  }
}

TEST(BinomialUpperTail, IsOneBelowZeroAndZeroFromN) {
  EXPECT_EQ(binomial_upper_tail(10, 0.5, -1), 1.0);
  EXPECT_EQ(binomial_upper_tail(10, 0.5, 10), 0.0);
  EXPECT_EQ(binomial_upper_tail(10, 0.5, 11), 0.0);
  EXPECT_EQ(binomial_upper_tail(0, 0.5, 0), 0.0);
}

TEST(BinomialUpperTail, OfAFairCoinAtItsMeanIsHalfOfWhatTheMeanLeaves) {
  // Binomial(100, 1/2) is symmetric about 50: Pr[X > 50] = (1 − Pr[X = 50]) / 2.
  const double at_mean = std::exp(std::lgamma(101) - 2 * std::lgamma(51) + 100 * std::log(0.5));
  EXPECT_NEAR(binomial_upper_tail(100, 0.5, 50), (1 - at_mean) / 2, 1e-13);
}

TEST(BloomShardCapacity, IsTheLeastCapacityWhoseOverflowIsAtMostAlpha) {
  const std::vector<std::pair<std::uint64_t, std::uint32_t>> cases = {
      {1'000, 4}, {100'000, 8}, {1'000'000, 32}, {50'000'000, 3}};
  for (const auto& [n, p] : cases) {
    for (double alpha : {1e-3, 0.05}) {
      const std::uint64_t c = bloom_shard_capacity(n, p, alpha);
      const double q = 1.0 / p;
      EXPECT_LE(p * binomial_upper_tail(n, q, static_cast<std::int64_t>(c)), alpha)
          << n << " over " << p;
      EXPECT_GT(p * binomial_upper_tail(n, q, static_cast<std::int64_t>(c) - 1), alpha)
          << n << " over " << p;
      EXPECT_GT(static_cast<double>(c), static_cast<double>(n) / p);
    }
  }
}

TEST(BloomShardCapacity, OfOnePartitionOrNoItemsIsTheItems) {
  EXPECT_EQ(bloom_shard_capacity(12345, 1), 12345u);
  EXPECT_EQ(bloom_shard_capacity(0, 16), 0u);
}

TEST(BloomShardCapacity, RefusesNoPartitionsAndAnOverflowOutsideZeroOne) {
  EXPECT_THROW((void)bloom_shard_capacity(100, 0), std::invalid_argument);
  EXPECT_THROW((void)bloom_shard_capacity(100, 4, 0.0), std::invalid_argument);
  EXPECT_THROW((void)bloom_shard_capacity(100, 4, 1.0), std::invalid_argument);
}

// The memory margin the header states, P·c/n − 1 for 32 partitions (α = 10⁻³): 12.7% at
// 1,000 items per partition, 4.0% at 10,000, 1.25% at 100,000 (to the rounding of the
// header's figures).
TEST(BloomShardCapacity, CostsTheMarginTheHeaderStates) {
  const auto margin = [](std::uint64_t per_partition) {
    const std::uint64_t n = 32 * per_partition;
    return 32.0 * static_cast<double>(bloom_shard_capacity(n, 32)) / static_cast<double>(n) - 1;
  };
  EXPECT_NEAR(margin(1'000), 0.127, 0.0005);
  EXPECT_NEAR(margin(10'000), 0.040, 0.0005);
  EXPECT_NEAR(margin(100'000), 0.0125, 0.00005);
}

// The guarantee measured: n distinct keys hashed into P partitions (as Kafka's partitioner
// spreads keyed messages), T times with fresh keys; the share of trials in which some
// partition holds more than the capacity is at most α (the union bound only adds slack),
// within three standard deviations of a proportion over T trials.
TEST(BloomShardCapacity, HoldsEveryPartitionsItemsButInAlphaOfTheTrials) {
  constexpr std::uint64_t kItems = 8'000;
  constexpr std::uint32_t kPartitions = 16;
  constexpr int kTrials = 2'000;
  constexpr double kAlpha = 0.05;
  const std::uint64_t c = bloom_shard_capacity(kItems, kPartitions, kAlpha);
  std::mt19937_64 rng(20261129);
  int over = 0;
  for (int t = 0; t < kTrials; ++t) {
    std::vector<std::uint64_t> count(kPartitions);
    for (std::uint64_t i = 0; i < kItems; ++i) {
      const std::uint64_t key = rng();
      ++count[hash_bytes(&key, sizeof key, kDefaultSeed).low % kPartitions];
    }
    if (*std::max_element(count.begin(), count.end()) > c) ++over;
  }
  const double sigma = std::sqrt(kAlpha * (1 - kAlpha) / kTrials);
  EXPECT_LE(static_cast<double>(over) / kTrials, kAlpha + 3 * sigma) << "capacity " << c;
}

TEST(RollingBloomShardCapacity, PutsTheMarginOnEachGenerationsShare) {
  // 3 generations hold 100,000 items, 50,000 each: the margin is that of 50,000 items.
  EXPECT_EQ(rolling_bloom_shard_capacity(100'000, 3, 8), 2 * bloom_shard_capacity(50'000, 8));
  EXPECT_EQ(rolling_bloom_shard_capacity(100'001, 3, 8), 2 * bloom_shard_capacity(50'001, 8));
  EXPECT_THROW((void)rolling_bloom_shard_capacity(100, 1, 8), std::invalid_argument);
}

// Shards sized by rolling_bloom_shard_capacity() for a keyed stream of n distinct items per
// window, coming evenly over the window: no shard rotates early (the sizing's overflow is 10⁻³),
// and new items, each tested against the shard of its partition, are false positives at no more
// than the target rate, within three standard deviations of a proportion over the queries.
TEST(RollingBloomShardCapacity, KeepsTheTargetRateOfAKeyedStream) {
  constexpr std::uint64_t kItems = 40'000;
  constexpr std::uint32_t kPartitions = 8;
  constexpr double kFpr = 0.01;
  rolling_bloom_options o;
  o.window_ms = 60'000;
  o.generations = 3;
  o.fpr = kFpr;
  o.capacity = rolling_bloom_shard_capacity(kItems, o.generations, kPartitions);
  std::vector<std::unique_ptr<rolling_bloom>> shards;
  for (std::uint32_t p = 0; p < kPartitions; ++p)
    shards.push_back(std::make_unique<rolling_bloom>(o));
  const auto partition_of = [](hash128 h) { return h.high % kPartitions; };
  for (std::uint64_t i = 0; i < kItems; ++i) {
    const hash128 h = hash_item(fmt::format("seen-{}", i), kDefaultSeed);
    // The items come evenly over the window: each generation receives its share.
    const auto at = static_cast<std::int64_t>(i * o.window_ms / kItems);
    (void)shards[partition_of(h)]->test_and_insert(h, at);
  }
  for (const auto& s : shards) EXPECT_EQ(s->rotations_by_capacity(), 0u);
  constexpr int kQueries = 200'000;
  int positives = 0;
  for (int i = 0; i < kQueries; ++i) {
    const hash128 h = hash_item(fmt::format("new-{}", i), kDefaultSeed);
    positives += shards[partition_of(h)]->contains(h) ? 1 : 0;
  }
  const double sigma = std::sqrt(kFpr * (1 - kFpr) / kQueries);
  EXPECT_LE(static_cast<double>(positives) / kQueries, kFpr + 3 * sigma);
}

TEST(CombinedBloomFigures, AreTheMeanRateTheSumOfItemsAndTheShortestWindow) {
  rolling_bloom_options o;
  o.window_ms = 10'000;
  o.generations = 3;
  o.fpr = 0.01;
  o.capacity = 10'000;
  rolling_bloom light(o);
  rolling_bloom heavy(o);
  for (int i = 0; i < 200; ++i) (void)light.test_and_insert(fmt::format("l{}", i), 1'000);
  // 16,000 items over 4 s: three rotations by capacity (a share is 5,000), so that the
  // heavy shard's oldest live generation is younger than the light one's.
  for (int i = 0; i < 16'000; ++i)
    (void)heavy.test_and_insert(fmt::format("h{}", i), 1'000 + i / 4);
  const std::vector<const rolling_bloom*> both = {&light, &heavy};
  const bloom_figures f = combined_bloom_figures(both, 8'000);
  EXPECT_DOUBLE_EQ(f.estimated_fpr, (light.estimated_fpr() + heavy.estimated_fpr()) / 2);
  EXPECT_DOUBLE_EQ(f.estimated_items, light.estimated_items() + heavy.estimated_items());
  ASSERT_EQ(f.fill_ratio.size(), 3u);
  for (std::size_t g = 0; g < 3; ++g)
    EXPECT_DOUBLE_EQ(f.fill_ratio[g], (light.fill_ratio(g) + heavy.fill_ratio(g)) / 2);
  EXPECT_EQ(f.guaranteed_horizon_ms, light.guaranteed_horizon_ms());
  EXPECT_EQ(f.effective_window_ms,
            std::min(light.effective_window_ms(8'000), heavy.effective_window_ms(8'000)));
  EXPECT_NE(light.effective_window_ms(8'000), heavy.effective_window_ms(8'000));
}

TEST(CombinedBloomFigures, OfNoShardsAreZeros) {
  const bloom_figures f = combined_bloom_figures(std::span<const rolling_bloom* const>{}, 0);
  EXPECT_EQ(f.estimated_fpr, 0);
  EXPECT_EQ(f.estimated_items, 0);
  EXPECT_TRUE(f.fill_ratio.empty());
}

// A 1 s window of 10 slices; ε = 0.01 (w = 272), δ = 0.01 (d = 5); top 10, heavy at 5%.
rolling_count_min_options shard_options() {
  rolling_count_min_options o;
  o.window_ms = 1000;
  o.buckets = 10;
  o.epsilon = 0.01;
  o.delta = 0.01;
  o.top_k = 10;
  o.threshold = 0.05;
  return o;
}

struct sharded_stream {
  std::vector<std::unique_ptr<rolling_count_min>> shards;
  rolling_count_min whole{shard_options()};
  std::map<std::string, std::uint64_t> truth;

  explicit sharded_stream(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      shards.push_back(std::make_unique<rolling_count_min>(shard_options()));
  }
  [[nodiscard]] std::vector<const rolling_count_min*> views() const {
    std::vector<const rolling_count_min*> v;
    for (const auto& s : shards) v.push_back(s.get());
    return v;
  }
  // 20,000 items of a Zipf(1.1) stream over 2,000 ranks inside one slice; keyed: each item
  // to the shard its hash names, else round robin.
  void feed(bool keyed) {
    zipf_generator zipf(2'000, 1.1, 7);
    for (std::size_t i = 0; i < 20'000; ++i) {
      const std::string item = fmt::format("item-{}", zipf());
      const hash128 h = hash_item(item, kDefaultSeed);
      const std::size_t s = keyed ? h.high % shards.size() : i % shards.size();
      (void)shards[s]->update(h, item, 5);
      (void)whole.update(h, item, 5);
      ++truth[item];
    }
    for (auto& s : shards) s->refresh();
    whole.refresh();
  }
};

// f(x) ≤ combined ≤ the estimate of one sketch of the whole stream (the header's chain of
// inequalities), for every item: the linearity argument, exact, not probabilistic.
void expect_between_truth_and_one_sketch(const sharded_stream& s) {
  const auto views = s.views();
  EXPECT_EQ(combined_window_items(views), s.whole.window_items());
  for (const auto& [item, f] : s.truth) {
    const hash128 h = hash_item(item, kDefaultSeed);
    const std::uint64_t combined = combined_estimate(views, h);
    EXPECT_GE(combined, f) << item;
    EXPECT_LE(combined, s.whole.estimate(h)) << item;
  }
}

TEST(CombinedEstimate, OfAKeyedStreamLiesBetweenTheTruthAndOneSketchOfTheWhole) {
  sharded_stream s(4);
  s.feed(/*keyed=*/true);
  expect_between_truth_and_one_sketch(s);
}

TEST(CombinedEstimate, OfAnItemSpreadOverEveryShardLiesBetweenTheTruthAndOneSketch) {
  sharded_stream s(4);
  s.feed(/*keyed=*/false);
  expect_between_truth_and_one_sketch(s);
}

TEST(CombinedEstimate, RefusesShardsOfAnotherShape) {
  rolling_count_min a(shard_options());
  rolling_count_min_options other = shard_options();
  other.epsilon = 0.001;
  rolling_count_min b(other);
  const std::vector<const rolling_count_min*> both = {&a, &b};
  EXPECT_THROW((void)combined_estimate(both, hash_item("x", kDefaultSeed)), std::invalid_argument);
  EXPECT_THROW((void)combined_top(both, 3), std::invalid_argument);
}

// Every item whose true count is ≥ φN is reported heavy, keyed or not (the header's
// pigeonhole argument), and the order is by combined estimate.
void expect_every_heavy_item_reported(const sharded_stream& s) {
  const auto views = s.views();
  const auto top = combined_top(views, 10);
  ASSERT_FALSE(top.empty());
  for (std::size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].estimate, top[i].estimate);
  const double n = static_cast<double>(combined_window_items(views));
  std::set<std::string> reported_heavy;
  for (const auto& e : top) {
    if (e.heavy) reported_heavy.insert(e.item);
    EXPECT_EQ(e.estimate, combined_estimate(views, hash_item(e.item, kDefaultSeed)));
  }
  int heavy = 0;
  for (const auto& [item, f] : s.truth) {
    if (static_cast<double>(f) < 0.05 * n) continue;
    ++heavy;
    EXPECT_TRUE(reported_heavy.contains(item)) << item << " true count " << f << " of " << n;
  }
  EXPECT_GE(heavy, 3) << "the stream has too few heavy items to test anything";
}

TEST(CombinedTop, OfAKeyedStreamReportsEveryHeavyItem) {
  sharded_stream s(4);
  s.feed(/*keyed=*/true);
  expect_every_heavy_item_reported(s);
}

TEST(CombinedTop, OfAStreamSpreadOverTheShardsReportsEveryHeavyItem) {
  sharded_stream s(4);
  s.feed(/*keyed=*/false);
  expect_every_heavy_item_reported(s);
}

TEST(CombinedTop, OfNoShardsIsEmpty) {
  EXPECT_TRUE(combined_top(std::span<const rolling_count_min* const>{}, 5).empty());
}

}  // namespace
}  // namespace sketch::shards
