#include "sketch/top_k.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/count_min.h"
#include "sketch/serialize.h"
#include "zipf_stream.h"

namespace sketch {

// Readable failure messages.
void PrintTo(const heavy_event& e, std::ostream* os) {
  *os << (e.kind == heavy_event::kind::enter ? "enter " : "leave ") << e.item << " " << e.estimate
      << "/" << e.window_items;
}
void PrintTo(const top_k_tracker::entry& e, std::ostream* os) {
  *os << e.item << " " << e.estimate << (e.heavy ? " heavy" : "");
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using kind = enum heavy_event::kind;

using test_util::zipf_generator;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

// Feeds an item through a sketch and the tracker, as the daemon does.
void count(count_min_sketch& sketch, top_k_tracker& tracker, std::string_view item) {
  const hash128 h = hash_item(item, sketch.seed());
  const std::uint64_t estimate = sketch.update(h);
  tracker.offer(h, item, estimate, sketch.total());
}

void refresh(const count_min_sketch& sketch, top_k_tracker& tracker) {
  tracker.refresh([&](hash128 h) { return sketch.estimate(h); }, sketch.total());
}

TEST(TopK, ConstructionValidatesAndSizesTheCandidates) {
  EXPECT_EQ(top_k_tracker::default_capacity(20, 0.01), 200u);  // ⌈2/φ⌉ = 200 > 2k = 40
  EXPECT_EQ(top_k_tracker::default_capacity(20, 0.5), 40u);    // 2k = 40 > ⌈2/φ⌉ = 4
  EXPECT_EQ(top_k_tracker::default_capacity(20, 1e-6), top_k_tracker::kMaxCapacity);
  EXPECT_EQ(top_k_tracker::default_capacity(4096, 0.5), 4096u);
  const top_k_tracker t(5, 0.1);
  EXPECT_EQ(t.capacity(), 20u);
  EXPECT_EQ(t.k(), 5u);
  EXPECT_EQ(t.phi(), 0.1);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_GT(t.size_bytes(), 20u * top_k_tracker::kMaxItemBytes);

  EXPECT_THAT(error_of([] { top_k_tracker t(0, 0.1); }), HasSubstr("k must be"));
  EXPECT_THAT(error_of([] { top_k_tracker t(5, 0.0); }), HasSubstr("phi"));
  EXPECT_THAT(error_of([] { top_k_tracker t(5, 1.5); }), HasSubstr("phi"));
  EXPECT_THAT(error_of([] { top_k_tracker t(5, std::nan("")); }), HasSubstr("phi"));
  EXPECT_THAT(error_of([] { top_k_tracker t(5, 0.1, 4); }), HasSubstr("capacity"));
  EXPECT_THAT(error_of([] { top_k_tracker t(5, 0.1, 5000); }), HasSubstr("capacity"));
}

// A Zipf(1.1) stream of 1M items over 100k distinct, sketch ε = 0.0005 (w = 5437, εN ≈ 500),
// δ = 0.001 (d = 7), k = 20, φ = 0.01 (200 candidates).
//
// Cormode & Muthukrishnan 2005, section 5.1: if every estimate is within εN of the truth, an
// item whose true count exceeds the 21st largest by more than εN is reported. Only an item j
// outside the true top 20 whose estimate exceeds f_j + εN could outrank it, or fill one of the
// 200 candidate slots ahead of it (rejecting or evicting it needs 200 > 20 candidates with
// larger estimates); each item does so with probability ≤ δ. For this distribution the
// expected counts are f_r ≈ N·r^{-1.1}/7.42 (f_18 ≈ 5606, f_19 ≈ 5283, f_21 ≈ 4732): ranks up
// to 18 clear f_21 + εN by ≥ 374, which is 3.7 standard deviations of the sampled difference
// (sqrt(f_18 + f_21) ≈ 102, Poisson counts); rank 19 clears it by 51 only. So the assertions
// are: every item that clears the margin in the sample is reported, and at least 18 do
// (recall ≥ 0.9).
TEST(TopK, FindsTheTrueTopKOfAZipfStream) {
  constexpr std::size_t kDistinct = 100'000;
  constexpr std::size_t kLength = 1'000'000;
  constexpr std::uint32_t kK = 20;
  std::vector<std::string> items;
  std::vector<hash128> hashes;
  items.reserve(kDistinct);
  hashes.reserve(kDistinct);
  for (std::size_t r = 0; r < kDistinct; ++r) {
    items.push_back("user-" + std::to_string(r * 7919 % kDistinct));
    hashes.push_back(hash_item(items.back(), kDefaultSeed));
  }
  std::vector<std::uint64_t> truth(kDistinct, 0);
  count_min_sketch sketch = count_min_sketch::from_error(0.0005, 0.001);
  top_k_tracker tracker(kK, 0.01);
  zipf_generator zipf(kDistinct, 1.1, 11);
  for (std::size_t i = 0; i < kLength; ++i) {
    const std::size_t r = zipf();
    ++truth[r];
    const std::uint64_t estimate = sketch.update(hashes[r]);
    tracker.offer(hashes[r], items[r], estimate, sketch.total());
  }
  refresh(sketch, tracker);
  const std::vector<top_k_tracker::entry> top = tracker.top();
  ASSERT_EQ(top.size(), kK);

  std::vector<std::size_t> by_count(kDistinct);
  for (std::size_t r = 0; r < kDistinct; ++r) by_count[r] = r;
  std::sort(by_count.begin(), by_count.end(),
            [&](std::size_t a, std::size_t b) { return truth[a] > truth[b]; });
  const double bound = sketch.error_bound();
  const std::uint64_t next = truth[by_count[kK]];
  std::set<std::string> reported;
  for (const auto& e : top) reported.insert(e.item);
  std::size_t guaranteed = 0;
  std::size_t found = 0;
  for (std::size_t i = 0; i < kK; ++i) {
    const std::size_t r = by_count[i];
    found += reported.count(items[r]);
    if (static_cast<double>(truth[r]) > static_cast<double>(next) + bound) {
      ++guaranteed;
      EXPECT_EQ(reported.count(items[r]), 1u) << items[r] << " with count " << truth[r];
    }
  }
  EXPECT_GE(guaranteed, 18u);
  EXPECT_GE(found, guaranteed);

  // Highest first; estimates never below the truth, and within εN: each of the 20 is over
  // with probability at most δ, so all of them are within with probability at least
  // 1 − 20δ (the union bound); with this stream they are.
  std::map<std::string, std::size_t> rank_of;
  for (std::size_t r = 0; r < kDistinct; ++r) rank_of[items[r]] = r;
  for (std::size_t i = 0; i < top.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(top[i - 1].estimate, top[i].estimate);
    }
    const std::uint64_t f = truth[rank_of.at(top[i].item)];
    EXPECT_GE(top[i].estimate, f);
    EXPECT_LE(static_cast<double>(top[i].estimate), static_cast<double>(f) + bound);
    // After the refresh an item at or above φN is heavy, one below (1 − hysteresis)·φN is
    // not; in between it keeps the state it had.
    const double share = static_cast<double>(top[i].estimate);
    if (share >= 0.01 * kLength) {
      EXPECT_TRUE(top[i].heavy) << top[i].item;
    }
    if (share < (1 - top_k_tracker::kHysteresis) * 0.01 * kLength) {
      EXPECT_FALSE(top[i].heavy) << top[i].item;
    }
  }
}

// φ = 0.1: after 2000 background items (500 distinct, 4 each) a burst of "hot" enters the
// heavy set once its estimate reaches 0.1·(2000 + c), at c = 223 less any collision excess;
// 10000 more background items put N at 12500, so hot (500) is under φN = 1250 and leaves.
// candidates(): every candidate with its hash, beyond the k that top() shows.
TEST(TopK, CandidatesAreEveryItemKeptWithItsHash) {
  top_k_tracker t(/*k=*/2, /*phi=*/0.2, /*capacity=*/4);
  const std::vector<std::pair<std::string, std::uint64_t>> offered = {
      {"a", 30}, {"b", 20}, {"c", 10}, {"d", 5}};
  for (const auto& [item, estimate] : offered)
    t.offer(hash_item(item, kDefaultSeed), item, estimate, 100);
  EXPECT_EQ(t.top().size(), 2u);
  std::map<std::string, top_k_tracker::candidate> by_item;
  for (auto& c : t.candidates()) by_item.emplace(c.item, c);
  ASSERT_EQ(by_item.size(), 4u);
  for (const auto& [item, estimate] : offered) {
    EXPECT_EQ(by_item.at(item).hash, hash_item(item, kDefaultSeed));
    EXPECT_EQ(by_item.at(item).estimate, estimate);
    EXPECT_EQ(by_item.at(item).heavy, estimate >= 20) << item;
  }
}

TEST(TopK, ItemEntersWhenHeavyAndLeavesWhenItsShareFalls) {
  count_min_sketch sketch = count_min_sketch::from_error(0.001, 0.001);
  top_k_tracker tracker(5, 0.1);
  for (int i = 0; i < 2000; ++i) count(sketch, tracker, "bg-" + std::to_string(i % 500));
  refresh(sketch, tracker);
  // The first background items were heavy at the very start of the stream (1 of 1 …);
  // the refresh records that they left.
  for (const heavy_event& e : tracker.drain_events()) EXPECT_NE(e.item, "hot");
  EXPECT_TRUE(tracker.drain_events().empty());

  for (int i = 0; i < 500; ++i) count(sketch, tracker, "hot");
  std::vector<heavy_event> events = tracker.drain_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, kind::enter);
  EXPECT_EQ(events[0].item, "hot");
  EXPECT_GE(static_cast<double>(events[0].estimate),
            0.1 * static_cast<double>(events[0].window_items));
  EXPECT_GT(events[0].window_items, 2000u);
  EXPECT_LT(events[0].window_items, 2500u);
  refresh(sketch, tracker);
  EXPECT_TRUE(tracker.drain_events().empty());
  ASSERT_FALSE(tracker.top().empty());
  EXPECT_EQ(tracker.top()[0].item, "hot");
  EXPECT_TRUE(tracker.top()[0].heavy);

  for (int i = 0; i < 10000; ++i) count(sketch, tracker, "bg-" + std::to_string(i % 500));
  refresh(sketch, tracker);
  events = tracker.drain_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, kind::leave);
  EXPECT_EQ(events[0].item, "hot");
  EXPECT_GE(events[0].estimate, 500u);
  EXPECT_EQ(events[0].window_items, 12500u);
  EXPECT_FALSE(tracker.top()[0].heavy);
}

TEST(TopK, EvictedHeavyCandidateLeaves) {
  top_k_tracker tracker(1, 0.1, 2);
  const auto h = [](std::string_view s) { return hash_item(s, kDefaultSeed); };
  tracker.offer(h("a"), "a", 10, 20);
  tracker.offer(h("b"), "b", 20, 40);
  tracker.offer(h("c"), "c", 15, 60);  // full, and 15 > 10: a (heavy) is evicted
  tracker.offer(h("d"), "d", 5, 60);   // 5 < 15: rejected, no event
  const std::vector<heavy_event> events = tracker.drain_events();
  EXPECT_THAT(
      events,
      ElementsAre(heavy_event{kind::enter, "a", 10, 20}, heavy_event{kind::enter, "b", 20, 40},
                  heavy_event{kind::leave, "a", 10, 60}, heavy_event{kind::enter, "c", 15, 60}));
  EXPECT_EQ(tracker.size(), 2u);
  EXPECT_THAT(tracker.top(), ElementsAre(top_k_tracker::entry{"b", 20, true}));
}

// The tracker rejects newcomers against a lower bound on the smallest estimate, which goes
// stale when the smallest candidate grows: a stale bound must neither admit a newcomer that
// cannot enter nor evict anything but the smallest candidate by (estimate, hash), and an
// estimate lowered by offer() must lower the bound.
TEST(TopK, EvictsTheSmallestCandidateWhateverTheBound) {
  top_k_tracker tracker(4, 1.0, 4);  // φ = 1: nothing becomes heavy, no events
  const auto h = [](std::string_view s) { return hash_item(s, kDefaultSeed); };
  const auto items = [&] {
    std::set<std::string> out;
    for (const auto& e : tracker.top()) out.insert(e.item);
    return out;
  };
  constexpr std::uint64_t n = 1'000'000;
  tracker.offer(h("a"), "a", 5, n);
  tracker.offer(h("b"), "b", 6, n);
  tracker.offer(h("c"), "c", 7, n);
  tracker.offer(h("d"), "d", 8, n);
  tracker.offer(h("a"), "a", 20, n);         // the smallest grows: the bound (5) is stale
  tracker.offer_growing(h("e"), "e", 6, n);  // 6 > 5 but not > b's 6: rejected
  EXPECT_EQ(items(), (std::set<std::string>{"a", "b", "c", "d"}));
  tracker.offer_growing(h("f"), "f", 7, n);  // 7 > 6: evicts b
  EXPECT_EQ(items(), (std::set<std::string>{"a", "c", "d", "f"}));
  // c and f tie at 7: the one with the smaller hash (high, then low) goes first.
  const bool c_first =
      std::make_pair(h("c").high, h("c").low) < std::make_pair(h("f").high, h("f").low);
  tracker.offer_growing(h("g"), "g", 8, n);
  EXPECT_EQ(items(), (std::set<std::string>{"a", "d", "g", c_first ? "f" : "c"}));
  tracker.offer(h("d"), "d", 1, n);  // lowered: the bound follows
  tracker.offer(h("i"), "i", 2, n);  // 2 > 1: evicts d
  EXPECT_EQ(items(), (std::set<std::string>{"a", "g", "i", c_first ? "f" : "c"}));
  EXPECT_TRUE(tracker.drain_events().empty());
}

TEST(TopK, TopIsOrderedByEstimateThenItem) {
  top_k_tracker tracker(3, 0.5, 8);
  const auto offer = [&](std::string_view s, std::uint64_t estimate) {
    tracker.offer(hash_item(s, kDefaultSeed), s, estimate, 1000);
  };
  offer("delta", 5);
  offer("bravo", 7);
  offer("charlie", 7);
  offer("alpha", 7);
  offer("echo", 1);
  EXPECT_THAT(tracker.top(), ElementsAre(top_k_tracker::entry{"alpha", 7, false},
                                         top_k_tracker::entry{"bravo", 7, false},
                                         top_k_tracker::entry{"charlie", 7, false}));
  offer("delta", 600);  // an update in place; crossing φ·n = 500 is an enter event
  EXPECT_EQ(tracker.top()[0], (top_k_tracker::entry{"delta", 600, true}));
  EXPECT_EQ(tracker.size(), 5u);
  EXPECT_EQ(tracker.drain_events().size(), 1u);
}

TEST(TopK, LongItemsAreStoredTruncatedAndIdentifiedByTheirHash) {
  top_k_tracker tracker(2, 0.5, 4);
  const std::string long_a(300, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';  // same first 256 bytes, another item
  tracker.offer(hash_item(long_a, 1), long_a, 3, 10);
  tracker.offer(hash_item(long_b, 1), long_b, 2, 10);
  tracker.offer(hash_item(long_a, 1), long_a, 4, 10);
  EXPECT_EQ(tracker.size(), 2u);
  const auto top = tracker.top();
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].item, long_a.substr(0, top_k_tracker::kMaxItemBytes));
  EXPECT_EQ(top[0].estimate, 4u);
  EXPECT_EQ(top[1].estimate, 2u);
}

TEST(TopK, RefreshForgetsItemsWhoseEstimateDropsToZero) {
  top_k_tracker tracker(4, 0.25, 4);
  std::map<std::string, std::uint64_t> estimates{{"a", 50}, {"b", 30}, {"c", 20}};
  for (const auto& [item, e] : estimates)
    tracker.offer(hash_item(item, kDefaultSeed), item, e, 100);
  (void)tracker.drain_events();  // a and b entered
  estimates = {{"a", 0}, {"b", 30}, {"c", 20}};
  tracker.refresh(
      [&](hash128 h) {
        for (const auto& [item, e] : estimates) {
          if (hash_item(item, kDefaultSeed) == h) return e;
        }
        return std::uint64_t{0};
      },
      50);
  EXPECT_THAT(tracker.drain_events(), ElementsAre(heavy_event{kind::leave, "a", 0, 50},
                                                  heavy_event{kind::enter, "c", 20, 50}));
  EXPECT_EQ(tracker.size(), 2u);
  EXPECT_THAT(tracker.top(), ElementsAre(top_k_tracker::entry{"b", 30, true},
                                         top_k_tracker::entry{"c", 20, true}));
}

TEST(TopK, EventBufferDropsTheOldestWhenFull) {
  top_k_tracker tracker(1, 1.0, 1);  // 1 slot, events buffer of kMinEventCapacity
  const std::uint32_t offers = top_k_tracker::kMinEventCapacity + 10;
  for (std::uint32_t i = 0; i < offers; ++i) {
    const std::string item = std::to_string(i);
    const std::uint64_t estimate = i + top_k_tracker::kMinHeavyEstimate;     // heavy from the start
    tracker.offer(hash_item(item, kDefaultSeed), item, estimate, estimate);  // each evicts the last
  }
  // Each offer is an enter, each eviction a leave: 2·offers − 1 events recorded.
  const std::vector<heavy_event> events = tracker.drain_events();
  EXPECT_EQ(events.size(), top_k_tracker::kMinEventCapacity);
  EXPECT_EQ(tracker.dropped_events(), 2 * offers - 1 - top_k_tracker::kMinEventCapacity);
  const std::uint64_t last = offers - 1 + top_k_tracker::kMinHeavyEstimate;
  EXPECT_EQ(events.back(), (heavy_event{kind::enter, std::to_string(offers - 1), last, last}));
}

// The tracker against a straightforward model (a map and a linear search for the minimum,
// with the same order: estimate, then hash) over random offers: the candidate set, every
// estimate and every event must be the same.
TEST(TopK, MatchesAReferenceModelUnderRandomOffers) {
  constexpr std::uint32_t kCapacity = 16;
  top_k_tracker tracker(kCapacity, 0.05, kCapacity);
  struct candidate {
    std::string item;
    std::uint64_t estimate;
    bool heavy;
  };
  std::map<std::pair<std::uint64_t, std::uint64_t>, candidate> model;  // by (high, low)
  std::vector<heavy_event> model_events;
  std::mt19937_64 rng(12);
  std::uint64_t n = 0;
  for (int step = 0; step < 20'000; ++step) {
    const std::string item = fmt::format("i{}", rng() % 64);
    const hash128 h = hash_item(item, kDefaultSeed);
    const std::uint64_t estimate = rng() % 1000;
    n += 1 + rng() % 50;
    tracker.offer(h, item, estimate, n);

    if (estimate > 0) {
      const auto key = std::make_pair(h.high, h.low);
      auto it = model.find(key);
      if (it == model.end()) {
        if (model.size() == kCapacity) {
          auto min = model.begin();
          for (auto c = model.begin(); c != model.end(); ++c) {
            if (c->second.estimate < min->second.estimate) min = c;  // ties: smaller key first
          }
          if (estimate > min->second.estimate) {
            if (min->second.heavy)
              model_events.push_back({kind::leave, min->second.item, min->second.estimate, n});
            model.erase(min);
            it = model.emplace(key, candidate{item, estimate, false}).first;
          }
        } else {
          it = model.emplace(key, candidate{item, estimate, false}).first;
        }
      } else {
        it->second.estimate = estimate;
      }
      if (it != model.end() && !it->second.heavy &&
          static_cast<double>(estimate) >= 0.05 * static_cast<double>(n)) {
        it->second.heavy = true;
        model_events.push_back({kind::enter, item, estimate, n});
      }
    }
    if (step % 20 == 0) {  // at most 2 events per offer: 40 < the 64 the buffer holds
      std::vector<top_k_tracker::entry> expected;
      for (const auto& [key, c] : model) expected.push_back({c.item, c.estimate, c.heavy});
      std::sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
        return a.estimate != b.estimate ? a.estimate > b.estimate : a.item < b.item;
      });
      ASSERT_EQ(tracker.top(), expected) << "step " << step;
      ASSERT_EQ(tracker.drain_events(), model_events) << "step " << step;
      model_events.clear();
    }
  }
}

// offer_growing() is offer() with an early reject that is exact when estimates never fall
// between refresh() calls: fed the same Count-Min estimates (plain and conservative; both
// only grow) with a refresh every 1,000 items, the two trackers stay byte-identical. The
// small capacity (8 slots for 2,000 Zipf items) keeps the tracker full and rejecting.
TEST(TopK, OfferGrowingMatchesOfferForGrowingEstimates) {
  for (const bool conservative : {false, true}) {
    count_min_sketch sketch(256, 4, 7, conservative);
    top_k_tracker plain(4, 0.05, 8, 7);
    top_k_tracker growing(4, 0.05, 8, 7);
    zipf_generator zipf(2000, 1.1, 17);
    for (int i = 1; i <= 20'000; ++i) {
      const std::string item = fmt::format("g{}", zipf());
      const hash128 h = hash_item(item, 7);
      const std::uint64_t estimate = sketch.update(h);
      plain.offer(h, item, estimate, sketch.total());
      growing.offer_growing(h, item, estimate, sketch.total());
      if (i % 1000 == 0) {
        refresh(sketch, plain);
        refresh(sketch, growing);
        ASSERT_EQ(growing.serialize(), plain.serialize()) << "after item " << i;
      }
    }
    EXPECT_EQ(growing.top(), plain.top());
    EXPECT_EQ(growing.drain_events(), plain.drain_events());
  }
}

// The batch offer is offer_growing() item by item: fed the estimates of a batch counted first
// (the whole batch updated, then offered) over the same Zipf stream, in batches of random sizes
// (some filling the tracker part way, some longer than a run of kBatchRun), with a refresh every
// few batches, the two trackers stay byte-identical and record the same events. 8 slots for 2,000
// items keep the tracker full and its bound test busy; k = 4 at φ = 0.05 makes enter and leave
// events.
TEST(TopK, BatchOfferIsOfferGrowingItemByItem) {
  for (const bool conservative : {false, true}) {
    count_min_sketch one_sketch(256, 4, 7, conservative);
    count_min_sketch batch_sketch = one_sketch;
    top_k_tracker one(4, 0.05, 8, 7);
    top_k_tracker batched(4, 0.05, 8, 7);
    zipf_generator zipf(2000, 1.1, 17);
    std::mt19937_64 rng(5);
    std::vector<std::string> items;
    std::vector<hash128> hashes;
    std::vector<std::uint64_t> estimates;
    for (int batch = 1; batch <= 200; ++batch) {
      const std::size_t size = rng() % 600;
      items.clear();
      hashes.clear();
      for (std::size_t i = 0; i < size; ++i) {
        items.push_back(fmt::format("g{}", zipf()));
        hashes.push_back(hash_item(items.back(), 7));
      }
      estimates.resize(size);
      const std::uint64_t n_before = batch_sketch.total();
      for (std::size_t i = 0; i < size; ++i) estimates[i] = batch_sketch.update(hashes[i]);
      batched.offer_growing(
          std::span<const hash128>(hashes), std::span<const std::uint64_t>(estimates),
          [&](std::size_t i) { return std::string_view(items[i]); }, n_before);
      for (std::size_t i = 0; i < size; ++i) {
        const std::uint64_t estimate = one_sketch.update(hashes[i]);
        one.offer_growing(hashes[i], items[i], estimate, one_sketch.total());
      }
      ASSERT_EQ(batched.serialize(), one.serialize()) << "after batch " << batch;
      if (batch % 7 == 0) {
        refresh(one_sketch, one);
        refresh(batch_sketch, batched);
      }
    }
    EXPECT_EQ(batched.top(), one.top());
    const std::vector<heavy_event> events = one.drain_events();
    EXPECT_FALSE(events.empty());
    EXPECT_EQ(batched.drain_events(), events);
  }
}

// The batch offer with each item's N given (the daemon's, whose batches hold skipped
// messages too): an entry of estimate 0 is no item, ignored whether the tracker is filling
// or full, so a batch with such entries between the items is the items offered one by one.
TEST(TopK, BatchOfferSkipsEntriesOfEstimateZero) {
  count_min_sketch sketch(256, 4, 7);
  top_k_tracker one(4, 0.05, 8, 7);
  top_k_tracker batched(4, 0.05, 8, 7);
  zipf_generator zipf(2000, 1.1, 19);
  std::mt19937_64 rng(6);
  std::vector<std::string> items;
  std::vector<hash128> hashes;
  std::vector<std::uint64_t> estimates;
  std::vector<std::uint64_t> totals;
  for (int batch = 1; batch <= 100; ++batch) {
    items.clear();
    hashes.clear();
    estimates.clear();
    totals.clear();
    const std::size_t size = rng() % 600;
    for (std::size_t i = 0; i < size; ++i) {
      if (rng() % 4 == 0) {  // a skipped message: no item, a stale hash
        items.emplace_back();
        hashes.push_back(hash128{rng(), rng()});
        estimates.push_back(0);
        totals.push_back(rng());
        continue;
      }
      items.push_back(fmt::format("g{}", zipf()));
      hashes.push_back(hash_item(items.back(), 7));
      estimates.push_back(sketch.update(hashes.back()));
      totals.push_back(sketch.total());
      one.offer_growing(hashes.back(), items.back(), estimates.back(), totals.back());
    }
    batched.offer_growing(
        std::span<const hash128>(hashes), std::span<const std::uint64_t>(estimates),
        [&](std::size_t i) { return std::string_view(items[i]); },
        [&](std::size_t i) { return totals[i]; });
    ASSERT_EQ(batched.serialize(), one.serialize()) << "after batch " << batch;
  }
  EXPECT_EQ(batched.drain_events(), one.drain_events());
}

TEST(TopK, SerializationRoundTripsTheCandidates) {
  count_min_sketch sketch = count_min_sketch::from_error(0.01, 0.01, 5);
  top_k_tracker tracker(5, 0.05, 0, 5);
  const top_k_tracker empty_back = top_k_tracker::deserialize(tracker.serialize());
  EXPECT_EQ(empty_back.size(), 0u);
  EXPECT_EQ(empty_back.capacity(), tracker.capacity());
  EXPECT_EQ(empty_back.seed(), 5u);

  zipf_generator zipf(1000, 1.1, 13);
  for (int i = 0; i < 20'000; ++i) count(sketch, tracker, fmt::format("x{}", zipf()));
  count(sketch, tracker, std::string(400, 'z'));
  const std::string bytes = tracker.serialize();
  top_k_tracker back = top_k_tracker::deserialize(bytes);
  EXPECT_EQ(back.size(), tracker.size());
  EXPECT_EQ(back.k(), 5u);
  EXPECT_EQ(back.phi(), 0.05);
  EXPECT_EQ(back.top(), tracker.top());
  EXPECT_EQ(back.serialize(), bytes);
  // Both continue identically.
  (void)tracker.drain_events();
  for (int i = 0; i < 5'000; ++i) {
    const std::string item = fmt::format("x{}", zipf());
    const hash128 h = hash_item(item, 5);
    const std::uint64_t estimate = sketch.update(h);
    tracker.offer(h, item, estimate, sketch.total());
    back.offer(h, item, estimate, sketch.total());
  }
  refresh(sketch, tracker);
  refresh(sketch, back);
  EXPECT_EQ(back.top(), tracker.top());
  EXPECT_EQ(back.drain_events(), tracker.drain_events());
}

TEST(TopK, CorruptOrTruncatedInputIsAFormatError) {
  top_k_tracker tracker(2, 0.5, 4);
  tracker.offer(hash_item("a", kDefaultSeed), "a", 3, 10);
  const std::string bytes = tracker.serialize();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW((void)top_k_tracker::deserialize(bytes.substr(0, n)), format_error) << n;
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string corrupt = bytes;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x01);
    EXPECT_THROW((void)top_k_tracker::deserialize(corrupt), format_error) << i;
  }

  struct fake {
    std::uint32_t k = 2, capacity = 4;
    double phi = 0.5;
    std::uint32_t size = 1;
    std::uint64_t low = 1, high = 2, estimate = 3;
    std::uint8_t heavy = 0;
    std::uint32_t length = 1;
    int copies = 1;
  };
  const auto record = [](const fake& f) {
    detail::record_writer w(structure_type::top_k, kDefaultSeed);
    w.u32(f.k);
    w.u32(f.capacity);
    w.f64(f.phi);
    w.u32(f.size);
    for (int i = 0; i < f.copies; ++i) {
      w.u64(f.low);
      w.u64(f.high);
      w.u64(f.estimate);
      w.u8(f.heavy);
      w.u32(f.length);
      w.bytes(std::string(std::min<std::uint32_t>(f.length, 300), 'x').data(),
              std::min<std::uint32_t>(f.length, 300));
    }
    return std::move(w).finish();
  };
  const auto problem = [&](const fake& f) {
    return error_of([&] { (void)top_k_tracker::deserialize(record(f)); });
  };
  EXPECT_EQ(problem(fake{}), "(no exception)");
  EXPECT_THAT(problem(fake{.k = 0}), HasSubstr("k must be"));
  EXPECT_THAT(problem(fake{.capacity = 1}), HasSubstr("capacity"));
  EXPECT_THAT(problem(fake{.capacity = 0}), HasSubstr("capacity"));
  EXPECT_THAT(problem(fake{.phi = 2}), HasSubstr("phi"));
  EXPECT_THAT(problem(fake{.size = 5}), HasSubstr("capacity"));
  EXPECT_THAT(problem(fake{.size = 2}), HasSubstr("payload ends early"));
  EXPECT_THAT(problem(fake{.estimate = 0}), HasSubstr("estimate 0"));
  EXPECT_THAT(problem(fake{.heavy = 3}), HasSubstr("heavy"));
  EXPECT_THAT(problem(fake{.length = 300}), HasSubstr("bytes"));
  EXPECT_THAT(problem(fake{.length = 100000}), HasSubstr("bytes"));
  EXPECT_THAT(problem(fake{.size = 2, .copies = 2}), HasSubstr("duplicate"));
  EXPECT_THROW((void)top_k_tracker::deserialize(count_min_sketch(4, 2).serialize()), format_error);
}

}  // namespace
}  // namespace sketch
