#include "sketchd/app/preflight.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "sketch/memory.h"
#include "sketchd/generator/generator.h"
#include "sketchd/pipeline/pipeline.h"

namespace sketchd::app {

bool sketches_fit_in_memory(const config& cfg) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::uint64_t need = 0;
  std::string parts;
  for (const pipeline_config& p : cfg.pipelines) {
    const std::uint64_t bytes = sketch_bytes_at_least(p);
    need += bytes;
    parts += fmt::format("{}{} {:.3g} GiB", parts.empty() ? "" : ", ", p.name,
                         static_cast<double>(bytes) / kGiB);
  }
  const std::uint64_t table = cfg.generator ? generator::memory_bytes(*cfg.generator) : 0;
  if (table > 0) {
    parts += fmt::format(", generator {:.3g} GiB", static_cast<double>(table) / kGiB);
  }
  const std::uint64_t peak = (cfg.state.dir ? 2 * need : need) + table;
  const std::uint64_t limit = sketch::usable_memory_bytes();
  if (peak <= limit) return true;
  spdlog::critical(
      "the pipelines' sketches{} need at least {:.3g} GiB ({}){}, more than the {:.3g} GiB of "
      "memory this process may use (the machine's, or its cgroup's or ulimit's limit): lower "
      "dedup.capacity{} or heavy_hitters.buckets, or raise dedup.fpr, heavy_hitters.epsilon or "
      "heavy_hitters.delta (sketch size prints a filter's size; docs/OPERATIONS.md, sizing)",
      table > 0 ? " and the generator's table" : "", static_cast<double>(need + table) / kGiB,
      parts,
      cfg.state.dir
          ? fmt::format(", {:.3g} GiB while a snapshot is written or restored (state.dir)",
                        static_cast<double>(peak) / kGiB)
          : std::string(),
      static_cast<double>(limit) / kGiB, table > 0 ? ", generator.distinct" : "");
  return false;
}

std::set<std::string> topics_of(const config& cfg) {
  std::set<std::string> topics;
  for (const auto& p : cfg.pipelines) {
    topics.insert(p.topics.begin(), p.topics.end());
    for (const std::string_view t : output_topics_of(p)) topics.emplace(t);
  }
  if (cfg.generator) topics.insert(cfg.generator->topic);
  return topics;
}

std::vector<std::string> input_topics(const config& cfg) {
  std::vector<std::string> topics;
  for (const auto& p : cfg.pipelines) {
    for (const auto& t : p.topics) {
      if (std::find(topics.begin(), topics.end(), t) == topics.end()) topics.push_back(t);
    }
  }
  return topics;
}

}  // namespace sketchd::app
