#include "sketchd/util/json.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

#include "sketchd/metrics/metrics.h"

namespace sketchd::json {

void append_string(std::string& out, std::string_view raw) {
  const std::string s = metrics::clean_label_value(raw, raw.size() * 3 + 3);
  out += '"';
  for (char c : s) {
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
        if (static_cast<unsigned char>(c) < 0x20) {
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
