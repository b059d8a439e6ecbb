#include "sketch/golomb.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>

#include "sketch/hash.h"

namespace sketch {
namespace {

// The largest parameter chosen: a run is shorter than the largest array (2^40 bits), and
// the remainder's field (at most 40 bits) fits the writer's 56-bit puts.
constexpr std::uint64_t kMaxParameter = std::uint64_t{1} << 40;

// Appends bits least significant first, 8 bytes at a time; at most 56 bits per put().
class bit_writer {
 public:
  explicit bit_writer(std::string& out) : out_(out) {}

  void put(std::uint64_t value, unsigned count) {
    buffer_ |= value << fill_;
    fill_ += count;
    if (fill_ >= 64) {
      append(buffer_);
      fill_ -= 64;
      // The bits of `value` that did not fit (count − fill_ of them went in).
      buffer_ = fill_ == 0 ? 0 : value >> (count - fill_);
    }
  }
  void ones(std::uint64_t count) {
    constexpr unsigned kChunk = 56;
    for (; count >= kChunk; count -= kChunk) put((std::uint64_t{1} << kChunk) - 1, kChunk);
    put((std::uint64_t{1} << count) - 1, static_cast<unsigned>(count));
  }
  // Writes the bits left, the last byte padded with zero bits.
  void finish() {
    for (; fill_ > 0; fill_ = fill_ > 8 ? fill_ - 8 : 0) {
      out_.push_back(static_cast<char>(buffer_ & 0xff));
      buffer_ >>= 8;
    }
    buffer_ = 0;
  }

 private:
  void append(std::uint64_t word) {
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((word >> (8 * i)) & 0xff);
    out_.append(bytes, 8);
  }

  std::string& out_;
  std::uint64_t buffer_ = 0;
  unsigned fill_ = 0;  // bits in buffer_, < 64 between puts
};

// Reads what bit_writer wrote.
class bit_reader {
 public:
  explicit bit_reader(std::string_view in)
      : next_(reinterpret_cast<const unsigned char*>(in.data())), end_(next_ + in.size()) {}

  // The next `count` (≤ 56) bits; false when the input ends first.
  bool get(unsigned count, std::uint64_t& value) {
    if (fill_ < count) refill();
    if (fill_ < count) return false;
    value = buffer_ & ((std::uint64_t{1} << count) - 1);
    buffer_ >>= count;
    fill_ -= count;
    return true;
  }
  // The number of 1 bits before the next 0 bit, which it consumes; false when the input
  // ends first or the count exceeds `limit`.
  bool unary(std::uint64_t limit, std::uint64_t& count) {
    count = 0;
    for (;;) {
      if (fill_ < 57) refill();
      if (fill_ == 0) return false;
      const auto run = static_cast<unsigned>(std::countr_one(buffer_));  // ≤ fill_: zeros above
      if (run < fill_) {
        count += run;
        buffer_ = run + 1 == 64 ? 0 : buffer_ >> (run + 1);
        fill_ -= run + 1;
        return count <= limit;
      }
      count += fill_;
      buffer_ = 0;
      fill_ = 0;
      if (count > limit) return false;
    }
  }
  // One Golomb run when the buffer holds its whole code (the common case: a run's code is a
  // few bits): `ones` 1 bits, a 0, then the remainder field of `width` = ⌈log2 M⌉ bits
  // (`width` − 1 below `cut`). False, having read nothing, when it does not; the caller then
  // reads the same bits the long way (unary(), get()).
  bool golomb_run(std::uint64_t parameter, unsigned width, std::uint64_t cut, std::uint64_t& run) {
    if (fill_ < 57) refill();
    const auto ones = static_cast<unsigned>(std::countr_one(buffer_));
    if (ones + 1 + width > fill_) return false;  // also when the buffer is all ones
    unsigned used = ones + 1;
    std::uint64_t remainder = 0;
    if (width > 0) {
      const std::uint64_t field = buffer_ >> used;  // used < 64: used + width ≤ fill_ ≤ 64
      remainder = field & ((std::uint64_t{1} << (width - 1)) - 1);
      used += width - 1;
      if (remainder >= cut) {
        remainder = ((remainder << 1) | ((field >> (width - 1)) & 1)) - cut;
        ++used;
      }
    }
    buffer_ = used == 64 ? 0 : buffer_ >> used;
    fill_ -= used;
    run = ones * parameter + remainder;
    return true;
  }

  // True when what is left is the zero padding of the last byte only.
  [[nodiscard]] bool at_padding() const { return next_ == end_ && fill_ < 8 && buffer_ == 0; }

 private:
  // Tops the buffer up to at least 57 bits, or to the end of the input.
  void refill() {
    if (end_ - next_ >= 8) {
      std::uint64_t word = 0;
      for (int i = 0; i < 8; ++i) word |= static_cast<std::uint64_t>(next_[i]) << (8 * i);
      buffer_ |= word << fill_;
      const unsigned bytes = (63 - fill_) / 8;
      next_ += bytes;
      fill_ += bytes * 8;
      buffer_ &= fill_ == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << fill_) - 1;
      return;
    }
    while (fill_ <= 56 && next_ != end_) {
      buffer_ |= static_cast<std::uint64_t>(*next_++) << fill_;
      fill_ += 8;
    }
  }

  const unsigned char* next_;
  const unsigned char* end_;
  std::uint64_t buffer_ = 0;
  unsigned fill_ = 0;
};

// The remainder's field: r mod M in truncated binary, `width` = ⌈log2 M⌉ bits, the first
// `cut` = 2^width − M values in width − 1 bits.
struct remainder_field {
  explicit remainder_field(std::uint64_t parameter)
      : width(static_cast<unsigned>(std::bit_width(parameter - 1))),
        cut((std::uint64_t{1} << width) - parameter) {}
  unsigned width;
  std::uint64_t cut;
};

template <class Word>
std::uint64_t encode(std::span<const Word> words, std::uint64_t bits, std::uint64_t parameter,
                     std::string& out) {
  constexpr std::uint64_t kWordBits = sizeof(Word) * 8;
  const remainder_field field(parameter);
  // ⌊(2^64 − 1) / M⌋: for a run below 2^40 (an array's), ⌊run · reciprocal / 2^64⌋ falls
  // short of run / M by under run / 2^64 < 2^−24, so it is ⌊run / M⌋ or one less.
  const std::uint64_t reciprocal = ~std::uint64_t{0} / parameter;
  bit_writer writer(out);
  std::uint64_t next = 0;  // the position after the previous set bit
  std::uint64_t set = 0;
  const std::size_t used = static_cast<std::size_t>((bits + kWordBits - 1) / kWordBits);
  for (std::size_t i = 0; i < used; ++i) {
    for (Word word = words[i]; word != 0; word &= static_cast<Word>(word - 1)) {
      const std::uint64_t position = i * kWordBits + static_cast<unsigned>(std::countr_zero(word));
      const std::uint64_t run = position - next;
      // run / M by the reciprocal: the quotient or one less, corrected without a branch (a
      // division took a third of the encoder's time).
      std::uint64_t quotient = reduce(run, reciprocal);  // ⌊run · reciprocal / 2^64⌋
      std::uint64_t remainder = run - quotient * parameter;
      const bool short_by_one = remainder >= parameter;
      quotient += short_by_one ? 1 : 0;
      remainder -= short_by_one ? parameter : 0;
      // The remainder's field, high part first: the value to put, least significant first.
      // (Without a branch: which of the two lengths a remainder takes is a coin toss.)
      const bool longer = field.width > 0 && remainder >= field.cut;
      const std::uint64_t y = remainder + field.cut;  // width bits when longer
      const std::uint64_t tail = longer ? (y >> 1) | ((y & 1) << (field.width - 1)) : remainder;
      const unsigned tail_bits = (field.width == 0 ? 0 : field.width - 1) + (longer ? 1 : 0);
      if (quotient + 1 + tail_bits <= 56) {
        // The whole code in one put: quotient 1 bits, a 0, the field.
        writer.put(((std::uint64_t{1} << quotient) - 1) | (tail << (quotient + 1)),
                   static_cast<unsigned>(quotient + 1 + tail_bits));
      } else {
        writer.ones(quotient);
        writer.put(0, 1);
        writer.put(tail, tail_bits);
      }
      next = position + 1;
      ++set;
    }
  }
  writer.finish();
  return set;
}

template <class Word>
bool decode(std::string_view code, std::uint64_t parameter, std::uint64_t set_bits,
            std::uint64_t bits, std::span<Word> words) {
  constexpr std::uint64_t kWordBits = sizeof(Word) * 8;
  std::fill(words.begin(), words.end(), Word{0});
  if (parameter == 0 || set_bits > bits || words.size() * kWordBits < bits) return false;
  const remainder_field field(parameter);
  bit_reader reader(code);
  std::uint64_t next = 0;
  for (std::uint64_t i = 0; i < set_bits; ++i) {
    // The run ends at a bit below `bits`: run ≤ bits − 1 − next.
    if (next >= bits) return false;
    const std::uint64_t room = bits - 1 - next;
    std::uint64_t run = 0;
    if (!reader.golomb_run(parameter, field.width, field.cut, run)) {
      std::uint64_t quotient = 0;
      if (!reader.unary(room / parameter, quotient)) return false;
      std::uint64_t remainder = 0;
      if (field.width > 0) {
        if (!reader.get(field.width - 1, remainder)) return false;
        if (remainder >= field.cut) {
          std::uint64_t low = 0;
          if (!reader.get(1, low)) return false;
          remainder = ((remainder << 1) | low) - field.cut;
        }
      }
      run = quotient * parameter + remainder;
    }
    if (run > room) return false;
    const std::uint64_t position = next + run;
    words[static_cast<std::size_t>(position / kWordBits)] |=
        static_cast<Word>(static_cast<Word>(1) << (position % kWordBits));
    next = position + 1;
  }
  return reader.at_padding();
}

}  // namespace

double golomb_bits_per_run(double zero_fraction, std::uint64_t parameter) noexcept {
  const double p = zero_fraction;
  const double pm = std::pow(p, static_cast<double>(parameter));
  double bits = pm / (1 - pm) + 1;  // E[⌊r/M⌋] = p^M / (1 − p^M), and the unary's end
  if (parameter > 1) {
    const int width = std::bit_width(parameter - 1);
    const std::uint64_t cut = (std::uint64_t{1} << width) - parameter;
    // P(r mod M < cut) = (1 − p^cut) / (1 − p^M): those remainders take one bit less.
    bits += width - (1 - std::pow(p, static_cast<double>(cut))) / (1 - pm);
  }
  return bits;
}

std::uint64_t golomb_parameter(double zero_fraction) noexcept {
  const double p = zero_fraction;
  if (!(p > 0.5)) return 1;  // p^1 + p^2 ≤ 1 for p ≤ 0.618…; p ≤ 1/2 as well
  if (!(p < 1)) return 1;
  // The least M with p^M (1 + p) ≤ 1: M ≥ −log(1 + p) / log(p), then checked around it
  // against rounding.
  const double estimate = std::ceil(-std::log1p(p) / std::log(p));
  auto m =
      static_cast<std::uint64_t>(std::clamp(estimate, 1.0, static_cast<double>(kMaxParameter)));
  const auto fits = [p](std::uint64_t c) {
    return std::pow(p, static_cast<double>(c)) * (1 + p) <= 1;
  };
  while (m > 1 && fits(m - 1)) --m;
  while (m < kMaxParameter && !fits(m)) ++m;
  return m;
}

std::uint64_t golomb_encode(std::span<const std::uint64_t> words, std::uint64_t bits,
                            std::uint64_t parameter, std::string& out) {
  return encode(words, bits, parameter, out);
}
std::uint64_t golomb_encode(std::span<const std::uint32_t> words, std::uint64_t bits,
                            std::uint64_t parameter, std::string& out) {
  return encode(words, bits, parameter, out);
}
bool golomb_decode(std::string_view code, std::uint64_t parameter, std::uint64_t set_bits,
                   std::uint64_t bits, std::span<std::uint64_t> words) {
  return decode(code, parameter, set_bits, bits, words);
}
bool golomb_decode(std::string_view code, std::uint64_t parameter, std::uint64_t set_bits,
                   std::uint64_t bits, std::span<std::uint32_t> words) {
  return decode(code, parameter, set_bits, bits, words);
}

}  // namespace sketch
