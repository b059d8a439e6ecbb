#include "sketchd/pipeline/pipeline.h"

#include <algorithm>

#include "sketchd/pipeline/options.h"

namespace sketchd {

namespace {

// How long a take-over leaves the heavy-hitter window incomplete (a window and a slice;
// see pipeline_clock::take_over()), or 0 without heavy_hitters.
std::int64_t takeover_ms_of(const pipeline_config& c, std::uint64_t seed) {
  if (!c.heavy_hitters) return 0;
  return c.heavy_hitters->window.count() +
         sketch::rolling_count_min::slice_ms(
             pipeline_options::count_min_of(*c.heavy_hitters, seed));
}

}  // namespace

pipeline::pipeline(const pipeline_config& config, std::uint64_t seed)
    : config_(config),
      seed_(seed),
      extractor_(pipeline_options::extractor_of(config)),
      clock_(config.clock, takeover_ms_of(config, seed)) {
  parameters_ = describe_parameters(config_, seed_);
  if (const auto& d = config_.dedup) dedup_options_ = pipeline_options::bloom_of(*d, seed_);
  partition_counts_.assign(config_.topics.size(), 0);
  shard_index_.resize(std::max<std::size_t>(config_.topics.size(), 1));
  if (!partition_scoped()) shards_.push_back(std::make_unique<shard>(make_shard(0, -1)));
  group_.resize(extractor::kBatchMessages);
  group_results_.resize(extractor::kBatchMessages);
  group_hashes_.resize(extractor::kBatchMessages);
  group_shards_.resize(extractor::kBatchMessages);
  group_times_.resize(extractor::kBatchMessages);
  if (config_.heavy_hitters) {
    const auto depth = sketch::count_min_sketch::suggest_depth(config_.heavy_hitters->delta);
    group_cells_.resize(extractor::kBatchMessages * depth);
    group_estimates_.resize(extractor::kBatchMessages);
    group_totals_.resize(extractor::kBatchMessages);
  }
}

pipeline::shard pipeline::make_shard(std::uint32_t topic, std::int32_t partition) const {
  shard s;
  s.topic = topic;
  s.partition = partition;
  if (const auto& h = config_.heavy_hitters)
    s.heavy.emplace(pipeline_options::count_min_of(*h, seed_));
  if (dedup_options_) {
    sketch::rolling_bloom_options o = *dedup_options_;
    if (partition >= 0) {
      std::uint64_t total = 0;
      bool known = true;
      for (const std::uint32_t n : partition_counts_) {
        total += n;
        known = known && n > 0;
      }
      if (known && total > 1) {
        o.capacity = sketch::shards::rolling_bloom_shard_capacity(
            o.capacity, o.generations, static_cast<std::uint32_t>(total));
      }
    }
    s.dedup.emplace(o);
  }
  return s;
}

pipeline::shard& pipeline::shard_of(std::uint32_t topic, std::int32_t partition) {
  if (!partition_scoped()) return *shards_.front();
  if (partition < 0) partition = 0;
  if (topic >= shard_index_.size()) topic = 0;
  auto& index = shard_index_[topic];
  const auto p = static_cast<std::size_t>(partition);
  if (p >= index.size()) index.resize(p + 1, nullptr);
  if (index[p] == nullptr) {
    shards_.reserve(shards_.size() + 1);  // so that nothing is left half made
    auto made = std::make_unique<shard>(make_shard(topic, partition));
    index[p] = made.get();
    shards_.push_back(std::move(made));
    shards_changed_ = true;
  }
  return *index[p];
}

pipeline::shard& pipeline::resident_shard(std::uint32_t topic, std::int32_t partition) noexcept {
  if (!partition_scoped()) return *shards_.front();
  if (partition < 0) partition = 0;
  if (topic >= shard_index_.size()) topic = 0;
  return *shard_index_[topic][static_cast<std::size_t>(partition)];
}

void pipeline::set_partition_counts(std::span<const std::uint32_t> counts) {
  std::lock_guard lock(mutex_);
  for (std::size_t t = 0; t < partition_counts_.size() && t < counts.size(); ++t)
    partition_counts_[t] = counts[t];
}

void pipeline::keep_partitions(
    const std::function<bool(std::uint32_t topic, std::int32_t partition)>& keep) {
  if (!partition_scoped()) return;
  std::lock_guard lock(mutex_);
  keep_partitions_locked(keep);
}

void pipeline::keep_partitions_locked(
    const std::function<bool(std::uint32_t topic, std::int32_t partition)>& keep) {
  std::vector<std::unique_ptr<shard>> kept;
  kept.reserve(shards_.size());
  for (auto& s : shards_) {
    if (keep(s->topic, s->partition)) {
      kept.push_back(std::move(s));
      continue;
    }
    if (s->dedup) {
      dropped_rotations_by_time_ += s->dedup->rotations_by_time();
      dropped_rotations_by_capacity_ += s->dedup->rotations_by_capacity();
    }
    shard_index_[s->topic][static_cast<std::size_t>(s->partition)] = nullptr;
    shards_changed_ = true;
  }
  shards_ = std::move(kept);
}

std::size_t pipeline::shard_count() const {
  std::lock_guard lock(mutex_);
  return shards_.size();
}

void pipeline::begin_batch() { batch_lock_.lock(); }

verdict pipeline::process(const message_view& message, std::int64_t event_ms, std::int64_t wall_ms,
                          std::uint32_t topic, std::int32_t partition) {
  shard& s = shard_of(topic, partition);
  return feed(extractor_.extract(message), event_ms, wall_ms, s);
}

void pipeline::process(std::span<const pipeline_input> batch, std::int64_t wall_ms,
                       std::span<verdict> out, std::span<extract_failure> failures) {
  if (partition_scoped()) {
    for (const pipeline_input& in : batch) static_cast<void>(shard_of(in.topic, in.partition));
  }
  std::size_t done = 0;
  while (done < batch.size()) {
    const std::size_t size = std::min(batch.size() - done, group_.size());
    for (std::size_t i = 0; i < size; ++i) group_[i] = batch[done + i].message;
    const std::size_t n = extractor_.extract(std::span(group_).first(size), group_results_);
    if (!failures.empty()) {
      for (std::size_t i = 0; i < n; ++i) failures[done + i] = group_results_[i].failure;
    }
    feed_group(batch.subspan(done, n), wall_ms, out.subspan(done, n));
    done += n;
  }
}

void pipeline::feed_group(std::span<const pipeline_input> inputs, std::int64_t wall_ms,
                          std::span<verdict> out) noexcept {
  // The items of group_results_, in three passes: their hashes and times first, then the
  // heavy hitters, then dedup. Each structure's pass asks for the cache lines of the item
  // kAhead places on while it updates this one, so that the misses of a sketch larger than
  // the cache overlap instead of coming one after the other (as
  // rolling_bloom::test_and_insert(span, …) does for items that share one time). The
  // answers and the state are those of feed() called item by item: each structure sees its
  // items in order, with their own times, and the two structures are independent. One loop
  // feeding both structures, prefetching alike, measured no faster than no prefetching at
  // all (docs/PERFORMANCE.md, "Daemon throughput"). With scope: partition each item goes
  // to its partition's shard; all shards have the same shape.
  constexpr std::size_t kAhead = 16;
  const std::size_t n = inputs.size();
  for (std::size_t i = 0; i < n; ++i) {
    const extract_result& r = group_results_[i];
    if (r.failure != extract_failure::none) {
      ++local_.failures[static_cast<std::size_t>(r.failure)];
      out[i] = verdict::skipped;
      continue;
    }
    ++local_.items;
    group_hashes_[i] = sketch::hash_item(r.item, seed_);
    group_times_[i] = clock_.time_of(inputs[i].event_ms, wall_ms);
    group_shards_[i] = &resident_shard(inputs[i].topic, inputs[i].partition);
    out[i] = verdict::counted;
  }
  const auto has_item = [&](std::size_t i) { return out[i] != verdict::skipped; };
  if (config_.heavy_hitters && !shards_.empty()) {
    // Each item's cells are located once, for its prefetch and its update. The pass is
    // written out: a generic pass taking a prefetch callable made GCC 12 emit none of the
    // dedup pass's prefetches (docs/PERFORMANCE.md, "The index mix").
    const sketch::rolling_count_min& any = *shards_.front()->heavy;  // every shard's shape
    const std::size_t depth = any.depth();
    for (std::size_t i = 0; i < n; ++i) {
      if (has_item(i)) any.locate(group_hashes_[i], &group_cells_[i * depth]);
    }
    for (std::size_t i = 0; i < std::min(n, kAhead); ++i) {
      if (has_item(i)) group_shards_[i]->heavy->prefetch(&group_cells_[i * depth]);
    }
    // The items are counted first and offered to their top-k tracker after, in order
    // (rolling_count_min::count and offer): the tracker's work then no longer waits on each
    // item's counters, nor holds up the next items' misses. A count that would rotate its
    // shard's window (which refreshes the tracker) first offers the items counted before it.
    // With one shard (scope: instance) a run is offered as one batch, whose bound test has
    // no branch per item; a skipped item has estimate 0, which the tracker ignores.
    std::size_t offered = 0;  // items [offered, i) are counted and not yet offered
    const auto offer_counted = [&](std::size_t end) {
      if (!partition_scoped()) {
        const std::span<const sketch::hash128> hashes(group_hashes_.data() + offered,
                                                      end - offered);
        const std::span<const std::uint64_t> estimates(group_estimates_.data() + offered,
                                                       end - offered);
        shards_.front()->heavy->offer(
            hashes, estimates, [&](std::size_t j) { return group_results_[offered + j].item; },
            [&](std::size_t j) { return group_totals_[offered + j]; });
        offered = end;
        return;
      }
      for (; offered < end; ++offered) {
        if (!has_item(offered)) continue;
        group_shards_[offered]->heavy->offer(group_hashes_[offered], group_results_[offered].item,
                                             group_estimates_[offered], group_totals_[offered]);
      }
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n && has_item(i + kAhead))
        group_shards_[i + kAhead]->heavy->prefetch(&group_cells_[(i + kAhead) * depth]);
      if (!has_item(i)) {
        group_estimates_[i] = 0;
        continue;
      }
      sketch::rolling_count_min& heavy = *group_shards_[i]->heavy;
      if (heavy.rotates_at(group_times_[i])) offer_counted(i);
      group_estimates_[i] = heavy.count(&group_cells_[i * depth], group_times_[i]);
      group_totals_[i] = heavy.window_items();
    }
    offer_counted(n);
  }
  if (config_.dedup) {
    for (std::size_t i = 0; i < std::min(n, kAhead); ++i) {
      if (has_item(i)) group_shards_[i]->dedup->prefetch(group_hashes_[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n && has_item(i + kAhead))
        group_shards_[i + kAhead]->dedup->prefetch(group_hashes_[i + kAhead]);
      if (!has_item(i)) continue;
      const bool seen = group_shards_[i]->dedup->test_and_insert(group_hashes_[i], group_times_[i]);
      local_.duplicates += seen ? 1 : 0;
      local_.first_seen += seen ? 0 : 1;
      out[i] = seen ? verdict::duplicate : verdict::first_seen;
    }
  }
}

verdict pipeline::feed(const extract_result& r, std::int64_t event_ms, std::int64_t wall_ms,
                       shard& s) noexcept {
  if (r.failure != extract_failure::none) {
    ++local_.failures[static_cast<std::size_t>(r.failure)];
    return verdict::skipped;
  }
  ++local_.items;
  const std::int64_t now = clock_.time_of(event_ms, wall_ms);
  const sketch::hash128 h = sketch::hash_item(r.item, seed_);
  if (s.heavy) s.heavy->update(h, r.item, now);
  if (!s.dedup) return verdict::counted;
  if (s.dedup->test_and_insert(h, now)) {
    ++local_.duplicates;
    return verdict::duplicate;
  }
  ++local_.first_seen;
  return verdict::first_seen;
}

std::vector<sketch::heavy_event> pipeline::end_batch(std::int64_t wall_ms) {
  const std::int64_t now = clock_.end_batch(wall_ms);
  const bool move = now > 0;  // 0: an event clock that has seen nothing yet
  // The lock is released however this ends (drain_events() allocates): held on, it would
  // block every reader and fail the next begin_batch().
  struct abandon_on_exit {
    pipeline& p;
    ~abandon_on_exit() { p.abandon_batch(); }
  } release{*this};
  std::vector<sketch::heavy_event> events;
  if (config_.heavy_hitters) {
    for (auto& s : shards_) {
      if (move) s->heavy->advance(now);
      s->heavy->refresh();
    }
    if (partition_scoped()) {
      for (auto& s : shards_) static_cast<void>(s->heavy->drain_events());
      if (wall_ms >= next_combined_refresh_ms_ || shards_changed_) {
        heavy_events_of_shards(events);
        next_combined_refresh_ms_ = wall_ms + kCombinedRefreshMs;
        shards_changed_ = false;
      }
    } else {
      sketch::rolling_count_min& heavy = *shards_.front()->heavy;
      events = heavy.drain_events();
      local_.heavy_events_dropped = heavy.tracker().dropped_events();
    }
    for (const auto& e : events) {
      if (e.kind == sketch::heavy_event::kind::enter) {
        ++local_.heavy_enter;
      } else {
        ++local_.heavy_leave;
      }
    }
  }
  if (config_.dedup && move) {
    for (auto& s : shards_) s->dedup->advance(now);
  }
  published_ = local_;
  return events;
}

void pipeline::heavy_events_of_shards(std::vector<sketch::heavy_event>& events) {
  // Each shard's tracker keeps its own events, of its own N: they are dropped, and the
  // events are those of the heavy set over every shard (combined estimate ≥ φ·N), among
  // the candidates of all (which hold every heavy item, sketch/shards.h).
  const auto& h = *config_.heavy_hitters;
  const std::vector<const sketch::rolling_count_min*> heavy = heavy_shards();
  const std::uint64_t n = sketch::shards::combined_window_items(heavy);
  std::vector<std::string> now_heavy;
  std::vector<sketch::top_k_tracker::entry> top = sketch::shards::combined_top(
      heavy, sketch::top_k_tracker::default_capacity(h.top_k, h.threshold));
  for (const auto& e : top) {
    if (!e.heavy) continue;
    now_heavy.push_back(e.item);
    if (!std::binary_search(heavy_set_.begin(), heavy_set_.end(), e.item))
      events.push_back({sketch::heavy_event::kind::enter, e.item, e.estimate, n});
  }
  if (top.size() > h.top_k) top.resize(h.top_k);
  combined_top_ = std::move(top);
  std::sort(now_heavy.begin(), now_heavy.end());
  for (const std::string& item : heavy_set_) {
    if (std::binary_search(now_heavy.begin(), now_heavy.end(), item)) continue;
    const sketch::hash128 hash = sketch::hash_item(item, seed_);
    events.push_back({sketch::heavy_event::kind::leave, item,
                      sketch::shards::combined_estimate(heavy, hash), n});
  }
  heavy_set_ = std::move(now_heavy);
}

void pipeline::partitions_taken_over() {
  if (!config_.heavy_hitters) return;
  std::lock_guard lock(mutex_);
  clock_.take_over();
}

void pipeline::abandon_batch() noexcept {
  if (batch_lock_.owns_lock()) batch_lock_.unlock();
}

void pipeline::publish_counters() {
  std::lock_guard lock(mutex_);
  published_ = local_;
}

pipeline_counters pipeline::counters() const {
  std::lock_guard lock(mutex_);
  return published_;
}

std::int64_t pipeline::clock_ms() const {
  std::lock_guard lock(mutex_);
  return clock_.time_ms();
}

// The combining readers: the lock is held by their callers.

std::vector<const sketch::rolling_count_min*> pipeline::heavy_shards() const {
  std::vector<const sketch::rolling_count_min*> out;
  out.reserve(shards_.size());
  for (const auto& s : shards_) out.push_back(&*s->heavy);
  return out;
}

std::vector<const sketch::rolling_bloom*> pipeline::dedup_shards() const {
  std::vector<const sketch::rolling_bloom*> out;
  out.reserve(shards_.size());
  for (const auto& s : shards_) out.push_back(&*s->dedup);
  return out;
}

std::vector<sketch::top_k_tracker::entry> pipeline::top_of_shards(std::uint32_t k) const {
  if (!partition_scoped()) {
    std::vector<sketch::top_k_tracker::entry> top = shards_.front()->heavy->top();
    if (top.size() > k) top.resize(k);
    return top;
  }
  // As the last combined refresh found it (at most a second old, as the instance-wide
  // tracker's top is as old as its last batch).
  std::vector<sketch::top_k_tracker::entry> top(
      combined_top_.begin(),
      combined_top_.begin() + std::min<std::size_t>(k, combined_top_.size()));
  return top;
}

std::uint64_t pipeline::window_items() const {
  return sketch::shards::combined_window_items(heavy_shards());
}

double pipeline::error_bound() const {
  double sum = 0;  // εN_s each: εN in all
  for (const auto& s : shards_) sum += s->heavy->error_bound();
  return sum;
}

sketch::shards::bloom_figures pipeline::bloom_figures() const {
  sketch::shards::bloom_figures f =
      sketch::shards::combined_bloom_figures(dedup_shards(), clock_.now_ms());
  // No shard resident: the generations are there, empty.
  if (f.fill_ratio.empty()) f.fill_ratio.assign(config_.dedup->generations, 0.0);
  return f;
}

std::pair<std::uint64_t, std::uint64_t> pipeline::rotations() const {
  std::uint64_t by_time = dropped_rotations_by_time_;
  std::uint64_t by_capacity = dropped_rotations_by_capacity_;
  for (const auto& s : shards_) {
    by_time += s->dedup->rotations_by_time();
    by_capacity += s->dedup->rotations_by_capacity();
  }
  return {by_time - restored_rotations_by_time_, by_capacity - restored_rotations_by_capacity_};
}

pipeline_summary pipeline::summary() const {
  std::lock_guard lock(mutex_);
  pipeline_summary s;
  s.name = config_.name;
  s.items = published_.items;
  if (config_.heavy_hitters) {
    s.has_heavy_hitters = true;
    s.window_items = window_items();
    s.top = top_of_shards(3);
  }
  if (config_.dedup) {
    const sketch::shards::bloom_figures f = bloom_figures();
    s.has_dedup = true;
    s.fill = f.fill_ratio[0];
    s.generations = config_.dedup->generations;
    s.estimated_fpr = f.estimated_fpr;
    s.target_fpr = config_.dedup->fpr;
    s.rotations_by_capacity = rotations().second;
    s.effective_window_ms = f.effective_window_ms;
  }
  return s;
}

pipeline_status pipeline::status() const {
  std::lock_guard lock(mutex_);
  pipeline_status s;
  s.name = config_.name;
  s.topics = config_.topics;
  s.item = config_.item;
  s.clock = config_.clock;
  s.scope = config_.scope;
  s.shards = shards_.size();
  s.items_total = published_.items;
  if (config_.heavy_hitters) {
    const auto& h = *config_.heavy_hitters;
    s.heavy_hitters = heavy_hitters_status{.window_ms = h.window.count(),
                                           .buckets = h.buckets,
                                           .epsilon = h.epsilon,
                                           .delta = h.delta,
                                           .top_k = h.top_k,
                                           .threshold = h.threshold,
                                           .window_items = window_items(),
                                           .error_bound = error_bound()};
  }
  if (config_.dedup) {
    const auto& d = *config_.dedup;
    const sketch::shards::bloom_figures f = bloom_figures();
    dedup_status& st = s.dedup.emplace();
    st.window_ms = d.window.count();
    st.capacity = d.capacity;
    st.generations = d.generations;
    st.first_seen_total = published_.first_seen;
    st.duplicates_total = published_.duplicates;
    st.target_fpr = d.fpr;
    st.estimated_fpr = f.estimated_fpr;
    st.estimated_items = f.estimated_items;
    st.fill_ratio = f.fill_ratio;
    st.forwarded_total = published_.forwarded;
    st.guaranteed_horizon_ms = f.guaranteed_horizon_ms;
    st.effective_window_ms = f.effective_window_ms;
  }
  return s;
}

std::optional<topk_status> pipeline::topk() const {
  std::lock_guard lock(mutex_);
  if (!config_.heavy_hitters) return std::nullopt;
  topk_status s;
  s.pipeline = config_.name;
  s.window_items = window_items();
  s.threshold = config_.heavy_hitters->threshold;
  s.error_bound = error_bound();
  const double n = static_cast<double>(s.window_items);
  for (auto& e : top_of_shards(config_.heavy_hitters->top_k)) {
    const double ratio = n > 0 ? static_cast<double>(e.estimate) / n : 0.0;
    s.items.push_back({std::move(e.item), e.estimate, ratio, e.heavy});
  }
  return s;
}

std::optional<estimate_status> pipeline::estimate(std::string_view item) const {
  std::lock_guard lock(mutex_);
  if (!config_.heavy_hitters) return std::nullopt;
  return estimate_status{
      .item = std::string(item),
      .estimate = sketch::shards::combined_estimate(heavy_shards(), sketch::hash_item(item, seed_)),
      .error_bound = error_bound(),
      .window_items = window_items()};
}

std::optional<seen_status> pipeline::seen(std::string_view item) const {
  std::lock_guard lock(mutex_);
  if (!config_.dedup) return std::nullopt;
  // The item's partition is not known here: it is looked for in every shard, so a new item
  // is a false positive when any shard says so (1 − Π(1 − p_s), at most the sum).
  const sketch::hash128 h = sketch::hash_item(item, seed_);
  bool seen = false;
  double none = 1.0;
  for (const auto& s : shards_) {
    seen = seen || s->dedup->contains(h);
    none *= 1.0 - s->dedup->estimated_fpr();
  }
  const double fpr = shards_.size() == 1 ? shards_.front()->dedup->estimated_fpr() : 1.0 - none;
  return seen_status{.item = std::string(item), .seen = seen, .estimated_fpr = fpr};
}

}  // namespace sketchd
