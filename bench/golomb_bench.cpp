// The Golomb coder of compressed Bloom filters (sketch/golomb.h): MB/s of the filter's array
// encoded and decoded, for seed 002's three columns (b bits per item, k hashes) at n = 1M
// items, and the bits per item of the code beside the entropy bound. zstd's speed on the same
// arrays is measured from the shell, with the array written out by --write_arrays DIR:
//   build/bench/golomb_bench --write_arrays /tmp/arrays
//   for f in /tmp/arrays/*.bin; do zstd -b19 "$f"; done
//
// window_record/CODING/FILL: a dedup window as sketchd snapshots and moves it (a rolling
// filter of 4 generations, capacity 10M at an FPR of 0.001, the harness's settings scaled)
// holding FILL% of its capacity, written plain (0) or with bit_coding::smaller (1), then
// read back: the record's bytes against the memory's, and the time of each, which the
// daemon spends between two batches at every snapshot. window_sizing/SIZING: the full window
// sized for memory (0) or for transmission (1, dedup.sizing): bytes moved, memory and FPR.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/bloom.h"
#include "sketch/bloom_math.h"
#include "sketch/golomb.h"
#include "sketch/rolling_bloom.h"

namespace {

constexpr std::uint64_t kItems = 1'000'000;

struct column {
  int bits_per_item;
  std::uint32_t hashes;
};
constexpr column kColumns[] = {{16, 11}, {28, 4}, {48, 3}};

sketch::bloom_filter filled(const column& c) {
  sketch::bloom_filter f(kItems * static_cast<std::uint64_t>(c.bits_per_item), c.hashes, 7);
  for (std::uint64_t i = 0; i < kItems; ++i) f.insert(sketch::hash_bytes(&i, sizeof i, 7));
  return f;
}

std::uint64_t parameter_of(const sketch::bloom_filter& f) {
  return sketch::golomb_parameter(1 - static_cast<double>(f.bits_set()) /
                                          static_cast<double>(f.bits()));
}

void report(benchmark::State& state, const sketch::bloom_filter& f, const std::string& code,
            const column& c) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(f.size_bytes()));
  state.counters["code_bits_per_item"] = static_cast<double>(code.size()) * 8 / kItems;
  state.counters["entropy_bits_per_item"] =
      sketch::bloom_math::entropy_bits_per_item(c.bits_per_item, c.hashes);
}

void encode(benchmark::State& state) {
  const column c = kColumns[state.range(0)];
  const sketch::bloom_filter f = filled(c);
  const std::uint64_t m = parameter_of(f);
  std::string code;
  for (auto _ : state) {
    code.clear();
    benchmark::DoNotOptimize(sketch::golomb_encode(f.words(), f.bits(), m, code));
  }
  report(state, f, code, c);
}

void decode(benchmark::State& state) {
  const column c = kColumns[state.range(0)];
  const sketch::bloom_filter f = filled(c);
  const std::uint64_t m = parameter_of(f);
  std::string code;
  sketch::golomb_encode(f.words(), f.bits(), m, code);
  std::vector<std::uint64_t> words(f.words().size());
  bool ok = true;
  for (auto _ : state) ok = ok && sketch::golomb_decode(code, m, f.bits_set(), f.bits(), words);
  if (!ok || !std::equal(words.begin(), words.end(), f.words().begin())) {
    state.SkipWithError("decoded array differs");
  }
  report(state, f, code, c);
}

BENCHMARK(encode)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);
BENCHMARK(decode)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

// The window after `fill` percent of its capacity, inserted in one go (the generations fill
// one after the other: at 100%, every generation but the newest is full).
// With `transmission`, its generations are sized as dedup.sizing: transmission sizes them
// (rolling_bloom::transmission_fpr).
sketch::rolling_bloom window(std::int64_t fill, bool transmission = false) {
  sketch::rolling_bloom_options o;
  o.window_ms = 3'600'000;
  o.capacity = 10'000'000;
  o.fpr = 0.001;
  o.generations = 4;
  o.seed = 7;
  if (transmission) o.fpr = sketch::rolling_bloom::transmission_fpr(o);
  sketch::rolling_bloom r(o);
  const std::uint64_t n = o.capacity * static_cast<std::uint64_t>(fill) / 100;
  for (std::uint64_t i = 0; i < n; ++i)
    (void)r.test_and_insert(sketch::hash_bytes(&i, sizeof i, 7), 0);
  return r;
}

void window_record(benchmark::State& state) {
  const auto coding = state.range(0) == 0 ? sketch::bit_coding::plain : sketch::bit_coding::smaller;
  const sketch::rolling_bloom r = window(state.range(1));
  std::string record;
  for (auto _ : state) {
    record.clear();
    r.serialize_to(record, coding);
  }
  state.counters["record_MB"] = static_cast<double>(record.size()) / 1e6;
  state.counters["memory_MB"] = static_cast<double>(r.size_bytes()) / 1e6;
}

void window_restore(benchmark::State& state) {
  const auto coding = state.range(0) == 0 ? sketch::bit_coding::plain : sketch::bit_coding::smaller;
  const sketch::rolling_bloom r = window(state.range(1));
  const std::string record = r.serialize(coding);
  for (auto _ : state) benchmark::DoNotOptimize(sketch::rolling_bloom::deserialize(record));
  state.counters["record_MB"] = static_cast<double>(record.size()) / 1e6;
}

BENCHMARK(window_record)
    ->ArgsProduct({{0, 1}, {0, 10, 50, 100}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(window_restore)
    ->ArgsProduct({{0, 1}, {0, 10, 50, 100}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

// window_sizing/SIZING: the full window (100%) sized for memory (0) or for transmission (1),
// written with bit_coding::smaller: the record's and the memory's bytes, the rate it is sized
// for and the rate measured with 2M absent items.
void window_sizing(benchmark::State& state) {
  const sketch::rolling_bloom r = window(100, state.range(0) == 1);
  std::string record;
  for (auto _ : state) {
    record.clear();
    r.serialize_to(record, sketch::bit_coding::smaller);
  }
  std::uint64_t false_positives = 0;
  constexpr std::uint64_t kQueries = 2'000'000;
  for (std::uint64_t i = std::uint64_t{1} << 40; i < (std::uint64_t{1} << 40) + kQueries; ++i) {
    false_positives += r.contains(sketch::hash_bytes(&i, sizeof i, 7)) ? 1 : 0;
  }
  state.counters["record_MB"] = static_cast<double>(record.size()) / 1e6;
  state.counters["memory_MB"] = static_cast<double>(r.size_bytes()) / 1e6;
  state.counters["sized_fpr"] = r.target_fpr();
  state.counters["measured_fpr"] = static_cast<double>(false_positives) / kQueries;
}

BENCHMARK(window_sizing)->DenseRange(0, 1)->Unit(benchmark::kMillisecond)->Iterations(3);

// --write_arrays DIR: writes each column's array as DIR/bloom_B_K.bin, for zstd.
bool write_arrays(const char* dir) {
  for (const column& c : kColumns) {
    const sketch::bloom_filter f = filled(c);
    const std::string path = std::string(dir) + "/bloom_" + std::to_string(c.bits_per_item) + "_" +
                             std::to_string(c.hashes) + ".bin";
    std::FILE* out = std::fopen(path.c_str(), "wb");
    if (out == nullptr) return false;
    const bool written = std::fwrite(f.words().data(), 1, f.size_bytes(), out) == f.size_bytes();
    if (std::fclose(out) != 0 || !written) return false;
    std::printf("%s\n", path.c_str());
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write_arrays") == 0)
    return write_arrays(argv[2]) ? 0 : 1;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
