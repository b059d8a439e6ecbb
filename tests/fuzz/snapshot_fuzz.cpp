// State snapshots (sketchd/state/snapshot.h): the file, and a pipeline's state read back
// by pipeline::restore_state(). Whatever the bytes: a snapshot or a state::snapshot_error,
// never a crash or another exception. A state that is restored works (messages, queries of
// the HTTP API, metrics) and is saved back as it was read.
//
// Input: the bytes after the fixed parts, used twice. (1) As a snapshot file's payload:
// the magic, version, length and checksum around it are written to fit. (2) As a pipeline
// state after the parameters: they are this target's pipeline's own, so that the fuzzer
// explores the structures past them. The library records nested in a state keep their own
// checksums, which a fuzzing build skips (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION).
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.h"
#include "sketchd/config/config.h"
#include "sketchd/http/api.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/state/binary.h"
#include "sketchd/state/snapshot.h"

namespace {

constexpr std::string_view kConfig = R"(
kafka: { brokers: "localhost:9092", group_id: fuzz }
pipelines:
  - name: p
    topics: [t]
    item: { from: json, path: /user/id }
    heavy_hitters: { window: 10s, buckets: 2, epsilon: 0.05, delta: 0.1, top_k: 5, threshold: 0.1 }
    dedup: { window: 10s, capacity: 100, fpr: 0.01 }
)";

const sketchd::pipeline_config& pipeline_config() {
  static const sketchd::pipeline_config config = [] {
    auto loaded = sketchd::load_config_string(
        kConfig, "fuzz.yaml", [](std::string_view) { return std::optional<std::string>(); });
    FUZZ_CHECK(loaded.value.has_value());
    return loaded.value->pipelines.front();
  }();
  return config;
}

void append_u64(std::string& out, std::uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void snapshot_file(std::string_view payload) {
  std::string file("SKDSNAP\0", 8);
  const std::uint32_t version = sketchd::state::kFormatVersion;
  file.append(reinterpret_cast<const char*>(&version), sizeof version);
  append_u64(file, payload.size());
  file.append(payload);
  append_u64(file, XXH3_64bits(file.data(), file.size()));
  try {
    const auto s = sketchd::state::decode(file, "fuzz.snapshot");
    FUZZ_CHECK(sketchd::state::encode(s) == file);
  } catch (const sketchd::state::snapshot_error&) {
  }
}

void pipeline_state(std::string_view rest) {
  sketchd::pipeline p(pipeline_config());
  std::string state;
  append_u64(state, p.parameters().size());
  state += p.parameters();
  state += rest;
  try {
    p.restore_state(state);
  } catch (const sketchd::state::snapshot_error&) {
    return;
  }
  if (kChecksumsVerified && all_current_version(state)) FUZZ_CHECK(p.save_state() == state);

  const std::string_view values[] = {R"({"user":{"id":"a"}})", R"({"user":{"id":"b"}})",
                                     R"({"user":{"id":"a"}})", "not json"};
  std::int64_t wall_ms = 1'000;
  for (int round = 0; round < 3; ++round) {
    p.begin_batch();
    for (const auto value : values) {
      sketchd::message_view m;
      m.value = value;
      (void)p.process(m, wall_ms - 10, wall_ms);
    }
    (void)p.end_batch(wall_ms);
    wall_ms += 4'000;
  }
  (void)sketchd::http::describe_json(p);
  (void)sketchd::http::topk_json(p);
  (void)sketchd::http::estimate_json(p, "a");
  (void)sketchd::http::seen_json(p, "b");
  (void)p.summary();
  sketchd::metrics::registry registry;
  p.register_metrics(registry);
  (void)registry.scrape();

  sketchd::pipeline again(pipeline_config());
  const std::string saved = p.save_state();
  again.restore_state(saved);
  FUZZ_CHECK(again.save_state() == saved);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  snapshot_file(bytes);
  pipeline_state(bytes);
  return 0;
}
