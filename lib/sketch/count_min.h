// The Count-Min sketch: frequency estimates of the items of a stream, with a one-sided error.
//
// Sources: G. Cormode and S. Muthukrishnan, "An Improved Data Stream Summary: The Count-Min
// Sketch and its Applications", J. Algorithms 55(1), 2005 (sizing and Theorem 1); seed
// lecture 000 (W. Rivera, "Bloom's Filter & Count-Min Sketch"); conservative update from
// C. Estan and G. Varghese, "New Directions in Traffic Measurement and Accounting",
// SIGCOMM 2002.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sketch/hash.h"

namespace sketch {

class rolling_count_min;

namespace detail {
// a + b for counters, stopping at 2^32 − 1 instead of wrapping (shared by the Count-Min
// sketch and the rolling one, whose counters saturate alike).
[[nodiscard]] inline std::uint32_t saturating_add(std::uint32_t a, std::uint32_t b) noexcept {
  const std::uint32_t sum = a + b;
  return sum < a ? UINT32_MAX : sum;
}
// The same for the 64-bit totals (N), which saturate too rather than wrap to a small N.
[[nodiscard]] inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t sum = a + b;
  return sum < a ? UINT64_MAX : sum;
}
}  // namespace detail

// d rows of w 32-bit counters. An update adds the item's weight to one counter per row; the
// estimate of an item is the minimum of its d counters. With N the total weight and f(x)
// the true count of x (Cormode & Muthukrishnan 2005, Theorem 1):
//
//   f(x) ≤ estimate(x)                always;
//   estimate(x) ≤ f(x) + εN           with probability ≥ 1 − δ,   ε = e/w,  δ = e^{-d}.
//
// Row r's counters are counters[r·w, (r+1)·w); the item's column in row r is the r-th index
// of index_sequence(h, w) (sketch/hash.h), so one hash128 per item serves every row and any
// other structure built with the same seed.
//
// Counters saturate at 2^32 − 1 (kSaturated) instead of wrapping. A counter that reached it
// only says "at least 2^32 − 1"; when an item's minimum is saturated, estimate() answers N,
// which still bounds f(x) from above, so no estimate ever undercounts.
//
// Conservative update (Estan & Varghese 2002) raises each of the item's counters only up to
// (current estimate + weight): estimates stay ≥ f(x) and are, counter by counter, never
// larger than those of the plain update on the same stream.
//
// Thread safety: not thread-safe for writers; one owner. Concurrent const calls are safe when
// no call modifies the sketch.
class count_min_sketch {
 public:
  static constexpr std::uint32_t kMaxDepth = 32;
  static constexpr std::uint32_t kMaxWidth = std::uint32_t{1} << 28;
  // Upper bound of w·d (4 GiB of counters): keeps every size computation far from overflow.
  static constexpr std::uint64_t kMaxCounters = std::uint64_t{1} << 30;
  static constexpr std::uint32_t kSaturated = UINT32_MAX;

  // w = ⌈e/ε⌉ (Cormode & Muthukrishnan 2005; lecture 000). Throws std::invalid_argument
  // unless 0 < ε < 1 and the width is at most kMaxWidth.
  [[nodiscard]] static std::uint32_t suggest_width(double epsilon);
  // d = ⌈ln(1/δ)⌉ (Cormode & Muthukrishnan 2005; lecture 000). Throws std::invalid_argument
  // unless 0 < δ < 1 and the depth is at most kMaxDepth (δ ≥ e^{-32}).
  [[nodiscard]] static std::uint32_t suggest_depth(double delta);

  // A sketch whose estimates exceed the truth by at most εN with probability ≥ 1 − δ:
  // w = suggest_width(ε), d = suggest_depth(δ). Throws std::invalid_argument naming
  // `epsilon` or `delta` when it is out of range.
  [[nodiscard]] static count_min_sketch from_error(double epsilon, double delta,
                                                   std::uint64_t seed = kDefaultSeed,
                                                   bool conservative = false);

  // An empty sketch of `depth` rows of `width` counters. Throws std::invalid_argument unless
  // 1 ≤ width ≤ kMaxWidth, 1 ≤ depth ≤ kMaxDepth and width·depth ≤ kMaxCounters.
  count_min_sketch(std::uint32_t width, std::uint32_t depth, std::uint64_t seed = kDefaultSeed,
                   bool conservative = false);

  // Adds `weight` occurrences of the item; returns its new estimate (as estimate() would).
  // Plain: every row's counter += weight. Conservative: every row's counter is raised to
  // max(counter, estimate + weight). No allocation.
  std::uint64_t update(hash128 h, std::uint32_t weight = 1) noexcept;
  std::uint64_t update(std::string_view item, std::uint32_t weight = 1) noexcept {
    return update(hash_item(item, seed_), weight);
  }

  // min over rows of the item's counters (N when that minimum is saturated): ≥ f(x) always,
  // ≤ f(x) + εN with probability ≥ 1 − δ (Cormode & Muthukrishnan 2005, Theorem 1).
  [[nodiscard]] std::uint64_t estimate(hash128 h) const noexcept;
  [[nodiscard]] std::uint64_t estimate(std::string_view item) const noexcept {
    return estimate(hash_item(item, seed_));
  }

  // Asks the CPU to start loading, for writing, the d cache lines of the item's counters, so
  // that a following update or estimate of h finds them in cache. A hint only: no effect on
  // the sketch, no allocation; call it some items ahead.
  void prefetch(const hash128& h) const noexcept {
    index_sequence columns(h, width_);
    const std::uint32_t* row = counters_.data();
    for (std::uint32_t r = 0; r < depth_; ++r, row += width_) {
      __builtin_prefetch(row + columns.next(), 1, 3);
    }
  }

  // N, the total weight added (exact, 64-bit).
  [[nodiscard]] std::uint64_t total() const noexcept { return total_; }
  // ε = e/w, the error per unit of N this width guarantees (Cormode & Muthukrishnan 2005).
  [[nodiscard]] double epsilon() const noexcept;
  // δ = e^{-d}, the probability that one estimate exceeds f(x) + εN.
  [[nodiscard]] double delta() const noexcept;
  // ε·N: estimates exceed the truth by at most this much with probability ≥ 1 − δ.
  [[nodiscard]] double error_bound() const noexcept {
    return epsilon() * static_cast<double>(total_);
  }

  [[nodiscard]] std::uint32_t width() const noexcept { return width_; }
  [[nodiscard]] std::uint32_t depth() const noexcept { return depth_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  [[nodiscard]] bool conservative() const noexcept { return conservative_; }
  // Bytes of the counters: 4·w·d.
  [[nodiscard]] std::size_t size_bytes() const noexcept {
    return counters_.size() * sizeof(std::uint32_t);
  }

  // Empties the sketch (all counters and N zero), keeping w, d, the seed and the mode.
  void clear() noexcept;

  // Same width, depth and seed: the precondition of merge and subtract. The update mode may
  // differ for a merge (a sum of sketches that never undercount never undercounts); see
  // subtract for its own.
  [[nodiscard]] bool compatible(const count_min_sketch& other) const noexcept;

  // This sketch becomes the sketch of both streams: counter-wise saturating sum, N summed.
  // For plain updates it equals, counter for counter, the sketch of the concatenated stream
  // (the sketch is linear; Cormode & Muthukrishnan 2005). Throws std::invalid_argument naming
  // the parameter (width, depth, seed) that differs.
  void merge(const count_min_sketch& other);

  // Removes a sketch that was merged into this one: counter-wise difference, N
  // minus part's N. A counter of this sketch that had saturated stays saturated, since its
  // true value is unknown, so estimates never undercount. Returns the number of counters
  // left saturated that way (0 means the result is exact). Throws std::invalid_argument
  // naming the parameter that differs. Precondition: `part` was added into this sketch.
  // Throws std::logic_error on a conservative sketch: its own updates are not linear (one
  // after the merge raises counters only up to the minimum that the merged part helped
  // make), so taking the part away could leave an item's counters below its count.
  std::uint64_t subtract(const count_min_sketch& part);

  // The sketch as one record of the library's binary format (sketch/serialize.h).
  [[nodiscard]] std::string serialize() const {
    std::string out;
    serialize_to(out);
    return out;
  }
  // The same record, appended to `out` (after what it holds).
  void serialize_to(std::string& out) const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure or holds parameters this class does not accept.
  [[nodiscard]] static count_min_sketch deserialize(std::string_view record);

  // Same parameters, mode, N and counters.
  friend bool operator==(const count_min_sketch& a, const count_min_sketch& b) noexcept;

 private:
  friend class rolling_count_min;

  using positions = std::array<std::size_t, kMaxDepth>;

  void locate(hash128 h, positions& out) const noexcept;
  [[nodiscard]] std::uint64_t estimate_at(const positions& at) const noexcept;
  // The conservative half of update(): total_ already counts `weight`.
  [[gnu::noinline]] std::uint64_t update_conservative(index_sequence columns,
                                                      std::uint32_t weight) noexcept;
  // Counter-wise saturating sum; the caller has checked compatibility.
  void add_counters(const count_min_sketch& other) noexcept;
  void require_compatible(const count_min_sketch& other, const char* operation) const;

  std::vector<std::uint32_t> counters_;
  std::uint64_t seed_;
  std::uint64_t total_ = 0;
  std::uint32_t width_;
  std::uint32_t depth_;
  bool conservative_;
};

}  // namespace sketch
