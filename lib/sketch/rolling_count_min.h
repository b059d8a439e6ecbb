// The heavy hitters of the last window of a stream: a ring of Count-Min sketches, one per
// time slice, their running sum, and a top-k tracker over the sum.
//
// Sources: G. Cormode and S. Muthukrishnan, "An Improved Data Stream Summary: The Count-Min
// Sketch and its Applications", J. Algorithms 55(1), 2005 (the sketch is linear, so a window
// is a sum of slices and sliding it is a subtraction); seed lecture 000.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
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
  // the window's d counters of the item (d cache lines; with conservative update, each beside
  // the current slice's counter, which it also reads). A hint only: no effect on the state,
  // no allocation; call it some items ahead, in a batch.
  void prefetch(const hash128& h) const noexcept {
    std::array<std::uint32_t, count_min_sketch::kMaxDepth> cells;
    locate(h, cells.data());
    prefetch(cells.data());
  }

  // The same in two steps, for a batch that prefetches items ahead of their update: the
  // item's d cells are located once (index_sequence, one multiplication per row for the
  // mix and one for the reduction) and used by both. locate() writes depth() offsets into
  // `cells`, which must hold that many; the other two read them. update(cells, h, …) is
  // update(h, …) for the cells that locate(h, cells) wrote.
  void locate(hash128 h, std::uint32_t* cells) const noexcept {
    index_sequence columns(h, width_);
    std::uint32_t row_start = 0;
    for (std::uint32_t r = 0; r < depth_; ++r, row_start += width_) {
      cells[r] = row_start + static_cast<std::uint32_t>(columns.next());
    }
  }
  void prefetch(const std::uint32_t* cells) const noexcept {
    for (std::uint32_t r = 0; r < depth_; ++r)
      __builtin_prefetch(counters_.data() + std::size_t{cells[r]} * stride_, 1, 3);
  }
  std::uint64_t update(const std::uint32_t* cells, hash128 h, std::string_view item,
                       std::int64_t now_ms, std::uint32_t weight = 1) noexcept;

  // update(cells, h, item, now_ms, weight) in two halves, for a batch that counts a run of
  // items before it offers them to the top-k tracker, so that the counters' cache misses are
  // not held up behind the tracker's work: count() moves the window to now_ms and adds the
  // item to the counters, returning its estimate over the window (what update() returns);
  // offer() hands the tracker that estimate with n = window_items() as count() left it.
  // Offering each item after the count() of later items, in the items' order, has exactly
  // the effect of update() item by item as long as no count() in between rotated the window
  // (rotates_at() says beforehand): the counters never depend on the tracker, and the
  // tracker's state depends only on the sequence of offers. No allocation.
  std::uint64_t count(const std::uint32_t* cells, std::int64_t now_ms,
                      std::uint32_t weight = 1) noexcept {
    if (now_ms >= next_slice_ms_) [[unlikely]]
      advance(now_ms);
    return update_cells(cells, weight);
  }
  void offer(hash128 h, std::string_view item, std::uint64_t estimate, std::uint64_t n) noexcept {
    tracker_.offer_growing(h, item, estimate, n);
  }
  // offer() of a batch of items counted in order into this window, through the tracker's
  // batch offer (top_k_tracker::offer_growing(span, …)): item i has hash hashes[i], bytes
  // item_of(i), estimate estimates[i] (0: no item, skipped) and N n_of(i).
  template <class ItemOf, class NOf>
  void offer(std::span<const hash128> hashes, std::span<const std::uint64_t> estimates,
             ItemOf&& item_of, NOf&& n_of) noexcept {
    tracker_.offer_growing(hashes, estimates, std::forward<ItemOf>(item_of),
                           std::forward<NOf>(n_of));
  }
  // Whether advance(now_ms) would rotate the window (and refresh the tracker).
  [[nodiscard]] bool rotates_at(std::int64_t now_ms) const noexcept;

  // Rotates out the slices that ended before `now_ms`'s slice minus buckets − 1 and, if any
  // did, refreshes the top-k tracker. Earlier times than the current slice do nothing.
  void advance(std::int64_t now_ms) noexcept;

  // The item's count over the window: ≥ f(x) always, ≤ f(x) + εN with probability ≥ 1 − δ.
  [[nodiscard]] std::uint64_t estimate(hash128 h) const noexcept;
  [[nodiscard]] std::uint64_t estimate(std::string_view item) const noexcept {
    return estimate(hash_item(item, options_.seed));
  }
  // N of the window: the sum of the slices' totals (exact).
  [[nodiscard]] std::uint64_t window_items() const noexcept { return window_total_; }
  // ε·N of the window, with ε = e/w.
  [[nodiscard]] double error_bound() const noexcept {
    return epsilon() * static_cast<double>(window_total_);
  }
  // ε = e/w and δ = e^{-d} of the sketches as built (at most the requested ones).
  [[nodiscard]] double epsilon() const noexcept;
  [[nodiscard]] double delta() const noexcept;
  // w and d of every slice and of the window's sum.
  [[nodiscard]] std::uint32_t width() const noexcept { return width_; }
  [[nodiscard]] std::uint32_t depth() const noexcept { return depth_; }
  // φ: heavy = estimate ≥ φ·N.
  [[nodiscard]] double threshold() const noexcept { return options_.threshold; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return options_.seed; }
  [[nodiscard]] const rolling_count_min_options& options() const noexcept { return options_; }
  // Length of a slice, ⌊window_ms / buckets⌋.
  [[nodiscard]] std::int64_t slice_ms() const noexcept { return slice_ms_; }
  // The same from options alone, for describing a window without building it. Throws
  // std::invalid_argument for buckets = 0.
  [[nodiscard]] static std::int64_t slice_ms(const rolling_count_min_options& options) {
    if (options.buckets == 0) {
      throw std::invalid_argument("rolling_count_min: buckets must be at least 1 (got 0)");
    }
    return options.window_ms / options.buckets;
  }

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
  [[nodiscard]] std::string serialize() const {
    std::string out;
    serialize_to(out);
    return out;
  }
  // The same record, appended to `out` (after what it holds).
  void serialize_to(std::string& out) const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure or inconsistent (the sum must equal the slices' sum).
  [[nodiscard]] static rolling_count_min deserialize(std::string_view record);

 private:
  // The window's sum and the current slice, in w·d positions of two counters each: sum(i),
  // the window's counter (the slices' counters summed, saturating), and second(i), which
  // keeps the current slice's counter in the form each update reads most cheaply:
  //   plain update (stride 1: the w·d sums contiguous, the w·d seconds after them) reads and
  //     writes sums only, as hot as a plain count_min_sketch's counters. second(i) is the
  //     base: what sum(i) was when the current slice began, so that the current slice's
  //     counter is sum(i) − second(i); once sum(i) is saturated, the current slice's counter
  //     itself (saturating). Only a rotation and a record need the current slice.
  //   conservative update (stride 2: each sum beside its second, one cache line per row)
  //     reads the current slice's counters at every update: second(i) is that counter.
  [[nodiscard]] std::uint32_t& sum(std::size_t i) noexcept { return counters_[i * stride_]; }
  [[nodiscard]] std::uint32_t sum(std::size_t i) const noexcept { return counters_[i * stride_]; }
  [[nodiscard]] std::uint32_t& second(std::size_t i) noexcept { return counters_[second_at(i)]; }
  [[nodiscard]] std::uint32_t second(std::size_t i) const noexcept {
    return counters_[second_at(i)];
  }
  [[nodiscard]] std::size_t second_at(std::size_t i) const noexcept {
    return stride_ == 2 ? 2 * i + 1 : cell_count() + i;
  }
  [[nodiscard]] std::size_t cell_count() const noexcept { return std::size_t{width_} * depth_; }
  // The current slice's counter at position i.
  [[nodiscard]] std::uint32_t current_of(std::size_t i) const noexcept {
    if (stride_ == 2) return second(i);
    const std::uint32_t s = sum(i);
    return s == count_min_sketch::kSaturated ? second(i) : s - second(i);
  }
  // Plain update: adds `increment` to the current slice's counter and the sum at position i,
  // when the sum saturates or is saturated (the rare path of update_cells).
  void add_saturating(std::size_t i, std::uint32_t increment) noexcept;
  // Every current slice's counter set to 0 (plain: every base set from its sum): the start
  // of a slice.
  void rebase() noexcept;

  std::uint64_t update_cells(const std::uint32_t* at, std::uint32_t weight) noexcept;
  void rotate() noexcept;
  // Makes `index` the current slice's ⌊t/s⌋ (slice_index_ and next_slice_ms_).
  void set_slice(std::int64_t index) noexcept;
  void clear_window() noexcept;
  // The age of ring position p: 0 for the oldest slice, buckets − 1 for the current one.
  [[nodiscard]] std::uint32_t age_of(std::uint32_t position) const noexcept {
    return (position + options_.buckets - current_ - 1) % options_.buckets;
  }
  // The completed slice of age `age` < buckets − 1.
  [[nodiscard]] count_min_sketch& past(std::uint32_t age) noexcept {
    return past_[(oldest_ + age) % past_.size()];
  }
  [[nodiscard]] const count_min_sketch& past(std::uint32_t age) const noexcept {
    return past_[(oldest_ + age) % past_.size()];
  }
  // The current slice or the window's sum as a count_min_sketch of the slices' shape.
  [[nodiscard]] count_min_sketch current_sketch() const;
  [[nodiscard]] count_min_sketch sum_sketch() const;

  rolling_count_min_options options_;
  std::uint32_t width_;
  std::uint32_t depth_;
  std::uint32_t stride_;                 // 1 (plain update) or 2 (conservative): see sum()
  std::vector<std::uint32_t> counters_;  // sums and bases, row-major like count_min_sketch's
  std::uint64_t window_total_ = 0;       // N of the window
  std::uint64_t current_total_ = 0;      // N of the current slice
  std::vector<count_min_sketch> past_;   // the buckets − 1 completed slices, a ring
  std::uint32_t oldest_ = 0;             // position in past_ of the oldest of them
  top_k_tracker tracker_;
  std::int64_t slice_ms_;
  std::int64_t slice_index_ = 0;  // ⌊t/s⌋ of the current slice, valid once started_
  // Where the next slice begins, (slice_index_ + 1)·s, or INT64_MAX when that overflows;
  // INT64_MIN until started_. A time below it cannot move the window, so count() calls
  // advance() (which decides) only at or past it: once per slice, not once per item.
  std::int64_t next_slice_ms_ = std::numeric_limits<std::int64_t>::min();
  std::uint32_t current_ = 0;  // ring position of the current slice (of the record format)
  bool started_ = false;
};

}  // namespace sketch
