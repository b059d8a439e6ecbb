// Where the outputs stood when an input partition was committed: the metadata of each offset
// commit, so that a member taking the partition over after a crash knows where to read the
// output topics back from (docs/SEMANTICS.md, "Crashes: reading the output back").
//
// A member that dies forwarded the messages after its last commit C of a partition; the next
// owner reads them again from C. To forward none of them twice, it reads the output topics
// from where they ended when those messages were forwarded, and finds their copies by their
// provenance headers. The commit of C says where that is, in Kafka's offset-commit metadata
// (a string per partition that the group coordinator keeps with the offset).
//
// A checkpoint is taken at each commit: the output ends E (kafka::forwarder::ends(): where
// whatever is forwarded from then on lands at the earliest) and, per input partition, the
// next offset N to be processed. Every message at N or after is forwarded after E, so its
// copies lie at or after E. The commit of partition p at offset C carries the E of the latest
// checkpoint whose N(p) ≤ C (the messages from C on came after it); when none qualifies (p
// was processed further than C at every kept checkpoint), it carries nothing, and the next
// owner forwards those messages again, as without this. A partition newly assigned counts as
// processed from its offset 0 at the checkpoint taken when the assignment began (started()):
// all it will forward comes after that checkpoint's ends.
//
//   checkpoint 1: E1, N(p)=500    checkpoint 2: E2, N(p)=900    commit of p at 700 → E1
//
// The metadata is text, `sketchd-outputs/1 TOPIC=P:O,P:O;TOPIC=…`, for instance
// `sketchd-outputs/1 unique=0:1200,1:1187;dups=0:40`. Topic names cannot hold the
// separators (Kafka allows [a-zA-Z0-9._-]). Brokers refuse a commit whose metadata exceeds
// offset.metadata.max.bytes (4096 by default): metadata longer than kMaxMetadataBytes is not
// sent.
//
// Pure: no Kafka, no clock. Not thread-safe: one owner, the processor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sketchd {

// The position of one output partition: the first offset to read.
struct output_end {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  friend bool operator==(const output_end&, const output_end&) = default;
};

// The metadata text of `ends`; "" when there are none, or when the text would be longer than
// `max_bytes`.
[[nodiscard]] std::string encode_output_ends(const std::vector<output_end>& ends,
                                             std::size_t max_bytes);
// The ends of a metadata text; nullopt for any other text (another client's metadata, an
// empty one, a later version).
[[nodiscard]] std::optional<std::vector<output_end>> parse_output_ends(std::string_view text);

class output_checkpoints {
 public:
  static constexpr std::size_t kMaxKept = 32;
  static constexpr std::size_t kMaxMetadataBytes = 3900;
  static constexpr std::string_view kPrefix = "sketchd-outputs/1 ";

  // A checkpoint: `next` the next offset to process of each input partition (topic index,
  // partition, offset), `ends` the outputs' ends at the same moment. The oldest of more than
  // kMaxKept is dropped.
  void take(const std::vector<std::tuple<std::size_t, std::int32_t, std::int64_t>>& next,
            const std::vector<output_end>& ends);
  // The metadata of the commit of input partition (topic_index, partition) at `offset`: the
  // ends of the latest checkpoint whose next offset of that partition is at most `offset`;
  // "" when none qualifies, or its text is too long.
  [[nodiscard]] std::string metadata(std::size_t topic_index, std::int32_t partition,
                                     std::int64_t offset) const;
  // Input partition (topic_index, partition) is assigned, and none of its messages processed
  // here yet: every one of them is forwarded after the ends of the latest checkpoint (taken
  // when the assignment began), which is then the one for any commit of it, until a later
  // one qualifies. Without it, a partition read far ahead of its first commit (a batch read
  // before any checkpoint) would commit with no metadata. Nothing without a checkpoint.
  void started(std::size_t topic_index, std::int32_t partition);
  // Checkpoints whose text was too long to send, since the start.
  [[nodiscard]] std::uint64_t too_long() const noexcept { return too_long_; }

 private:
  struct checkpoint {
    std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> next;
    std::string text;  // "" when too long, or no end is known
  };
  std::deque<checkpoint> kept_;  // oldest first
  std::uint64_t too_long_ = 0;
};

}  // namespace sketchd
