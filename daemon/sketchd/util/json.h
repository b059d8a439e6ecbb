// Writing JSON for the HTTP API, alert events and the JSON log. Reading JSON is simdjson's
// job; writing is nlohmann::json's, through dump() here, which makes any bytes safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace sketchd::json {

// `value` as JSON text on one line (RFC 8259), whatever bytes its strings hold: bytes that
// are not valid UTF-8 become U+FFFD (nlohmann's error_handler_t::replace), and the
// characters that act on a terminal or reorder the text around them (DEL, the C1 controls,
// U+2028, U+2029 and the bidirectional controls, as sketch::escape_controls) are written
// as \uNNNN, so that a JSON line shown as it is (tail, less, jq) cannot act on the
// terminal. Never throws for a string's content.
[[nodiscard]] std::string dump(const nlohmann::json& value);

// The members of the JSON object `object` without its braces, as log_fields takes them
// (`"pipeline":"clicks","skipped":3`); empty for an empty object.
[[nodiscard]] std::string members(const nlohmann::json& object);

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
