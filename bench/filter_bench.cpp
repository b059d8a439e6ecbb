// Dedup micro-benchmarks: ns per test_and_insert of the classic and the blocked Bloom filter,
// each beside an exact baseline doing the same job in the same run, an
// absl::flat_hash_set<uint64_t> of the 64-bit hash (insert(h).second).
//
// Workload (the same stream for every structure of a size class):
//   - the structure is pre-filled, untimed, with `prefill` distinct items;
//   - the timed loop then makes one test_and_insert per iteration over a pre-generated stream
//     in which each item is, with probability 1/2, a duplicate (an item inserted earlier, drawn
//     uniformly) and otherwise a new item; so the answer is unpredictable, as in a real stream;
//   - filters are sized for prefill + the stream's new items at 1% false positives, so they
//     end the stream exactly at their design load; the set is reserved for the same number, so
//     it never rehashes in the timed loop (which favours the baseline).
// Items are 64-bit ids; their hash128 (XXH3-128 of the id, as hash_item would give) is computed
// before timing, so the hash cost is EXCLUDED for every structure alike: the daemon hashes an
// item once and hands the same hash to each structure. The "/strings" variants instead time
// test_and_insert on 16-byte strings and so INCLUDE one XXH3-128 per item, for all alike.
//
// Size classes:
//   in_l1:        20,000 items, filters of 23-26 KiB (the 32 KiB L1 data cache holds them),
//                 to show the structure's own work with no cache miss at all;
//   in_cache:     250,000 items, filters of 290-330 KiB (the L2 of one core holds them);
//   out_of_cache: 208M pre-filled items + 16.8M new, filters of >= 256 MiB, the set 2.4 GB.
// Beside them:
//   blocked/all_new, blocked/all_duplicates: the in-cache class with 0% or 100% duplicates,
//     which shows what the unpredictable "already present?" answer costs;
//   floor_one_line: not a dedup structure, the cost of touching one random cache line per
//     item in an array of the blocked filter's size (see one_line_floor);
//     floor_one_line_batch (out of cache): the same in batches, prefetching as far ahead as
//     blocked_batch, the floor of a prefetching batch;
//   blocked_batch, exact_set_batch: the same stream handed over in batches of kBatch hashes,
//     to blocked_bloom_filter::test_and_insert(span, span) (which prefetches the block of
//     item i + 32 while it processes item i, for a filter larger than half of L2), and to
//     the set with the same look-ahead through
//     absl's prefetch(key). Still one iteration per item: the batch is processed by the
//     first iteration of its kBatch, so the time per iteration is the time per item.
//
// Counters: items_per_second; bytes of the structure (for the set capacity() · (sizeof(slot)
// + 1), its slots and control bytes); bits_per_item, bytes · 8 / the distinct items held at
// the end of the stream; fpr, the measured share of new items reported as present (0 for the
// exact set, up to 64-bit hash collisions).
//
// A separate mode, `filter_bench --bits_per_item_table`, prints the bits per item of each
// structure at 1% and 0.1% beside the information-theoretic bound -log2(p).
#include <absl/container/flat_hash_set.h>
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "sketch/blocked_bloom.h"
#include "sketch/bloom.h"
#include "sketch/bloom_math.h"
#include "sketch/hash.h"

namespace {

using sketch::blocked_bloom_filter;
using sketch::bloom_filter;
using sketch::hash128;

constexpr double kFpr = 0.01;
constexpr std::uint64_t kStreamSeed = 20240601;
constexpr std::size_t kItemBytes = 16;  // the short strings of the /strings variants
constexpr std::size_t kBatch = 1024;    // items per batch of the /*_batch variants
constexpr std::size_t kSetPrefetchDistance = blocked_bloom_filter::kPrefetchDistance;

// The hash of item `id`, as the daemon would compute it once per item.
hash128 hash_of_id(std::uint64_t id) {
  return sketch::hash_bytes(&id, sizeof id, sketch::kDefaultSeed);
}

// Item `id` as a 16-byte string, "u" and 15 digits.
void write_item(std::uint64_t id, char* out) { fmt::format_to_n(out, kItemBytes, "u{:015d}", id); }

// The shape of a workload: pre-filled items, then a stream of `length` operations of which a
// share `duplicates` (in percent) repeat an item inserted earlier.
struct workload_spec {
  std::uint64_t prefill;
  std::uint64_t length;
  int duplicates;
  friend auto operator<=>(const workload_spec&, const workload_spec&) = default;
};

// The main workloads: half duplicates. Both end with prefill + length/2 distinct items.
constexpr workload_spec kInCache{125'000, 250'000, 50};
constexpr workload_spec kInL1{10'000, 20'000, 50};
constexpr workload_spec kOutOfCache{208'000'000, std::uint64_t{1} << 25, 50};
// The in-cache size class with every item new, or every item a duplicate (the same 250,000
// distinct items at the end): what the "already present?" branch costs.
constexpr workload_spec kInCacheAllNew{0, 250'000, 0};
constexpr workload_spec kInCacheAllDuplicates{250'000, 250'000, 100};

// The stream of a workload, as ids: is_duplicate[i] says whether ids[i] was inserted before.
// Deterministic (fixed seed); `distinct` = prefill + the new items of the stream.
struct id_stream {
  std::vector<std::uint64_t> ids;
  std::vector<std::uint8_t> is_duplicate;
  std::uint64_t distinct = 0;
};

id_stream make_id_stream(const workload_spec& spec) {
  id_stream s;
  s.ids.reserve(spec.length);
  s.is_duplicate.reserve(spec.length);
  std::mt19937_64 rng(kStreamSeed);
  std::bernoulli_distribution duplicate(spec.duplicates / 100.0);
  std::uint64_t next = spec.prefill;
  for (std::uint64_t i = 0; i < spec.length; ++i) {
    const bool dup = next > 0 && duplicate(rng);
    s.ids.push_back(dup ? std::uniform_int_distribution<std::uint64_t>(0, next - 1)(rng) : next++);
    s.is_duplicate.push_back(dup ? 1 : 0);
  }
  s.distinct = next;
  return s;
}

// The stream as the timed loop reads it: hashes, or 16-byte strings in one flat buffer.
struct hash_stream {
  const id_stream* ids;
  std::vector<hash128> items;
  [[nodiscard]] const hash128& operator[](std::size_t i) const { return items[i]; }
  [[nodiscard]] std::size_t size() const { return items.size(); }
};

struct string_stream {
  const id_stream* ids;
  std::vector<char> bytes;
  [[nodiscard]] std::string_view operator[](std::size_t i) const {
    return {bytes.data() + i * kItemBytes, kItemBytes};
  }
  [[nodiscard]] std::size_t size() const { return bytes.size() / kItemBytes; }
};

// Each stream is built once, on first use, and kept for the benchmarks that follow.
const id_stream& ids_of(const workload_spec& spec) {
  static std::map<workload_spec, std::unique_ptr<id_stream>> cache;
  auto& s = cache[spec];
  if (!s) s = std::make_unique<id_stream>(make_id_stream(spec));
  return *s;
}

const hash_stream& hashes_of(const workload_spec& spec) {
  static std::map<workload_spec, std::unique_ptr<hash_stream>> cache;
  auto& s = cache[spec];
  if (!s) {
    const id_stream& ids = ids_of(spec);
    s = std::make_unique<hash_stream>(hash_stream{&ids, {}});
    s->items.reserve(ids.ids.size());
    for (const std::uint64_t id : ids.ids) s->items.push_back(hash_of_id(id));
  }
  return *s;
}

const string_stream& strings_of_in_cache() {
  static const string_stream s = [] {
    const id_stream& ids = ids_of(kInCache);
    string_stream out{&ids, std::vector<char>(ids.ids.size() * kItemBytes)};
    for (std::size_t i = 0; i < ids.ids.size(); ++i)
      write_item(ids.ids[i], &out.bytes[i * kItemBytes]);
    return out;
  }();
  return s;
}

// ---- the structures, behind one interface ------------------------------------------------

struct classic_dedup {
  explicit classic_dedup(std::uint64_t n) : filter(bloom_filter::for_capacity(n, kFpr)) {}
  bool test_and_insert(hash128 h) noexcept { return filter.test_and_insert(h); }
  bool test_and_insert(std::string_view s) noexcept { return filter.test_and_insert(s); }
  void clear() { filter.clear(); }
  [[nodiscard]] double bytes() const { return static_cast<double>(filter.size_bytes()); }
  [[nodiscard]] double bits_per_item(std::uint64_t held) const {
    return bytes() * 8 / static_cast<double>(held);
  }
  bloom_filter filter;
};

struct blocked_dedup {
  blocked_dedup(std::uint64_t n, sketch::simd_path path)
      : filter(blocked_bloom_filter::for_capacity(n, kFpr, sketch::kDefaultSeed, path)) {}
  bool test_and_insert(hash128 h) noexcept { return filter.test_and_insert(h); }
  bool test_and_insert(std::string_view s) noexcept { return filter.test_and_insert(s); }
  void clear() { filter.clear(); }
  [[nodiscard]] double bytes() const { return static_cast<double>(filter.size_bytes()); }
  [[nodiscard]] double bits_per_item(std::uint64_t held) const {
    return bytes() * 8 / static_cast<double>(held);
  }
  void test_and_insert_batch(std::span<const hash128> hashes, std::span<bool> present) noexcept {
    filter.test_and_insert(hashes, present);
  }
  blocked_bloom_filter filter;
};

// The exact baseline: the set of the 64-bit hashes (low half of the hash128; a 64-bit hash is
// what a hash set of strings would compute and compare anyway, minus the string compares).
// Its table has the filter's allocator, huge pages included: out of cache, 4 KiB pages
// would add a TLB miss per access to the set alone (about 30 ns per item here).
struct exact_dedup {
  explicit exact_dedup(std::uint64_t n) : reserved(n) { set.reserve(n); }
  bool test_and_insert(hash128 h) { return !set.insert(h.low).second; }
  bool test_and_insert(std::string_view s) {
    return test_and_insert(sketch::hash_item(s, sketch::kDefaultSeed));
  }
  void clear() {
    set.clear();  // frees the table when it is large; reserve it again
    set.reserve(reserved);
  }
  // absl's SwissTable: one slot and one control byte per bucket (plus 16 bytes).
  [[nodiscard]] double bytes() const {
    return static_cast<double>(set.capacity() * (sizeof(std::uint64_t) + 1));
  }
  [[nodiscard]] double bits_per_item(std::uint64_t held) const {
    return bytes() * 8 / static_cast<double>(held);
  }
  // The batch loop of blocked_bloom_filter, with absl's prefetch(key) as the look-ahead.
  void test_and_insert_batch(std::span<const hash128> hashes, std::span<bool> present) {
    const std::size_t n = hashes.size();
    for (std::size_t i = 0; i < std::min(n, kSetPrefetchDistance); ++i) set.prefetch(hashes[i].low);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kSetPrefetchDistance < n) set.prefetch(hashes[i + kSetPrefetchDistance].low);
      present[i] = test_and_insert(hashes[i]);
    }
  }
  absl::flat_hash_set<std::uint64_t, absl::Hash<std::uint64_t>, std::equal_to<>,
                      sketch::detail::bit_array_allocator<std::uint64_t>>
      set;
  std::uint64_t reserved;
};

// Not a dedup structure: the floor of any structure that touches one random cache line per
// item. It sets one bit of a random 32-byte block (a blocked filter with one hash, inlined,
// no branch) in an array of the blocked filter's size. Its fpr is that of one hash, high.
struct one_line_floor {
  explicit one_line_floor(std::uint64_t n)
      : blocks(blocked_bloom_filter::suggest_bits(n, kFpr) / blocked_bloom_filter::kBlockBits),
        words(blocks * blocked_bloom_filter::kWordsPerBlock, 0) {}
  [[nodiscard]] std::uint32_t* word_of(const hash128& h) noexcept {
    return &words[sketch::reduce(h.high, blocks) * blocked_bloom_filter::kWordsPerBlock];
  }
  bool test_and_insert(hash128 h) noexcept {
    std::uint32_t& word = *word_of(h);
    const std::uint32_t bit = std::uint32_t{1} << (h.low & 31);
    const bool present = (word & bit) != 0;
    word |= bit;
    return present;
  }
  bool test_and_insert(std::string_view s) noexcept {
    return test_and_insert(sketch::hash_item(s, sketch::kDefaultSeed));
  }
  // The floor of a batch: the same line per item, prefetched as far ahead as the blocked
  // filter's batch call prefetches.
  void test_and_insert_batch(std::span<const hash128> hashes, std::span<bool> present) noexcept {
    constexpr std::size_t kAhead = blocked_bloom_filter::kPrefetchDistance;
    const std::size_t n = hashes.size();
    for (std::size_t i = 0; i < std::min(n, kAhead); ++i) __builtin_prefetch(word_of(hashes[i]), 1);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) __builtin_prefetch(word_of(hashes[i + kAhead]), 1);
      present[i] = test_and_insert(hashes[i]);
    }
  }
  void clear() { std::fill(words.begin(), words.end(), 0U); }
  [[nodiscard]] double bytes() const {
    return static_cast<double>(words.size() * sizeof(std::uint32_t));
  }
  [[nodiscard]] double bits_per_item(std::uint64_t held) const {
    return bytes() * 8 / static_cast<double>(held);
  }
  std::uint64_t blocks;
  // The filter's allocator: the same alignment and huge-page advice as the filter's array.
  std::vector<std::uint32_t, sketch::detail::bit_array_allocator<std::uint32_t>> words;
};

// Inserts the pre-filled items [0, prefill), untimed.
template <class Structure>
void prefill(Structure& s, std::uint64_t count, bool strings) {
  char item[kItemBytes];
  for (std::uint64_t id = 0; id < count; ++id) {
    if (strings) {
      write_item(id, item);
      static_cast<void>(s.test_and_insert(std::string_view(item, kItemBytes)));
    } else {
      static_cast<void>(s.test_and_insert(hash_of_id(id)));
    }
  }
}

// The counters of a dedup run: items per second, memory, bits per distinct item and the
// measured FPR (items reported present that were new, over the new items).
template <class Structure>
void report_dedup(benchmark::State& state, const Structure& s, std::uint64_t distinct,
                  std::uint64_t present, std::uint64_t duplicates, std::uint64_t processed) {
  const std::uint64_t new_items = processed - duplicates;
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["bytes"] = s.bytes();
  state.counters["bits_per_item"] = s.bits_per_item(distinct);
  state.counters["fpr"] =
      new_items == 0 ? 0.0
                     : static_cast<double>(present - duplicates) / static_cast<double>(new_items);
}

// The timed loop: one test_and_insert per iteration, walking the stream; at its end (all its
// new items inserted, the filter at design load) the structure is cleared and pre-filled
// again, untimed, and the walk restarts.
template <class Structure, class Stream>
void run_dedup(benchmark::State& state, Structure& s, const Stream& stream, std::uint64_t prefilled,
               bool strings) {
  const id_stream& ids = *stream.ids;
  prefill(s, prefilled, strings);
  std::size_t pos = 0;
  std::uint64_t present = 0;
  std::uint64_t duplicates = 0;  // duplicates among the items processed
  std::uint64_t processed = 0;
  const auto tally = [&](std::size_t end) {
    for (std::size_t i = 0; i < end; ++i) duplicates += ids.is_duplicate[i];
    processed += end;
  };
  for (auto _ : state) {
    if (pos == stream.size()) {
      state.PauseTiming();
      tally(pos);
      s.clear();
      prefill(s, prefilled, strings);
      pos = 0;
      state.ResumeTiming();
    }
    present += s.test_and_insert(stream[pos++]) ? 1 : 0;
  }
  tally(pos);
  report_dedup(state, s, ids.distinct, present, duplicates, processed);
}

// run_dedup with the stream handed over in batches of kBatch: each batch is processed by the
// first iteration of its kBatch iterations, so the time per iteration stays the time per item
// (a run that stops inside a batch is charged for at most kBatch − 1 items it did not count).
template <class Structure>
void run_dedup_batch(benchmark::State& state, Structure& s, const hash_stream& stream,
                     std::uint64_t prefilled) {
  const id_stream& ids = *stream.ids;
  prefill(s, prefilled, false);
  const std::unique_ptr<bool[]> answers(new bool[kBatch]);
  std::size_t pos = 0;
  std::size_t left = 0;  // items of the current batch not yet counted by an iteration
  std::uint64_t present = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t processed = 0;
  const auto tally = [&](std::size_t end) {
    for (std::size_t i = 0; i < end; ++i) duplicates += ids.is_duplicate[i];
    processed += end;
  };
  for (auto _ : state) {
    if (left == 0) {
      if (pos == stream.size()) {
        state.PauseTiming();
        tally(pos);
        s.clear();
        prefill(s, prefilled, false);
        pos = 0;
        state.ResumeTiming();
      }
      const std::size_t n = std::min(kBatch, stream.size() - pos);
      s.test_and_insert_batch(std::span<const hash128>(stream.items.data() + pos, n),
                              std::span<bool>(answers.get(), n));
      for (std::size_t i = 0; i < n; ++i) present += answers[i] ? 1 : 0;
      pos += n;
      left = n;
    }
    --left;
  }
  tally(pos);
  report_dedup(state, s, ids.distinct, present, duplicates, processed);
}

// ---- registration ------------------------------------------------------------------------

template <class Make>
void dedup_on_hashes(benchmark::State& state, const workload_spec& spec, Make make) {
  const hash_stream& stream = hashes_of(spec);
  auto s = make(stream.ids->distinct);
  run_dedup(state, s, stream, spec.prefill, false);
}

template <class Make>
void dedup_batch_on_hashes(benchmark::State& state, const workload_spec& spec, Make make) {
  const hash_stream& stream = hashes_of(spec);
  auto s = make(stream.ids->distinct);
  run_dedup_batch(state, s, stream, spec.prefill);
}

template <class Make>
void dedup_on_strings(benchmark::State& state, Make make) {
  const string_stream& stream = strings_of_in_cache();
  auto s = make(stream.ids->distinct);
  run_dedup(state, s, stream, kInCache.prefill, true);
}

const auto kClassic = [](std::uint64_t n) { return classic_dedup(n); };
const auto kBlocked = [](std::uint64_t n) {
  return blocked_dedup(n, sketch::simd_path::automatic);
};
const auto kBlockedScalar = [](std::uint64_t n) {
  return blocked_dedup(n, sketch::simd_path::scalar);
};
const auto kExact = [](std::uint64_t n) { return exact_dedup(n); };
const auto kFloor = [](std::uint64_t n) { return one_line_floor(n); };

void register_benchmarks() {
  // In L1: repeated passes until --benchmark_min_time.
  benchmark::RegisterBenchmark("Dedup/in_l1/classic",
                               [](benchmark::State& st) { dedup_on_hashes(st, kInL1, kClassic); });
  benchmark::RegisterBenchmark("Dedup/in_l1/blocked",
                               [](benchmark::State& st) { dedup_on_hashes(st, kInL1, kBlocked); });
  benchmark::RegisterBenchmark("Dedup/in_l1/blocked_batch", [](benchmark::State& st) {
    dedup_batch_on_hashes(st, kInL1, kBlocked);
  });
  benchmark::RegisterBenchmark("Dedup/in_l1/exact_set",
                               [](benchmark::State& st) { dedup_on_hashes(st, kInL1, kExact); });
  benchmark::RegisterBenchmark("Dedup/in_l1/floor_one_line",
                               [](benchmark::State& st) { dedup_on_hashes(st, kInL1, kFloor); });
  // In cache: repeated passes until --benchmark_min_time.
  benchmark::RegisterBenchmark("Dedup/in_cache/classic", [](benchmark::State& st) {
    dedup_on_hashes(st, kInCache, kClassic);
  });
  benchmark::RegisterBenchmark("Dedup/in_cache/blocked", [](benchmark::State& st) {
    dedup_on_hashes(st, kInCache, kBlocked);
  });
  benchmark::RegisterBenchmark("Dedup/in_cache/blocked/all_new", [](benchmark::State& st) {
    dedup_on_hashes(st, kInCacheAllNew, kBlocked);
  });
  benchmark::RegisterBenchmark("Dedup/in_cache/blocked/all_duplicates", [](benchmark::State& st) {
    dedup_on_hashes(st, kInCacheAllDuplicates, kBlocked);
  });
  benchmark::RegisterBenchmark("Dedup/in_cache/blocked_scalar", [](benchmark::State& st) {
    dedup_on_hashes(st, kInCache, kBlockedScalar);
  });
  benchmark::RegisterBenchmark("Dedup/in_cache/blocked_batch", [](benchmark::State& st) {
    dedup_batch_on_hashes(st, kInCache, kBlocked);
  });
  benchmark::RegisterBenchmark("Dedup/in_cache/exact_set",
                               [](benchmark::State& st) { dedup_on_hashes(st, kInCache, kExact); });
  benchmark::RegisterBenchmark("Dedup/in_cache/exact_set_batch", [](benchmark::State& st) {
    dedup_batch_on_hashes(st, kInCache, kExact);
  });
  benchmark::RegisterBenchmark("Dedup/in_cache/floor_one_line",
                               [](benchmark::State& st) { dedup_on_hashes(st, kInCache, kFloor); });
  benchmark::RegisterBenchmark("Dedup/in_cache/strings/classic",
                               [](benchmark::State& st) { dedup_on_strings(st, kClassic); });
  benchmark::RegisterBenchmark("Dedup/in_cache/strings/blocked",
                               [](benchmark::State& st) { dedup_on_strings(st, kBlocked); });
  benchmark::RegisterBenchmark("Dedup/in_cache/strings/exact_set",
                               [](benchmark::State& st) { dedup_on_strings(st, kExact); });
  // Out of cache: exactly one pass over the stream (the pre-fill takes seconds; one pass is
  // 33.5M operations, far more than enough for a stable figure).
  const auto iterations = static_cast<benchmark::IterationCount>(kOutOfCache.length);
  benchmark::RegisterBenchmark("Dedup/out_of_cache/classic", [](benchmark::State& st) {
    dedup_on_hashes(st, kOutOfCache, kClassic);
  })->Iterations(iterations);
  benchmark::RegisterBenchmark("Dedup/out_of_cache/blocked", [](benchmark::State& st) {
    dedup_on_hashes(st, kOutOfCache, kBlocked);
  })->Iterations(iterations);
  benchmark::RegisterBenchmark("Dedup/out_of_cache/blocked_batch", [](benchmark::State& st) {
    dedup_batch_on_hashes(st, kOutOfCache, kBlocked);
  })->Iterations(iterations);
  benchmark::RegisterBenchmark("Dedup/out_of_cache/exact_set", [](benchmark::State& st) {
    dedup_on_hashes(st, kOutOfCache, kExact);
  })->Iterations(iterations);
  benchmark::RegisterBenchmark("Dedup/out_of_cache/exact_set_batch", [](benchmark::State& st) {
    dedup_batch_on_hashes(st, kOutOfCache, kExact);
  })->Iterations(iterations);
  benchmark::RegisterBenchmark("Dedup/out_of_cache/floor_one_line", [](benchmark::State& st) {
    dedup_on_hashes(st, kOutOfCache, kFloor);
  })->Iterations(iterations);
  benchmark::RegisterBenchmark("Dedup/out_of_cache/floor_one_line_batch", [](benchmark::State& st) {
    dedup_batch_on_hashes(st, kOutOfCache, kFloor);
  })->Iterations(iterations);
}

// ---- bits per item -----------------------------------------------------------------------

// The set's memory per item, capacity() · (sizeof(slot) + 1) · 8 / size(), as it grows from
// 2^20 to 2^22 items by single inserts (two whole doublings of its table): min, mean, max.
struct set_bits {
  double min = std::numeric_limits<double>::infinity();
  double mean = 0;
  double max = 0;
};

set_bits measure_set_bits() {
  absl::flat_hash_set<std::uint64_t> set;
  constexpr std::uint64_t kFrom = std::uint64_t{1} << 20;
  constexpr std::uint64_t kTo = std::uint64_t{1} << 22;
  set_bits out;
  double sum = 0;
  for (std::uint64_t id = 0; id < kTo; ++id) {
    set.insert(hash_of_id(id).low);
    if (id + 1 < kFrom) continue;
    const double bits = static_cast<double>(set.capacity() * (sizeof(std::uint64_t) + 1)) * 8 /
                        static_cast<double>(set.size());
    out.min = std::min(out.min, bits);
    out.max = std::max(out.max, bits);
    sum += bits;
  }
  out.mean = sum / static_cast<double>(kTo - kFrom + 1);
  return out;
}

void print_bits_per_item_table() {
  constexpr std::uint64_t kItems = 10'000'000;  // large enough that rounding does not show
  const set_bits set = measure_set_bits();
  fmt::print(
      "Bits per item for n = {} items (flat_hash_set<uint64_t>: measured while growing "
      "from 2^20 to 2^22 items)\n\n",
      kItems);
  fmt::print("{:>7}  {:>10}  {:>14}  {:>14}  {:>9}  {:>22}  {:>15}\n", "fpr", "-log2(p)", "classic",
             "blocked", "k classic", "flat_hash_set min/mean/max", "blocked / set");
  for (const double p : {0.01, 0.001}) {
    const auto classic = sketch::bloom_math::suggest_classic(kItems, p);
    const auto blocked_bits = blocked_bloom_filter::suggest_bits(kItems, p);
    const double n = static_cast<double>(kItems);
    const double classic_bpi = static_cast<double>(classic.bits) / n;
    const double blocked_bpi = static_cast<double>(blocked_bits) / n;
    fmt::print(
        "{:>7}  {:>10.2f}  {:>14.2f}  {:>14.2f}  {:>9}  {:>8.1f} /{:>6.1f} /{:>6.1f}  "
        "{:>15}\n",
        p, -std::log2(p), classic_bpi, blocked_bpi, classic.hashes, set.min, set.mean, set.max,
        fmt::format("1/{:.1f} of mean", set.mean / blocked_bpi));
  }
  fmt::print(
      "\n(classic: bloom_math::suggest_classic; blocked: blocked_bloom_filter::suggest_bits; "
      "-log2(p): the information-theoretic lower bound for an approximate set)\n");
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bits_per_item_table") == 0) {
      print_bits_per_item_table();
      return 0;
    }
  }
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
