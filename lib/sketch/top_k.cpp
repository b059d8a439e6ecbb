#include "sketch/top_k.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "sketch/serialize.h"

namespace sketch {
namespace {

// Empty when the parameters are acceptable (capacity 0 = the default), else the problem.
std::string check_params(std::uint32_t k, double phi, std::uint32_t capacity) {
  if (k < 1 || k > top_k_tracker::kMaxCapacity) {
    return fmt::format("k must be in [1, {}] (got {})", top_k_tracker::kMaxCapacity, k);
  }
  if (!(phi > 0 && phi <= 1)) return fmt::format("phi must be in (0, 1] (got {})", phi);
  if (capacity != 0 && (capacity < k || capacity > top_k_tracker::kMaxCapacity)) {
    return fmt::format("capacity must be in [k = {}, {}] (got {})", k, top_k_tracker::kMaxCapacity,
                       capacity);
  }
  return {};
}

void require_params(std::uint32_t k, double phi, std::uint32_t capacity) {
  if (const std::string problem = check_params(k, phi, capacity); !problem.empty()) {
    throw std::invalid_argument("top_k_tracker: " + problem);
  }
}

}  // namespace

std::uint32_t top_k_tracker::default_capacity(std::uint32_t k, double phi) {
  require_params(k, phi, 0);
  const double for_phi = std::min(std::ceil(2 / phi), static_cast<double>(kMaxCapacity));
  const std::uint32_t c = std::max(2 * k, static_cast<std::uint32_t>(for_phi));
  return std::clamp(c, k, kMaxCapacity);
}

top_k_tracker::top_k_tracker(std::uint32_t k, double phi, std::uint32_t capacity,
                             std::uint64_t seed)
    : seed_(seed), phi_(phi), k_(k), capacity_(capacity) {
  require_params(k, phi, capacity);
  if (capacity_ == 0) capacity_ = default_capacity(k, phi);
  slots_.resize(capacity_);
  estimates_.resize(capacity_);
  bytes_.resize(std::size_t{capacity_} * kMaxItemBytes);
  // At most half full, so probe sequences stay short and always end at an empty entry.
  index_.assign(std::bit_ceil(std::size_t{capacity_} * 2), kEmpty);
  events_.resize(std::max(kMinEventCapacity, capacity_));
}

bool top_k_tracker::stays_heavy(std::uint64_t estimate, std::uint64_t n) const noexcept {
  return estimate >= kMinHeavyEstimate &&
         static_cast<double>(estimate) >= (1.0 - kHysteresis) * phi_ * static_cast<double>(n);
}

std::string_view top_k_tracker::item_of(std::uint32_t s) const noexcept {
  return {bytes_.data() + std::size_t{s} * kMaxItemBytes, slots_[s].length};
}

void top_k_tracker::store_item(std::uint32_t s, std::string_view item) noexcept {
  const std::size_t length = std::min(item.size(), kMaxItemBytes);
  if (length > 0) std::memcpy(bytes_.data() + std::size_t{s} * kMaxItemBytes, item.data(), length);
  slots_[s].length = static_cast<std::uint16_t>(length);
}

void top_k_tracker::record(enum heavy_event::kind kind, std::uint32_t s, std::uint64_t n) noexcept {
  if (event_count_ == events_.size()) {
    event_head_ = (event_head_ + 1) % events_.size();
    --event_count_;
    ++dropped_events_;
  }
  event_record& e = events_[(event_head_ + event_count_) % events_.size()];
  ++event_count_;
  e.kind = kind;
  e.estimate = estimates_[s];
  e.window_items = n;
  e.length = slots_[s].length;
  if (e.length > 0) std::memcpy(e.bytes, bytes_.data() + std::size_t{s} * kMaxItemBytes, e.length);
}

void top_k_tracker::index_insert(std::uint32_t s) noexcept {
  const std::size_t mask = index_.size() - 1;
  std::size_t i = home(slots_[s].hash);
  while (index_[i] != kEmpty) i = (i + 1) & mask;
  index_[i] = s;
}

// Linear probing deletion by backward shift (Knuth, TAOCP vol. 3, 6.4, Algorithm R): no
// tombstones, so lookups never slow down however many evictions happen.
void top_k_tracker::index_erase(hash128 h) noexcept {
  const std::size_t mask = index_.size() - 1;
  std::size_t hole = home(h);
  while (index_[hole] != kEmpty && !(slots_[index_[hole]].hash == h)) hole = (hole + 1) & mask;
  if (index_[hole] == kEmpty) return;
  for (std::size_t j = (hole + 1) & mask; index_[j] != kEmpty; j = (j + 1) & mask) {
    const std::size_t want = home(slots_[index_[j]].hash);
    // The entry at j stays when its home lies cyclically in (hole, j].
    const bool stays = hole <= j ? (hole < want && want <= j) : (hole < want || want <= j);
    if (stays) continue;
    index_[hole] = index_[j];
    hole = j;
  }
  index_[hole] = kEmpty;
}

std::uint32_t top_k_tracker::smallest() noexcept {
  std::uint32_t best = 0;
  for (std::uint32_t s = 1; s < size_; ++s) {
    if (estimates_[s] > estimates_[best]) continue;
    if (estimates_[s] < estimates_[best]) {
      best = s;
      continue;
    }
    const hash128& x = slots_[s].hash;
    const hash128& y = slots_[best].hash;
    if (x.high < y.high || (x.high == y.high && x.low < y.low)) best = s;
  }
  min_bound_ = estimates_[best];
  return best;
}

void top_k_tracker::rebuild() noexcept {
  std::fill(index_.begin(), index_.end(), kEmpty);
  min_bound_ = UINT64_MAX;
  for (std::uint32_t s = 0; s < size_; ++s) {
    index_insert(s);
    min_bound_ = std::min(min_bound_, estimates_[s]);
  }
}

void top_k_tracker::offer(hash128 h, std::string_view item, std::uint64_t estimate,
                          std::uint64_t n) noexcept {
  if (estimate == 0) return;
  std::uint32_t s = find(h);
  if (s == kEmpty) {
    if (size_ < capacity_) {
      s = size_++;
    } else {
      // A newcomer must exceed the smallest candidate; at or under the bound it cannot.
      if (estimate <= min_bound_) return;
      s = smallest();
      if (estimate <= estimates_[s]) return;
      if (slots_[s].heavy) record(heavy_event::kind::leave, s, n);
      index_erase(slots_[s].hash);
      // The bound stays valid: the evicted estimate was the minimum and this one exceeds it.
    }
    slots_[s] = slot{h, 0, false};
    store_item(s, item);
    index_insert(s);
  }
  estimates_[s] = estimate;
  min_bound_ = std::min(min_bound_, estimate);
  slot& c = slots_[s];
  if (!c.heavy && is_heavy(estimate, n)) {
    c.heavy = true;
    record(heavy_event::kind::enter, s, n);
  }
}

void top_k_tracker::settle(std::uint64_t n) noexcept {
  std::uint32_t kept = 0;
  for (std::uint32_t s = 0; s < size_; ++s) {
    slot& c = slots_[s];
    const std::uint64_t estimate = estimates_[s];
    const bool heavy = c.heavy ? stays_heavy(estimate, n) : is_heavy(estimate, n);
    if (heavy != c.heavy) {
      c.heavy = heavy;
      record(heavy ? heavy_event::kind::enter : heavy_event::kind::leave, s, n);
    }
    if (estimate == 0) continue;
    if (kept != s) {
      slots_[kept] = c;
      estimates_[kept] = estimate;
      std::memcpy(bytes_.data() + std::size_t{kept} * kMaxItemBytes,
                  bytes_.data() + std::size_t{s} * kMaxItemBytes, c.length);
    }
    ++kept;
  }
  size_ = kept;
  rebuild();
}

std::vector<heavy_event> top_k_tracker::drain_events() {
  std::vector<heavy_event> out;
  out.reserve(event_count_);
  for (std::size_t i = 0; i < event_count_; ++i) {
    const event_record& e = events_[(event_head_ + i) % events_.size()];
    out.push_back(heavy_event{e.kind, std::string(e.bytes, e.length), e.estimate, e.window_items});
  }
  event_head_ = 0;
  event_count_ = 0;
  return out;
}

std::vector<top_k_tracker::candidate> top_k_tracker::candidates() const {
  std::vector<candidate> out;
  out.reserve(size_);
  for (std::uint32_t s = 0; s < size_; ++s) {
    if (estimates_[s] > 0)
      out.push_back(
          candidate{slots_[s].hash, std::string(item_of(s)), estimates_[s], slots_[s].heavy});
  }
  return out;
}

std::vector<top_k_tracker::entry> top_k_tracker::top() const {
  std::vector<std::uint32_t> order;
  order.reserve(size_);
  for (std::uint32_t s = 0; s < size_; ++s) {
    if (estimates_[s] > 0) order.push_back(s);
  }
  const auto before = [this](std::uint32_t a, std::uint32_t b) {
    const slot& x = slots_[a];
    const slot& y = slots_[b];
    if (estimates_[a] != estimates_[b]) return estimates_[a] > estimates_[b];
    if (const int c = item_of(a).compare(item_of(b)); c != 0) return c < 0;
    if (x.hash.high != y.hash.high) return x.hash.high < y.hash.high;
    return x.hash.low < y.hash.low;
  };
  const std::size_t shown = std::min<std::size_t>(order.size(), k_);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    before);
  std::vector<entry> out;
  out.reserve(shown);
  for (std::size_t i = 0; i < shown; ++i) {
    const std::uint32_t s = order[i];
    out.push_back(entry{std::string(item_of(s)), estimates_[s], slots_[s].heavy});
  }
  return out;
}

std::size_t top_k_tracker::size_bytes() const noexcept {
  return slots_.size() * sizeof(slot) + estimates_.size() * sizeof(std::uint64_t) + bytes_.size() +
         index_.size() * sizeof(std::uint32_t) + events_.size() * sizeof(event_record);
}

void top_k_tracker::clear() noexcept {
  size_ = 0;
  min_bound_ = UINT64_MAX;
  std::fill(index_.begin(), index_.end(), kEmpty);
  event_head_ = 0;
  event_count_ = 0;
}

// Payload (after the record header of sketch/serialize.h, whose seed field is the seed of
// the hashes):
//
//   offset  size  field
//   ------  ----  -----------------------------------------------------------------
//        0     4  k (u32)
//        4     4  capacity c (u32), k ≤ c ≤ kMaxCapacity
//        8     8  φ (f64), 0 < φ ≤ 1
//       16     4  number of candidates s (u32), s ≤ c
//       20     …  s candidates, each:
//                   8  hash, low half (u64)
//                   8  hash, high half (u64)
//                   8  last estimate (u64), > 0
//                   1  heavy: 0 or 1
//                   4  item length L (u32), L ≤ kMaxItemBytes
//                   L  item bytes
//
// Pending events are not part of the record: they are drained once per batch.
void top_k_tracker::serialize_to(std::string& to) const {
  detail::record_writer out(structure_type::top_k, seed_, to);
  out.u32(k_);
  out.u32(capacity_);
  out.f64(phi_);
  out.u32(size_);
  for (std::uint32_t s = 0; s < size_; ++s) {
    const slot& c = slots_[s];
    out.u64(c.hash.low);
    out.u64(c.hash.high);
    out.u64(estimates_[s]);
    out.u8(c.heavy ? 1 : 0);
    out.str(item_of(s));
  }
  std::move(out).finish_appended();
}

top_k_tracker top_k_tracker::deserialize(std::string_view record) {
  detail::record_reader in(record, structure_type::top_k);
  const std::uint32_t k = in.u32();
  const std::uint32_t capacity = in.u32();
  const double phi = in.f64();
  const std::uint32_t size = in.u32();
  const std::string problem = check_params(k, phi, capacity);
  in.require(problem.empty(), problem);
  in.require(capacity != 0, "capacity is 0");
  in.require(size <= capacity,
             fmt::format("{} candidates do not fit a capacity of {}", size, capacity));

  top_k_tracker tracker(k, phi, capacity, in.seed());
  for (std::uint32_t s = 0; s < size; ++s) {
    slot c;
    c.hash.low = in.u64();
    c.hash.high = in.u64();
    const std::uint64_t estimate = in.u64();
    const std::uint8_t heavy = in.u8();
    const std::uint32_t length = in.u32();
    in.require(estimate > 0, fmt::format("candidate {} has estimate 0", s));
    in.require(heavy <= 1, fmt::format("candidate {}: heavy flag {} is not 0 or 1", s, heavy));
    in.require(length <= kMaxItemBytes, fmt::format("candidate {}: item of {} bytes, more than {}",
                                                    s, length, kMaxItemBytes));
    in.require(tracker.find(c.hash) == kEmpty, fmt::format("candidate {} is a duplicate", s));
    c.heavy = heavy == 1;
    tracker.slots_[s] = c;
    tracker.estimates_[s] = estimate;
    tracker.store_item(s, in.view(length));
    tracker.size_ = s + 1;
    tracker.index_insert(s);
  }
  in.done();
  tracker.rebuild();
  return tracker;
}

}  // namespace sketch
