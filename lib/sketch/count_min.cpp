#include "sketch/count_min.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "sketch/serialize.h"

namespace sketch {
namespace {

using detail::saturating_add;

// Empty when width and depth are acceptable, else what is wrong with them.
std::string check_shape(std::uint32_t width, std::uint32_t depth) {
  if (width < 1 || width > count_min_sketch::kMaxWidth) {
    return fmt::format("width must be in [1, {}] (got {})", count_min_sketch::kMaxWidth, width);
  }
  if (depth < 1 || depth > count_min_sketch::kMaxDepth) {
    return fmt::format("depth must be in [1, {}] (got {})", count_min_sketch::kMaxDepth, depth);
  }
  if (std::uint64_t{width} * depth > count_min_sketch::kMaxCounters) {
    return fmt::format("width * depth must be at most {} (got {} * {})",
                       count_min_sketch::kMaxCounters, width, depth);
  }
  return {};
}

std::size_t checked_counters(std::uint32_t width, std::uint32_t depth) {
  if (const std::string problem = check_shape(width, depth); !problem.empty()) {
    throw std::invalid_argument("count_min_sketch: " + problem);
  }
  return std::size_t{width} * depth;
}

}  // namespace

std::uint32_t count_min_sketch::suggest_width(double epsilon) {
  if (!(epsilon > 0 && epsilon < 1)) {
    throw std::invalid_argument(
        fmt::format("count_min_sketch: epsilon must be in (0, 1) (got {})", epsilon));
  }
  const double width = std::ceil(std::numbers::e / epsilon);
  if (width > kMaxWidth) {
    throw std::invalid_argument(fmt::format(
        "count_min_sketch: epsilon {} needs a width of {} counters, more than the {} allowed",
        epsilon, width, kMaxWidth));
  }
  return static_cast<std::uint32_t>(width);
}

std::uint32_t count_min_sketch::suggest_depth(double delta) {
  if (!(delta > 0 && delta < 1)) {
    throw std::invalid_argument(
        fmt::format("count_min_sketch: delta must be in (0, 1) (got {})", delta));
  }
  const double depth = std::max(1.0, std::ceil(std::log(1 / delta)));
  if (depth > kMaxDepth) {
    throw std::invalid_argument(
        fmt::format("count_min_sketch: delta {} needs a depth of {} rows, more than the {} allowed",
                    delta, depth, kMaxDepth));
  }
  return static_cast<std::uint32_t>(depth);
}

count_min_sketch count_min_sketch::from_error(double epsilon, double delta, std::uint64_t seed,
                                              bool conservative) {
  const std::uint32_t width = suggest_width(epsilon);
  const std::uint32_t depth = suggest_depth(delta);
  return count_min_sketch(width, depth, seed, conservative);
}

count_min_sketch::count_min_sketch(std::uint32_t width, std::uint32_t depth, std::uint64_t seed,
                                   bool conservative)
    : counters_(checked_counters(width, depth), 0),
      seed_(seed),
      width_(width),
      depth_(depth),
      conservative_(conservative) {}

void count_min_sketch::locate(hash128 h, positions& out) const noexcept {
  index_sequence columns(h, width_);
  std::size_t row_start = 0;
  for (std::uint32_t r = 0; r < depth_; ++r) {
    out[r] = row_start + static_cast<std::size_t>(columns.next());
    row_start += width_;
  }
}

std::uint64_t count_min_sketch::estimate_at(const positions& at) const noexcept {
  std::uint32_t minimum = kSaturated;
  for (std::uint32_t r = 0; r < depth_; ++r) minimum = std::min(minimum, counters_[at[r]]);
  return minimum == kSaturated ? total_ : minimum;
}

// One pass over the rows for the plain update (the new estimate is the minimum of the raised
// counters); two for the conservative one (Estan & Varghese 2002: raise every counter to at
// most raw minimum + weight, the smallest change that keeps the minimum ≥ the true count;
// afterwards every counter is at least that target and the smallest equals it, so the new
// estimate is the target).
std::uint64_t count_min_sketch::update(hash128 h, std::uint32_t weight) noexcept {
  total_ = saturating_add(total_, std::uint64_t{weight});
  index_sequence columns(h, width_);
  std::uint32_t* row = counters_.data();
  if (!conservative_) {
    // Locals: a store to a counter could alias the members, which would be reloaded.
    const std::uint32_t width = width_;
    const std::uint32_t depth = depth_;
    std::uint32_t minimum = kSaturated;
    for (std::uint32_t r = 0; r < depth; ++r, row += width) {
      std::uint32_t& counter = row[columns.next()];
      counter = saturating_add(counter, weight);
      minimum = std::min(minimum, counter);
    }
    return minimum == kSaturated ? total_ : minimum;
  }
  return update_conservative(columns, weight);
}

// Out of line, so that the plain update above needs neither the stack array nor the saved
// registers of this one.
std::uint64_t count_min_sketch::update_conservative(index_sequence columns,
                                                    std::uint32_t weight) noexcept {
  std::uint32_t* const counters = counters_.data();
  const std::uint32_t width = width_;
  const std::uint32_t depth = depth_;
  positions at;
  std::uint32_t minimum = kSaturated;
  std::size_t row_start = 0;
  for (std::uint32_t r = 0; r < depth; ++r, row_start += width) {
    at[r] = row_start + static_cast<std::size_t>(columns.next());
    minimum = std::min(minimum, counters[at[r]]);
  }
  const std::uint32_t target = saturating_add(minimum, weight);
  for (std::uint32_t r = 0; r < depth; ++r) {
    std::uint32_t& counter = counters[at[r]];
    counter = std::max(counter, target);
  }
  return target == kSaturated ? total_ : target;
}

std::uint64_t count_min_sketch::estimate(hash128 h) const noexcept {
  positions at;
  locate(h, at);
  return estimate_at(at);
}

double count_min_sketch::epsilon() const noexcept { return std::numbers::e / width_; }

double count_min_sketch::delta() const noexcept { return std::exp(-static_cast<double>(depth_)); }

void count_min_sketch::clear() noexcept {
  std::fill(counters_.begin(), counters_.end(), 0);
  total_ = 0;
}

bool count_min_sketch::compatible(const count_min_sketch& other) const noexcept {
  return width_ == other.width_ && depth_ == other.depth_ && seed_ == other.seed_;
}

void count_min_sketch::require_compatible(const count_min_sketch& other,
                                          const char* operation) const {
  if (width_ != other.width_) {
    throw std::invalid_argument(fmt::format("count_min_sketch: cannot {}: width {} != {}",
                                            operation, width_, other.width_));
  }
  if (depth_ != other.depth_) {
    throw std::invalid_argument(fmt::format("count_min_sketch: cannot {}: depth {} != {}",
                                            operation, depth_, other.depth_));
  }
  if (seed_ != other.seed_) {
    throw std::invalid_argument(fmt::format("count_min_sketch: cannot {}: seed {:#x} != {:#x}",
                                            operation, seed_, other.seed_));
  }
}

void count_min_sketch::add_counters(const count_min_sketch& other) noexcept {
  for (std::size_t i = 0; i < counters_.size(); ++i) {
    counters_[i] = saturating_add(counters_[i], other.counters_[i]);
  }
  total_ = saturating_add(total_, other.total_);
}

void count_min_sketch::merge(const count_min_sketch& other) {
  require_compatible(other, "merge");
  add_counters(other);
}

std::uint64_t count_min_sketch::subtract(const count_min_sketch& part) {
  require_compatible(part, "subtract");
  if (conservative_) {
    throw std::logic_error(
        "count_min_sketch: cannot subtract from a conservative sketch (its updates are not "
        "linear, so the difference could undercount)");
  }
  std::uint64_t stuck = 0;
  for (std::size_t i = 0; i < counters_.size(); ++i) {
    std::uint32_t& counter = counters_[i];
    if (counter == kSaturated) {
      stuck += part.counters_[i] != 0 ? 1 : 0;
      continue;
    }
    // part ≤ this for every counter when the precondition holds; clamp otherwise.
    counter -= std::min(counter, part.counters_[i]);
  }
  total_ -= std::min(total_, part.total_);
  return stuck;
}

// Payload (after the record header of sketch/serialize.h, whose seed field is the seed):
//
//   offset     size     field
//   ------     -------  --------------------------------------------------------------
//        0     4        width w (u32)
//        4     4        depth d (u32)
//        8     1        update mode: 0 plain, 1 conservative
//        9     8        N, the total weight (u64)
//       17     4·w·d    counters (u32), row-major: row r is [r·w, (r+1)·w)
//
void count_min_sketch::serialize_to(std::string& to) const {
  detail::record_writer out(structure_type::count_min_sketch, seed_, to);
  out.u32(width_);
  out.u32(depth_);
  out.u8(conservative_ ? 1 : 0);
  out.u64(total_);
  out.bytes(counters_.data(), size_bytes());
  std::move(out).finish_appended();
}

count_min_sketch count_min_sketch::deserialize(std::string_view record) {
  detail::record_reader in(record, structure_type::count_min_sketch);
  const std::uint32_t width = in.u32();
  const std::uint32_t depth = in.u32();
  const std::uint8_t mode = in.u8();
  const std::uint64_t total = in.u64();
  const std::string problem = check_shape(width, depth);
  in.require(problem.empty(), problem);
  in.require(mode <= 1,
             fmt::format("update mode {} is neither 0 (plain) nor 1 (conservative)", mode));
  const std::uint64_t bytes = std::uint64_t{width} * depth * sizeof(std::uint32_t);
  in.require(in.remaining() == bytes,
             fmt::format("the counters hold {} bytes, {} x {} counters need {}", in.remaining(),
                         width, depth, bytes));

  count_min_sketch sketch(width, depth, in.seed(), mode == 1);
  in.bytes(sketch.counters_.data(), sketch.size_bytes());
  in.done();
  sketch.total_ = total;
  // What every sequence of updates (plain, conservative, weighted), merges (of either mode)
  // and subtractions of a merged part leaves. An unsaturated counter holds at most a sum of
  // weights, so it cannot exceed N; and, by row, the unsaturated counters sum to at most N:
  // an update raises each of a row's counters by at most its weight (plain: one counter, by
  // the weight; conservative: each to at most minimum + weight), a merge adds the row sums
  // and the Ns, a subtraction takes both back. Two stronger rules do not hold and are not
  // required: a plain row summing to exactly N (a plain sketch may merge a conservative one,
  // whose rows sum to less, and the rolling Count-Min records the sum of its conservative
  // slices as a plain sketch), and a saturated counter only when N ≥ kSaturated (subtract()
  // leaves a saturated counter saturated while N falls). Sums of at most 2^28 counters below
  // 2^32 fit 64 bits.
  const std::uint32_t* row = sketch.counters_.data();
  for (std::uint32_t r = 0; r < depth; ++r, row += width) {
    std::uint64_t sum = 0;
    for (std::uint32_t j = 0; j < width; ++j) {
      const std::uint32_t c = row[j];
      if (c == kSaturated) continue;
      in.require(c <= total, fmt::format("counter {} holds {}, more than N = {}",
                                         std::size_t{r} * width + j, c, total));
      sum += c;
    }
    in.require(sum <= total,
               fmt::format("the counters of row {} sum to {}, more than N = {}", r, sum, total));
  }
  return sketch;
}

bool operator==(const count_min_sketch& a, const count_min_sketch& b) noexcept {
  return a.compatible(b) && a.conservative_ == b.conservative_ && a.total_ == b.total_ &&
         a.counters_ == b.counters_;
}

}  // namespace sketch
