#include "sketchd/pipeline/extractor.h"

#include <simdjson.h>

#include <array>
#include <charconv>
#include <cstring>

namespace sketchd {

std::string_view to_string(extract_failure f) noexcept {
  switch (f) {
    case extract_failure::none: return "none";
    case extract_failure::invalid_json: return "invalid_json";
    case extract_failure::missing_field: return "missing_field";
    case extract_failure::not_scalar: return "not_scalar";
    case extract_failure::empty_item: return "empty_item";
    case extract_failure::oversized: return "oversized";
  }
  return "unknown";
}

struct extractor::json_state {
  simdjson::dom::parser parser;
  std::vector<char> padded;  // the message copied with SIMDJSON_PADDING bytes after it
  std::array<char, 32> scalar_text{};  // a number printed back as text, shortest form

  template <class T>
  std::string_view print(T v) noexcept {
    const auto r = std::to_chars(scalar_text.data(), scalar_text.data() + scalar_text.size(), v);
    return {scalar_text.data(), static_cast<std::size_t>(r.ptr - scalar_text.data())};
  }
};

namespace {
constexpr std::size_t kInitialJsonCapacity = 64 * 1024;
}

extractor::extractor(extractor_options options) : options_(std::move(options)) {
  if (options_.from == item_source::json) {
    json_ = std::make_unique<json_state>();
    json_->padded.resize(kInitialJsonCapacity + simdjson::SIMDJSON_PADDING);
    if (json_->parser.allocate(kInitialJsonCapacity) != simdjson::SUCCESS) throw std::bad_alloc();
  }
}

extractor::~extractor() = default;
extractor::extractor(extractor&&) noexcept = default;
extractor& extractor::operator=(extractor&&) noexcept = default;

extract_result extractor::finish(std::string_view item) const noexcept {
  if (item.empty()) return {{}, extract_failure::empty_item};
  if (item.size() > options_.max_item_bytes) return {{}, extract_failure::oversized};
  return {item, extract_failure::none};
}

extract_result extractor::extract(const message_view& message) noexcept {
  switch (options_.from) {
    case item_source::key:
      if (!message.has_key) return {{}, extract_failure::missing_field};
      return finish(message.key);
    case item_source::value:
      return finish(message.value);
    case item_source::header: {
      std::string_view value;
      if (message.find_header == nullptr ||
          !message.find_header(message.header_context, options_.header_name, &value)) {
        return {{}, extract_failure::missing_field};
      }
      return finish(value);
    }
    case item_source::json:
      return extract_json(message.value);
  }
  return {{}, extract_failure::missing_field};
}

extract_result extractor::extract_json(std::string_view value) noexcept {
  json_state& js = *json_;
  // Growing happens only for a message larger than every earlier one: amortised, and
  // bounded by the broker's maximum message size.
  try {
    if (value.size() + simdjson::SIMDJSON_PADDING > js.padded.size()) {
      js.padded.resize(value.size() + simdjson::SIMDJSON_PADDING);
    }
  } catch (const std::bad_alloc&) {
    return {{}, extract_failure::oversized};
  }
  std::memcpy(js.padded.data(), value.data(), value.size());
  std::memset(js.padded.data() + value.size(), 0, simdjson::SIMDJSON_PADDING);

  simdjson::dom::element root;
  if (js.parser.parse(js.padded.data(), value.size(), false).get(root) != simdjson::SUCCESS) {
    return {{}, extract_failure::invalid_json};
  }
  simdjson::dom::element field;
  const auto found = root.at_pointer(options_.json_pointer).get(field);
  if (found != simdjson::SUCCESS) {
    // NO_SUCH_FIELD, INDEX_OUT_OF_BOUNDS, or a pointer that walks into a scalar.
    return {{}, extract_failure::missing_field};
  }
  switch (field.type()) {
    case simdjson::dom::element_type::STRING: {
      std::string_view s;
      if (field.get_string().get(s) != simdjson::SUCCESS) return {{}, extract_failure::not_scalar};
      return finish(s);
    }
    case simdjson::dom::element_type::INT64:
      return finish(js.print(field.get_int64().value_unsafe()));
    case simdjson::dom::element_type::UINT64:
      return finish(js.print(field.get_uint64().value_unsafe()));
    case simdjson::dom::element_type::DOUBLE:
      return finish(js.print(field.get_double().value_unsafe()));
    case simdjson::dom::element_type::BOOL:
      return finish(field.get_bool().value_unsafe() ? "true" : "false");
    case simdjson::dom::element_type::NULL_VALUE:
      return {{}, extract_failure::missing_field};
    case simdjson::dom::element_type::ARRAY:
    case simdjson::dom::element_type::OBJECT:
      return {{}, extract_failure::not_scalar};
  }
  return {{}, extract_failure::not_scalar};
}

}  // namespace sketchd
