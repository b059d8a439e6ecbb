#include "sketch/text.h"

#include <fmt/format.h>

namespace sketch {

// The characters escaped: the C1 controls U+0080..U+009F (U+009B is a terminal's CSI), the
// line and paragraph separators U+2028 and U+2029, and the bidirectional marks, embeddings,
// overrides and isolates (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), which
// reorder the text shown around them.
std::size_t escaped_character_at(std::string_view text, std::size_t i, unsigned* cp) {
  const auto at = [&](std::size_t j) { return static_cast<unsigned char>(text[j]); };
  if (at(i) == 0xc2 && i + 1 < text.size() && at(i + 1) >= 0x80 && at(i + 1) <= 0x9f) {
    *cp = at(i + 1);
    return 2;
  }
  if (at(i) == 0xd8 && i + 1 < text.size() && at(i + 1) == 0x9c) {
    *cp = 0x061c;
    return 2;
  }
  if (at(i) == 0xe2 && i + 2 < text.size()) {
    const unsigned code = 0x2000 | ((at(i + 1) & 0x3fu) << 6) | (at(i + 2) & 0x3fu);
    const bool continuation = (at(i + 1) & 0xc0) == 0x80 && (at(i + 2) & 0xc0) == 0x80;
    if (continuation && (code == 0x200e || code == 0x200f || (code >= 0x2028 && code <= 0x202e) ||
                         (code >= 0x2066 && code <= 0x2069))) {
      *cp = code;
      return 3;
    }
  }
  return 0;
}

std::string escape_controls(std::string_view text, bool escape_backslash) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    const auto byte = static_cast<unsigned char>(ch);
    unsigned cp = 0;
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\\' && escape_backslash) {
      out += "\\\\";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else if (const std::size_t length = byte >= 0xc2 ? escaped_character_at(text, i, &cp) : 0) {
      out += fmt::format("\\u{:04x}", cp);
      i += length - 1;
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace sketch
