// Heavy hitters over a Count-Min sketch: a bounded set of candidates, the smallest evicted
// by a larger newcomer (the "CMS + heap" method of G. Cormode and S. Muthukrishnan, "An
// Improved Data Stream Summary: The Count-Min Sketch and its Applications", J. Algorithms
// 55(1), 2005, section 5.1; seed lecture 000, "HH(k)"), with the heap replaced by a lower
// bound on the smallest estimate.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketch/hash.h"

namespace sketch {

// An item entering or leaving the heavy set (estimate ≥ φ·N). The member `kind` hides the
// enum's name: compare with heavy_event::kind::enter, name the type `enum heavy_event::kind`.
struct heavy_event {
  enum class kind { enter, leave } kind;
  std::string item;            // the item's bytes, at most top_k_tracker::kMaxItemBytes
  std::uint64_t estimate;      // its estimate when the event was recorded
  std::uint64_t window_items;  // N at that moment
  friend bool operator==(const heavy_event&, const heavy_event&) = default;
};

// Up to `capacity` candidate items, each with its hash, its bytes, its last estimate and
// whether it is heavy (estimate ≥ φ·N). The caller estimates an item with a Count-Min sketch
// and offers it; the tracker keeps it if it is already a candidate, if a slot is free, or if
// its estimate exceeds the smallest candidate's, which it evicts. Lookup is O(1) through an
// open-addressing index on the hash. Instead of a min-heap, which would sift on every offer
// of a candidate, the tracker keeps a lower bound on the smallest estimate: an offer of a
// candidate only stores its estimate, a newcomer at or under the bound is rejected at once,
// and only a newcomer above it scans the c estimates (O(c)) for the exact minimum, which
// then becomes the bound. Evictions are those of a min-heap ordered by (estimate, hash).
//
// Guarantee (Cormode & Muthukrishnan 2005, section 5.1), when the sketch's estimates never
// undercount and are within εN of the truth: with capacity > k, every item whose true count
// exceeds the (k+1)-th largest by more than εN is reported by top() (it can only be
// rejected or evicted when c ≥ k+1 candidates have larger estimates, and only the other
// top-k items can have those); a heavy item's true count is ≥ (φ − ε)·N, and an item
// with true count ≥ φ·N is heavy whenever it is a candidate.
//
// Items are identified by their full 128-bit hash; only their first kMaxItemBytes bytes are
// stored, for reporting. Events (enter, leave) go to a bounded buffer sized at construction;
// when it is full the oldest event is dropped and dropped_events() counts it.
//
// offer() and refresh() never allocate or throw; top(), drain_events() and serialize()
// allocate their results.
//
// Thread safety: not thread-safe for writers; one owner. Concurrent const calls are safe when
// no call modifies the tracker.
class top_k_tracker {
 public:
  static constexpr std::size_t kMaxItemBytes = 256;
  // An item enters the heavy set when its estimate is ≥ φ·N and at least
  // kMinHeavyEstimate (so that the first few items of an empty window are not all
  // "heavy"), and leaves it when its estimate falls below (1 − kHysteresis)·φ·N (so that
  // an item hovering at the threshold does not flap in and out on every batch).
  static constexpr std::uint64_t kMinHeavyEstimate = 10;
  static constexpr double kHysteresis = 0.1;
  static constexpr std::uint32_t kMaxCapacity = 4096;
  static constexpr std::uint32_t kMinEventCapacity = 64;

  struct entry {
    std::string item;
    std::uint64_t estimate;
    bool heavy;
    friend bool operator==(const entry&, const entry&) = default;
  };

  // max(2k, ⌈2/φ⌉), at least k and at most kMaxCapacity: room for every item that can be
  // heavy (at most 1/φ of them) twice over, as long as φ ≥ 2/kMaxCapacity (about 4.9e-4);
  // below that, the cap leaves room for fewer. Throws std::invalid_argument like the
  // constructor.
  [[nodiscard]] static std::uint32_t default_capacity(std::uint32_t k, double phi);

  // A tracker reporting k items, heavy when estimate ≥ φ·N, with `capacity` candidate slots
  // (0 = default_capacity(k, φ)); `seed` is the seed of the hashes offered, recorded by
  // serialize(). Throws std::invalid_argument unless 1 ≤ k ≤ kMaxCapacity, 0 < φ ≤ 1 and
  // k ≤ capacity ≤ kMaxCapacity.
  top_k_tracker(std::uint32_t k, double phi, std::uint32_t capacity = 0,
                std::uint64_t seed = kDefaultSeed);

  // Records the item's estimate (out of n items in all): updates its candidate, or inserts
  // it when a slot is free or when `estimate` exceeds the smallest candidate's (evicted; a
  // heavy evicted candidate gets a leave event). An item that becomes heavy, estimate ≥ φ·n
  // and ≥ kMinHeavyEstimate, gets an enter event. A heavy item whose share falls is
  // noticed by the next refresh(). An estimate of 0 is ignored. No allocation.
  void offer(hash128 h, std::string_view item, std::uint64_t estimate, std::uint64_t n) noexcept;

  // offer() for callers whose estimate of an item never falls between refresh() calls (a
  // Count-Min sketch, plain or conservative; rolling_count_min, which refreshes after every
  // rotation). Under that condition it has exactly the effect of offer(), faster: when every
  // slot is taken and `estimate` is below the smallest candidate's, the item cannot be a
  // candidate (a candidate's estimate is at least that minimum and has not fallen) nor evict
  // one, so it returns before the index lookup. No allocation.
  void offer_growing(hash128 h, std::string_view item, std::uint64_t estimate,
                     std::uint64_t n) noexcept {
    if (size_ == capacity_ && estimate < min_bound_) return;
    offer(h, item, estimate, n);
  }

  // offer_growing() of a batch of items, in order: item i has hash hashes[i], bytes
  // item_of(i) (a string_view), estimate estimates[i] and N n_of(i) (the N after its count).
  // Under the condition of offer_growing() it has exactly the effect of those calls, in fewer
  // steps: once every slot is taken, the smallest candidate's estimate can only rise until
  // the next refresh() (an offered candidate's estimate does not fall, an evicting newcomer
  // exceeds the one it evicts), so an item under the bound at the start of a run of kBatchRun
  // items is under it at its own turn too. The bound test therefore runs first, over the
  // whole run and without a branch per item (most items of a skewed stream's tail fail it,
  // and a branch on an estimate just loaded stalls the loads after it when it mispredicts),
  // and only the items that pass it are offered one by one. An estimate of 0 (an item to
  // skip) is ignored, as by offer(). Precondition: estimates.size() ≥ hashes.size(). No
  // allocation.
  static constexpr std::size_t kBatchRun = 256;
  template <class ItemOf, class NOf>
  void offer_growing(std::span<const hash128> hashes, std::span<const std::uint64_t> estimates,
                     ItemOf&& item_of, NOf&& n_of) noexcept {
    const std::size_t count = hashes.size();
    std::size_t i = 0;
    for (; i < count && size_ < capacity_; ++i) {
      offer(hashes[i], item_of(i), estimates[i], n_of(i));
    }
    std::array<std::uint16_t, kBatchRun> passed;
    while (i < count) {
      const std::size_t run = std::min(count - i, kBatchRun);
      const std::uint64_t bound = min_bound_;
      std::size_t kept = 0;
      for (std::size_t j = 0; j < run; ++j) {
        passed[kept] = static_cast<std::uint16_t>(j);
        kept += estimates[i + j] >= bound ? 1 : 0;
      }
      for (std::size_t p = 0; p < kept; ++p) {
        const std::size_t at = i + passed[p];
        offer_passed(hashes[at], item_of(at), estimates[at], n_of(at));
      }
      i += run;
    }
  }
  // The same for a batch counted with count_min_sketch::update(h), weight 1, one item after
  // the other: item i's N is n_before + i + 1, n_before the sketch's N before the batch.
  template <class ItemOf>
  void offer_growing(std::span<const hash128> hashes, std::span<const std::uint64_t> estimates,
                     ItemOf&& item_of, std::uint64_t n_before) noexcept {
    offer_growing(hashes, estimates, std::forward<ItemOf>(item_of),
                  [n_before](std::size_t i) { return n_before + i + 1; });
  }

  // Re-estimates every candidate with `estimate_of_hash(hash128) -> uint64` (after a window
  // slides, estimates can drop), records leave events for heavy candidates now below
  // (1 − kHysteresis)·φ·n and enter events for new ones, and forgets candidates whose
  // estimate is 0. Call it after each rotation, once per batch, and before reading top().
  // O(c), no allocation.
  template <class Estimator>
  void refresh(Estimator&& estimate_of_hash, std::uint64_t n) {
    for (std::uint32_t i = 0; i < size_; ++i) {
      estimates_[i] = static_cast<std::uint64_t>(estimate_of_hash(slots_[i].hash));
    }
    settle(n);
  }

  // The events recorded since the last call, oldest first.
  [[nodiscard]] std::vector<heavy_event> drain_events();
  // Events dropped because the buffer was full, since construction.
  [[nodiscard]] std::uint64_t dropped_events() const noexcept { return dropped_events_; }

  // At most k candidates with a positive estimate, by estimate (the last offered or
  // refreshed) from highest, ties by item bytes then hash.
  [[nodiscard]] std::vector<entry> top() const;

  // Every candidate with a positive estimate, with its hash, in no particular order: for a
  // caller that ranks the candidates of several trackers together (shards.h).
  struct candidate {
    hash128 hash;
    std::string item;
    std::uint64_t estimate;
    bool heavy;
  };
  [[nodiscard]] std::vector<candidate> candidates() const;

  [[nodiscard]] std::uint32_t k() const noexcept { return k_; }
  [[nodiscard]] double phi() const noexcept { return phi_; }
  [[nodiscard]] std::uint32_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::uint32_t size() const noexcept { return size_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  // Bytes of the fixed buffers (candidates, estimates, item bytes, index, events).
  [[nodiscard]] std::size_t size_bytes() const noexcept;

  // Forgets every candidate and pending event.
  void clear() noexcept;

  // The candidate set (not the pending events) as one record of the library's binary format
  // (sketch/serialize.h).
  [[nodiscard]] std::string serialize() const {
    std::string out;
    serialize_to(out);
    return out;
  }
  // The same record, appended to `out` (after what it holds).
  void serialize_to(std::string& out) const;
  // Reads a record written by serialize(). Throws format_error when the input is corrupt,
  // truncated, of another structure or holds parameters this class does not accept.
  [[nodiscard]] static top_k_tracker deserialize(std::string_view record);

 private:
  static constexpr std::uint32_t kEmpty = UINT32_MAX;

  struct slot {
    hash128 hash;
    std::uint16_t length = 0;
    bool heavy = false;
  };
  struct event_record {
    enum heavy_event::kind kind = heavy_event::kind::enter;
    std::uint16_t length = 0;
    std::uint64_t estimate = 0;
    std::uint64_t window_items = 0;
    char bytes[kMaxItemBytes];
  };

  // offer_growing() of an item of a batch that passed the bound at the start of its run
  // (every slot taken). A candidate's offer that changes nothing but its estimate (it stays
  // heavy, or stays light) only stores that estimate, inline: the estimate did not fall, so
  // the bound on the smallest one holds as it is. On a skewed stream that is most offers
  // that pass the bound. Only the batch path takes it: one item at a time, the lookup before
  // offer()'s own measured no faster (docs/PERFORMANCE.md, issue 42 before and after).
  void offer_passed(hash128 h, std::string_view item, std::uint64_t estimate,
                    std::uint64_t n) noexcept {
    if (estimate < min_bound_) return;
    if (const std::uint32_t s = find(h); s != kEmpty) {
      // Without a branch on whether it is heavy: on a skewed stream about half the offers
      // that pass the bound are of the few heavy items, so that branch mispredicts.
      const bool stays = slots_[s].heavy | !is_heavy(estimate, n);
      if (stays) {
        estimates_[s] = estimate;
        return;
      }
    }
    offer(h, item, estimate, n);
  }

  [[nodiscard]] bool is_heavy(std::uint64_t estimate, std::uint64_t n) const noexcept {
    return (estimate >= kMinHeavyEstimate) &
           (static_cast<double>(estimate) >= phi_ * static_cast<double>(n));
  }
  [[nodiscard]] bool stays_heavy(std::uint64_t estimate, std::uint64_t n) const noexcept;
  [[nodiscard]] std::string_view item_of(std::uint32_t s) const noexcept;
  void store_item(std::uint32_t s, std::string_view item) noexcept;
  void record(enum heavy_event::kind kind, std::uint32_t s, std::uint64_t n) noexcept;

  [[nodiscard]] std::size_t home(hash128 h) const noexcept {
    return static_cast<std::size_t>(h.high) & (index_.size() - 1);
  }
  [[nodiscard]] std::uint32_t find(hash128 h) const noexcept {
    const std::size_t mask = index_.size() - 1;
    for (std::size_t i = home(h); index_[i] != kEmpty; i = (i + 1) & mask) {
      if (slots_[index_[i]].hash == h) return index_[i];
    }
    return kEmpty;
  }
  void index_insert(std::uint32_t s) noexcept;
  void index_erase(hash128 h) noexcept;

  // The candidate evicted next: the smallest by (estimate, hash), unique, so eviction is
  // deterministic. Sets min_bound_ to its estimate. Precondition: size_ > 0. O(c).
  [[nodiscard]] std::uint32_t smallest() noexcept;
  void rebuild() noexcept;
  void settle(std::uint64_t n) noexcept;

  std::vector<slot> slots_;               // capacity; slots [0, size_) are in use
  std::vector<std::uint64_t> estimates_;  // capacity: slot s's last estimate, > 0 when in use
  std::vector<char> bytes_;               // capacity × kMaxItemBytes: slot s at s·kMaxItemBytes
  std::vector<std::uint32_t> index_;      // linear probing on the hash: slot number or kEmpty
  std::vector<event_record> events_;      // ring buffer
  std::size_t event_head_ = 0;            // oldest event
  std::size_t event_count_ = 0;
  std::uint64_t dropped_events_ = 0;
  std::uint64_t seed_;
  double phi_;
  std::uint32_t k_;
  std::uint32_t capacity_;
  std::uint32_t size_ = 0;
  // ≤ every candidate's estimate (UINT64_MAX when there is none): lowered by offers, raised
  // to the exact minimum by smallest(), refresh() and deserialize().
  std::uint64_t min_bound_ = UINT64_MAX;
};

}  // namespace sketch
