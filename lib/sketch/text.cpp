#include "sketch/text.h"

#include <fmt/format.h>

namespace sketch {

std::string escape_controls(std::string_view text, bool escape_backslash) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\\' && escape_backslash) {
      out += "\\\\";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace sketch
