// The heavy hitters of the last window of a stream: a ring of Count-Min sketches, one per
// time slice, their running sum, and a top-k tracker over the sum.
//
// Sources: G. Cormode and S. Muthukrishnan, "An Improved Data Stream Summary: The Count-Min
// Sketch and its Applications", J. Algorithms 55(1), 2005 (the sketch is linear, so a window
// is a sum of slices and sliding it is a subtraction); seed lecture 000.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/count_min.h"
#include "sketch/hash.h"
#include "sketch/top_k.h"

namespace sketch {

struct rolling_count_min_options {
  std::int64_t window_ms = 0;  // > 0, and at least `buckets` (a slice is ≥ 1 ms)
  std::uint32_t buckets = 10;  // 1..kMaxBuckets: the window slides by window/buckets
  double epsilon = 0.0001;     // (0, 1): estimates ≤ true + ε·N of the window ...
  double delta = 0.001;        // (0, 1): ... with probability ≥ 1 − δ
  std::uint32_t top_k = 20;    // items reported by top()
  double threshold = 0.01;     // φ in (0, 1]: heavy = estimate ≥ φ·N
  bool conservative = false;   // conservative update inside each slice
  std::uint64_t seed = kDefaultSeed;
};

// Window semantics. Time is whatever the caller passes, in milliseconds (never a clock read
// here). Time is cut into slices of s = ⌊window_ms / buckets⌋ ms aligned on multiples of s
// (slice i covers [i·s, (i+1)·s)). The newest slice seen is the current one; the window is
// the current slice and the buckets − 1 before it. At time t in slice i it therefore covers
// [(i − buckets + 1)·s, t]: between (buckets − 1)·s and buckets·s of history, that is
// between window − window/buckets and window (exactly, when buckets divides window_ms). An
// update counts in the current slice c (its own time's slice, unless time went backwards) and
// stays counted until the first update or advance at a time in slice c + buckets or later;
// then it is forgotten.
//
// Rotation subtracts the oldest slice from the sum and clears it, then the top-k tracker
// re-estimates its candidates (refresh) and records leave events for items no longer heavy.
// Time going backwards never rotates and never throws: the update counts in the current
// slice. A jump of buckets slices or more clears every slice at once.
//
// Each slice sketch has w = ⌈e/ε⌉ and d = ⌈ln(1/δ)⌉; the sum is their counter-wise sum, so
// for every item x with f(x) occurrences in the window, with N = window_items():
//   f(x) ≤ estimate(x)  always,  estimate(x) ≤ f(x) + εN  with probability ≥ 1 − δ.
// With conservative update each slice updates conservatively and the sum receives exactly
// the slice's increments, so the sum stays subtractable and still never undercounts.
//
// update() and advance() never allocate or throw.
//
// Thread safety: not thread-safe for writers; one owner. Concurrent const calls are safe when
// no call modifies the sketch.
class rolling_count_min {
 public:
  static constexpr std::uint32_t kMaxBuckets = 1000;

  // Throws std::invalid_argument naming the option that is out of range.
  explicit rolling_count_min(const rolling_count_min_options& options);

  // Moves the window to `now_ms` (see the window semantics above), then adds `weight`
  // occurrences of the item (h = hash_item(item, seed())) to the current slice and the sum,
  // and offers the sum's estimate with N = window_items() to the top-k tracker. Returns the
  // item's estimate over the window. No allocation.
  std::uint64_t update(hash128 h, std::string_view item, std::int64_t now_ms,
                       std::uint32_t weight = 1) noexcept;
  std::uint64_t update(std::string_view item, std::int64_t now_ms,
                       std::uint32_t weight = 1) noexcept {
    return update(hash_item(item, options_.seed), item, now_ms, weight);
  }

  // Asks the CPU to start loading, for writing, every counter that update(h, …) will touch:
  // the item's d counters in the current slice and in the sum (2·d cache lines; if that
  // update rotates the window first, the slice it writes is another, just cleared). A hint
  // only: no effect on the state, no allocation; call it some items ahead, in a batch.
  void prefetch(const hash128& h) const noexcept {
    const count_min_sketch& slice = buckets_[current_];
    index_sequence columns(h, sum_.width_);
    std::size_t row_start = 0;
    for (std::uint32_t r = 0; r < sum_.depth_; ++r, row_start += sum_.width_) {
      const std::size_t at = row_start + static_cast<std::size_t>(columns.next());
      __builtin_prefetch(slice.counters_.data() + at, 1, 3);
      __builtin_prefetch(sum_.counters_.data() + at, 1, 3);
    }
  }

  // Rotates out the slices that ended before `now_ms`'s slice minus buckets − 1 and, if any
  // did, refreshes the top-k tracker. Earlier times than the current slice do nothing.
  void advance(std::int64_t now_ms) noexcept;

  // The item's count over the window: ≥ f(x) always, ≤ f(x) + εN with probability ≥ 1 − δ.
  [[nodiscard]] std::uint64_t estimate(hash128 h) const noexcept { return sum_.estimate(h); }
  [[nodiscard]] std::uint64_t estimate(std::string_view item) const noexcept {
    return sum_.estimate(item);
  }
  // N of the window: the sum of the slices' totals (exact).
  [[nodiscard]] std::uint64_t window_items() const noexcept { return sum_.total(); }
  // ε·N of the window, with ε = e/w.
  [[nodiscard]] double error_bound() const noexcept { return sum_.error_bound(); }
  // ε = e/w and δ = e^{-d} of the sketches as built (at most the requested ones).
  [[nodiscard]] double epsilon() const noexcept { return sum_.epsilon(); }
  [[nodiscard]] double delta() const noexcept { return sum_.delta(); }
  // φ: heavy = estimate ≥ φ·N.
  [[nodiscard]] double threshold() const noexcept { return options_.threshold; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return options_.seed; }
  [[nodiscard]] const rolling_count_min_options& options() const noexcept { return options_; }
  // Length of a slice, ⌊window_ms / buckets⌋.
  [[nodiscard]] std::int64_t slice_ms() const noexcept { return slice_ms_; }

  // Re-estimates the top-k candidates against the window (see top_k_tracker::refresh); call
  // it once per batch and before top().
  void refresh() noexcept;
  // The top-k candidates with their last estimates, highest first (top_k_tracker::top).
  [[nodiscard]] std::vector<top_k_tracker::entry> top() const { return tracker_.top(); }
  // Enter and leave events since the last call, oldest first.
  [[nodiscard]] std::vector<heavy_event> drain_events() { return tracker_.drain_events(); }
  [[nodiscard]] const top_k_tracker& tracker() const noexcept { return tracker_; }

  // Bytes of every slice, the sum and the tracker.
  [[nodiscard]] std::size_t size_bytes() const noexcept;

  // The whole state (options, every slice, the sum, the ring position and current slice, the
  // tracker's candidates) as one record of the library's binary format (sketch/serialize.h).
  [[nodiscard]] std::string serialize() const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure or inconsistent (the sum must equal the slices' sum).
  [[nodiscard]] static rolling_count_min deserialize(std::string_view record);

 private:
  void rotate() noexcept;
  void clear_window() noexcept;

  rolling_count_min_options options_;
  std::vector<count_min_sketch> buckets_;
  count_min_sketch sum_;
  top_k_tracker tracker_;
  std::int64_t slice_ms_;
  std::int64_t slice_index_ = 0;  // ⌊t/s⌋ of the current slice, valid once started_
  std::uint32_t current_ = 0;     // ring position of the current slice
  bool started_ = false;
};

}  // namespace sketch
