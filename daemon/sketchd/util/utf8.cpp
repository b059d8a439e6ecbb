#include "sketchd/util/utf8.h"

#include <simdjson.h>

#include <algorithm>

namespace sketchd::utf8 {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t sequence_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char c = b(i);
  const std::size_t left = s.size() - i;
  if (c < 0x80) return 1;
  const auto cont = [&](std::size_t j) { return j < s.size() && (b(j) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

bool valid(std::string_view s) noexcept { return simdjson::validate_utf8(s.data(), s.size()); }

std::string clean(std::string_view raw, std::size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(std::min(raw.size(), max_bytes));
  for (std::size_t i = 0; i < raw.size();) {
    const std::size_t n = sequence_length(raw, i);
    const std::string_view piece = n ? raw.substr(i, n) : kReplacement;
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += n ? n : 1;
  }
  return out;
}

}  // namespace sketchd::utf8
