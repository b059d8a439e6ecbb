// The pipelines section: each pipeline's name, topics, item, clock and sketches, and the
// checks between pipelines (loops, the kind of event of each output topic). The sizes of
// the sketches are checked in sketch_sizes.cpp.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "sketch/rolling_bloom.h"
#include "sketch/rolling_count_min.h"
#include "sketchd/config/sections.h"

namespace sketchd::config_detail {
namespace {

using std::chrono::milliseconds;

// Not "." nor "..": a URL's path cannot carry them (/api/v1/pipelines/../topk).
bool is_pipeline_name(std::string_view name) {
  if (name == "." || name == "..") return false;
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char ch) {
    return ch == '_' || ch == '.' || ch == '-' || (ch >= '0' && ch <= '9') ||
           (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
  });
}

// RFC 6901: "" or "/" followed by reference tokens where "~" is escaped as "~0" or "~1".
bool is_json_pointer(std::string_view p) {
  if (p.empty()) return true;
  if (p.front() != '/') return false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '~' && (i + 1 == p.size() || (p[i + 1] != '0' && p[i + 1] != '1'))) return false;
  }
  return true;
}

item_config read_item(checker& c, const field& f) {
  item_config item;
  const mapping m(c, f, {"from", "path", "name"});
  if (!m.read_required("from", item.from,
                       choices(c, {item_source::key, item_source::value, item_source::json,
                                   item_source::header}))) {
    return item;
  }
  const auto only_with = [&](std::string_view key, item_source source) {
    if (const field* k = m.find(key); k != nullptr && item.from != source) {
      c.error(k->key_mark, fmt::format("{}: only used with from: {}", k->path, to_string(source)));
    }
  };
  only_with("path", item_source::json);
  only_with("name", item_source::header);
  if (item.from == item_source::json) {
    if (const auto p = m.require("path")) {
      if (auto value = c.text(*p)) {
        if (is_json_pointer(*value)) {
          item.path = std::move(*value);
        } else {
          c.error(*p, fmt::format("expected a JSON pointer such as /user/id (RFC 6901), got \"{}\"",
                                  *value));
        }
      }
    }
  }
  if (item.from == item_source::header) {
    if (const auto n = m.require("name")) {
      if (auto value = c.nonempty_text(*n)) item.header = std::move(*value);
    }
  }
  return item;
}

// `scope`: with partition, each input partition has a whole Count-Min sketch, and epsilon
// defaults to threshold/10 (docs/CONFIGURATION.md, "Partition-scoped windows").
heavy_hitters_config read_heavy_hitters(checker& c, const field& f,
                                        const std::vector<std::string>& inputs, state_scope scope) {
  heavy_hitters_config hh;
  const mapping m(c, f,
                  {"window", "buckets", "epsilon", "delta", "top_k", "threshold", "conservative",
                   "alerts_topic"});
  const bool window_ok = m.read("window", hh.window, durations(c, milliseconds(1), kMaxWindow));
  const bool buckets_ok =
      m.read("buckets", hh.buckets, counts(c, 1, sketch::rolling_count_min::kMaxBuckets));
  const bool epsilon_ok = m.read("epsilon", hh.epsilon, reals(c, kOpenUnit));
  const bool delta_ok = m.read("delta", hh.delta, reals(c, kOpenUnit));
  m.read("top_k", hh.top_k, counts(c, 1, 1000));
  const bool threshold_ok = m.read("threshold", hh.threshold, reals(c, {0, true, 1, false}));
  m.read("conservative", hh.conservative, booleans(c));
  read_optional_topic(c, m, "alerts_topic", hh.alerts_topic);
  if (scope == state_scope::partition && threshold_ok && !m.get("epsilon"))
    hh.epsilon = hh.threshold / 10;

  if (window_ok && buckets_ok && hh.window.count() < static_cast<std::int64_t>(hh.buckets)) {
    const auto w = m.get("window");
    c.error(w ? mark_of(*w) : m.mark(),
            fmt::format("{}.window: must be at least 1ms per bucket ({} buckets), got {}", m.path(),
                        hh.buckets, format_duration(hh.window)));
  }
  if (epsilon_ok && threshold_ok && hh.threshold <= hh.epsilon) {
    // Said of the key that is written: the other may be its default.
    constexpr std::string_view why =
        "since an estimate may exceed the true count by epsilon times the window's items";
    if (const auto t = m.get("threshold")) {
      c.error(mark_of(*t),
              fmt::format("{}.threshold: must be greater than epsilon ({}{}), {}, got {}", m.path(),
                          hh.epsilon, m.get("epsilon") ? "" : ", its default", why, hh.threshold));
    } else {
      const auto e = m.get("epsilon");
      c.error(e ? mark_of(*e) : m.mark(),
              fmt::format("{}.epsilon: must be less than threshold ({}, its default), {}, got {}",
                          m.path(), hh.threshold, why, hh.epsilon));
    }
  }
  check_count_min_size(c, m, hh, epsilon_ok, delta_ok, buckets_ok);
  if (hh.alerts_topic &&
      std::find(inputs.begin(), inputs.end(), *hh.alerts_topic) != inputs.end()) {
    c.error(*m.get("alerts_topic"),
            "must not be one of the pipeline's topics (the pipeline would read its own alerts)");
  }
  return hh;
}

dedup_config read_dedup(checker& c, const field& f, const std::vector<std::string>& inputs) {
  dedup_config d;
  const mapping m(
      c, f,
      {"window", "capacity", "fpr", "generations", "sizing", "output_topic", "duplicates_topic"});
  const bool window_ok = m.read("window", d.window, durations(c, milliseconds(1), kMaxWindow));
  const bool capacity_ok = m.read_required("capacity", d.capacity, counts(c, 1));
  const bool fpr_ok = m.read("fpr", d.fpr, reals(c, {0, true, 0.5, true}));
  const bool generations_ok =
      m.read("generations", d.generations, counts(c, 2, sketch::rolling_bloom::kMaxGenerations));
  m.read("sizing", d.sizing, choices(c, {dedup_sizing::memory, dedup_sizing::transmission}));
  read_optional_topic(c, m, "output_topic", d.output_topic);
  read_optional_topic(c, m, "duplicates_topic", d.duplicates_topic);

  if (window_ok && generations_ok && d.window.count() < static_cast<std::int64_t>(d.generations)) {
    const auto w = m.get("window");
    c.error(w ? mark_of(*w) : m.mark(),
            fmt::format("{}.window: must be at least 1ms per generation ({} generations), got {}",
                        m.path(), d.generations, format_duration(d.window)));
  }
  if (capacity_ok && fpr_ok && generations_ok) check_bloom_size(c, m, d);
  const auto check_not_input = [&](std::string_view key, const std::optional<std::string>& topic) {
    if (topic && std::find(inputs.begin(), inputs.end(), *topic) != inputs.end()) {
      c.error(*m.get(key),
              "must not be one of the pipeline's topics (the pipeline would read its own output)");
    }
  };
  check_not_input("output_topic", d.output_topic);
  check_not_input("duplicates_topic", d.duplicates_topic);
  return d;
}

// A pipeline's name, unique among `names` (name → the line of its first use), which it
// joins.
std::optional<std::string> read_pipeline_name(checker& c, const field& n,
                                              std::map<std::string, int, std::less<>>& names) {
  auto value = c.text(n);
  if (!value) return std::nullopt;
  if (!is_pipeline_name(*value)) {
    c.error(n,
            *value == "." || *value == ".."
                ? fmt::format("\"{}\" cannot name a pipeline: a URL cannot carry it "
                              "(/api/v1/pipelines/{}/…)",
                              *value, *value)
                : fmt::format("must be 1 to 128 letters, digits, \"_\", \".\" or \"-\", got \"{}\"",
                              *value));
    return std::nullopt;
  }
  if (const auto it = names.find(*value); it != names.end()) {
    c.error(n,
            fmt::format("duplicate pipeline name \"{}\" (first at line {})", *value, it->second));
    return std::nullopt;
  }
  names.emplace(*value, mark_of(n).line + 1);
  return value;
}

// A pipeline's topics: valid names, each once.
std::vector<std::string> read_topics(checker& c, const field& t) {
  std::vector<std::string> out;
  const auto elements = c.list(t);
  if (!elements) return out;
  if (elements->empty()) c.error(t, "needs at least one topic");
  std::map<std::string, int, std::less<>> seen;  // topic → its line, for a repeat
  for (const field& e : *elements) {
    auto topic = c.topic(e);
    if (!topic) continue;
    if (const auto [at, fresh] = seen.try_emplace(*topic, mark_of(e).line + 1); !fresh) {
      c.error(e,
              fmt::format("topic \"{}\" is listed twice (first at line {})", *topic, at->second));
      continue;
    }
    out.push_back(std::move(*topic));
  }
  return out;
}

pipeline_config read_pipeline(checker& c, const field& f,
                              std::map<std::string, int, std::less<>>& names, bool state_topic) {
  pipeline_config p;
  p.at = position_of(mark_of(f));
  if (f.node.IsNull()) {  // a bare "-": one problem, not one per required key
    c.error(f,
            "an empty entry: a pipeline needs name, topics, item, and heavy_hitters, dedup or "
            "both");
    return p;
  }
  const mapping m(c, f,
                  {"name", "topics", "item", "clock", "scope", "max_item_bytes",
                   "dead_letter_topic", "heavy_hitters", "dedup"});
  if (!m.valid()) return p;

  if (const auto n = m.require("name")) {
    if (auto name = read_pipeline_name(c, *n, names)) p.name = std::move(*name);
  }
  if (const auto t = m.require("topics")) p.topics = read_topics(c, *t);
  if (const auto i = m.require("item")) p.item = read_item(c, *i);
  m.read("clock", p.clock, choices(c, {clock_kind::event, clock_kind::wall}));
  m.read("scope", p.scope, choices(c, {state_scope::instance, state_scope::partition}));
  if (state_topic) {
    // The state topic holds one shard per input partition: an instance-wide state has none.
    if (const auto s = m.get("scope"); s && p.scope == state_scope::instance) {
      c.error(*s,
              "state.topic keeps each input partition's shard on Kafka, and a pipeline with "
              "scope: instance has none: remove scope (it is partition with state.topic) or set "
              "it to partition");
    }
    p.scope = state_scope::partition;
  }
  m.read("max_item_bytes", p.max_item_bytes, counts(c, 1, 1 << 20));
  read_optional_topic(c, m, "dead_letter_topic", p.dead_letter_topic);
  if (p.dead_letter_topic &&
      std::find(p.topics.begin(), p.topics.end(), *p.dead_letter_topic) != p.topics.end()) {
    c.error(*m.get("dead_letter_topic"),
            "must not be one of the pipeline's topics (the pipeline would read its own dead "
            "letters, and skip them again)");
  }
  if (const field* hh = m.find("heavy_hitters"))
    p.heavy_hitters = read_heavy_hitters(c, *hh, p.topics, p.scope);
  if (const field* d = m.find("dedup")) p.dedup = read_dedup(c, *d, p.topics);
  if (!m.find("heavy_hitters") && !m.find("dedup")) {
    c.error(m.mark(), fmt::format("{}: needs heavy_hitters, dedup or both", m.path()));
  }
  return p;
}

// Pipelines that feed each other in a circle: one's output topic (output_topic,
// duplicates_topic, alerts_topic or dead_letter_topic) read by the next, back to the first. Each
// event would go round again and again (a pipeline reading its own output is checked with its
// section).
void check_pipeline_loops(checker& c, const std::vector<field>& elements,
                          const std::vector<pipeline_config>& pipelines) {
  const std::size_t n = std::min(elements.size(), pipelines.size());
  std::map<std::string_view, std::vector<std::size_t>> readers;
  for (std::size_t i = 0; i < n; ++i) {
    for (const std::string& t : pipelines[i].topics) readers[t].push_back(i);
  }
  // Depth-first, iterative; a pipeline met again while on the path closes a loop.
  enum class mark : std::uint8_t { unseen, on_path, done };
  std::vector<mark> marks(n, mark::unseen);
  struct step {
    std::size_t pipeline;
    std::vector<std::pair<std::string_view, std::size_t>> next;  // (topic, reader)
    std::size_t taken = 0;
  };
  for (std::size_t root = 0; root < n; ++root) {
    if (marks[root] != mark::unseen) continue;
    std::vector<step> path;
    const auto enter = [&](std::size_t i) {
      marks[i] = mark::on_path;
      step s{i, {}, 0};
      for (const std::string_view t : output_topics_of(pipelines[i])) {
        if (const auto it = readers.find(t); it != readers.end()) {
          for (const std::size_t j : it->second)
            if (j != i) s.next.emplace_back(t, j);
        }
      }
      path.push_back(std::move(s));
    };
    enter(root);
    while (!path.empty()) {
      step& top = path.back();
      if (top.taken == top.next.size()) {
        marks[top.pipeline] = mark::done;
        path.pop_back();
        continue;
      }
      const std::size_t j = top.next[top.taken++].second;
      if (marks[j] == mark::unseen) {
        enter(j);
      } else if (marks[j] == mark::on_path) {
        std::string loop;
        std::size_t k = 0;
        while (path[k].pipeline != j) ++k;
        for (std::size_t a = k; a < path.size(); ++a) {
          // The edge each pipeline of the loop took last (the one just taken, for the last).
          loop += fmt::format("{} → topic {} → ", pipelines[path[a].pipeline].name,
                              path[a].next[path[a].taken - 1].first);
        }
        loop += pipelines[j].name;
        c.error(elements[j],
                fmt::format("pipelines feed each other in a loop ({}): every event would go round "
                            "again and again",
                            loop));
      }
    }
  }
}

// The value at KEY of a mapping, or a null node: found by iterating, since yaml-cpp's
// lookup of a missing key gives a node that throws when used.
YAML::Node find_value(const YAML::Node& node, std::string_view key) {
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
    }
  }
  return YAML::Node();
}

// The field of a topic at PARENT[section][key] (there: its value was read).
field topic_field(const field& parent, std::string_view section, std::string_view key) {
  const YAML::Node value = section.empty() ? find_value(parent.node, key)
                                           : find_value(find_value(parent.node, section), key);
  return field{value, parent.node.Mark(),
               section.empty() ? fmt::format("{}.{}", parent.path, key)
                               : fmt::format("{}.{}.{}", parent.path, section, key)};
}

}  // namespace

std::vector<pipeline_config> read_pipelines(checker& c, const std::vector<field>& elements,
                                            bool state_topic) {
  std::vector<pipeline_config> pipelines;
  std::map<std::string, int, std::less<>> names;
  for (const field& e : elements) pipelines.push_back(read_pipeline(c, e, names, state_topic));
  check_pipeline_loops(c, elements, pipelines);
  return pipelines;
}

// A sink reading first-seen events must not meet duplicates or alerts among them. (Several
// pipelines may write the same kind to one topic: their first-seen events, say.)
void check_output_kinds(checker& c, const std::vector<field>& elements,
                        const std::vector<pipeline_config>& pipelines, const field* generator_field,
                        const std::optional<generator_config>& generator) {
  struct writer {
    std::string_view kind;
    std::string what;  // "pipeline NAME (PATH)" or "the generator (generator.topic)"
  };
  std::map<std::string_view, writer, std::less<>> first;
  const auto add = [&](const std::string& topic, std::string_view kind, const field& where,
                       std::string what) {
    const auto [it, inserted] = first.emplace(topic, writer{kind, std::move(what)});
    if (inserted || it->second.kind == kind) return;
    c.error(where, fmt::format("topic {} already receives the {} of {}: a topic sketchd writes to "
                               "holds one kind of event (first-seen events, duplicates, "
                               "heavy-hitter alerts, dead letters or the generator's stream)",
                               topic, it->second.kind, it->second.what));
  };
  const std::size_t n = std::min(elements.size(), pipelines.size());
  std::size_t outputs = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const pipeline_config& p = pipelines[i];
    const auto each = [&](const std::optional<std::string>& topic, std::string_view kind,
                          std::string_view section, std::string_view key) {
      if (!topic) return;
      const field f = topic_field(elements[i], section, key);
      add(*topic, kind, f, fmt::format("pipeline {} ({})", p.name, f.path));
      if (++outputs == kMaxOutputs + 1) {
        c.error(f, fmt::format("at most {} outputs (output_topic, duplicates_topic, "
                               "alerts_topic and dead_letter_topic) over all pipelines; this is "
                               "output {}",
                               kMaxOutputs, outputs));
      }
    };
    if (p.dedup) {
      each(p.dedup->output_topic, "first-seen events", "dedup", "output_topic");
      each(p.dedup->duplicates_topic, "duplicates", "dedup", "duplicates_topic");
    }
    if (p.heavy_hitters)
      each(p.heavy_hitters->alerts_topic, "heavy-hitter alerts", "heavy_hitters", "alerts_topic");
    each(p.dead_letter_topic, "dead letters", "", "dead_letter_topic");
  }
  if (generator && generator_field != nullptr && !generator->topic.empty()) {
    add(generator->topic, "generated events", topic_field(*generator_field, "", "topic"),
        "the generator (generator.topic)");
  }
}

}  // namespace sketchd::config_detail

namespace sketchd {

std::vector<std::string_view> output_topics_of(const pipeline_config& p) {
  std::vector<std::string_view> out;
  const auto add = [&](const std::optional<std::string>& t) {
    if (t) out.emplace_back(*t);
  };
  if (p.dedup) {
    add(p.dedup->output_topic);
    add(p.dedup->duplicates_topic);
  }
  if (p.heavy_hitters) add(p.heavy_hitters->alerts_topic);
  add(p.dead_letter_topic);
  return out;
}

}  // namespace sketchd
