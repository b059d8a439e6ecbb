// The state section: where snapshots are written, how often, and whether windows are filled
// from the log.
#include <algorithm>

#include "sketchd/config/sections.h"

namespace sketchd::config_detail {

state_config read_state(checker& c, const field& f) {
  state_config s;
  const mapping m(c, f,
                  {"dir", "topic", "topic_partitions", "snapshot_interval",
                   "discard_incompatible_snapshot", "fill_from_log", "compression"});
  read_optional_text(c, m, "dir", s.dir);
  if (s.dir) s.dir_at = position_of(mark_of(*m.get("dir")));
  read_optional_topic(c, m, "topic", s.topic);
  m.read("topic_partitions", s.topic_partitions, counts(c, 1, 100000));
  m.read("snapshot_interval", s.snapshot_interval,
         durations(c, std::chrono::milliseconds(1), kMaxInterval));
  m.read("discard_incompatible_snapshot", s.discard_incompatible_snapshot, booleans(c));
  m.read("fill_from_log", s.fill_from_log, booleans(c));
  m.read("compression", s.compression,
         choices(c, {state_compression::automatic, state_compression::none}));
  return s;
}

void check_state_topic(checker& c, const field& state,
                       const std::vector<pipeline_config>& pipelines,
                       const std::optional<generator_config>& generator) {
  const YAML::Node value = state.node["topic"];
  const field f{value, value.Mark(), state.path.empty() ? "topic" : state.path + ".topic"};
  const std::string topic = value.as<std::string>();
  const auto refuse = [&](const std::string& what) {
    c.error(f, fmt::format("{} is {}: the state topic holds sketchd's shard snapshots only", topic,
                           what));
  };
  if (generator && generator->topic == topic) refuse("the generator's topic");
  for (const pipeline_config& p : pipelines) {
    if (std::find(p.topics.begin(), p.topics.end(), topic) != p.topics.end())
      refuse(fmt::format("an input of pipeline {}", p.name));
    const auto is = [&](const std::optional<std::string>& t) { return t && *t == topic; };
    if ((p.dedup && (is(p.dedup->output_topic) || is(p.dedup->duplicates_topic))) ||
        (p.heavy_hitters && is(p.heavy_hitters->alerts_topic))) {
      refuse(fmt::format("an output of pipeline {}", p.name));
    }
  }
}

}  // namespace sketchd::config_detail
