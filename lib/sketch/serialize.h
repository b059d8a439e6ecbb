// The binary format shared by every structure of the library.
//
// A serialized structure is one self-checking record:
//
//   offset  size  field
//   ------  ----  -----------------------------------------------------------------
//        0     4  magic "SKCH"
//        4     2  format version (3 or 4, see below), little-endian
//        6     2  structure type (sketch::structure_type), little-endian
//        8     8  seed of the structure's hash, little-endian
//       16     8  payload length L in bytes, little-endian
//       24     L  payload: the structure's parameters, then its data (each structure
//                 draws its own payload layout next to the code that writes it)
//   24 + L     8  XXH64 (seed 0) of bytes [0, 24 + L), little-endian
//
// All integers are little-endian; doubles are IEEE-754 binary64 stored as their bit
// pattern. A reader checks the magic, the version, the length, the checksum and the type
// before it looks at the payload, then checks every parameter; anything that does not fit
// is a `format_error` naming what was wrong, never a crash or a silently empty structure.
//
// A record carries the oldest format version that describes it, so that a build reads every
// record of a later build that holds nothing new to it: plain records are version 3
// (kFormatVersion), and only a Bloom filter whose bit array is Golomb-coded (bit_coding
// below), or a rolling filter holding one, is version 4 (kCodedFormatVersion). During a
// rolling upgrade from a build before version 4, write plain records until every reader
// is upgraded (sketchd's `state.compression: none`).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sketch {

static_assert(std::endian::native == std::endian::little,
              "the serialized format is little-endian and so is every supported host");

inline constexpr char kMagic[4] = {'S', 'K', 'C', 'H'};
// Version 2 (the index sequence of sketch/hash.h gained its cubic term) and version 3 (it
// mixes each value): the classic and counting filters' bits and the Count-Min sketches'
// counters of an earlier version sit at other indices, so earlier records of those are
// refused rather than misread (format_version_error). The blocked and rolling Bloom filters
// and the top-k tracker do not use the sequence: their version 2 records read as version 3.
inline constexpr std::uint16_t kFormatVersion = 3;
// Version 4: the payload of a Bloom filter (classic or blocked) holds its bit array
// Golomb-coded (sketch/golomb.h) instead of as words; a rolling filter's record is version 4
// when one of its generations is (its size then no longer follows from its options).
inline constexpr std::uint16_t kCodedFormatVersion = 4;
inline constexpr std::size_t kHeaderSize = 24;
inline constexpr std::size_t kTrailerSize = 8;

enum class structure_type : std::uint16_t {
  bloom_filter = 1,
  blocked_bloom_filter = 2,
  counting_bloom_filter = 3,
  count_min_sketch = 4,
  top_k = 5,
  rolling_count_min = 6,
  rolling_bloom = 7,
};

[[nodiscard]] const char* to_string(structure_type type) noexcept;

// How a Bloom filter's serialize() writes its bit array.
enum class bit_coding : std::uint8_t {
  // The words as they are (format version 3): as fast as a copy, and read by every build
  // since version 3.
  plain,
  // Golomb-coded (format version 4), whatever its size: the compressed Bloom filter of seed
  // 002, near m·H(p) bits for a share p of zero bits (within 1.5% for p ≥ 0.7), and about m
  // bits, a little more, for a filter with half its bits set. Coding runs at 50 to 150 MB of
  // array per second (docs/PERFORMANCE.md), where plain runs at the speed of a copy.
  golomb,
  // Golomb-coded where that is smaller than plain, else plain: an empty or sparse array is
  // coded, a filter near half full is copied (without trying to code it when its share of
  // set bits is 45% or more).
  smaller,
};

// bit_coding::smaller does not try to code an array with this share of set bits or more: its
// code would take about m·H(q) · (1 + a few %) bits, at least m for q ≥ 0.45 (H(0.45) = 0.993).
inline constexpr double kCodedDenseShare = 0.45;

// The expected bits of an array of `bits` bits, each set with probability `set_share` on its
// own, written with bit_coding::smaller: the Golomb code's expected length (its coding byte
// and parameter, then golomb_bits_per_run per set bit) where that is smaller and the share is
// below kCodedDenseShare, else the plain array's bits (rounded up to whole 64-bit words).
[[nodiscard]] double expected_smaller_bits(std::uint64_t bits, double set_share) noexcept;

// A serialized input that is corrupt, truncated, of another format version or of another
// structure type.
class format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A record of another format version that this build cannot read (one written before the
// structure's layout changed, or by a later build): the data is whole, but of another kind.
class format_version_error : public format_error {
 public:
  using format_error::format_error;
};

namespace detail {

// The format version of a record (its first bytes; 0 when too short to hold one).
[[nodiscard]] inline std::uint16_t record_version(std::string_view record) noexcept {
  std::uint16_t version = 0;
  if (record.size() >= 6) std::memcpy(&version, record.data() + 4, sizeof version);
  return version;
}

// The first u64 of a record's payload, where a Bloom filter keeps its size in bits (0 when
// the record is too short to hold it): for a reader that checks the size a nested record
// describes before that record allocates it.
[[nodiscard]] inline std::uint64_t record_first_u64(std::string_view record) noexcept {
  std::uint64_t value = 0;
  if (record.size() >= kHeaderSize + 8) std::memcpy(&value, record.data() + kHeaderSize, 8);
  return value;
}

// Writes a record: header, payload fields, then `finish()` adds the length and the
// checksum. Either into a string of its own, which finish() returns, or appended to a
// caller's string after what it holds (finish_appended()), so that a structure made of
// structures writes them all in place, without a copy of each. Not thread-safe; one owner.
class record_writer {
 public:
  record_writer(structure_type type, std::uint64_t seed) : record_writer(type, seed, nullptr) {}
  record_writer(structure_type type, std::uint64_t seed, std::string& out)
      : record_writer(type, seed, &out) {}
  record_writer(const record_writer&) = delete;
  record_writer& operator=(const record_writer&) = delete;

  void u8(std::uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { raw(&v, sizeof v); }
  void u32(std::uint32_t v) { raw(&v, sizeof v); }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void i64(std::int64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void bytes(const void* data, std::size_t size) { raw(data, size); }
  // A length-prefixed (u32) byte string.
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  // A nested record (for structures made of structures): its length (u64), then the
  // record.
  void record(std::string_view nested) {
    u64(nested.size());
    raw(nested.data(), nested.size());
  }
  // The same, with the record written in place by write(std::string&) (a structure's
  // serialize_to): no copy of it.
  template <class Write>
  void record_with(Write&& write) {
    const std::size_t at = out_->size();
    u64(0);  // patched below
    write(*out_);
    const std::uint64_t size = out_->size() - at - sizeof size;
    std::memcpy(out_->data() + at, &size, sizeof size);
  }

  // A Bloom filter's bit array, `bits` bits of `words` (W = 64 or 32 bits per word, bit i
  // at bit i % W of word i / W), of which `set_bits` are set, as the last field of the
  // payload:
  //   plain:   the words, little-endian (the record stays version 3);
  //   golomb:  u8 coding (1 = Golomb), u64 parameter M, then the code of golomb_encode to
  //            the payload's end (the record becomes version 4);
  //   smaller: the smaller of the two.
  // Returns whether it wrote the code. read_bit_array() reads it back.
  bool bit_array(std::span<const std::uint64_t> words, std::uint64_t bits, std::uint64_t set_bits,
                 bit_coding coding);
  bool bit_array(std::span<const std::uint32_t> words, std::uint64_t bits, std::uint64_t set_bits,
                 bit_coding coding);
  // Marks the record as of format version 4 (a nested record is coded).
  void coded() noexcept;

  // Returns the whole record (a writer of its own string); the writer is spent afterwards.
  [[nodiscard]] std::string finish() &&;
  // Completes the record appended to the caller's string; the writer is spent afterwards.
  void finish_appended() &&;

 private:
  record_writer(structure_type type, std::uint64_t seed, std::string* out);
  void raw(const void* data, std::size_t size) {
    out_->append(static_cast<const char*>(data), size);
  }
  void complete();
  template <class Word>
  bool write_bit_array(std::span<const Word> words, std::uint64_t bits, std::uint64_t set_bits,
                       bit_coding coding);
  std::string own_;
  std::string* out_;
  std::size_t start_;  // of the record in *out_
};

// Reads a record written by record_writer. The constructor checks magic, version, length,
// checksum and type (in that order: a corrupt type field is a checksum mismatch); every
// read is bounds-checked and throws format_error past the payload. `done()` throws if
// payload bytes are left over. Not thread-safe; one owner.
class record_reader {
 public:
  record_reader(std::string_view input, structure_type expected);

  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  // The record's format version: 2 to 4 (see kCodedFormatVersion).
  [[nodiscard]] std::uint16_t version() const noexcept { return version_; }

  [[nodiscard]] std::uint8_t u8() { return pod<std::uint8_t>(); }
  [[nodiscard]] std::uint16_t u16() { return pod<std::uint16_t>(); }
  [[nodiscard]] std::uint32_t u32() { return pod<std::uint32_t>(); }
  [[nodiscard]] std::uint64_t u64() { return pod<std::uint64_t>(); }
  [[nodiscard]] std::int64_t i64() { return pod<std::int64_t>(); }
  [[nodiscard]] double f64() { return pod<double>(); }
  void bytes(void* out, std::size_t size) { std::memcpy(out, take(size), size); }
  [[nodiscard]] std::string_view view(std::size_t size) { return {take(size), size}; }
  [[nodiscard]] std::string str() {
    const std::uint32_t n = u32();
    return std::string(view(n));
  }
  [[nodiscard]] std::string_view record() {
    const std::uint64_t n = u64();
    return view(static_cast<std::size_t>(n));
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return payload_.size() - pos_; }
  void done() const;

  // Before the caller allocates the bit array of `bits` bits in words of `word_bytes` bytes:
  // in a plain record (version 3 or earlier) it must fill the rest of the payload exactly.
  // A coded record's length does not bound its array: the caller bounds `bits` otherwise.
  void require_bit_array_size(std::uint64_t bits, std::size_t word_bytes) const;
  // The bit array written by record_writer::bit_array() as the payload's last field, into
  // `words` (which must hold `bits` bits; bits from `bits` up are left zero): plain in a
  // record of version 3 or earlier (its size checked by require_bit_array_size()),
  // Golomb-coded in one of version 4, the code checked to be well formed and of `set_bits`
  // runs; the caller checks the count of set bits (a plain array's is not known here).
  void read_bit_array(std::span<std::uint64_t> words, std::uint64_t bits, std::uint64_t set_bits);
  void read_bit_array(std::span<std::uint32_t> words, std::uint64_t bits, std::uint64_t set_bits);

  // Throws format_error("<type>: <what>") when `ok` is false: for parameter checks.
  void require(bool ok, std::string_view what) const;

 private:
  template <class T>
  [[nodiscard]] T pod() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  const char* take(std::size_t size);
  template <class Word>
  void read_array(std::span<Word> words, std::uint64_t bits, std::uint64_t set_bits);

  structure_type type_;
  std::uint16_t version_ = 0;
  std::uint64_t seed_ = 0;
  std::string_view payload_;
  std::size_t pos_ = 0;
};

}  // namespace detail
}  // namespace sketch
