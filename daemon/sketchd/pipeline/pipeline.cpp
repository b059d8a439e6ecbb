#include "sketchd/pipeline/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "sketch/serialize.h"
#include "sketchd/state/binary.h"

namespace sketchd {

namespace {

extractor_options extractor_options_of(const pipeline_config& c) {
  extractor_options o;
  o.from = c.item.from;
  o.json_pointer = c.item.path;
  o.header_name = c.item.header;
  o.max_item_bytes = c.max_item_bytes;
  return o;
}

sketch::rolling_count_min_options count_min_options_of(const heavy_hitters_config& h,
                                                       std::uint64_t seed) {
  sketch::rolling_count_min_options o;
  o.window_ms = h.window.count();
  o.buckets = h.buckets;
  o.epsilon = h.epsilon;
  o.delta = h.delta;
  o.top_k = h.top_k;
  o.threshold = h.threshold;
  o.conservative = h.conservative;
  o.seed = seed;
  return o;
}

sketch::rolling_bloom_options bloom_options_of(const dedup_config& d, std::uint64_t seed) {
  sketch::rolling_bloom_options o;
  o.window_ms = d.window.count();
  o.capacity = d.capacity;
  o.fpr = d.fpr;
  o.generations = d.generations;
  o.seed = seed;
  return o;
}

}  // namespace

pipeline::pipeline(const pipeline_config& config, std::uint64_t seed)
    : config_(config), seed_(seed), extractor_(extractor_options_of(config)) {
  if (const auto& h = config_.heavy_hitters) heavy_.emplace(count_min_options_of(*h, seed_));
  if (const auto& d = config_.dedup) dedup_.emplace(bloom_options_of(*d, seed_));
  parameters_ = describe_parameters(config_, seed_);
  group_.resize(extractor::kBatchMessages);
  group_results_.resize(extractor::kBatchMessages);
  group_hashes_.resize(extractor::kBatchMessages);
  group_times_.resize(extractor::kBatchMessages);
  if (heavy_) group_cells_.resize(extractor::kBatchMessages * heavy_->depth());
}

void pipeline::begin_batch() { batch_lock_.lock(); }

std::int64_t pipeline::clock_of(std::int64_t event_ms, std::int64_t wall_ms) noexcept {
  std::int64_t t = wall_ms;
  if (config_.clock == clock_kind::event) {
    // A message without a timestamp, or with one further ahead of the wall clock than
    // kMaxClockSkewMs (a producer with a wrong clock), counts at the pipeline's current
    // time: its last event time plus the wall time since (the wall time before any), as an
    // idle stream slides. Taking the wall time (or the cap) would jump the clock from a
    // backlog's time to now, and expire every slice and generation at once. It does not
    // move the clock's reference, so that a stream of such messages still slides its
    // windows by the wall time.
    const bool usable = event_ms > 0 && event_ms <= wall_ms + kMaxClockSkewMs;
    if (!usable && clock_ms_ > 0) {
      if (!clock_live_) {
        clock_wall_ms_ = wall_ms;
        clock_live_ = true;
      }
      return clock_ms_ + std::max<std::int64_t>(0, wall_ms - clock_wall_ms_);
    }
    if (usable) t = event_ms;
  }
  // A late message (older than the clock) counts at the clock's time, in the current slice
  // and generation, as it would anyway: passing its own time would also date a generation
  // its insert fills back to that time, so that the next one rotated out early and the
  // dedup horizon shrank.
  if (t < clock_ms_) {
    if (!clock_live_) {
      // The first item of the run is older than the restored clock (read again since the
      // snapshot): the clock stays, and an idle stream slides it from now on.
      clock_wall_ms_ = wall_ms;
      clock_live_ = true;
    }
    return clock_ms_;
  }
  clock_ms_ = t;
  clock_wall_ms_ = wall_ms;
  clock_live_ = true;
  return t;
}

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
    group_times_[i] = clock_of(inputs[i].event_ms, wall_ms);
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
  const std::int64_t now = clock_of(event_ms, wall_ms);
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
  // Slide the windows even when no message came: on the wall clock, or for an idle
  // event-time stream by the wall time elapsed since its last event. An event-time clock
  // that no item has moved in this run holds still: the first batches of a run are often
  // empty (the group is being joined) while a backlog waits, whose items must land in the
  // slices of their own times, not all in one slice opened at the wall time.
  // A restored clock holds still for kHoldStillMs at most: a stream that stays idle after a
  // restart slides its windows from the snapshot's time on, and its heavy hitters expire.
  if (config_.clock == clock_kind::event && !clock_live_ && clock_ms_ > 0) {
    if (held_since_wall_ms_ == 0 && !await_assignment_) held_since_wall_ms_ = wall_ms;
    if (held_since_wall_ms_ != 0 && wall_ms - held_since_wall_ms_ >= kHoldStillMs)
      clock_live_ = true;
  }
  std::int64_t now = wall_ms;
  if (config_.clock == clock_kind::event) {
    now = clock_live_ ? clock_ms_ + std::max<std::int64_t>(0, wall_ms - clock_wall_ms_) : clock_ms_;
  }
  const bool move = now > 0;  // 0: an event clock that has seen nothing yet
  if (move) advanced_ms_ = std::max(advanced_ms_, now);
  if (takeover_pending_ && move && (config_.clock == clock_kind::wall || clock_live_)) {
    takeover_pending_ = false;
    // A window, and a slice more: a backlog read after the take-over (what the member that
    // left had counted since its last commit) lands in the current slice and later ones,
    // and distorts the shares until that slice has left the window.
    incomplete_until_ms_ =
        std::max(incomplete_until_ms_,
                 advanced_ms_ + config_.heavy_hitters->window.count() + heavy_->slice_ms());
  }
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
  takeover_pending_ = true;
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
    s.effective_window_ms = dedup_->effective_window_ms(std::max(clock_ms_, advanced_ms_));
  }
  return s;
}

void pipeline::collect(std::vector<metrics::metric_family>& out) const {
  using metrics::metric_family;
  using metrics::metric_type;
  std::lock_guard lock(mutex_);
  const std::vector<metrics::label> p{{"pipeline", config_.name}};
  const auto one = [&](const char* name, const char* help, metric_type type, double v) {
    out.push_back(metric_family{name, help, type, {{p, v}}});
  };
  one("sketchd_pipeline_items_total", "Items extracted from messages and fed to the pipeline.",
      metric_type::counter, static_cast<double>(published_.items));
  metric_family failures{"sketchd_pipeline_extract_failures_total",
                         "Messages skipped because no item could be extracted, by reason.",
                         metric_type::counter,
                         {}};
  for (std::size_t i = 1; i < kExtractFailureCount; ++i) {
    failures.samples.push_back(
        {{{"pipeline", config_.name},
          {"reason", std::string(to_string(static_cast<extract_failure>(i)))}},
         static_cast<double>(published_.failures[i])});
  }
  out.push_back(std::move(failures));

  if (heavy_) {
    const auto& h = *config_.heavy_hitters;
    const double n = static_cast<double>(heavy_->window_items());
    one("sketchd_cms_window_items", "Items in the current heavy-hitter window (N).",
        metric_type::gauge, n);
    one("sketchd_cms_error_bound_items",
        "Count-Min error bound epsilon*N: estimates exceed true counts by at most this, with "
        "probability 1-delta.",
        metric_type::gauge, heavy_->error_bound());
    one("sketchd_heavy_hitter_threshold_ratio",
        "Heavy-hitter threshold phi: share of the window's items.", metric_type::gauge,
        h.threshold);
    const double whole_s = static_cast<double>(h.window.count() + heavy_->slice_ms()) / 1000.0;
    one("sketchd_cms_window_incomplete_seconds",
        "Time on the pipeline's clock until the heavy-hitter window again holds every item of "
        "the partitions this instance took over from another member (or started without); 0 "
        "when whole.",
        metric_type::gauge,
        takeover_pending_ ? whole_s
                          : static_cast<double>(std::max<std::int64_t>(
                                0, incomplete_until_ms_ - std::max(clock_ms_, advanced_ms_))) /
                                1000.0);
    one("sketchd_cms_size_bytes", "Memory of the rolling Count-Min sketch and its top-k tracker.",
        metric_type::gauge, static_cast<double>(heavy_->size_bytes()));
    // A gauge by nature, exposed as untyped: the contract's name ends in "_count", which
    // `promtool check metrics` reserves for histograms and summaries unless the family is
    // untyped (Prometheus stores untyped samples exactly like gauges).
    metric_family counts{"sketchd_heavy_hitter_estimated_count",
                         "Estimated count in the window of each of the current top-k items.",
                         metric_type::untyped,
                         {}};
    metric_family ratios{"sketchd_heavy_hitter_ratio",
                         "Estimated share of the window of each top-k item.",
                         metric_type::gauge,
                         {}};
    // Two items may clean to the same label (invalid bytes, truncation): keep the first,
    // which has the higher estimate, so that no series is duplicated.
    std::set<std::string, std::less<>> labels;
    for (const auto& e : heavy_->top()) {
      std::string label = metrics::clean_label_value(e.item);
      if (!labels.insert(label).second) continue;
      counts.samples.push_back(
          {{{"pipeline", config_.name}, {"item", label}}, static_cast<double>(e.estimate)});
      ratios.samples.push_back({{{"pipeline", config_.name}, {"item", label}},
                                n > 0 ? static_cast<double>(e.estimate) / n : 0.0});
    }
    out.push_back(std::move(counts));
    out.push_back(std::move(ratios));
    metric_family events{"sketchd_heavy_hitter_events_total",
                         "Items entering or leaving the heavy set (estimate >= phi*N).",
                         metric_type::counter,
                         {}};
    events.samples.push_back({{{"pipeline", config_.name}, {"event", "enter"}},
                              static_cast<double>(published_.heavy_enter)});
    events.samples.push_back({{{"pipeline", config_.name}, {"event", "leave"}},
                              static_cast<double>(published_.heavy_leave)});
    out.push_back(std::move(events));
  }

  if (dedup_) {
    one("sketchd_dedup_first_seen_total", "Items not seen before in the dedup window.",
        metric_type::counter, static_cast<double>(published_.first_seen));
    one("sketchd_dedup_duplicates_total",
        "Items already seen in the dedup window (or false positives).", metric_type::counter,
        static_cast<double>(published_.duplicates));
    one("sketchd_dedup_forwarded_total", "First-seen events delivered to the output topic.",
        metric_type::counter, static_cast<double>(published_.forwarded));
    one("sketchd_dedup_forward_failures_total",
        "Outputs (first-seen events and duplicates) whose delivery failed for good.",
        metric_type::counter, static_cast<double>(published_.forward_failures));
    metric_family fill{"sketchd_bloom_fill_ratio",
                       "Share of bits set in each Bloom generation (0 = newest).",
                       metric_type::gauge,
                       {}};
    for (std::size_t g = 0; g < dedup_->generations(); ++g) {
      fill.samples.push_back(
          {{{"pipeline", config_.name}, {"generation", std::to_string(g)}}, dedup_->fill_ratio(g)});
    }
    out.push_back(std::move(fill));
    one("sketchd_bloom_estimated_false_positive_ratio",
        "False-positive probability of a new item over all generations, estimated from their fill.",
        metric_type::gauge, dedup_->estimated_fpr());
    one("sketchd_bloom_target_false_positive_ratio",
        "Configured target false-positive rate of the dedup window.", metric_type::gauge,
        dedup_->target_fpr());
    one("sketchd_bloom_estimated_items",
        "Distinct items in the dedup window, estimated from the fill.", metric_type::gauge,
        dedup_->estimated_items());
    one("sketchd_bloom_size_bytes", "Memory of the rolling Bloom filter.", metric_type::gauge,
        static_cast<double>(dedup_->size_bytes()));
    one("sketchd_bloom_effective_window_seconds",
        "Time span the dedup generations cover now; below the configured window after bursts.",
        metric_type::gauge,
        static_cast<double>(dedup_->effective_window_ms(std::max(clock_ms_, advanced_ms_))) /
            1000.0);
    one("sketchd_bloom_window_seconds", "Configured dedup window (dedup.window).",
        metric_type::gauge, static_cast<double>(config_.dedup->window.count()) / 1000.0);
    metric_family rotations{
        "sketchd_bloom_rotations_total",
        "Bloom generation rotations since sketchd started: at the end of a time slice (time) "
        "or when the newest generation reached its share of dedup.capacity first (capacity).",
        metric_type::counter,
        {}};
    rotations.samples.push_back(
        {{{"pipeline", config_.name}, {"reason", "time"}},
         static_cast<double>(dedup_->rotations_by_time() - restored_rotations_by_time_)});
    rotations.samples.push_back(
        {{{"pipeline", config_.name}, {"reason", "capacity"}},
         static_cast<double>(dedup_->rotations_by_capacity() - restored_rotations_by_capacity_)});
    out.push_back(std::move(rotations));
  }
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
    st.effective_window_ms = dedup_->effective_window_ms(std::max(clock_ms_, advanced_ms_));
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

// ---------------------------------------------------------------------------------------
// Snapshots. The state of a pipeline (all integers little-endian):
//
//   u64 n, n bytes   parameters(): "key: value" lines
//   u8               1 when heavy_hitters follows, else 0
//   u64 n, n bytes     rolling_count_min::serialize() (its own checked record)
//   u8               1 when dedup follows, else 0
//   u64 n, n bytes     rolling_bloom::serialize()
//   i64 clock_ms, i64 clock_wall_ms
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
         sketch::rolling_count_min::slice_ms(count_min_options_of(*h, seed)));
  } else {
    line("heavy_hitters", "none");
  }
  if (const auto& d = config.dedup) {
    line("dedup.window", format_duration(d->window));
    line("dedup.capacity", d->capacity);
    line("dedup.fpr", d->fpr);
    line("dedup.generations", d->generations);
    const sketch::rolling_bloom_options o = bloom_options_of(*d, seed);
    line("dedup.generation_capacity (derived)", sketch::rolling_bloom::generation_capacity(o));
    line("dedup.generation_fpr (derived)", sketch::rolling_bloom::generation_fpr(o));
    line("dedup.generation_bits (derived)", sketch::rolling_bloom::generation_bits(o));
    line("dedup.slice_ms (derived)", sketch::rolling_bloom::slice_ms(o));
  } else {
    line("dedup", "none");
  }
  return out;
}

std::int64_t pipeline::clock_ms() const {
  std::lock_guard lock(mutex_);
  return clock_ms_;
}

std::string pipeline::save_state() const {
  std::lock_guard lock(mutex_);
  std::string out;
  // Room for the whole state at once: growing by appends would double the buffer, holding
  // the old and the new one together at the last step. The records hold the structures'
  // bytes and a little more (headers, the top-k items); the room not used is never touched.
  const std::size_t structures =
      (heavy_ ? heavy_->size_bytes() : 0) + (dedup_ ? dedup_->size_bytes() : 0);
  out.reserve(parameters_.size() + structures + structures / 50 + (std::size_t{1} << 20));
  state::binary_writer w(out);
  w.bytes(parameters_);
  w.u8(heavy_ ? 1 : 0);
  // The structures are written in place: the state is held once more, not twice.
  if (heavy_) w.bytes_with([&](std::string& o) { heavy_->serialize_to(o); });
  w.u8(dedup_ ? 1 : 0);
  if (dedup_) w.bytes_with([&](std::string& o) { dedup_->serialize_to(o); });
  w.i64(clock_ms_);
  w.i64(clock_wall_ms_);
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
  std::optional<sketch::rolling_count_min_options> heavy_options;
  std::optional<sketch::rolling_bloom_options> dedup_options;
  if (heavy_) heavy_options = heavy_->options();
  if (dedup_) dedup_options = dedup_->options();
  heavy_.reset();
  dedup_.reset();
  try {
    const auto present = [&r] {
      const std::uint8_t flag = r.u8();
      if (flag > 1) r.fail("corrupt: a presence flag is neither 0 nor 1");
      return flag == 1;
    };
    heavy_window_dropped_.reset();
    try {
      if (present()) {
        const std::string_view record = r.bytes();
        try {
          heavy_.emplace(sketch::rolling_count_min::deserialize(record));
        } catch (const sketch::format_version_error& e) {
          // Written before the Count-Min rows' hashing changed: its counters sit at other
          // columns, so the window cannot be read, but the dedup window and the input
          // positions can (the dedup window's format is the same). It starts empty.
          if (!heavy_options) throw;
          heavy_.emplace(*heavy_options);
          heavy_window_dropped_ = e.what();
        }
      }
      if (present()) dedup_.emplace(sketch::rolling_bloom::deserialize(r.bytes()));
    } catch (const sketch::format_error& e) {
      r.fail(e.what());
    }
    const std::int64_t clock_ms = r.i64();
    const std::int64_t clock_wall_ms = r.i64();
    r.done();
    // The parameters' text matched; the structures must carry the same options (they can
    // only differ in a state written by something else than save_state()).
    if (heavy_.has_value() != heavy_options.has_value() ||
        dedup_.has_value() != dedup_options.has_value() ||
        (heavy_ && !same_options(heavy_->options(), *heavy_options)) ||
        (dedup_ && !same_options(dedup_->options(), *dedup_options))) {
      r.fail("the structures do not match the parameters");
    }
    clock_ms_ = clock_ms;
    clock_wall_ms_ = clock_wall_ms;
    clock_live_ = false;  // the wall time of another run (see end_batch())
    held_since_wall_ms_ = 0;
    // The newest generation may have been slid past the last item by an idle stream.
    advanced_ms_ = dedup_ && dedup_->live_generations() > 0
                       ? std::max(clock_ms, dedup_->generation_start_ms(0))
                       : clock_ms;
    restored_rotations_by_time_ = dedup_ ? dedup_->rotations_by_time() : 0;
    restored_rotations_by_capacity_ = dedup_ ? dedup_->rotations_by_capacity() : 0;
  } catch (...) {
    restored_rotations_by_time_ = 0;
    restored_rotations_by_capacity_ = 0;
    heavy_window_dropped_.reset();
    heavy_.reset();
    dedup_.reset();
    if (heavy_options) heavy_.emplace(*heavy_options);
    if (dedup_options) dedup_.emplace(*dedup_options);
    throw;
  }
}

}  // namespace sketchd
