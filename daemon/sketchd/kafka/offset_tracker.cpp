#include "sketchd/kafka/offset_tracker.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace sketchd::kafka {

namespace {

constexpr int kSeqBits = 42;
constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << kSeqBits) - 1;
static_assert(kSeqBits + 14 == offset_tracker::kTicketBits);

constexpr offset_tracker::ticket make_ticket(std::size_t slot, std::uint64_t seq) noexcept {
  return (static_cast<std::uint64_t>(slot) << kSeqBits) | (seq & kSeqMask);
}

}  // namespace

std::size_t offset_tracker::slot(std::size_t topic_index, std::int32_t partition) {
  if (partition < 0) throw std::invalid_argument("offset_tracker: negative partition");
  const auto p = static_cast<std::size_t>(partition);
  if (topic_index >= index_.size()) index_.resize(topic_index + 1);
  auto& by_partition = index_[topic_index];
  if (p >= by_partition.size()) by_partition.resize(p + 1, 0);
  if (by_partition[p] != 0) return by_partition[p] - 1;
  if (slots_.size() >= kMaxSlots)
    throw std::length_error("offset_tracker: more than 16384 partitions");
  slots_.emplace_back();
  slots_.back().topic_index = topic_index;
  slots_.back().partition = partition;
  by_partition[p] = static_cast<std::uint32_t>(slots_.size());
  return slots_.size() - 1;
}

offset_tracker::ticket offset_tracker::add(std::size_t index, std::int64_t offset,
                                           std::uint32_t outputs) {
  slot_state& s = slots_[index];
  if (outputs == 0 && s.entries.empty()) {
    s.committable = offset + 1;
    mark_dirty(index, s);
    return make_ticket(index, s.base_seq);
  }
  const std::uint64_t seq = s.base_seq + s.entries.size();
  s.entries.push_back({offset, outputs, false});
  if (outputs > 0) ++pending_messages_;
  return make_ticket(index, seq);
}

bool offset_tracker::report(ticket t, bool ok) noexcept {
  const std::size_t index = static_cast<std::size_t>(t >> kSeqBits);
  if (index >= slots_.size()) return ok;
  slot_state& s = slots_[index];
  const std::uint64_t seq = t & kSeqMask;
  // Position in the ring, modulo 2^42; a sequence behind it is a retained message's (or
  // a complete one's, which has nothing left to report).
  const std::uint64_t at = (seq - (s.base_seq & kSeqMask)) & kSeqMask;
  if (at >= s.entries.size()) return report_retained(index, s, seq, ok);
  entry& e = s.entries[at];
  if (e.pending == 0) return ok;
  complete_or_fail(s, e, ok);
  if (e.pending == 0 && at == 0) advance(index, s);
  return ok;
}

void offset_tracker::complete_or_fail(slot_state& s, entry& e, bool ok) noexcept {
  if (!ok) {
    if (!failed_) first_failure_ = {s.topic_index, s.partition, e.offset};
    failed_ = true;
    e.failed = true;
  }
  if (--e.pending == 0) --pending_messages_;
}

bool offset_tracker::report_retained(std::size_t index, slot_state& s, std::uint64_t seq,
                                     bool ok) noexcept {
  if (s.retained.empty()) return ok;
  // The ticket's full sequence: it lies behind base_seq, by less than 2^42.
  const std::uint64_t full = s.base_seq - ((s.base_seq - seq) & kSeqMask);
  const auto it =
      std::lower_bound(s.retained.begin(), s.retained.end(), full,
                       [](const retained_entry& r, std::uint64_t value) { return r.seq < value; });
  if (it == s.retained.end() || it->seq != full || it->e.pending == 0) return ok;
  complete_or_fail(s, it->e, ok);
  if (it->e.pending == 0 && !it->e.failed) {
    s.retained.erase(it);
    mark_dirty(index, s);  // the floor may have risen
  }
  return ok;
}

std::int64_t offset_tracker::retained_floor(const slot_state& s) noexcept {
  std::int64_t floor = std::numeric_limits<std::int64_t>::max();
  for (const retained_entry& r : s.retained) floor = std::min(floor, r.e.offset);
  return floor;
}

void offset_tracker::mark_dirty(std::size_t index, slot_state& s) {
  if (s.dirty) return;
  s.dirty = true;
  dirty_.push_back(index);
}

void offset_tracker::advance(std::size_t index, slot_state& s) {
  bool moved = false;
  while (!s.entries.empty() && s.entries.front().pending == 0 && !s.entries.front().failed) {
    s.committable = s.entries.front().offset + 1;
    s.entries.pop_front();
    ++s.base_seq;
    moved = true;
  }
  if (moved) mark_dirty(index, s);
}

void offset_tracker::reset(std::size_t topic_index, std::int32_t partition) {
  if (topic_index >= index_.size() || partition < 0) return;
  const auto p = static_cast<std::size_t>(partition);
  if (p >= index_[topic_index].size() || index_[topic_index][p] == 0) return;
  slot_state& s = slots_[index_[topic_index][p] - 1];
  // Messages still waiting for outputs, or failed, stay; the rest of the assignment's
  // entries are complete. Their sequences stay unique: the next message takes the one
  // after the last entry's.
  for (std::size_t i = 0; i < s.entries.size(); ++i) {
    const entry& e = s.entries[i];
    if (e.pending > 0 || e.failed) s.retained.push_back({s.base_seq + i, e});
  }
  s.base_seq += s.entries.size();
  s.entries.clear();
  s.committable = -1;
  // A dirty slot stays listed; drain_committable() then reports committable = -1, which
  // the caller skips.
}

}  // namespace sketchd::kafka
