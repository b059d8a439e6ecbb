#include "sketch/rolling_count_min.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

#include "sketch/serialize.h"

namespace sketch {
namespace {

constexpr std::uint32_t kSaturated = count_min_sketch::kSaturated;
using detail::saturating_add;

// Upper bound of the counters of all slices and the sum together (4 GiB).
constexpr std::uint64_t kMaxWindowCounters = count_min_sketch::kMaxCounters;

// ⌊a / b⌋ for b > 0, also for negative a; never overflows.
std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

const rolling_count_min_options& checked(const rolling_count_min_options& o) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("rolling_count_min: " + what);
  };
  if (o.window_ms <= 0) fail(fmt::format("window_ms must be positive (got {})", o.window_ms));
  if (o.buckets < 1 || o.buckets > rolling_count_min::kMaxBuckets) {
    fail(fmt::format("buckets must be in [1, {}] (got {})", rolling_count_min::kMaxBuckets,
                     o.buckets));
  }
  if (o.window_ms < o.buckets) {
    fail(fmt::format("window_ms {} is shorter than buckets {} (a slice is at least 1 ms)",
                     o.window_ms, o.buckets));
  }
  if (!(o.epsilon > 0 && o.epsilon < 1)) {
    fail(fmt::format("epsilon must be in (0, 1) (got {})", o.epsilon));
  }
  if (!(o.delta > 0 && o.delta < 1)) fail(fmt::format("delta must be in (0, 1) (got {})", o.delta));
  if (o.top_k < 1 || o.top_k > top_k_tracker::kMaxCapacity) {
    fail(fmt::format("top_k must be in [1, {}] (got {})", top_k_tracker::kMaxCapacity, o.top_k));
  }
  if (!(o.threshold > 0 && o.threshold <= 1)) {
    fail(fmt::format("threshold must be in (0, 1] (got {})", o.threshold));
  }
  const std::uint64_t counters = std::uint64_t{count_min_sketch::suggest_width(o.epsilon)} *
                                 count_min_sketch::suggest_depth(o.delta) * (o.buckets + 1);
  if (counters > kMaxWindowCounters) {
    fail(fmt::format(
        "epsilon {}, delta {} and {} buckets need {} counters, more than the {} allowed", o.epsilon,
        o.delta, o.buckets, counters, kMaxWindowCounters));
  }
  return o;
}

// Calls visit(index, hash, estimate) for each candidate of a top-k record that
// top_k_tracker::deserialize has accepted (the layout drawn in top_k.cpp): the tracker
// does not show its candidates' hashes, which the window's decoder checks against the sum.
template <class Visit>
void for_each_candidate(std::string_view record, Visit&& visit) {
  detail::record_reader in(record, structure_type::top_k);
  (void)in.u32();  // k
  (void)in.u32();  // capacity
  (void)in.f64();  // phi
  const std::uint32_t size = in.u32();
  for (std::uint32_t s = 0; s < size; ++s) {
    hash128 h;
    h.low = in.u64();
    h.high = in.u64();
    const std::uint64_t estimate = in.u64();
    (void)in.u8();            // heavy
    (void)in.view(in.u32());  // item bytes
    visit(s, h, estimate);
  }
}

}  // namespace

rolling_count_min::rolling_count_min(const rolling_count_min_options& options)
    : options_(checked(options)),
      width_(count_min_sketch::suggest_width(options.epsilon)),
      depth_(count_min_sketch::suggest_depth(options.delta)),
      stride_(options.conservative ? 2 : 1),
      counters_(2 * std::size_t{width_} * depth_, 0),
      tracker_(options.top_k, options.threshold, 0, options.seed),
      slice_ms_(slice_ms(options)) {
  past_.reserve(options.buckets - 1);
  for (std::uint32_t i = 0; i + 1 < options.buckets; ++i) {
    past_.emplace_back(width_, depth_, options.seed, options.conservative);
  }
}

double rolling_count_min::epsilon() const noexcept { return std::numbers::e / width_; }

double rolling_count_min::delta() const noexcept { return std::exp(-static_cast<double>(depth_)); }

std::uint64_t rolling_count_min::estimate(hash128 h) const noexcept {
  index_sequence columns(h, width_);
  std::size_t row = 0;
  std::uint32_t minimum = kSaturated;
  for (std::uint32_t r = 0; r < depth_; ++r, row += width_) {
    minimum = std::min(minimum, sum(row + columns.next()));
  }
  return minimum == kSaturated ? window_total_ : minimum;
}

void rolling_count_min::clear_window() noexcept {
  std::fill(counters_.begin(), counters_.end(), 0);
  for (count_min_sketch& b : past_) b.clear();
  window_total_ = 0;
  current_total_ = 0;
  oldest_ = 0;
  current_ = 0;
}

// The oldest slice leaves the sum and the current one takes its place in the ring of
// completed slices, in one pass over the counters; the new current slice starts empty.
// Only for fewer steps than buckets (advance()), so there are at least two buckets and a
// ring of completed slices: a window of one bucket is cleared at every step instead.
void rolling_count_min::rotate() noexcept {
  assert(!past_.empty());
  count_min_sketch& oldest = past_[oldest_];
  std::uint32_t* const old = oldest.counters_.data();
  std::uint64_t stuck = 0;
  for (std::size_t i = 0; i < cell_count(); ++i) {
    const std::uint32_t current = current_of(i);
    std::uint32_t& s = sum(i);
    // Saturated counters of the sum do not know what is left once the slice is gone.
    if (s == kSaturated) {
      stuck += old[i] != 0 ? 1 : 0;
    } else {
      s -= std::min(s, old[i]);  // old ≤ sum always; clamp all the same
    }
    old[i] = current;
  }
  window_total_ -= std::min(window_total_, oldest.total_);
  oldest.total_ = current_total_;
  current_total_ = 0;
  oldest_ = (oldest_ + 1) % static_cast<std::uint32_t>(past_.size());
  current_ = (current_ + 1) % options_.buckets;
  if (stuck > 0) {
    // Recompute the sum from the slices (the current one is empty) so it is exact again.
    for (std::size_t i = 0; i < cell_count(); ++i) sum(i) = 0;
    for (const count_min_sketch& b : past_) {
      for (std::size_t i = 0; i < cell_count(); ++i)
        sum(i) = saturating_add(sum(i), b.counters_[i]);
    }
  }
  rebase();
}

void rolling_count_min::rebase() noexcept {
  for (std::size_t i = 0; i < cell_count(); ++i) {
    const std::uint32_t s = sum(i);
    second(i) = stride_ == 2 || s == kSaturated ? 0 : s;
  }
}

void rolling_count_min::add_saturating(std::size_t i, std::uint32_t increment) noexcept {
  assert(stride_ == 1);
  std::uint32_t& s = sum(i);
  std::uint32_t& b = second(i);
  assert(s >= kSaturated - increment);  // the sum is or becomes saturated
  if (s != kSaturated) {
    // It saturates: from now on the base holds the current slice's counter itself.
    b = saturating_add(s - b, increment);
    s = kSaturated;
    return;
  }
  b = saturating_add(b, increment);
}

bool rolling_count_min::rotates_at(std::int64_t now_ms) const noexcept {
  return started_ && floor_div(now_ms, slice_ms_) > slice_index_;
}

void rolling_count_min::advance(std::int64_t now_ms) noexcept {
  const std::int64_t index = floor_div(now_ms, slice_ms_);
  if (!started_) {
    started_ = true;
    set_slice(index);
    return;
  }
  if (index <= slice_index_) return;
  // The difference of two int64 fits a uint64 when index > slice_index_.
  const std::uint64_t steps =
      static_cast<std::uint64_t>(index) - static_cast<std::uint64_t>(slice_index_);
  if (steps >= options_.buckets) {
    clear_window();
  } else {
    for (std::uint64_t i = 0; i < steps; ++i) rotate();
  }
  set_slice(index);
  refresh();
}

void rolling_count_min::set_slice(std::int64_t index) noexcept {
  slice_index_ = index;
  std::int64_t next = 0;
  if (__builtin_add_overflow(index, 1, &next) || __builtin_mul_overflow(next, slice_ms_, &next)) {
    next = std::numeric_limits<std::int64_t>::max();
  }
  next_slice_ms_ = next;
}

// The slice's update (plain or conservative, as count_min_sketch::update) with each
// counter's increment added to the sum beside it. Returns the sum's new estimate.
std::uint64_t rolling_count_min::update_cells(const std::uint32_t* at,
                                              std::uint32_t weight) noexcept {
  current_total_ = saturating_add(current_total_, std::uint64_t{weight});
  window_total_ = saturating_add(window_total_, std::uint64_t{weight});
  std::uint32_t* const counters = counters_.data();
  const std::uint32_t depth = depth_;
  std::uint32_t minimum = kSaturated;  // of the sum's counters after the update
  if (!options_.conservative) {
    for (std::uint32_t r = 0; r < depth; ++r) {
      std::uint32_t& s = counters[at[r]];  // stride 1
      if (s < kSaturated - weight) [[likely]] {
        s += weight;
      } else {
        add_saturating(at[r], weight);
      }
      minimum = std::min(minimum, s);
    }
    return minimum == kSaturated ? window_total_ : minimum;
  }
  // Conservative: raise the slice's counters to at most its minimum + weight, and the sum's
  // beside them by as much.
  std::uint32_t slice_minimum = kSaturated;
  for (std::uint32_t r = 0; r < depth; ++r)
    slice_minimum = std::min(slice_minimum, counters[2 * std::size_t{at[r]} + 1]);
  const std::uint32_t target = saturating_add(slice_minimum, weight);
  for (std::uint32_t r = 0; r < depth; ++r) {
    std::uint32_t* const pair = counters + 2 * std::size_t{at[r]};  // sum, current
    // Branch-free: whether a row is raised is as good as random.
    const std::uint32_t raised = std::max(pair[1], target);
    pair[0] = saturating_add(pair[0], raised - pair[1]);
    pair[1] = raised;
    minimum = std::min(minimum, pair[0]);
  }
  return minimum == kSaturated ? window_total_ : minimum;
}

std::uint64_t rolling_count_min::update(hash128 h, std::string_view item, std::int64_t now_ms,
                                        std::uint32_t weight) noexcept {
  std::array<std::uint32_t, count_min_sketch::kMaxDepth> at;
  locate(h, at.data());
  return update(at.data(), h, item, now_ms, weight);
}

std::uint64_t rolling_count_min::update(const std::uint32_t* cells, hash128 h,
                                        std::string_view item, std::int64_t now_ms,
                                        std::uint32_t weight) noexcept {
  const std::uint64_t estimate = count(cells, now_ms, weight);
  tracker_.offer_growing(h, item, estimate, window_total_);  // advance() refreshed
  return estimate;
}

void rolling_count_min::refresh() noexcept {
  tracker_.refresh([this](hash128 h) noexcept { return estimate(h); }, window_total_);
}

count_min_sketch rolling_count_min::current_sketch() const {
  count_min_sketch s(width_, depth_, options_.seed, options_.conservative);
  for (std::size_t i = 0; i < cell_count(); ++i) s.counters_[i] = current_of(i);
  s.total_ = current_total_;
  return s;
}

count_min_sketch rolling_count_min::sum_sketch() const {
  // The sum is recorded as a plain sketch (it only ever receives the slices' increments).
  count_min_sketch s(width_, depth_, options_.seed, false);
  for (std::size_t i = 0; i < cell_count(); ++i) s.counters_[i] = sum(i);
  s.total_ = window_total_;
  return s;
}

std::size_t rolling_count_min::size_bytes() const noexcept {
  std::size_t bytes = counters_.size() * sizeof(std::uint32_t) + tracker_.size_bytes();
  for (const count_min_sketch& b : past_) bytes += b.size_bytes();
  return bytes;
}

// Payload (after the record header of sketch/serialize.h, whose seed field is the seed):
//
//   offset  size  field
//   ------  ----  -----------------------------------------------------------------
//        0     8  window_ms (i64)
//        8     4  buckets B (u32)
//       12     8  epsilon (f64)
//       20     8  delta (f64)
//       28     4  top_k (u32)
//       32     8  threshold φ (f64)
//       40     1  conservative: 0 or 1
//       41     1  started: 0 or 1 (0: no time seen yet, everything empty)
//       42     4  ring position of the current slice (u32), < B
//       46     8  index of the current slice ⌊t / slice_ms⌋ (i64); it starts at index·slice_ms
//       54     …  B slices, ring positions 0 … B−1, each a nested count-min record
//                 (u64 length, then the record of count_min_sketch::serialize)
//        …     …  the sum, a nested count-min record; must equal the slices' counter-wise sum
//        …     …  the tracker, a nested top-k record (top_k_tracker::serialize)
//
void rolling_count_min::serialize_to(std::string& to) const {
  detail::record_writer out(structure_type::rolling_count_min, options_.seed, to);
  out.i64(options_.window_ms);
  out.u32(options_.buckets);
  out.f64(options_.epsilon);
  out.f64(options_.delta);
  out.u32(options_.top_k);
  out.f64(options_.threshold);
  out.u8(options_.conservative ? 1 : 0);
  out.u8(started_ ? 1 : 0);
  out.u32(current_);
  out.i64(slice_index_);
  for (std::uint32_t p = 0; p < options_.buckets; ++p) {
    const std::uint32_t age = age_of(p);
    out.record_with([&](std::string& o) {
      if (age + 1 == options_.buckets) {
        current_sketch().serialize_to(o);
      } else {
        past(age).serialize_to(o);
      }
    });
  }
  out.record_with([&](std::string& o) { sum_sketch().serialize_to(o); });
  out.record_with([&](std::string& o) { tracker_.serialize_to(o); });
  std::move(out).finish_appended();
}

rolling_count_min rolling_count_min::deserialize(std::string_view record) {
  detail::record_reader in(record, structure_type::rolling_count_min);
  rolling_count_min_options o;
  o.seed = in.seed();
  o.window_ms = in.i64();
  o.buckets = in.u32();
  o.epsilon = in.f64();
  o.delta = in.f64();
  o.top_k = in.u32();
  o.threshold = in.f64();
  const std::uint8_t conservative = in.u8();
  const std::uint8_t started = in.u8();
  const std::uint32_t current = in.u32();
  const std::int64_t slice_index = in.i64();
  in.require(conservative <= 1, fmt::format("conservative flag {} is not 0 or 1", conservative));
  in.require(started <= 1, fmt::format("started flag {} is not 0 or 1", started));
  o.conservative = conservative == 1;
  try {
    checked(o);
  } catch (const std::invalid_argument& e) {
    in.require(false, e.what());
  }
  in.require(current < o.buckets,
             fmt::format("ring position {} is not below buckets {}", current, o.buckets));
  // Before anything is allocated: the input must hold the counters it announces.
  const std::uint64_t counters = std::uint64_t{count_min_sketch::suggest_width(o.epsilon)} *
                                 count_min_sketch::suggest_depth(o.delta) * (o.buckets + 1);
  in.require(
      in.remaining() >= counters * sizeof(std::uint32_t),
      fmt::format("{} bytes cannot hold the {} counters of the window", in.remaining(), counters));

  rolling_count_min r(o);
  r.current_ = current;
  // A nested record's errors say where it sits in this one ("slice 1: count-min sketch:
  // …"); the bytes are taken outside, so a nested length past the end is this record's.
  const auto nested = [&](const std::string& where, std::string_view bytes, auto decode) {
    try {
      return decode(bytes);
    } catch (const format_error& e) {
      throw format_error(
          fmt::format("{}: {}: {}", to_string(structure_type::rolling_count_min), where, e.what()));
    }
  };
  const auto read_sketch = [&](const std::string& where) {
    count_min_sketch s = nested(where, in.record(), count_min_sketch::deserialize);
    in.require(s.width() == r.width_ && s.depth() == r.depth_ && s.seed() == o.seed,
               fmt::format("{}: width {}, depth {}, seed {:#x} do not match the options (width {}, "
                           "depth {}, seed {:#x})",
                           where, s.width(), s.depth(), s.seed(), r.width_, r.depth_, o.seed));
    return s;
  };
  // The sum of the slices, computed as they are read; the record's own sum must equal it.
  count_min_sketch sum(r.width_, r.depth_, o.seed, false);
  std::vector<std::uint32_t> current_counters;
  for (std::uint32_t p = 0; p < o.buckets; ++p) {
    count_min_sketch b = read_sketch(fmt::format("slice {}", p));
    in.require(b.conservative() == o.conservative,
               fmt::format("slice {}: update mode does not match the options", p));
    sum.add_counters(b);
    const std::uint32_t age = r.age_of(p);
    if (age + 1 == o.buckets) {
      current_counters = std::move(b.counters_);
      r.current_total_ = b.total_;
    } else {
      r.past(age) = std::move(b);
    }
  }
  const count_min_sketch stored_sum = read_sketch("sum");
  // sum_sketch() writes it plain whatever the slices' mode; a conservative flag would be
  // read back and written back as another record.
  in.require(!stored_sum.conservative(), "sum: recorded as a conservative sketch");
  in.require(stored_sum.total_ == sum.total_ && stored_sum.counters_ == sum.counters_,
             "the sum is not the sum of the slices");
  for (std::size_t i = 0; i < r.cell_count(); ++i) {
    const std::uint32_t s = sum.counters_[i];
    r.sum(i) = s;
    // The sum holds the current slice's counter, so it is never below it.
    if (r.stride_ == 2) {
      r.second(i) = current_counters[i];
    } else {
      r.second(i) = s == kSaturated ? current_counters[i] : s - current_counters[i];
    }
  }
  r.window_total_ = sum.total_;
  const std::string_view tracker_record = in.record();
  top_k_tracker tracker = nested("tracker", tracker_record, top_k_tracker::deserialize);
  in.require(tracker.k() == o.top_k && tracker.phi() == o.threshold && tracker.seed() == o.seed,
             "the tracker's k, phi or seed do not match the options");
  // The constructor sizes the tracker by default; another capacity would change which
  // items it keeps from the record on.
  const std::uint32_t capacity = top_k_tracker::default_capacity(o.top_k, o.threshold);
  in.require(tracker.capacity() == capacity,
             fmt::format("tracker: capacity {} is not the {} that top_k and threshold give",
                         tracker.capacity(), capacity));
  // A candidate's estimate was the sum's estimate of it when offered or refreshed, and the
  // sum only grows between the refreshes that follow every rotation: it is never above the
  // sum's estimate now (so never above N).
  for_each_candidate(tracker_record, [&](std::uint32_t s, hash128 h, std::uint64_t estimate) {
    const std::uint64_t window = r.estimate(h);
    in.require(estimate <= window,
               fmt::format("tracker: candidate {} has estimate {}, more than the sum's {}", s,
                           estimate, window));
  });
  in.done();
  in.require(started == 1 || r.window_total_ == 0, "items counted before any time was seen");
  r.tracker_ = std::move(tracker);
  r.started_ = started == 1;
  if (r.started_) {
    r.set_slice(slice_index);
  } else {
    r.slice_index_ = slice_index;
  }
  return r;
}

}  // namespace sketch
