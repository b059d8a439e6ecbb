#include "sketch/counting_bloom.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "sketch/serialize.h"

namespace sketch {
namespace {

std::uint64_t cell_count(std::uint64_t counters) { return (counters + 1) / 2; }

// Validates the parameters before anything is allocated; returns the number of bytes.
std::uint64_t checked_cells(std::uint64_t counters, std::uint32_t hashes) {
  if (counters < 1 || counters > counting_bloom_filter::kMaxCounters) {
    throw std::invalid_argument(
        fmt::format("counting_bloom_filter: counters must be in [1, 2^40] (got {})", counters));
  }
  if (hashes < 1 || hashes > counting_bloom_filter::kMaxHashes) {
    throw std::invalid_argument(
        fmt::format("counting_bloom_filter: hashes must be in [1, {}] (got {})",
                    counting_bloom_filter::kMaxHashes, hashes));
  }
  return cell_count(counters);
}

// One in the nibble of counter i.
std::uint8_t unit(std::uint64_t i) noexcept { return static_cast<std::uint8_t>(1U << (i % 2 * 4)); }

}  // namespace

counting_bloom_filter counting_bloom_filter::for_capacity(std::uint64_t n, double fpr,
                                                          std::uint64_t seed) {
  const bloom_math::sizing s = bloom_math::suggest_classic(n, fpr);
  return counting_bloom_filter(s.bits, s.hashes, seed);
}

counting_bloom_filter::counting_bloom_filter(std::uint64_t counters, std::uint32_t hashes,
                                             std::uint64_t seed)
    : cells_(checked_cells(counters, hashes), 0),
      counters_(counters),
      seed_(seed),
      hashes_(hashes) {}

void counting_bloom_filter::insert(hash128 h) noexcept {
  index_sequence indices(h, counters_);
  for (std::uint32_t i = 0; i < hashes_; ++i) {
    const std::uint64_t index = indices.next();
    if (counter(index) < kSaturated) cells_[index / 2] += unit(index);
  }
}

bool counting_bloom_filter::contains(hash128 h) const noexcept {
  index_sequence indices(h, counters_);
  for (std::uint32_t i = 0; i < hashes_; ++i) {
    if (counter(indices.next()) == 0) return false;
  }
  return true;
}

bool counting_bloom_filter::remove(hash128 h) noexcept {
  if (!contains(h)) return false;
  index_sequence indices(h, counters_);
  for (std::uint32_t i = 0; i < hashes_; ++i) {
    const std::uint64_t index = indices.next();
    const unsigned c = counter(index);
    // An item may hit one counter twice; the `c > 0` guard keeps a counter from wrapping
    // when such an item was never inserted (removing a false positive).
    if (c > 0 && c < kSaturated) cells_[index / 2] -= unit(index);
  }
  return true;
}

void counting_bloom_filter::clear() noexcept { std::fill(cells_.begin(), cells_.end(), 0); }

// Payload (after the common header, whose seed field holds seed()):
//
//   offset  size                 field
//   ------  -------------------  -----------------------------------------------------
//        0                    8  counters m, 1 <= m <= 2^40
//        8                    4  hashes k, 1 <= k <= 64
//       12  ceil(m / 2)          the counters, two per byte: counter i in byte i / 2,
//                                low nibble when i is even; when m is odd the high nibble
//                                of the last byte is zero
// All fields little-endian.
void counting_bloom_filter::serialize_to(std::string& to) const {
  detail::record_writer out(structure_type::counting_bloom_filter, seed_, to);
  out.u64(counters_);
  out.u32(hashes_);
  out.bytes(cells_.data(), cells_.size());
  std::move(out).finish_appended();
}

counting_bloom_filter counting_bloom_filter::deserialize(std::string_view record) {
  detail::record_reader in(record, structure_type::counting_bloom_filter);
  const std::uint64_t counters = in.u64();
  const std::uint32_t hashes = in.u32();
  in.require(counters >= 1 && counters <= kMaxCounters,
             fmt::format("counters {} is not in [1, 2^40]", counters));
  in.require(hashes >= 1 && hashes <= kMaxHashes,
             fmt::format("hashes {} is not in [1, {}]", hashes, kMaxHashes));
  in.require(in.remaining() == cell_count(counters),
             fmt::format("the counter array holds {} bytes, {} counters need {}", in.remaining(),
                         counters, cell_count(counters)));

  counting_bloom_filter filter(counters, hashes, in.seed());
  in.bytes(filter.cells_.data(), filter.cells_.size());
  in.done();
  in.require(counters % 2 == 0 || (filter.cells_.back() >> 4) == 0,
             fmt::format("the unused high nibble after counter {} is not zero", counters - 1));
  return filter;
}

}  // namespace sketch
