#include "sketchd/kafka/offset_tracker.h"

#include <stdexcept>

namespace sketchd::kafka {

namespace {

constexpr int kSeqBits = 36;
constexpr int kEpochBits = 6;
constexpr int kSlotShift = kSeqBits + kEpochBits;
constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << kSeqBits) - 1;
constexpr std::uint8_t kEpochMask = (1u << kEpochBits) - 1;
static_assert(kSlotShift + 14 == offset_tracker::kTicketBits);

constexpr offset_tracker::ticket make_ticket(std::size_t slot, std::uint8_t epoch,
                                             std::uint64_t seq) noexcept {
  return (static_cast<std::uint64_t>(slot) << kSlotShift) |
         (static_cast<std::uint64_t>(epoch & kEpochMask) << kSeqBits) | (seq & kSeqMask);
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
    if (!s.dirty) {
      s.dirty = true;
      dirty_.push_back(index);
    }
    return make_ticket(index, s.epoch, s.base_seq);
  }
  const std::uint64_t seq = s.base_seq + s.entries.size();
  s.entries.push_back({offset, outputs, false});
  if (outputs > 0) ++pending_messages_;
  return make_ticket(index, s.epoch, seq);
}

bool offset_tracker::report(ticket t, bool ok) noexcept {
  const std::size_t index = static_cast<std::size_t>(t >> kSlotShift);
  if (index >= slots_.size()) return ok;
  slot_state& s = slots_[index];
  if (((t >> kSeqBits) & kEpochMask) != (s.epoch & kEpochMask)) return ok;
  const std::uint64_t seq = t & kSeqMask;
  const std::uint64_t base = s.base_seq & kSeqMask;
  const std::uint64_t at = (seq - base) & kSeqMask;  // position in the deque, modulo 2^40
  if (at >= s.entries.size()) return ok;
  entry& e = s.entries[at];
  if (e.pending == 0) return ok;
  if (!ok) {
    if (!failed_) first_failure_ = {s.topic_index, s.partition, e.offset};
    failed_ = true;
    e.failed = true;
  }
  if (--e.pending == 0) {
    --pending_messages_;
    if (at == 0) advance(index, s);
  }
  return ok;
}

void offset_tracker::advance(std::size_t index, slot_state& s) {
  bool moved = false;
  while (!s.entries.empty() && s.entries.front().pending == 0 && !s.entries.front().failed) {
    s.committable = s.entries.front().offset + 1;
    s.entries.pop_front();
    ++s.base_seq;
    moved = true;
  }
  if (moved && !s.dirty) {
    s.dirty = true;
    dirty_.push_back(index);
  }
}

void offset_tracker::reset(std::size_t topic_index, std::int32_t partition) {
  if (topic_index >= index_.size() || partition < 0) return;
  const auto p = static_cast<std::size_t>(partition);
  if (p >= index_[topic_index].size() || index_[topic_index][p] == 0) return;
  slot_state& s = slots_[index_[topic_index][p] - 1];
  for (const entry& e : s.entries) {
    if (e.pending > 0) --pending_messages_;
  }
  s.entries.clear();
  s.committable = -1;
  ++s.epoch;
  // A dirty slot stays listed; drain_committable() then reports committable = -1, which
  // the caller skips.
}

}  // namespace sketchd::kafka
