// In-order completion of input messages whose outputs are acknowledged out of order.
//
// Every consumed message is registered with the number of outputs it produced (events
// forwarded to output topics; zero for most). Delivery reports acknowledge outputs in any
// order. The offset of a partition that may be stored for commit is the offset after the
// longest prefix of its messages whose outputs are all acknowledged:
//
//   partition 3:  offset 40 (0 outputs) ✓ · 41 (1, acked) ✓ · 42 (2, one acked) … · 43 (0) ✓
//                                                           ▲ committable: 42
//
// so a message is never committed before its outputs, nor before an earlier message of its
// partition. A final delivery failure blocks its partition at that message for good: the
// offset never moves past it (at-least-once; the message is read again after a restart).
//
// A partition revoked while outputs of its messages are in flight keeps those messages as
// "retained": should the partition come back to this instance, its committable offset
// stays below the first of them until their outputs are acknowledged. This instance's
// dedup state already holds their items, so reading them again finds duplicates and
// forwards nothing: committing past them before their own outputs are delivered could
// lose those outputs. A retained message whose output finally fails is a failure like any
// other (failed(), first_failure()), and blocks its partition for good.
//
// Tickets identify one message in delivery reports, in 56 bits (the caller keeps the top 8
// bits of a producer's 64-bit opaque for itself): 14 bits of partition slot and 42 bits of
// sequence, which never repeats within a slot, across resets too (modulo 2^42: far more
// than can be in flight).
//
// Not thread-safe: one owner, the processing thread, which also serves the producer's
// delivery reports.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace sketchd::kafka {

class offset_tracker {
 public:
  using ticket = std::uint64_t;
  static constexpr int kTicketBits = 56;
  static constexpr std::size_t kMaxSlots = 1u << 14;

  // The slot of (topic_index, partition), created on first use. Throws std::length_error
  // beyond kMaxSlots partitions.
  [[nodiscard]] std::size_t slot(std::size_t topic_index, std::int32_t partition);

  // Registers the message at `offset` of `slot` with `outputs` outputs to be acknowledged.
  // Offsets of a slot must increase (the consumer delivers a partition in order).
  [[nodiscard]] ticket add(std::size_t slot, std::int64_t offset, std::uint32_t outputs);

  // One output of the ticket's message was delivered (`ok`) or finally failed, the message
  // registered since the slot's last reset or retained by a reset. Unknown tickets are
  // ignored. Returns false for a failure.
  bool report(ticket t, bool ok) noexcept;

  // Calls f(topic_index, partition, next_offset) for every slot whose committable offset
  // moved since the last call; next_offset is -1 for a slot reset meanwhile (skip it). The
  // offset is at most that of the slot's first retained message.
  template <class F>
  void drain_committable(F&& f) {
    for (std::size_t i : dirty_) {
      slot_state& s = slots_[i];
      s.dirty = false;
      f(s.topic_index, s.partition,
        s.committable < 0 ? s.committable : std::min(s.committable, retained_floor(s)));
    }
    dirty_.clear();
  }

  // Calls f(topic_index, partition, next) for every slot that registered a message since
  // its last reset: next is the offset after the last one registered (whatever its outputs'
  // state), i.e. where the partition's processing goes on.
  template <class F>
  void for_each_registered(F&& f) const {
    for (const slot_state& s : slots_) {
      const std::int64_t next = s.entries.empty() ? s.committable : s.entries.back().offset + 1;
      if (next >= 0) f(s.topic_index, s.partition, next);
    }
  }

  // Starts the slot afresh (its partition was revoked, or assigned anew): its offsets come
  // from the messages registered from now on. Messages with outputs still in flight, or
  // failed, are retained (see above).
  void reset(std::size_t topic_index, std::int32_t partition);

  // Messages registered, retained ones included, whose outputs are not all reported yet.
  [[nodiscard]] std::size_t pending_messages() const noexcept { return pending_messages_; }
  // Whether some output finally failed; the first failure's description.
  [[nodiscard]] bool failed() const noexcept { return failed_; }
  struct failure {
    std::size_t topic_index = 0;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
  };
  [[nodiscard]] const failure& first_failure() const noexcept { return first_failure_; }

 private:
  struct entry {
    std::int64_t offset;
    std::uint32_t pending;
    bool failed;
  };
  struct retained_entry {
    std::uint64_t seq;
    entry e;
  };
  // A queue in one array whose size is a power of two, doubled when full and never shrunk:
  // once it has held a batch's messages, registering more allocates nothing (a std::deque
  // allocated a block for every 32 entries, on the path of each forwarding message).
  class entry_ring {
   public:
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    entry& operator[](std::size_t i) noexcept {
      return buffer_[(head_ + i) & (buffer_.size() - 1)];
    }
    const entry& operator[](std::size_t i) const noexcept {
      return buffer_[(head_ + i) & (buffer_.size() - 1)];
    }
    entry& front() noexcept { return (*this)[0]; }
    const entry& back() const noexcept { return (*this)[size_ - 1]; }
    void push_back(const entry& e) {
      if (size_ == buffer_.size()) grow();
      ++size_;
      (*this)[size_ - 1] = e;
    }
    void pop_front() noexcept {
      head_ = (head_ + 1) & (buffer_.size() - 1);
      --size_;
    }
    void clear() noexcept {
      head_ = 0;
      size_ = 0;
    }

   private:
    void grow() {
      std::vector<entry> bigger(std::max<std::size_t>(64, 2 * buffer_.size()));
      for (std::size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
      buffer_ = std::move(bigger);
      head_ = 0;
    }
    std::vector<entry> buffer_;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
  };
  struct slot_state {
    std::size_t topic_index = 0;
    std::int32_t partition = 0;
    std::uint64_t base_seq = 0;            // sequence of entries.front()
    entry_ring entries;                    // incomplete messages, and complete ones behind them
    std::vector<retained_entry> retained;  // of earlier assignments, by increasing seq
    std::int64_t committable = -1;
    bool dirty = false;
  };
  void advance(std::size_t index, slot_state& s);
  void mark_dirty(std::size_t index, slot_state& s);
  // The lowest offset of the slot's retained messages; INT64_MAX when there are none.
  [[nodiscard]] static std::int64_t retained_floor(const slot_state& s) noexcept;
  bool report_retained(std::size_t index, slot_state& s, std::uint64_t seq, bool ok) noexcept;
  void complete_or_fail(slot_state& s, entry& e, bool ok) noexcept;

  std::vector<slot_state> slots_;
  std::vector<std::vector<std::uint32_t>> index_;  // [topic_index][partition] → slot + 1
  std::vector<std::size_t> dirty_;
  std::size_t pending_messages_ = 0;
  bool failed_ = false;
  failure first_failure_;
};

}  // namespace sketchd::kafka
