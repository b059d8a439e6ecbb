// Writing JSON for the HTTP API, alert events and the JSON log. Reading JSON is simdjson's
// job; writing is nlohmann::json's, through dump() here, which makes any bytes safe.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sketchd::json {

// `value` as JSON text on one line (RFC 8259), whatever bytes its strings hold: they are
// cleaned as utf8::clean does (each byte that does not begin a valid sequence becomes
// U+FFFD), and the characters that act on a terminal or reorder the text around them (DEL,
// the C1 controls, U+2028, U+2029 and the bidirectional controls, as
// sketch::escape_controls) are written as \uNNNN, so that a JSON line shown as it is (tail,
// less, jq) cannot act on the terminal. An ordered_json keeps its members in the order
// they were set (a json sorts them). Never throws for a string's content.
[[nodiscard]] std::string dump(const nlohmann::json& value);

// The members of the JSON object `object` without its braces, as log_fields takes them
// (`"pipeline":"clicks","skipped":3`); empty for an empty object.
[[nodiscard]] std::string members(const nlohmann::json& object);

// dump() and members() of an ordered_json. Templates, so that a braced list
// (`dump({{"k", 1}})`) still means a json.
template <typename Json>
requires std::same_as<Json, nlohmann::ordered_json>
[[nodiscard]] std::string dump(const Json& value);
template <typename Json>
requires std::same_as<Json, nlohmann::ordered_json>
[[nodiscard]] std::string members(const Json& object);

// `v` as a JSON value, an ordered_json unless asked otherwise (the daemon's writers keep
// their members in order): an integral value as an integer ("3", not nlohmann's "3.0"; from
// 1e16 on with an exponent), others in shortest round-trip form, non-finite ones as null.
template <typename Json = nlohmann::ordered_json>
[[nodiscard]] Json number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e16)
    return Json(static_cast<std::int64_t>(v));
  return Json(v);
}

}  // namespace sketchd::json
