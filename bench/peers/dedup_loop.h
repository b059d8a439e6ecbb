// The timed loop of the dedup comparison, instantiated once per structure in the translation
// unit of that structure (compiled with the structure's own flags).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>

#include "workload.h"

namespace peers {

// One test-and-insert per iteration over dedup_stream_of(state.range(0)). `make()` returns a
// fresh structure (std::unique_ptr) with `bool test_and_insert(std::uint64_t key)` and
// `std::uint64_t bytes() const`; at the end of the stream the structure is rebuilt and
// pre-filled again, untimed. Counters: bytes, bits_per_key, fpr (new keys answered present).
// The count of present answers is the loop's result (it gives fpr), so nothing is optimised
// away without benchmark::DoNotOptimize, which is not used: Google Benchmark 1.7's
// DoNotOptimize(counter) ("+m,r") made GCC 12 read the counter back as garbage here.
template <class Make>
void run_dedup(benchmark::State& state, Make make) {
  const auto distinct = static_cast<std::uint64_t>(state.range(0));
  const dedup_stream& s = dedup_stream_of(distinct);
  const auto fill = [&] {
    auto f = make();
    for (std::uint64_t i = 0; i < s.prefill; ++i) static_cast<void>(f->test_and_insert(key_of(i)));
    return f;
  };
  auto filter = fill();
  std::size_t pos = 0;
  std::uint64_t present = 0;
  std::uint64_t repeats = 0;
  std::uint64_t processed = 0;
  const auto tally = [&](std::size_t end) {
    repeats += repeats_before(s, end);
    processed += end;
  };
  for (auto _ : state) {
    if (pos == s.keys.size()) {
      state.PauseTiming();
      tally(pos);
      filter.reset();
      filter = fill();
      pos = 0;
      state.ResumeTiming();
    }
    present += filter->test_and_insert(s.keys[pos]) ? 1 : 0;
    ++pos;
  }
  tally(pos);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["bytes"] = static_cast<double>(filter->bytes());
  state.counters["bits_per_key"] =
      static_cast<double>(filter->bytes()) * 8 / static_cast<double>(s.distinct);
  const std::uint64_t fresh = processed - repeats;
  state.counters["fpr"] =
      fresh == 0 ? 0.0 : static_cast<double>(present - repeats) / static_cast<double>(fresh);
}

// Registers `run` as benchmark `name` at both size classes.
inline bool register_dedup(const char* name, void (*run)(benchmark::State&)) {
  for (const std::uint64_t keys : {kInCacheKeys, kOutOfCacheKeys}) {
    benchmark::RegisterBenchmark(name, run)
        ->Arg(static_cast<std::int64_t>(keys))
        ->Iterations(dedup_passes(keys) * static_cast<std::int64_t>(keys))
        ->Unit(benchmark::kNanosecond);
  }
  return true;
}

}  // namespace peers
