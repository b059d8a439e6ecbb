// A pipeline's snapshot state: save_state(), restore_state() and the parameters a state is
// checked against.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sketch/serialize.h"
#include "sketchd/pipeline/options.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/state/binary.h"

namespace sketchd {

// The state of a pipeline (all integers little-endian):
//
//   u64 n, n bytes   parameters(): "key: value" lines
//   u8               1 when heavy_hitters follows, else 0
//   u64 n, n bytes     rolling_count_min::serialize() (its own checked record)
//   u8               1 when dedup follows, else 0
//   u64 n, n bytes     rolling_bloom::serialize()
//   i64 clock_ms, i64 clock_wall_ms
//
// With scope: partition (the parameters say so), the two sections are instead one per
// resident shard:
//
//   u32 shards, then for each:
//     u64 n, n bytes   the input topic's name
//     i32              the partition
//     u8 + record      heavy_hitters, as above
//     u8 + record      dedup, as above
//   i64 clock_ms, i64 clock_wall_ms
//
// A shard of a topic the pipeline no longer reads is dropped at the restore.
//
// The parameters are compared as text before anything else is read, so a state made under
// another configuration (or by a library that sizes the structures differently: the
// derived sizes are part of the text) is refused with every difference named.

std::string pipeline::describe_parameters(const pipeline_config& config, std::uint64_t seed) {
  std::string out;
  const auto line = [&](std::string_view key, const auto& value) {
    out += fmt::format("{}: {}\n", key, value);
  };
  line("item.from", to_string(config.item.from));
  if (config.item.from == item_source::json) line("item.path", config.item.path);
  if (config.item.from == item_source::header) line("item.name", config.item.header);
  line("clock", to_string(config.clock));
  // Only when not the default, so that the states made before the key existed still match.
  if (config.scope != state_scope::instance) line("scope", to_string(config.scope));
  line("seed", seed);
  if (const auto& h = config.heavy_hitters) {
    line("heavy_hitters.window", format_duration(h->window));
    line("heavy_hitters.buckets", h->buckets);
    line("heavy_hitters.epsilon", h->epsilon);
    line("heavy_hitters.delta", h->delta);
    line("heavy_hitters.top_k", h->top_k);
    line("heavy_hitters.threshold", h->threshold);
    line("heavy_hitters.conservative", h->conservative);
    line("heavy_hitters.width (derived)", sketch::count_min_sketch::suggest_width(h->epsilon));
    line("heavy_hitters.depth (derived)", sketch::count_min_sketch::suggest_depth(h->delta));
    line("heavy_hitters.slice_ms (derived)",
         sketch::rolling_count_min::slice_ms(pipeline_options::count_min_of(*h, seed)));
  } else {
    line("heavy_hitters", "none");
  }
  if (const auto& d = config.dedup) {
    line("dedup.window", format_duration(d->window));
    line("dedup.capacity", d->capacity);
    line("dedup.fpr", d->fpr);
    line("dedup.generations", d->generations);
    const sketch::rolling_bloom_options o = pipeline_options::bloom_of(*d, seed);
    // Only when not the default, as scope.
    if (d->sizing != dedup_sizing::memory) {
      line("dedup.sizing", to_string(d->sizing));
      line("dedup.sized_fpr (derived)", o.fpr);
    }
    line("dedup.generation_capacity (derived)", sketch::rolling_bloom::generation_capacity(o));
    line("dedup.generation_fpr (derived)", sketch::rolling_bloom::generation_fpr(o));
    line("dedup.generation_bits (derived)", sketch::rolling_bloom::generation_bits(o));
    line("dedup.slice_ms (derived)", sketch::rolling_bloom::slice_ms(o));
  } else {
    line("dedup", "none");
  }
  return out;
}

std::string pipeline::save_state(sketch::bit_coding coding) const {
  std::lock_guard lock(mutex_);
  std::string out;
  // Room for the whole state at once: growing by appends would double the buffer, holding
  // the old and the new one together at the last step. The records hold the structures'
  // bytes and a little more (headers, the top-k items); the room not used is never touched.
  std::size_t structures = 0;
  for (const auto& s : shards_) {
    structures += (s->heavy ? s->heavy->size_bytes() : 0) + (s->dedup ? s->dedup->size_bytes() : 0);
  }
  out.reserve(parameters_.size() + structures + structures / 50 + (std::size_t{1} << 20));
  state::binary_writer w(out);
  w.bytes(parameters_);
  if (partition_scoped()) {
    save_shards(w, coding);
  } else {
    // The structures are written in place: the state is held once more, not twice.
    write_structures(w, *shards_.front(), coding);
  }
  w.i64(clock_.time_ms());
  w.i64(clock_.wall_ms());
  return out;
}

void pipeline::save_shards(state::binary_writer& w, sketch::bit_coding coding) const {
  w.u32(static_cast<std::uint32_t>(shards_.size()));
  for (const auto& s : shards_) {
    w.bytes(config_.topics[s->topic]);
    w.i32(s->partition);
    write_structures(w, *s, coding);
  }
}

void pipeline::write_structures(state::binary_writer& w, const shard& s,
                                sketch::bit_coding coding) {
  w.u8(s.heavy ? 1 : 0);
  if (s.heavy) w.bytes_with([&](std::string& o) { s.heavy->serialize_to(o); });
  w.u8(s.dedup ? 1 : 0);
  if (s.dedup) w.bytes_with([&](std::string& o) { s.dedup->serialize_to(o, coding); });
}

std::optional<std::string> pipeline::save_shard(std::uint32_t topic, std::int32_t partition,
                                                sketch::bit_coding coding) const {
  if (!partition_scoped() || partition < 0 || topic >= shard_index_.size()) return std::nullopt;
  std::lock_guard lock(mutex_);
  const auto& index = shard_index_[topic];
  const auto p = static_cast<std::size_t>(partition);
  if (p >= index.size() || index[p] == nullptr) return std::nullopt;
  const shard& s = *index[p];
  std::string out;
  out.reserve((s.heavy ? s.heavy->size_bytes() : 0) + (s.dedup ? s.dedup->size_bytes() : 0) +
              (std::size_t{64} << 10));
  state::binary_writer w(out);
  write_structures(w, s, coding);
  return out;
}

namespace {

// "key: value" lines into pairs, in order.
std::vector<std::pair<std::string, std::string>> parameter_lines(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    const std::size_t colon = line.find(": ");
    if (colon != std::string_view::npos)
      out.emplace_back(line.substr(0, colon), line.substr(colon + 2));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return out;
}

bool same_options(const sketch::rolling_count_min_options& a,
                  const sketch::rolling_count_min_options& b) {
  return a.window_ms == b.window_ms && a.buckets == b.buckets && a.epsilon == b.epsilon &&
         a.delta == b.delta && a.top_k == b.top_k && a.threshold == b.threshold &&
         a.conservative == b.conservative && a.seed == b.seed;
}

bool same_options(const sketch::rolling_bloom_options& a, const sketch::rolling_bloom_options& b) {
  return a.window_ms == b.window_ms && a.capacity == b.capacity && a.fpr == b.fpr &&
         a.generations == b.generations && a.seed == b.seed;
}

// A shard's Bloom filter: sized for its share of the capacity (the partition counts when it
// was made), the rest as configured.
bool same_shard_options(const sketch::rolling_bloom_options& a,
                        const sketch::rolling_bloom_options& b) {
  return a.window_ms == b.window_ms && a.capacity <= b.capacity && a.fpr == b.fpr &&
         a.generations == b.generations && a.seed == b.seed;
}

// Whether a restored shard has the sections and the options the parameters give; a Bloom
// shard of a partition (`share`) holds its share of the capacity at most.
template <typename Shard>
bool structures_match(const Shard& s,
                      const std::optional<sketch::rolling_count_min_options>& heavy_options,
                      const std::optional<sketch::rolling_bloom_options>& dedup_options,
                      bool share) {
  if (s.heavy.has_value() != heavy_options.has_value()) return false;
  if (s.dedup.has_value() != dedup_options.has_value()) return false;
  if (s.heavy && !same_options(s.heavy->options(), *heavy_options)) return false;
  if (!s.dedup) return true;
  return share ? same_shard_options(s.dedup->options(), *dedup_options)
               : same_options(s.dedup->options(), *dedup_options);
}

// Whether a dedup window's record carries the options the configuration gives (`share`: at
// most the share of a partition's shard), read before the window is built: a record whose
// generations are coded (state.compression) is far smaller than the arrays it describes,
// so one written by something else must not make the restore allocate them.
bool dedup_record_fits(std::string_view record,
                       const std::optional<sketch::rolling_bloom_options>& expected, bool share) {
  if (!expected) return false;
  const sketch::rolling_bloom_options o = sketch::rolling_bloom::record_options(record);
  return share ? same_shard_options(o, *expected) : same_options(o, *expected);
}

bool present(state::binary_reader& r) {
  const std::uint8_t flag = r.u8();
  if (flag > 1) r.fail("corrupt: a presence flag is neither 0 nor 1");
  return flag == 1;
}

// A shard's structures as write_structures() wrote them, checked against the options the
// configuration builds (a Bloom shard holds its share of the capacity, sized from the
// partition counts).
template <class Shard>
void read_shard_structures(state::binary_reader& r, Shard& s,
                           const std::optional<sketch::rolling_count_min_options>& heavy_options,
                           const std::optional<sketch::rolling_bloom_options>& dedup_options) {
  try {
    if (present(r)) s.heavy.emplace(sketch::rolling_count_min::deserialize(r.bytes()));
    if (present(r)) {
      const std::string_view record = r.bytes();
      if (!dedup_record_fits(record, dedup_options, true))
        r.fail("the structures of a shard do not match the parameters");
      s.dedup.emplace(sketch::rolling_bloom::deserialize(record));
    }
  } catch (const sketch::format_error& e) {
    r.fail(e.what());
  }
  if (!structures_match(s, heavy_options, dedup_options, true))
    r.fail("the structures of a shard do not match the parameters");
}

}  // namespace

std::optional<std::string> pipeline::state_mismatch(const std::string& name,
                                                    const std::string& ours,
                                                    std::string_view saved) {
  state::binary_reader r(saved, fmt::format("state of pipeline {}", name));
  const std::string theirs(r.bytes());
  if (theirs == ours) return std::nullopt;
  const auto a = parameter_lines(theirs);
  const auto b = parameter_lines(ours);
  std::vector<std::string> differences;
  const auto value_in = [](const auto& lines, const std::string& key) -> std::string {
    for (const auto& [k, v] : lines) {
      if (k == key) return v;
    }
    return "(not set)";
  };
  std::vector<std::string> keys;
  for (const auto& [k, v] : a) keys.push_back(k);
  for (const auto& [k, v] : b) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  // The derived sizes follow from the settings: they are listed only when no setting
  // differs (then the sizing itself changed, e.g. with another version of the library).
  std::vector<std::string> derived;
  // A section on one side only is one difference, not one per key of it.
  std::vector<std::string> one_sided;
  for (const std::string section : {"heavy_hitters", "dedup"}) {
    const bool in_theirs = value_in(a, section) != "none";
    const bool in_ours = value_in(b, section) != "none";
    if (in_theirs == in_ours) continue;
    one_sided.push_back(section);
    differences.push_back(fmt::format("{}: {} in the snapshot, {} in the configuration", section,
                                      in_theirs ? "present" : "absent",
                                      in_ours ? "present" : "absent"));
  }
  for (const auto& k : keys) {
    const std::string x = value_in(a, k);
    const std::string y = value_in(b, k);
    if (x == y) continue;
    if (std::any_of(one_sided.begin(), one_sided.end(), [&k](const std::string& section) {
          return k == section || k.starts_with(section + ".");
        })) {
      continue;
    }
    (k.ends_with(" (derived)") ? derived : differences)
        .push_back(fmt::format("{}: {} in the snapshot, {} in the configuration", k, x, y));
  }
  if (differences.empty()) differences = std::move(derived);
  if (differences.empty()) r.fail("corrupt: unreadable parameters");
  return fmt::format("made under other parameters ({})", fmt::join(differences, "; "));
}

std::pair<std::optional<sketch::rolling_count_min_options>,
          std::optional<sketch::rolling_bloom_options>>
pipeline::structure_options() const {
  std::optional<sketch::rolling_count_min_options> heavy;
  if (const auto& h = config_.heavy_hitters) heavy = pipeline_options::count_min_of(*h, seed_);
  return {heavy, dedup_options_};
}

void pipeline::restore_state(std::string_view saved) {
  if (auto mismatch = state_mismatch(config_.name, parameters_, saved)) {
    throw state::mismatch_error(*mismatch);
  }
  state::binary_reader r(saved, fmt::format("state of pipeline {}", config_.name));
  (void)r.bytes();  // skips the parameters, equal to ours (state_mismatch above)
  // The current structures are released before the state's are built, so that the two
  // are never held together (they can take most of the memory); should the state turn out
  // corrupt, empty ones take their place.
  std::lock_guard lock(mutex_);
  // What the configuration builds, without building it.
  const auto [heavy_options, dedup_options] = structure_options();
  shards_.clear();
  for (auto& index : shard_index_) index.clear();
  heavy_set_.clear();
  combined_top_.clear();
  shards_changed_ = true;
  try {
    heavy_window_dropped_.reset();
    if (partition_scoped()) {
      restore_shards(r, heavy_options, dedup_options);
    } else {
      shard& s = *shards_.emplace_back(std::make_unique<shard>());
      try {
        if (present(r)) {
          const std::string_view record = r.bytes();
          try {
            s.heavy.emplace(sketch::rolling_count_min::deserialize(record));
          } catch (const sketch::format_version_error& e) {
            // Written before the Count-Min rows' hashing changed: its counters sit at other
            // columns, so the window cannot be read, but the dedup window and the input
            // positions can (the dedup window's format is the same). It starts empty.
            if (!heavy_options) throw;
            s.heavy.emplace(*heavy_options);
            heavy_window_dropped_ = e.what();
          }
        }
        if (present(r)) {
          const std::string_view record = r.bytes();
          if (!dedup_record_fits(record, dedup_options, false))
            r.fail("the structures do not match the parameters");
          s.dedup.emplace(sketch::rolling_bloom::deserialize(record));
        }
      } catch (const sketch::format_error& e) {
        r.fail(e.what());
      }
      // The parameters' text matched; the structures must carry the same options (they can
      // only differ in a state written by something else than save_state()).
      if (!structures_match(s, heavy_options, dedup_options, false))
        r.fail("the structures do not match the parameters");
    }
    const std::int64_t clock_ms = r.i64();
    const std::int64_t clock_wall_ms = r.i64();
    r.done();
    // The newest generation may have been slid past the last item by an idle stream.
    std::int64_t newest = clock_ms;
    for (const auto& s : shards_) {
      if (s->dedup && s->dedup->live_generations() > 0)
        newest = std::max(newest, s->dedup->generation_start_ms(0));
    }
    clock_.restore(clock_ms, clock_wall_ms, newest);
    restored_rotations_by_time_ = dropped_rotations_by_time_;
    restored_rotations_by_capacity_ = dropped_rotations_by_capacity_;
    for (const auto& s : shards_) {
      if (!s->dedup) continue;
      restored_rotations_by_time_ += s->dedup->rotations_by_time();
      restored_rotations_by_capacity_ += s->dedup->rotations_by_capacity();
    }
  } catch (...) {
    restored_rotations_by_time_ = dropped_rotations_by_time_;
    restored_rotations_by_capacity_ = dropped_rotations_by_capacity_;
    heavy_window_dropped_.reset();
    shards_.clear();
    for (auto& index : shard_index_) index.clear();
    if (!partition_scoped()) shards_.push_back(std::make_unique<shard>(make_shard(0, -1)));
    throw;
  }
}

void pipeline::restore_shards(state::binary_reader& r,
                              const std::optional<sketch::rolling_count_min_options>& heavy_options,
                              const std::optional<sketch::rolling_bloom_options>& dedup_options) {
  const std::uint32_t count = r.u32();
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string topic(r.bytes());
    const std::int32_t partition = r.i32();
    if (partition < 0) r.fail("corrupt: a shard of a negative partition");
    shard s;
    s.partition = partition;
    read_shard_structures(r, s, heavy_options, dedup_options);
    const auto it = std::find(config_.topics.begin(), config_.topics.end(), topic);
    if (it == config_.topics.end()) continue;  // a topic no longer read
    s.topic = static_cast<std::uint32_t>(it - config_.topics.begin());
    auto& index = shard_index_[s.topic];
    const auto p = static_cast<std::size_t>(partition);
    if (p >= index.size()) index.resize(p + 1, nullptr);
    if (index[p] != nullptr) r.fail("corrupt: a partition's shard twice");
    index[p] = shards_.emplace_back(std::make_unique<shard>(std::move(s))).get();
  }
}

void pipeline::restore_shard(std::uint32_t topic, std::int32_t partition, std::string_view saved) {
  if (!partition_scoped() || partition < 0 || topic >= shard_index_.size())
    throw std::invalid_argument("restore_shard: not a partition-scoped shard");
  const std::string what =
      fmt::format("shard {} [{}] of pipeline {}", config_.topics[topic], partition, config_.name);
  const auto [heavy_options, dedup_options] = structure_options();
  std::lock_guard lock(mutex_);
  // The partition's current shard goes first: the two are never held together.
  keep_partitions_locked(
      [&](std::uint32_t t, std::int32_t p) { return t != topic || p != partition; });
  state::binary_reader r(saved, what);
  shard s;
  s.topic = topic;
  s.partition = partition;
  read_shard_structures(r, s, heavy_options, dedup_options);
  r.done();
  auto& index = shard_index_[topic];
  const auto p = static_cast<std::size_t>(partition);
  if (p >= index.size()) index.resize(p + 1, nullptr);
  // Its rotations happened before: the counters of this run do not count them.
  if (s.dedup) {
    restored_rotations_by_time_ += s.dedup->rotations_by_time();
    restored_rotations_by_capacity_ += s.dedup->rotations_by_capacity();
  }
  index[p] = shards_.emplace_back(std::make_unique<shard>(std::move(s))).get();
  shards_changed_ = true;
}

}  // namespace sketchd
