#include "sketchd/util/json.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

#include "sketch/text.h"
#include "sketchd/metrics/metrics.h"

namespace sketchd::json {

std::string dump(const nlohmann::json& value) {
  const std::string text =
      value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  // What must be escaped can only be inside strings: the rest of the text is ASCII.
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    unsigned cp = 0;
    if (static_cast<unsigned char>(c) >= 0xc2) {
      if (const std::size_t length = sketch::escaped_character_at(text, i, &cp)) {
        fmt::format_to(std::back_inserter(out), "\\u{:04x}", cp);
        i += length - 1;
        continue;
      }
    }
    if (c == 0x7f) {
      out += "\\u007f";
    } else {
      out += c;
    }
  }
  return out;
}

std::string members(const nlohmann::json& object) {
  std::string text = dump(object);
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return {};
  return text.substr(1, text.size() - 2);
}

void append_string(std::string& out, std::string_view raw) {
  const std::string s = metrics::clean_label_value(raw, raw.size() * 3 + 3);
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    unsigned cp = 0;
    // What acts on a terminal or reorders the text around it is escaped too (valid JSON
    // either way), as in the text log (sketch::escape_controls): a JSON line shown as it is
    // (tail, less, jq) cannot act on the terminal. (`jq -r` decodes the escapes again.)
    if (static_cast<unsigned char>(c) >= 0xc2) {
      if (const std::size_t length = sketch::escaped_character_at(s, i, &cp)) {
        fmt::format_to(std::back_inserter(out), "\\u{:04x}", cp);
        i += length - 1;
        continue;
      }
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
  } else if (v == std::floor(v) && std::fabs(v) < 9e15) {
    fmt::format_to(std::back_inserter(out), "{}", static_cast<long long>(v));
  } else {
    fmt::format_to(std::back_inserter(out), "{}", v);
  }
}

}  // namespace sketchd::json
