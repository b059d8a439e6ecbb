#include "sketch/rolling_count_min.h"

#include <fmt/format.h>

#include <stdexcept>

#include "sketch/serialize.h"

namespace sketch {
namespace {

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

}  // namespace

rolling_count_min::rolling_count_min(const rolling_count_min_options& options)
    : options_(checked(options)),
      sum_(count_min_sketch::from_error(options.epsilon, options.delta, options.seed)),
      tracker_(options.top_k, options.threshold, 0, options.seed),
      slice_ms_(options.window_ms / options.buckets) {
  buckets_.reserve(options.buckets);
  for (std::uint32_t i = 0; i < options.buckets; ++i) {
    buckets_.emplace_back(sum_.width(), sum_.depth(), options.seed, options.conservative);
  }
}

void rolling_count_min::clear_window() noexcept {
  for (count_min_sketch& b : buckets_) b.clear();
  sum_.clear();
  current_ = 0;
}

void rolling_count_min::rotate() noexcept {
  const std::uint32_t oldest = (current_ + 1) % options_.buckets;
  const std::uint64_t stuck = sum_.subtract(buckets_[oldest]);
  buckets_[oldest].clear();
  if (stuck > 0) {
    // Saturated counters of the sum do not know what is left once the slice is gone:
    // recompute the sum from the remaining slices so it is exact again.
    sum_.clear();
    for (const count_min_sketch& b : buckets_) sum_.add_counters(b);
  }
  current_ = oldest;
}

void rolling_count_min::advance(std::int64_t now_ms) noexcept {
  const std::int64_t index = floor_div(now_ms, slice_ms_);
  if (!started_) {
    started_ = true;
    slice_index_ = index;
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
  slice_index_ = index;
  refresh();
}

std::uint64_t rolling_count_min::update(hash128 h, std::string_view item, std::int64_t now_ms,
                                        std::uint32_t weight) noexcept {
  advance(now_ms);
  const std::uint64_t estimate = buckets_[current_].update_mirrored(h, weight, sum_);
  tracker_.offer_growing(h, item, estimate, sum_.total());  // advance() refreshed
  return estimate;
}

void rolling_count_min::refresh() noexcept {
  tracker_.refresh([this](hash128 h) noexcept { return sum_.estimate(h); }, sum_.total());
}

std::size_t rolling_count_min::size_bytes() const noexcept {
  std::size_t bytes = sum_.size_bytes() + tracker_.size_bytes();
  for (const count_min_sketch& b : buckets_) bytes += b.size_bytes();
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
std::string rolling_count_min::serialize() const {
  detail::record_writer out(structure_type::rolling_count_min, options_.seed);
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
  for (const count_min_sketch& b : buckets_) out.record(b.serialize());
  out.record(sum_.serialize());
  out.record(tracker_.serialize());
  return std::move(out).finish();
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
  const auto read_sketch = [&](const char* what) {
    count_min_sketch s = count_min_sketch::deserialize(in.record());
    in.require(s.compatible(r.sum_),
               fmt::format("{}: width {}, depth {}, seed {:#x} do not match the options (width {}, "
                           "depth {}, seed {:#x})",
                           what, s.width(), s.depth(), s.seed(), r.sum_.width(), r.sum_.depth(),
                           r.sum_.seed()));
    return s;
  };
  for (std::uint32_t i = 0; i < o.buckets; ++i) {
    count_min_sketch b = read_sketch("slice");
    in.require(b.conservative() == o.conservative,
               fmt::format("slice {}: update mode does not match the options", i));
    r.buckets_[i] = std::move(b);
  }
  const count_min_sketch sum = read_sketch("sum");
  for (const count_min_sketch& b : r.buckets_) r.sum_.add_counters(b);
  in.require(sum.total_ == r.sum_.total_ && sum.counters_ == r.sum_.counters_,
             "the sum is not the sum of the slices");
  top_k_tracker tracker = top_k_tracker::deserialize(in.record());
  in.require(tracker.k() == o.top_k && tracker.phi() == o.threshold && tracker.seed() == o.seed,
             "the tracker's k, phi or seed do not match the options");
  in.done();
  in.require(started == 1 || r.sum_.total() == 0, "items counted before any time was seen");
  r.tracker_ = std::move(tracker);
  r.started_ = started == 1;
  r.current_ = current;
  r.slice_index_ = slice_index;
  return r;
}

}  // namespace sketch
