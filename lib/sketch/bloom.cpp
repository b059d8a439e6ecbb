#include "sketch/bloom.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "sketch/serialize.h"

namespace sketch {
namespace {

constexpr std::uint64_t kWordBits = 64;

std::uint64_t word_count(std::uint64_t bits) { return (bits + kWordBits - 1) / kWordBits; }

// Validates the parameters before anything is allocated; returns the number of words.
std::uint64_t checked_words(std::uint64_t bits, std::uint32_t hashes) {
  if (bits < 1 || bits > bloom_filter::kMaxBits) {
    throw std::invalid_argument(
        fmt::format("bloom_filter: bits must be in [1, 2^40] (got {})", bits));
  }
  if (hashes < 1 || hashes > bloom_filter::kMaxHashes) {
    throw std::invalid_argument(fmt::format("bloom_filter: hashes must be in [1, {}] (got {})",
                                            bloom_filter::kMaxHashes, hashes));
  }
  return word_count(bits);
}

// Bit j of the result is bit 2j OR bit 2j+1 of x, for j < 32; the high half is zero.
// (x | x >> 1) puts each pair's OR on its even bit, then the even bits are packed
// together by the classic halving shifts (Warren, "Hacker's Delight", 7-2 "unshuffle").
std::uint64_t fold_adjacent_pairs(std::uint64_t x) noexcept {
  x = (x | (x >> 1)) & 0x5555555555555555ULL;
  x = (x | (x >> 1)) & 0x3333333333333333ULL;
  x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0FULL;
  x = (x | (x >> 4)) & 0x00FF00FF00FF00FFULL;
  x = (x | (x >> 8)) & 0x0000FFFF0000FFFFULL;
  x = (x | (x >> 16)) & 0x00000000FFFFFFFFULL;
  return x;
}

}  // namespace

bloom_filter bloom_filter::for_capacity(std::uint64_t n, double fpr, std::uint64_t seed) {
  const bloom_math::sizing s = bloom_math::suggest_classic(n, fpr);
  return bloom_filter(s.bits, s.hashes, seed);
}

bloom_filter::bloom_filter(std::uint64_t bits, std::uint32_t hashes, std::uint64_t seed)
    : words_(checked_words(bits, hashes), 0), bits_(bits), seed_(seed), hashes_(hashes) {}

void bloom_filter::insert(hash128 h) noexcept {
  index_sequence indices(h, bits_);
  for (std::uint32_t i = 0; i < hashes_; ++i) {
    const std::uint64_t index = indices.next();
    std::uint64_t& word = words_[index / kWordBits];
    const std::uint64_t mask = std::uint64_t{1} << (index % kWordBits);
    bits_set_ += (word & mask) == 0 ? 1 : 0;
    word |= mask;
  }
}

bool bloom_filter::contains(hash128 h) const noexcept {
  index_sequence indices(h, bits_);
  for (std::uint32_t i = 0; i < hashes_; ++i) {
    const std::uint64_t index = indices.next();
    if ((words_[index / kWordBits] >> (index % kWordBits) & 1) == 0) return false;
  }
  return true;
}

bool bloom_filter::test_and_insert(hash128 h) noexcept {
  index_sequence indices(h, bits_);
  bool present = true;
  for (std::uint32_t i = 0; i < hashes_; ++i) {
    const std::uint64_t index = indices.next();
    std::uint64_t& word = words_[index / kWordBits];
    const std::uint64_t mask = std::uint64_t{1} << (index % kWordBits);
    if ((word & mask) == 0) {
      present = false;
      ++bits_set_;
      word |= mask;
    }
  }
  return present;
}

double bloom_filter::fill_ratio() const noexcept {
  return static_cast<double>(bits_set_) / static_cast<double>(bits_);
}

double bloom_filter::estimated_fpr() const noexcept {
  return bloom_math::fpr_from_fill(fill_ratio(), hashes_);
}

double bloom_filter::estimated_items() const noexcept {
  return bloom_math::estimated_items(static_cast<double>(bits_), hashes_, fill_ratio());
}

void bloom_filter::clear() noexcept {
  std::fill(words_.begin(), words_.end(), 0);
  bits_set_ = 0;
}

bool bloom_filter::compatible(const bloom_filter& other) const noexcept {
  return bits_ == other.bits_ && hashes_ == other.hashes_ && seed_ == other.seed_;
}

void bloom_filter::require_compatible(const bloom_filter& other, const char* operation) const {
  if (bits_ != other.bits_) {
    throw std::invalid_argument(
        fmt::format("bloom_filter::{}: incompatible filters: bits differ ({} vs {})", operation,
                    bits_, other.bits_));
  }
  if (hashes_ != other.hashes_) {
    throw std::invalid_argument(
        fmt::format("bloom_filter::{}: incompatible filters: hashes differ ({} vs {})", operation,
                    hashes_, other.hashes_));
  }
  if (seed_ != other.seed_) {
    throw std::invalid_argument(
        fmt::format("bloom_filter::{}: incompatible filters: seeds differ ({:#x} vs {:#x})",
                    operation, seed_, other.seed_));
  }
}

void bloom_filter::union_with(const bloom_filter& other) {
  require_compatible(other, "union_with");
  std::uint64_t set = 0;
  for (std::size_t i = 0; i < words_.size(); ++i) {
    words_[i] |= other.words_[i];
    set += static_cast<std::uint64_t>(std::popcount(words_[i]));
  }
  bits_set_ = set;
}

void bloom_filter::intersect_with(const bloom_filter& other) {
  require_compatible(other, "intersect_with");
  std::uint64_t set = 0;
  for (std::size_t i = 0; i < words_.size(); ++i) {
    words_[i] &= other.words_[i];
    set += static_cast<std::uint64_t>(std::popcount(words_[i]));
  }
  bits_set_ = set;
}

bloom_filter bloom_filter::halved() const {
  if (!std::has_single_bit(bits_) || bits_ < 2 * kWordBits) {
    throw std::invalid_argument(fmt::format(
        "bloom_filter::halved: bits must be a power of two and at least 128 (got {})", bits_));
  }
  bloom_filter half(bits_ / 2, hashes_, seed_);
  // Old bit i goes to new bit i/2: old words 2j and 2j+1 fill the low and high halves of
  // new word j. m >= 128 makes both counts whole words.
  for (std::size_t j = 0; j < half.words_.size(); ++j) {
    half.words_[j] =
        fold_adjacent_pairs(words_[2 * j]) | (fold_adjacent_pairs(words_[2 * j + 1]) << 32);
  }
  half.recount();
  return half;
}

void bloom_filter::recount() noexcept {
  std::uint64_t set = 0;
  for (const std::uint64_t w : words_) set += static_cast<std::uint64_t>(std::popcount(w));
  bits_set_ = set;
}

// Payload (after the common header, whose seed field holds seed()):
//
//   offset  size     field
//   ------  -------  ----------------------------------------------------------------
//        0        8  bits m, 1 <= m <= 2^40
//        8        4  hashes k, 1 <= k <= 64
//       12        8  bits_set: number of set bits (checked against the array on read)
//       20    8 · W  the bit array, W = ceil(m / 64) words, bit i in word i / 64 at bit
//                    position i % 64; bits from m up are zero
// All fields little-endian. In a record of format version 4 the bit array is Golomb-coded
// instead (record_writer::bit_array): u8 1, u64 the parameter, the code to the payload's end.
void bloom_filter::serialize_to(std::string& to, bit_coding coding) const {
  detail::record_writer out(structure_type::bloom_filter, seed_, to);
  out.u64(bits_);
  out.u32(hashes_);
  out.u64(bits_set_);
  out.bit_array(words_, bits_, bits_set_, coding);
  std::move(out).finish_appended();
}

bloom_filter bloom_filter::deserialize(std::string_view record) {
  detail::record_reader in(record, structure_type::bloom_filter);
  const std::uint64_t bits = in.u64();
  const std::uint32_t hashes = in.u32();
  const std::uint64_t bits_set = in.u64();
  in.require(bits >= 1 && bits <= kMaxBits, fmt::format("bits {} is not in [1, 2^40]", bits));
  in.require(hashes >= 1 && hashes <= kMaxHashes,
             fmt::format("hashes {} is not in [1, {}]", hashes, kMaxHashes));
  in.require_bit_array_size(bits, sizeof(std::uint64_t));  // before the array is allocated

  bloom_filter filter(bits, hashes, in.seed());
  in.read_bit_array(filter.words_, bits, bits_set);
  in.done();
  const std::uint64_t used = bits % kWordBits;
  in.require(used == 0 || (filter.words_.back() >> used) == 0,
             fmt::format("bits beyond m = {} are set", bits));
  filter.recount();
  in.require(filter.bits_set_ == bits_set,
             fmt::format("bits_set {} does not match the {} set bits of the array", bits_set,
                         filter.bits_set_));
  return filter;
}

bool operator==(const bloom_filter& a, const bloom_filter& b) noexcept {
  return a.compatible(b) && a.bits_set_ == b.bits_set_ && a.words_ == b.words_;
}

}  // namespace sketch
