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
  if (const auto& h = config_.heavy_hitters)
    heavy_.emplace(pipeline_options::count_min_of(*h, seed_));
  if (const auto& d = config_.dedup) dedup_.emplace(pipeline_options::bloom_of(*d, seed_));
  parameters_ = describe_parameters(config_, seed_);
  group_.resize(extractor::kBatchMessages);
  group_results_.resize(extractor::kBatchMessages);
  group_hashes_.resize(extractor::kBatchMessages);
  group_times_.resize(extractor::kBatchMessages);
  if (heavy_) group_cells_.resize(extractor::kBatchMessages * heavy_->depth());
}

void pipeline::begin_batch() { batch_lock_.lock(); }

verdict pipeline::process(const message_view& message, std::int64_t event_ms,
                          std::int64_t wall_ms) noexcept {
  return feed(extractor_.extract(message), event_ms, wall_ms);
}

void pipeline::process(std::span<const pipeline_input> batch, std::int64_t wall_ms,
                       std::span<verdict> out) noexcept {
  std::size_t done = 0;
  while (done < batch.size()) {
    const std::size_t size = std::min(batch.size() - done, group_.size());
    for (std::size_t i = 0; i < size; ++i) group_[i] = batch[done + i].message;
    const std::size_t n = extractor_.extract(std::span(group_).first(size), group_results_);
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
  // all (docs/PERFORMANCE.md, "Daemon throughput").
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
    out[i] = verdict::counted;
  }
  const auto has_item = [&](std::size_t i) { return out[i] != verdict::skipped; };
  // One structure's pass: feed(i) for each item, the item kAhead on prefetched.
  const auto pass = [&](const auto& structure, auto&& feed) {
    for (std::size_t i = 0; i < std::min(n, kAhead); ++i) {
      if (has_item(i)) structure.prefetch(group_hashes_[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n && has_item(i + kAhead)) structure.prefetch(group_hashes_[i + kAhead]);
      if (has_item(i)) feed(i);
    }
  };
  if (heavy_) {
    // Each item's cells are located once, for its prefetch and its update. The pass is
    // written out: `pass` generalised to take a prefetch callable made GCC 12 emit none of
    // the dedup pass's prefetches (docs/PERFORMANCE.md, "The index mix").
    const std::size_t depth = heavy_->depth();
    for (std::size_t i = 0; i < n; ++i) {
      if (has_item(i)) heavy_->locate(group_hashes_[i], &group_cells_[i * depth]);
    }
    for (std::size_t i = 0; i < std::min(n, kAhead); ++i) {
      if (has_item(i)) heavy_->prefetch(&group_cells_[i * depth]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n && has_item(i + kAhead))
        heavy_->prefetch(&group_cells_[(i + kAhead) * depth]);
      if (has_item(i)) {
        heavy_->update(&group_cells_[i * depth], group_hashes_[i], group_results_[i].item,
                       group_times_[i]);
      }
    }
  }
  if (dedup_) {
    pass(*dedup_, [&](std::size_t i) {
      const bool seen = dedup_->test_and_insert(group_hashes_[i], group_times_[i]);
      local_.duplicates += seen ? 1 : 0;
      local_.first_seen += seen ? 0 : 1;
      out[i] = seen ? verdict::duplicate : verdict::first_seen;
    });
  }
}

verdict pipeline::feed(const extract_result& r, std::int64_t event_ms,
                       std::int64_t wall_ms) noexcept {
  if (r.failure != extract_failure::none) {
    ++local_.failures[static_cast<std::size_t>(r.failure)];
    return verdict::skipped;
  }
  ++local_.items;
  const std::int64_t now = clock_.time_of(event_ms, wall_ms);
  const sketch::hash128 h = sketch::hash_item(r.item, seed_);
  if (heavy_) heavy_->update(h, r.item, now);
  if (!dedup_) return verdict::counted;
  if (dedup_->test_and_insert(h, now)) {
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
  if (heavy_) {
    if (move) heavy_->advance(now);
    heavy_->refresh();
    events = heavy_->drain_events();
    local_.heavy_events_dropped = heavy_->tracker().dropped_events();
    for (const auto& e : events) {
      if (e.kind == sketch::heavy_event::kind::enter) {
        ++local_.heavy_enter;
      } else {
        ++local_.heavy_leave;
      }
    }
  }
  if (dedup_ && move) dedup_->advance(now);
  published_ = local_;
  return events;
}

void pipeline::partitions_taken_over() {
  if (!heavy_) return;
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

pipeline_summary pipeline::summary() const {
  std::lock_guard lock(mutex_);
  pipeline_summary s;
  s.name = config_.name;
  s.items = published_.items;
  if (heavy_) {
    s.has_heavy_hitters = true;
    s.window_items = heavy_->window_items();
    s.top = heavy_->top();
    if (s.top.size() > 3) s.top.resize(3);
  }
  if (dedup_) {
    s.has_dedup = true;
    s.fill = dedup_->fill_ratio(0);
    s.generations = dedup_->generations();
    s.estimated_fpr = dedup_->estimated_fpr();
    s.target_fpr = dedup_->target_fpr();
    s.rotations_by_capacity = dedup_->rotations_by_capacity() - restored_rotations_by_capacity_;
    s.effective_window_ms = dedup_->effective_window_ms(clock_.now_ms());
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
  s.items_total = published_.items;
  if (heavy_) {
    const auto& h = *config_.heavy_hitters;
    s.heavy_hitters = heavy_hitters_status{.window_ms = h.window.count(),
                                           .buckets = h.buckets,
                                           .epsilon = h.epsilon,
                                           .delta = h.delta,
                                           .top_k = h.top_k,
                                           .threshold = h.threshold,
                                           .window_items = heavy_->window_items(),
                                           .error_bound = heavy_->error_bound()};
  }
  if (dedup_) {
    const auto& d = *config_.dedup;
    dedup_status& st = s.dedup.emplace();
    st.window_ms = d.window.count();
    st.capacity = d.capacity;
    st.generations = d.generations;
    st.first_seen_total = published_.first_seen;
    st.duplicates_total = published_.duplicates;
    st.target_fpr = dedup_->target_fpr();
    st.estimated_fpr = dedup_->estimated_fpr();
    st.estimated_items = dedup_->estimated_items();
    for (std::size_t g = 0; g < dedup_->generations(); ++g)
      st.fill_ratio.push_back(dedup_->fill_ratio(g));
    st.forwarded_total = published_.forwarded;
    st.guaranteed_horizon_ms = dedup_->guaranteed_horizon_ms();
    st.effective_window_ms = dedup_->effective_window_ms(clock_.now_ms());
  }
  return s;
}

std::optional<topk_status> pipeline::topk() const {
  std::lock_guard lock(mutex_);
  if (!heavy_) return std::nullopt;
  topk_status s;
  s.pipeline = config_.name;
  s.window_items = heavy_->window_items();
  s.threshold = config_.heavy_hitters->threshold;
  s.error_bound = heavy_->error_bound();
  const double n = static_cast<double>(s.window_items);
  for (auto& e : heavy_->top()) {
    const double ratio = n > 0 ? static_cast<double>(e.estimate) / n : 0.0;
    s.items.push_back({std::move(e.item), e.estimate, ratio, e.heavy});
  }
  return s;
}

std::optional<estimate_status> pipeline::estimate(std::string_view item) const {
  std::lock_guard lock(mutex_);
  if (!heavy_) return std::nullopt;
  return estimate_status{.item = std::string(item),
                         .estimate = heavy_->estimate(sketch::hash_item(item, seed_)),
                         .error_bound = heavy_->error_bound(),
                         .window_items = heavy_->window_items()};
}

std::optional<seen_status> pipeline::seen(std::string_view item) const {
  std::lock_guard lock(mutex_);
  if (!dedup_) return std::nullopt;
  return seen_status{.item = std::string(item),
                     .seen = dedup_->contains(sketch::hash_item(item, seed_)),
                     .false_positive_ratio = dedup_->estimated_fpr()};
}

}  // namespace sketchd
