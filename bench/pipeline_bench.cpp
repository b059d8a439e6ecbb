// The daemon's work per message, without Kafka: what sketchd adds on top of a bare consumer
// (bench/kafka_throughput.sh measures the two side by side through a broker; this isolates
// the part that is sketchd's own, with far less noise).
//
// Stream: the events of bench/kafka_throughput.sh, {"user":{"id":"uK"},"seq":S} with K drawn
// from Zipf(1.1) over 1,000,000 items (fixed seed), 600,000 of them, walked in order again
// and again; the pipeline is the harness's: item { from: json, path: /user/id }, wall clock,
// heavy_hitters { window 5m, 10 buckets, ε 0.0001, δ 0.001, top_k 20, φ 0.01 } (a rolling
// Count-Min of d = 7 rows of w = 27,183 counters) and dedup { window 1h, capacity 2M,
// fpr 0.001 }. The wall clock advances 1 ms per 1,000 messages (1M msg/s).
//
//   baseline_touch      reads every message's bytes (the floor: what any consumer pays to look
//                       at its messages once)
//   extract/json        the extractor alone (simdjson parse + JSON pointer)
//   extract/json_and_hash … and the XXH3-128 hash of the item
//   extract_batch       the extractor over groups of 256 messages (one simdjson parse per
//                       group), as the pipelines call it
//   pipeline_process/heavy_hitters_and_dedup
//                       pipeline::process over batches of 1,000 messages, as the daemon
//                       (the whole per-item path: extract, hash, rolling Count-Min + top-k,
//                       rolling Bloom); /heavy_hitters_only and /dedup_only without the
//                       other section; /heavy_hitters_and_dedup_one_by_one the same batches
//                       passed one message at a time; /…_steady after 2.2M distinct items
//                       have filled the dedup window's generations (every one live, as in a
//                       daemon that has run for a while; the others stay in the first slice)
//   processor_process   processor::process over batches of 1,000 records (adds the routing
//                       and the offset tracking of the daemon's processing step)
//
// items_per_second is messages per second; its inverse, ns per message, is the figure.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sketch/hash.h"
#include "sketch/zipf.h"
#include "sketchd/config/config.h"
#include "sketchd/kafka/source.h"
#include "sketchd/pipeline/extractor.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/processor/processor.h"

namespace {

constexpr std::size_t kMessages = 600'000;
constexpr std::size_t kBatch = 1000;
constexpr std::int64_t kStartMs = 1'700'000'000'000;

const std::vector<std::string>& events() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> out;
    out.reserve(kMessages);
    const sketch::zipf_distribution zipf(1'000'000, 1.1);
    std::mt19937_64 rng(1);
    for (std::size_t seq = 0; seq < kMessages; ++seq) {
      out.push_back(fmt::format(R"({{"user":{{"id":"u{}"}},"seq":{}}})", zipf(rng), seq));
    }
    return out;
  }();
  return all;
}

sketchd::pipeline_config harness_pipeline() {
  sketchd::pipeline_config c;
  c.name = "clicks";
  c.topics = {"in"};
  c.item.from = sketchd::item_source::json;
  c.item.path = "/user/id";
  c.clock = sketchd::clock_kind::wall;
  c.heavy_hitters = sketchd::heavy_hitters_config{.window = std::chrono::minutes(5),
                                                  .buckets = 10,
                                                  .epsilon = 0.0001,
                                                  .delta = 0.001,
                                                  .top_k = 20,
                                                  .threshold = 0.01,
                                                  .alerts_topic = {}};
  c.dedup = sketchd::dedup_config{.window = std::chrono::hours(1),
                                  .capacity = 2'000'000,
                                  .fpr = 0.001,
                                  .output_topic = {},
                                  .duplicates_topic = {}};
  return c;
}

sketchd::message_view view_of(const std::string& e) {
  sketchd::message_view v;
  v.value = e;
  return v;
}

void baseline_touch(benchmark::State& state) {
  const auto& ev = events();
  std::size_t i = 0;
  std::uint64_t sum = 0;
  for (auto _ : state) {
    for (const char c : ev[i]) sum += static_cast<unsigned char>(c);
    if (++i == ev.size()) i = 0;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}

// The extractor alone, or followed by the item's hash.
void extract(benchmark::State& state, bool hash) {
  const auto& ev = events();
  sketchd::extractor ex({sketchd::item_source::json, "/user/id", "", 1024});
  std::size_t i = 0;
  for (auto _ : state) {
    const auto r = ex.extract(view_of(ev[i]));
    benchmark::DoNotOptimize(r.item.data());
    if (hash) benchmark::DoNotOptimize(sketch::hash_item(r.item, sketch::kDefaultSeed));
    if (++i == ev.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

// The extractor over groups of messages (extract(span, span), one simdjson parse for the
// group), as the pipelines call it. One iteration is one group: the rate is per message.
void extract_batch(benchmark::State& state) {
  const auto& ev = events();
  sketchd::extractor ex({sketchd::item_source::json, "/user/id", "", 1024});
  std::vector<sketchd::message_view> views;
  for (const auto& e : ev) views.push_back(view_of(e));
  std::vector<const sketchd::message_view*> group(sketchd::extractor::kBatchMessages);
  std::vector<sketchd::extract_result> results(group.size());
  std::size_t next = 0;
  std::int64_t messages = 0;
  for (auto _ : state) {
    if (next + group.size() > views.size()) next = 0;
    for (std::size_t j = 0; j < group.size(); ++j) group[j] = &views[next + j];
    const std::size_t n = ex.extract(group, results);
    benchmark::DoNotOptimize(results.data());
    next += n;
    messages += static_cast<std::int64_t>(n);
  }
  state.SetItemsProcessed(messages);
}

// Feeds `p` 2.2M distinct items, more than the dedup capacity, so that every generation of
// the rolling Bloom filter is live afterwards (it rotates when the newest holds its share,
// capacity / (G − 1)): the state of a daemon that has run for a while, which the 600,000
// events alone never reach.
void fill_every_generation(sketchd::pipeline& p, std::int64_t& now) {
  constexpr std::size_t kWarmUp = 2'200'000;
  std::vector<std::string> items(kBatch);
  std::vector<sketchd::message_view> views(kBatch);
  std::vector<sketchd::pipeline_input> inputs(kBatch);
  std::vector<sketchd::verdict> verdicts(kBatch);
  for (std::size_t done = 0; done < kWarmUp; done += kBatch) {
    for (std::size_t j = 0; j < kBatch; ++j) {
      items[j] = fmt::format(R"({{"user":{{"id":"w{}"}},"seq":{}}})", done + j, done + j);
      views[j] = view_of(items[j]);
      inputs[j] = {&views[j], -1};
    }
    p.begin_batch();
    p.process(inputs, ++now, verdicts);
    (void)p.end_batch(now);
  }
}

// True when every dedup generation of `p` holds bits (sketchd_bloom_fill_ratio > 0).
bool every_generation_live(const sketchd::pipeline& p) {
  std::vector<prometheus::MetricFamily> families;
  p.collect(families);
  std::size_t live = 0;
  std::size_t generations = 0;
  for (const auto& f : families) {
    if (f.name != "sketchd_bloom_fill_ratio") continue;
    for (const auto& s : f.metric) {
      ++generations;
      live += s.gauge.value > 0 ? 1 : 0;
    }
  }
  return generations > 0 && live == generations;
}

// The partition of each event when the stream is keyed by its item over `partitions`
// partitions (the item's bytes hashed, as a producer's partitioner would).
std::vector<std::int32_t> keyed_partitions(const std::vector<std::string>& ev,
                                           std::uint32_t partitions) {
  std::vector<std::int32_t> out(ev.size(), 0);
  if (partitions == 0) return out;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const std::string_view e = ev[i];
    const std::size_t from = e.find(R"("id":")") + 6;
    const std::string_view id = e.substr(from, e.find('"', from) - from);
    out[i] = static_cast<std::int32_t>(XXH3_64bits(id.data(), id.size()) % partitions);
  }
  return out;
}

// One iteration is one batch of kBatch messages: the rate is per message. `steady`: after
// fill_every_generation(). `partitions` > 0: scope: partition, the stream keyed by item over
// that many partitions (one shard of windows each).
void pipeline_process(benchmark::State& state, bool heavy_hitters, bool dedup,
                      bool one_by_one = false, bool steady = false, std::uint32_t partitions = 0) {
  const auto& ev = events();
  sketchd::pipeline_config c = harness_pipeline();
  if (!heavy_hitters) c.heavy_hitters.reset();
  if (!dedup) c.dedup.reset();
  if (partitions > 0) c.scope = sketchd::state_scope::partition;
  sketchd::pipeline p(c);
  const std::uint32_t counts[] = {partitions};
  p.set_partition_counts(counts);
  const std::vector<std::int32_t> partition_of = keyed_partitions(ev, partitions);
  std::vector<sketchd::message_view> views;
  for (const auto& e : ev) views.push_back(view_of(e));
  std::vector<sketchd::pipeline_input> inputs(kBatch);
  std::vector<sketchd::verdict> verdicts(kBatch);
  std::size_t next = 0;
  std::int64_t now = kStartMs;
  if (steady) {
    fill_every_generation(p, now);
    if (!every_generation_live(p)) {
      state.SkipWithError("the warm-up left a dedup generation empty");
      return;
    }
  }
  if (partitions > 0) {
    // Every partition's shard made (and its memory touched) before the timing starts, as a
    // daemon's are after its first batches.
    for (std::size_t j = 0; j < kBatch; ++j)
      inputs[j] = {&views[j], -1, 0, static_cast<std::int32_t>(j % partitions)};
    p.begin_batch();
    p.process(inputs, now, verdicts);
    (void)p.end_batch(now);
  }
  for (auto _ : state) {
    if (next + kBatch > views.size()) next = 0;
    p.begin_batch();
    ++now;
    if (one_by_one) {
      for (std::size_t j = 0; j < kBatch; ++j) verdicts[j] = p.process(views[next + j], -1, now);
    } else {
      for (std::size_t j = 0; j < kBatch; ++j)
        inputs[j] = {&views[next + j], -1, 0, partition_of[next + j]};
      p.process(inputs, now, verdicts);
    }
    benchmark::DoNotOptimize(verdicts.data());
    next += kBatch;
    state.PauseTiming();  // keep the heavy-hitter event vector out of the figure
    (void)p.end_batch(now);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
}

void processor_process(benchmark::State& state) {
  const auto& ev = events();
  sketchd::config cfg;
  cfg.pipelines = {harness_pipeline()};
  sketchd::pipeline p(cfg.pipelines[0]);
  sketchd::processor proc(cfg, {&p}, {"in"}, nullptr, nullptr);
  proc.assigned({0, 0}, std::nullopt);
  std::vector<sketchd::kafka::record> records(ev.size());
  for (std::size_t i = 0; i < ev.size(); ++i) {
    records[i].offset = static_cast<std::int64_t>(i);
    records[i].view = view_of(ev[i]);
  }
  std::vector<sketchd::kafka::partition_offset> offsets;
  std::size_t next = 0;
  std::int64_t now = kStartMs;
  std::int64_t offset = 0;
  for (auto _ : state) {
    // One iteration is one batch: the rate below is per message.
    if (next + kBatch > records.size()) next = 0;
    std::span<sketchd::kafka::record> batch(records.data() + next, kBatch);
    for (auto& r : batch) r.offset = offset++;
    proc.process(batch, ++now);
    proc.poll(offsets);
    offsets.clear();
    next += kBatch;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
}

}  // namespace

BENCHMARK(baseline_touch);
BENCHMARK_CAPTURE(extract, json, false);
BENCHMARK_CAPTURE(extract, json_and_hash, true);
BENCHMARK(extract_batch);
BENCHMARK_CAPTURE(pipeline_process, heavy_hitters_and_dedup_one_by_one, true, true, true);
BENCHMARK_CAPTURE(pipeline_process, heavy_hitters_and_dedup, true, true);
BENCHMARK_CAPTURE(pipeline_process, heavy_hitters_and_dedup_32_partitions, true, true, false, false,
                  32);
BENCHMARK_CAPTURE(pipeline_process, heavy_hitters_only, true, false);
BENCHMARK_CAPTURE(pipeline_process, dedup_only, false, true);
BENCHMARK_CAPTURE(pipeline_process, heavy_hitters_and_dedup_steady, true, true, false, true);
BENCHMARK_CAPTURE(pipeline_process, dedup_only_steady, false, true, false, true);
BENCHMARK(processor_process);

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // the processor logs heavy-hitter events
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
