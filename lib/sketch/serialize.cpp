#include "sketch/serialize.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>

#include "sketch/golomb.h"

namespace sketch {

const char* to_string(structure_type type) noexcept {
  switch (type) {
    case structure_type::bloom_filter:
      return "bloom filter";
    case structure_type::blocked_bloom_filter:
      return "blocked bloom filter";
    case structure_type::counting_bloom_filter:
      return "counting bloom filter";
    case structure_type::count_min_sketch:
      return "count-min sketch";
    case structure_type::top_k:
      return "top-k tracker";
    case structure_type::rolling_count_min:
      return "rolling count-min sketch";
    case structure_type::rolling_bloom:
      return "rolling bloom filter";
  }
  return "unknown structure";
}

double expected_smaller_bits(std::uint64_t bits, double set_share) noexcept {
  const double plain = 64.0 * static_cast<double>((bits + 63) / 64);
  if (!(set_share < kCodedDenseShare)) return plain;
  if (!(set_share > 0)) return std::min(plain, 8.0 * (1 + 8));  // the coding byte and M only
  const double zeros = 1 - set_share;
  const double code = 8.0 * (1 + 8) + set_share * static_cast<double>(bits) *
                                          golomb_bits_per_run(zeros, golomb_parameter(zeros));
  return std::min(plain, 8.0 * std::ceil(code / 8));
}

namespace detail {
namespace {

// "a count-min sketch", "an unknown structure".
std::string with_article(structure_type type) {
  const std::string_view name = to_string(type);
  const bool vowel = std::string_view("aeiou").find(name.front()) != std::string_view::npos;
  return fmt::format("{} {}", vowel ? "an" : "a", name);
}

}  // namespace

record_writer::record_writer(structure_type type, std::uint64_t seed, std::string* out)
    : out_(out ? out : &own_), start_(out_->size()) {
  out_->append(kMagic, sizeof kMagic);
  u16(kFormatVersion);
  u16(static_cast<std::uint16_t>(type));
  u64(seed);
  u64(0);  // payload length, patched by complete()
}

void record_writer::complete() {
  char* record = out_->data() + start_;
  const std::size_t size = out_->size() - start_;
  const std::uint64_t length = size - kHeaderSize;
  std::memcpy(record + 16, &length, sizeof length);
  const std::uint64_t checksum = XXH64(record, size, 0);
  u64(checksum);
}

void record_writer::coded() noexcept {
  std::memcpy(out_->data() + start_ + 4, &kCodedFormatVersion, sizeof kCodedFormatVersion);
}

namespace {
// The Golomb coding byte of a version 4 bit array.
constexpr std::uint8_t kGolomb = 1;
}  // namespace

template <class Word>
bool record_writer::write_bit_array(std::span<const Word> words, std::uint64_t bits,
                                    std::uint64_t set_bits, bit_coding coding) {
  const std::size_t plain = words.size() * sizeof(Word);
  const double share = bits == 0 ? 0 : static_cast<double>(set_bits) / static_cast<double>(bits);
  if (coding == bit_coding::golomb || (coding == bit_coding::smaller && share < kCodedDenseShare)) {
    const std::size_t at = out_->size();
    const std::uint64_t parameter = golomb_parameter(1 - share);
    u8(kGolomb);
    u64(parameter);
    golomb_encode(words, bits, parameter, *out_);
    if (coding == bit_coding::golomb || out_->size() - at < plain) {
      coded();
      return true;
    }
    out_->resize(at);
  }
  raw(words.data(), plain);
  return false;
}

bool record_writer::bit_array(std::span<const std::uint64_t> words, std::uint64_t bits,
                              std::uint64_t set_bits, bit_coding coding) {
  return write_bit_array(words, bits, set_bits, coding);
}
bool record_writer::bit_array(std::span<const std::uint32_t> words, std::uint64_t bits,
                              std::uint64_t set_bits, bit_coding coding) {
  return write_bit_array(words, bits, set_bits, coding);
}

std::string record_writer::finish() && {
  complete();
  return std::move(own_);
}

void record_writer::finish_appended() && { complete(); }

record_reader::record_reader(std::string_view input, structure_type expected) : type_(expected) {
  const char* what = to_string(expected);
  if (input.size() < kHeaderSize + kTrailerSize) {
    throw format_error(fmt::format("{}: input of {} bytes is truncated (a record has at least {})",
                                   what, input.size(), kHeaderSize + kTrailerSize));
  }
  if (std::memcmp(input.data(), kMagic, sizeof kMagic) != 0) {
    throw format_error(fmt::format("{}: not a sketch record (bad magic)", what));
  }
  std::uint16_t version = 0;
  std::uint16_t type = 0;
  std::uint64_t length = 0;
  std::memcpy(&version, input.data() + 4, 2);
  version_ = version;
  std::memcpy(&type, input.data() + 6, 2);
  std::memcpy(&seed_, input.data() + 8, 8);
  std::memcpy(&length, input.data() + 16, 8);
  // Version 2 differs from 3 only where the index sequence is used, version 4 from 3 only
  // in the Bloom filters' coded bit arrays (serialize.h).
  const bool same_since_2 = expected == structure_type::blocked_bloom_filter ||
                            expected == structure_type::rolling_bloom ||
                            expected == structure_type::top_k;
  const bool codes = expected == structure_type::bloom_filter ||
                     expected == structure_type::blocked_bloom_filter ||
                     expected == structure_type::rolling_bloom;
  const std::uint16_t oldest = same_since_2 ? 2 : kFormatVersion;
  const std::uint16_t newest = codes ? kCodedFormatVersion : kFormatVersion;
  if (version < oldest || version > newest) {
    throw format_version_error(fmt::format(
        "{}: format version {} is not supported (this build reads {})", what, version,
        oldest == newest ? fmt::format("{}", oldest) : fmt::format("{} to {}", oldest, newest)));
  }
  // The length and the checksum before the type: a flipped bit in the type field is
  // corruption, to be reported as such, not as a record of another structure.
  if (length > input.size() - kHeaderSize - kTrailerSize) {
    throw format_error(fmt::format("{}: truncated: payload of {} bytes announced, {} present", what,
                                   length, input.size() - kHeaderSize - kTrailerSize));
  }
  if (length < input.size() - kHeaderSize - kTrailerSize) {
    throw format_error(fmt::format("{}: {} unexpected bytes after the record", what,
                                   input.size() - kHeaderSize - kTrailerSize - length));
  }
  std::uint64_t stored = 0;
  std::memcpy(&stored, input.data() + kHeaderSize + length, 8);
  // A fuzzing build (tests/fuzz/) reads past a wrong checksum, to reach the payload's checks.
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (XXH64(input.data(), kHeaderSize + length, 0) != stored) {
    throw format_error(fmt::format("{}: checksum mismatch (the data is corrupt)", what));
  }
#endif
  if (type != static_cast<std::uint16_t>(expected)) {
    throw format_error(fmt::format("{}: the record holds {} (type {})", what,
                                   with_article(static_cast<structure_type>(type)), type));
  }
  payload_ = input.substr(kHeaderSize, static_cast<std::size_t>(length));
}

const char* record_reader::take(std::size_t size) {
  if (size > payload_.size() - pos_) {
    throw format_error(fmt::format("{}: payload ends early (wanted {} bytes at offset {}, has {})",
                                   to_string(type_), size, pos_, payload_.size() - pos_));
  }
  const char* p = payload_.data() + pos_;
  pos_ += size;
  return p;
}

namespace {
std::uint64_t plain_bytes(std::uint64_t bits, std::size_t word_bytes) {
  return (bits + word_bytes * 8 - 1) / (word_bytes * 8) * word_bytes;
}
}  // namespace

void record_reader::require_bit_array_size(std::uint64_t bits, std::size_t word_bytes) const {
  if (version_ >= kCodedFormatVersion) return;
  const std::uint64_t plain = plain_bytes(bits, word_bytes);
  require(remaining() == plain,
          fmt::format("the bit array holds {} bytes, {} bits need {}", remaining(), bits, plain));
}

template <class Word>
void record_reader::read_array(std::span<Word> words, std::uint64_t bits, std::uint64_t set_bits) {
  if (version_ < kCodedFormatVersion) {
    // Sized by require_bit_array_size(); a shorter payload ends early here, a longer one at
    // done().
    bytes(words.data(), static_cast<std::size_t>(plain_bytes(bits, sizeof(Word))));
    return;
  }
  const std::uint8_t coding = u8();
  require(coding == kGolomb, fmt::format("bit array coding {} is not Golomb (1)", coding));
  const std::uint64_t parameter = u64();
  require(parameter >= 1 && parameter <= bits,
          fmt::format("Golomb parameter {} is not in [1, {}]", parameter, bits));
  require(set_bits <= bits, fmt::format("{} set bits, more than the {} bits", set_bits, bits));
  const std::string_view code = view(remaining());
  require(golomb_decode(code, parameter, set_bits, bits, words),
          fmt::format("the Golomb code of {} bytes is not {} runs within {} bits", code.size(),
                      set_bits, bits));
}

void record_reader::read_bit_array(std::span<std::uint64_t> words, std::uint64_t bits,
                                   std::uint64_t set_bits) {
  read_array(words, bits, set_bits);
}
void record_reader::read_bit_array(std::span<std::uint32_t> words, std::uint64_t bits,
                                   std::uint64_t set_bits) {
  read_array(words, bits, set_bits);
}

void record_reader::done() const {
  if (pos_ != payload_.size()) {
    throw format_error(
        fmt::format("{}: {} payload bytes left unread", to_string(type_), payload_.size() - pos_));
  }
}

void record_reader::require(bool ok, std::string_view what) const {
  if (!ok) throw format_error(fmt::format("{}: {}", to_string(type_), what));
}

}  // namespace detail
}  // namespace sketch
