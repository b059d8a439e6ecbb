#include "sketchd/state/shard_record.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <utility>

namespace sketchd::state {
namespace {

constexpr char kMagic[8] = {'S', 'K', 'D', 'S', 'H', 'A', 'R', 'D'};
constexpr std::size_t kHeaderSize = 20;
constexpr std::size_t kTrailerSize = 8;
constexpr std::string_view kKeyPrefix = "sketchd-shard/1";

// The payload of the record (see the header), without the framing, with `cluster_id`.
void write_payload(const shard_snapshot& s, std::string_view cluster_id, binary_writer& w) {
  w.bytes(s.shard.pipeline);
  w.bytes(s.shard.topic);
  w.i32(s.shard.partition);
  w.i64(s.input_offset);
  w.i64(s.created_ms);
  w.bytes(cluster_id);
  w.bytes(s.parameters);
  w.u32(static_cast<std::uint32_t>(s.outputs.size()));
  for (const auto& o : s.outputs) {
    w.bytes(o.topic);
    w.i32(o.partition);
    w.i64(o.next_offset);
  }
  w.bytes(s.state);
}

shard_snapshot read_payload(binary_reader& r) {
  shard_snapshot s;
  s.shard.pipeline = r.bytes();
  s.shard.topic = r.bytes();
  s.shard.partition = r.i32();
  s.input_offset = r.i64();
  s.created_ms = r.i64();
  s.cluster_id = r.bytes();
  s.parameters = r.bytes();
  const std::uint32_t outputs = r.u32();
  if (outputs > r.remaining() / 20) r.fail("corrupt: more output positions than the data holds");
  for (std::uint32_t i = 0; i < outputs; ++i) {
    partition_offset o;
    o.topic = r.bytes();
    o.partition = r.i32();
    o.next_offset = r.i64();
    s.outputs.push_back(std::move(o));
  }
  s.state = r.bytes();
  r.done();
  if (s.shard.partition < 0 || s.input_offset < 0)
    r.fail("corrupt: a negative partition or offset");
  return s;
}

// "<len>:<text>" at the start of `in`, which is advanced past it and one space.
std::optional<std::string> take_counted(std::string_view& in) {
  const std::size_t colon = in.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto length = number<std::size_t>(in.substr(0, colon));
  if (!length || *length > in.size() - colon - 1) return std::nullopt;
  std::string text(in.substr(colon + 1, *length));
  in.remove_prefix(colon + 1 + *length);
  if (in.empty() || in.front() != ' ') return std::nullopt;
  in.remove_prefix(1);
  return text;
}

}  // namespace

std::string encode_record(const shard_snapshot& s, std::string_view cluster_id) {
  std::string payload;
  binary_writer pw(payload);
  write_payload(s, cluster_id, pw);
  std::string out(kMagic, sizeof kMagic);
  out.reserve(kHeaderSize + payload.size() + kTrailerSize);
  binary_writer w(out);
  w.u32(kShardFormatVersion);
  w.u64(payload.size());
  out.append(payload);
  w.u64(XXH3_64bits(out.data(), out.size()));
  return out;
}

std::string encode_shard(const shard_snapshot& s) { return encode_record(s, s.cluster_id); }

shard_snapshot decode_shard(std::string_view record, const std::string& what) {
  binary_reader header(record, what);
  if (record.size() < kHeaderSize + kTrailerSize ||
      std::string_view(record.data(), sizeof kMagic) != std::string_view(kMagic, sizeof kMagic)) {
    header.fail("not a sketchd shard record (bad magic or too short)");
  }
  static_cast<void>(header.pod<std::uint64_t>());  // the magic
  const std::uint32_t version = header.u32();
  if (version != kShardFormatVersion) {
    header.fail(fmt::format("format version {}, this sketchd reads version {}", version,
                            kShardFormatVersion));
  }
  const std::uint64_t length = header.u64();
  if (length != record.size() - kHeaderSize - kTrailerSize) {
    header.fail(
        fmt::format("truncated or corrupt: the header announces {} bytes of data, the "
                    "record has {}",
                    length, record.size() - kHeaderSize - kTrailerSize));
  }
  const std::size_t covered = record.size() - kTrailerSize;
  binary_reader trailer(record.substr(covered), what);
  if (trailer.u64() != XXH3_64bits(record.data(), covered))
    header.fail("corrupt: checksum mismatch");
  binary_reader payload(record.substr(kHeaderSize, static_cast<std::size_t>(length)), what);
  return read_payload(payload);
}

std::string shard_key(const shard_id& shard, std::uint32_t chunk) {
  return fmt::format("{} {}:{} {}:{} {} {}", kKeyPrefix, shard.pipeline.size(), shard.pipeline,
                     shard.topic.size(), shard.topic, shard.partition, chunk);
}

std::optional<parsed_key> parse_shard_key(std::string_view key) {
  if (!key.starts_with(kKeyPrefix) || key.size() == kKeyPrefix.size() ||
      key[kKeyPrefix.size()] != ' ') {
    return std::nullopt;
  }
  key.remove_prefix(kKeyPrefix.size() + 1);
  parsed_key out;
  auto pipeline = take_counted(key);
  auto topic = pipeline ? take_counted(key) : std::nullopt;
  const std::size_t space = key.find(' ');
  if (!topic || space == std::string_view::npos) return std::nullopt;
  const auto partition = number<std::int32_t>(key.substr(0, space));
  const auto chunk = number<std::uint32_t>(key.substr(space + 1));
  if (!partition || *partition < 0 || !chunk) return std::nullopt;
  out.shard = {std::move(*pipeline), std::move(*topic), *partition};
  out.chunk = *chunk;
  return out;
}

std::int32_t state_partition(const shard_id& shard, std::int32_t state_partitions) {
  if (state_partitions < 1)
    throw std::invalid_argument(
        fmt::format("state partitions must be at least 1, not {}", state_partitions));
  return shard.partition % state_partitions;
}

std::map<std::string, std::string> state_topic_configs() {
  return {{"cleanup.policy", "compact"},
          // A snapshot's chunks outlive a newer, partial write of the same keys by at
          // least this long (docs/STATE-TOPIC.md): the new owner of a crashed writer's
          // partition still finds the older complete snapshot.
          {"min.compaction.lag.ms", "600000"},
          // Compaction only touches closed segments: roll at least every 10 minutes.
          {"segment.ms", "600000"}};
}

offset_plausibility check_input_offset(const shard_id& shard, std::int64_t input_offset,
                                       std::int64_t low, std::int64_t high) {
  using verdict = offset_plausibility::verdict;
  if (input_offset > high) {
    return {verdict::beyond_log_end,
            fmt::format("{}: the snapshot reflects the input up to offset {}, but the partition's "
                        "log ends at {}: the topic was deleted and created again (or truncated) "
                        "since; the snapshot is not of this log",
                        describe(shard), input_offset, high)};
  }
  if (input_offset < low) {
    return {verdict::before_log_start,
            fmt::format("{}: the snapshot reflects the input up to offset {}, but the partition's "
                        "log starts at {}: the {} messages in between were deleted by retention "
                        "and cannot be read into the state",
                        describe(shard), input_offset, low, low - input_offset)};
  }
  return {};
}

}  // namespace sketchd::state
