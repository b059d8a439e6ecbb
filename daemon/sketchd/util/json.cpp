#include "sketchd/util/json.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

#include "sketch/text.h"
#include "sketchd/util/utf8.h"

namespace sketchd::json {

namespace {

// Whether every string of `value`, and every member name, is valid UTF-8.
template <typename Json>
bool all_text(const Json& value) {
  if (value.is_string()) return utf8::valid(value.template get_ref<const std::string&>());
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!utf8::valid(it.key()) || !all_text(it.value())) return false;
    }
  } else if (value.is_array()) {
    for (const auto& element : value) {
      if (!all_text(element)) return false;
    }
  }
  return true;
}

// `value` with its strings and member names cleaned (utf8::clean).
template <typename Json>
Json cleaned(const Json& value) {
  if (value.is_string()) return utf8::clean(value.template get_ref<const std::string&>());
  if (value.is_object()) {
    Json out = Json::object();
    for (auto it = value.begin(); it != value.end(); ++it)
      out[utf8::clean(it.key())] = cleaned(it.value());
    return out;
  }
  if (value.is_array()) {
    Json out = Json::array();
    for (const auto& element : value) out.push_back(cleaned(element));
    return out;
  }
  return value;
}

// `text`, valid UTF-8, with what acts on a terminal written as \uNNNN. What must be escaped
// can only be inside strings: the rest of the text is ASCII.
std::string escape_terminal_controls(const std::string& text) {
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

template <typename Json>
std::string dump_text(const Json& value) {
  // Cleaned first, so that invalid bytes become what utf8::clean makes of them everywhere
  // (nlohmann's own replacement takes a cut sequence as one character). The replace
  // handler is never used then; it is there so that nothing can throw.
  const auto text = [](const Json& v) {
    return v.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
  };
  return escape_terminal_controls(all_text(value) ? text(value) : text(cleaned(value)));
}

template <typename Json>
std::string members_text(const Json& object) {
  std::string text = dump_text(object);
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return {};
  return text.substr(1, text.size() - 2);
}

}  // namespace

std::string dump(const nlohmann::json& value) { return dump_text(value); }
std::string members(const nlohmann::json& object) { return members_text(object); }

template <typename Json>
requires std::same_as<Json, nlohmann::ordered_json> std::string dump(const Json& value) {
  return dump_text(value);
}
template <typename Json>
requires std::same_as<Json, nlohmann::ordered_json> std::string members(const Json& object) {
  return members_text(object);
}
template std::string dump<nlohmann::ordered_json>(const nlohmann::ordered_json&);
template std::string members<nlohmann::ordered_json>(const nlohmann::ordered_json&);

}  // namespace sketchd::json
