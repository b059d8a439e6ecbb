// Writing JSON for the HTTP API and for alert events. Reading JSON is simdjson's job;
// writing needs only correct string escaping, which this does (RFC 8259 §7).
#pragma once

#include <string>
#include <string_view>

namespace sketchd::json {

// Appends `s` as a JSON string literal: quotes, backslashes and control characters are
// escaped (DEL, the C1 controls, U+2028, U+2029 and the bidirectional controls too, as
// sketch::escape_controls does), and bytes that are not valid UTF-8 become U+FFFD, so the
// output is always valid JSON whatever the item bytes were.
void append_string(std::string& out, std::string_view s);

[[nodiscard]] inline std::string quote(std::string_view s) {
  std::string out;
  append_string(out, s);
  return out;
}

// A number as JSON: finite values in shortest round-trip form, non-finite ones as null.
void append_number(std::string& out, double v);

}  // namespace sketchd::json
