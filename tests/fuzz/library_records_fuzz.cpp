// The library's binary format (sketch/serialize.h), read back by every structure's
// deserialize(): whatever the bytes, a structure or a sketch::format_error, never a crash,
// another exception or an allocation beyond what the record holds. A structure that is
// read back works (queries, updates, window moves) and writes back the very same record.
//
// Input: one record. Its version (3, or 4 when it is 4: the coded bit arrays of the Bloom
// filters), length field and checksum are rewritten to fit the input and this build, so that
// the fuzzer explores what lies past them (a record of another version or with a wrong
// checksum is refused before its payload is read, and tests/unit covers that). Records
// nested in a record keep their own versions and checksums; a fuzzing build skips the
// checksums (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION).
//
// A coded record describes arrays larger than itself (an empty filter's code is empty), so
// "beyond what the record holds" is, for those, beyond what its fields describe: records
// whose fields describe more than kMaxCodedBits bits are skipped, as a reader of untrusted
// records checks those fields before it reads one (sketchd checks them against its
// configuration: rolling_bloom::record_options()).
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "fuzz.h"
#include "sketch/blocked_bloom.h"
#include "sketch/bloom.h"
#include "sketch/count_min.h"
#include "sketch/counting_bloom.h"
#include "sketch/rolling_bloom.h"
#include "sketch/rolling_count_min.h"
#include "sketch/serialize.h"
#include "sketch/top_k.h"

namespace {

// A slice's length, bounded so that the times below stay far from overflow (a record may
// hold any positive window; the daemon's times are milliseconds since 1970).
std::int64_t step(std::int64_t slice_ms) {
  return std::min<std::int64_t>(slice_ms, 1'000'000'000'000);
}

constexpr std::string_view kItems[] = {"a", "b", "item", "", "\xff\xfe", "a-longer-item-0001"};

// The record is written back as it was read. For the rolling structures, whose records nest
// the records of their slices or generations, only up to those nested checksums when the
// build does not verify them (the outer one is rewritten above to fit).
template <typename T>
void round_trip(const T& structure, const std::string& record) {
  constexpr bool nests_records =
      std::is_same_v<T, sketch::rolling_count_min> || std::is_same_v<T, sketch::rolling_bloom>;
  const std::string again = structure.serialize();
  if ((kChecksumsVerified || !nests_records) && all_current_version(record))
    FUZZ_CHECK(again == record);
  FUZZ_CHECK(T::deserialize(again).serialize() == again);
  if constexpr (std::is_same_v<T, sketch::bloom_filter> ||
                std::is_same_v<T, sketch::blocked_bloom_filter> ||
                std::is_same_v<T, sketch::rolling_bloom>) {
    // Coded, the same structure comes back (a coded record may carry another parameter
    // than the one the writer picks, so the record itself need not be the same).
    for (const auto coding : {sketch::bit_coding::golomb, sketch::bit_coding::smaller}) {
      const std::string coded = structure.serialize(coding);
      FUZZ_CHECK(T::deserialize(coded).serialize() == again);
    }
  }
}

void exercise(sketch::bloom_filter f, const std::string& record) {
  round_trip(f, record);
  for (auto item : kItems) {
    f.insert(item);
    FUZZ_CHECK(f.contains(item));
  }
  (void)f.estimated_fpr();
  (void)f.estimated_items();
  if (std::has_single_bit(f.bits()) && f.bits() >= 128) (void)f.halved();
}

void exercise(sketch::blocked_bloom_filter f, const std::string& record) {
  round_trip(f, record);
  for (auto item : kItems) {
    (void)f.test_and_insert(item);
    FUZZ_CHECK(f.contains(item));
  }
  (void)f.estimated_fpr();
  (void)f.estimated_items();
}

void exercise(sketch::counting_bloom_filter f, const std::string& record) {
  round_trip(f, record);
  for (auto item : kItems) {
    f.insert(item);
    FUZZ_CHECK(f.contains(item));
    (void)f.remove(item);
  }
}

void exercise(sketch::count_min_sketch s, const std::string& record) {
  round_trip(s, record);
  for (auto item : kItems) {
    const std::uint64_t before = s.estimate(item);
    (void)s.update(item, 3);
    FUZZ_CHECK(s.estimate(item) >= before);
  }
  (void)s.error_bound();
}

void exercise(sketch::top_k_tracker t, const std::string& record) {
  round_trip(t, record);
  std::uint64_t n = 1000;
  for (auto item : kItems) {
    t.offer(sketch::hash_item(item, t.seed()), item, n / 2, n);
    n += 7;
  }
  FUZZ_CHECK(t.top().size() <= t.k());
  t.refresh([](sketch::hash128) { return std::uint64_t{1}; }, n);
  (void)t.drain_events();
}

void exercise(sketch::rolling_count_min s, const std::string& record) {
  round_trip(s, record);
  std::int64_t now = 0;
  for (auto item : kItems) {
    now += 1 + step(s.slice_ms()) / 2;
    (void)s.update(item, now);
    (void)s.estimate(item);
  }
  s.advance(now + 3 * step(s.slice_ms()));
  s.refresh();
  FUZZ_CHECK(s.top().size() <= s.options().top_k);
  (void)s.drain_events();
}

void exercise(sketch::rolling_bloom f, const std::string& record) {
  round_trip(f, record);
  std::int64_t now = 0;
  for (auto item : kItems) {
    now += 1 + step(f.slice_ms()) / 2;
    (void)f.test_and_insert(item, now);
    FUZZ_CHECK(f.contains(item));
  }
  (void)f.estimated_fpr();
  (void)f.estimated_items();
  (void)f.effective_window_ms(now);
  f.advance(now + 5 * step(f.slice_ms()));
}

// The most bits the fields of a coded record may describe here (16 MiB of arrays).
constexpr std::uint64_t kMaxCodedBits = std::uint64_t{1} << 27;

// Whether a record of format version 4 describes more than kMaxCodedBits bits: a Bloom
// filter's size is its payload's first u64; a rolling filter's follows from its options.
template <typename T>
bool describes_too_much(const std::string& record) {
  if (sketch::detail::record_version(record) != sketch::kCodedFormatVersion) return false;
  if constexpr (std::is_same_v<T, sketch::rolling_bloom>) {
    try {
      const sketch::rolling_bloom_options o = sketch::rolling_bloom::record_options(record);
      const std::uint64_t bits = sketch::rolling_bloom::generation_bits(o);  // checks o
      return o.generations == 0 || bits > kMaxCodedBits / o.generations;
    } catch (const std::exception&) {
      return false;  // deserialize() refuses it the same way
    }
  } else {
    return sketch::detail::record_first_u64(record) > kMaxCodedBits;
  }
}

template <typename T>
void read(const std::string& record) {
  if (describes_too_much<T>(record)) return;
  try {
    exercise(T::deserialize(record), record);
  } catch (const sketch::format_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string record(reinterpret_cast<const char*>(data), size);
  std::uint16_t type = 0;
  if (record.size() >= sketch::kHeaderSize + sketch::kTrailerSize) {
    // Inputs of earlier format versions (found/ keeps them) would stop at the version check.
    std::uint16_t version = 0;
    std::memcpy(&version, record.data() + 4, sizeof version);
    if (version != sketch::kCodedFormatVersion) version = sketch::kFormatVersion;
    std::memcpy(record.data() + 4, &version, sizeof version);
    const std::uint64_t length = record.size() - sketch::kHeaderSize - sketch::kTrailerSize;
    std::memcpy(record.data() + 16, &length, sizeof length);
    const std::uint64_t checksum = XXH64(record.data(), record.size() - 8, 0);
    std::memcpy(record.data() + record.size() - 8, &checksum, sizeof checksum);
    std::memcpy(&type, record.data() + 6, sizeof type);
  }
  switch (static_cast<sketch::structure_type>(type)) {
    case sketch::structure_type::blocked_bloom_filter:
      read<sketch::blocked_bloom_filter>(record);
      break;
    case sketch::structure_type::counting_bloom_filter:
      read<sketch::counting_bloom_filter>(record);
      break;
    case sketch::structure_type::count_min_sketch:
      read<sketch::count_min_sketch>(record);
      break;
    case sketch::structure_type::top_k:
      read<sketch::top_k_tracker>(record);
      break;
    case sketch::structure_type::rolling_count_min:
      read<sketch::rolling_count_min>(record);
      break;
    case sketch::structure_type::rolling_bloom:
      read<sketch::rolling_bloom>(record);
      break;
    default:  // a bloom filter, and every unknown type (refused with its name)
      read<sketch::bloom_filter>(record);
      break;
  }
  return 0;
}
