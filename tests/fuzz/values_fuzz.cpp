// The small parsers and cleaners that take user bytes: durations, counts, reals and
// ${VAR} substitution of the configuration; label values, JSON strings and log items
// made of item bytes. Whatever the bytes: no crash, the documented exception or a result
// with the documented properties.
//
// Input: the whole input is given to every function.
#include <simdjson.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz.h"
#include "sketch/text.h"
#include "sketchd/config/config.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace {

bool valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

bool has_control_bytes(std::string_view s) {
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  try {
    const auto d = sketchd::parse_duration(text);
    FUZZ_CHECK(d.count() >= 0);
    FUZZ_CHECK(sketchd::parse_duration(sketchd::format_duration(d)) == d);
  } catch (const std::invalid_argument&) {
  }
  try {
    (void)sketchd::parse_count(text);
  } catch (const std::invalid_argument&) {
  }
  try {
    FUZZ_CHECK(std::isfinite(sketchd::parse_real(text)));
  } catch (const std::invalid_argument&) {
  }
  try {
    const std::string out = sketchd::substitute_variables(text, fuzz_env);
    if (text.find('$') == std::string_view::npos) FUZZ_CHECK(out == text);
  } catch (const sketchd::substitution_error& e) {
    FUZZ_CHECK(e.offset() < text.size());
  }

  for (const std::size_t max : {std::size_t{128}, std::size_t{3}}) {
    const std::string label = sketchd::metrics::clean_label_value(text, max);
    FUZZ_CHECK(valid_utf8(label));
    FUZZ_CHECK(label.size() <= max);
    if (valid_utf8(text) && text.size() <= max) FUZZ_CHECK(label == text);
  }

  const std::string quoted = sketchd::json::dump(nlohmann::json(text));
  simdjson::dom::parser parser;
  std::string_view parsed;
  FUZZ_CHECK(parser.parse(quoted).get_string().get(parsed) == simdjson::SUCCESS);
  if (valid_utf8(text)) FUZZ_CHECK(parsed == text);
  // Nothing in it acts on a terminal: the text log's escaping finds nothing to escape.
  FUZZ_CHECK(sketch::escape_controls(quoted) == quoted);

  const std::string logged = sketchd::loggable_item(text);
  FUZZ_CHECK(valid_utf8(logged));
  FUZZ_CHECK(!has_control_bytes(logged));
  return 0;
}
