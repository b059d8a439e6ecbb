#include "sketchd/pipeline/extractor.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <optional>

namespace sketchd {

std::string_view to_string(extract_failure f) noexcept {
  switch (f) {
    case extract_failure::none:
      return "none";
    case extract_failure::invalid_json:
      return "invalid_json";
    case extract_failure::missing_field:
      return "missing_field";
    case extract_failure::not_scalar:
      return "not_scalar";
    case extract_failure::empty_item:
      return "empty_item";
    case extract_failure::oversized:
      return "oversized";
    case extract_failure::tombstone:
      return "tombstone";
    case extract_failure::null_key:
      return "null_key";
  }
  return "unknown";
}

namespace {

// One reference token of the JSON pointer, unescaped (RFC 6901: "~1" is "/", "~0" is "~"),
// and the array index it names when it is one ("0" or digits without a leading zero).
struct pointer_token {
  std::string key;
  std::optional<std::size_t> index;
};

// The pointer split once, at construction: simdjson's at_pointer() re-parses and
// re-unescapes it for every message (most of its cost on small messages). The config
// checked its syntax; a pointer that does not start with "/" names the whole document only
// when it is empty, and otherwise nothing.
std::vector<pointer_token> compile_pointer(std::string_view pointer) {
  std::vector<pointer_token> tokens;
  if (pointer.empty()) return tokens;
  std::size_t at = 1;
  for (;;) {
    const std::size_t end = std::min(pointer.find('/', at), pointer.size());
    pointer_token t;
    for (std::size_t i = at; i < end; ++i) {
      if (pointer[i] == '~' && i + 1 < end && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
        t.key += pointer[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        t.key += pointer[i];
      }
    }
    const bool digits = !t.key.empty() && std::all_of(t.key.begin(), t.key.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (digits && (t.key.size() == 1 || t.key.front() != '0')) {
      std::size_t index = 0;
      const auto r = std::from_chars(t.key.data(), t.key.data() + t.key.size(), index);
      if (r.ec == std::errc()) t.index = index;
    }
    tokens.push_back(std::move(t));
    if (end == pointer.size()) break;
    at = end + 1;
  }
  return tokens;
}

constexpr std::size_t kInitialJsonCapacity = 64 * 1024;
// JSON's whitespace (RFC 8259: space, tab, line feed, carriage return).
constexpr bool json_blank(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
constexpr std::size_t kMaxScalarText = 32;  // a number printed back, shortest form
}  // namespace

struct extractor::json_state {
  std::vector<pointer_token> path;
  simdjson::dom::parser parser;
  std::vector<char> padded;  // the message copied with SIMDJSON_PADDING bytes after it
  std::vector<char> quoted;  // the same with its integers beyond 64 bits quoted (rare)
  std::array<char, kMaxScalarText> scalar_text{};

  // Batches (extract(span, span)): the values joined by newlines, with padding; the parser
  // of the joined text; where each value's document must start; and the items of the
  // batch, copied out of the parsers (an item is at most its value's bytes, or a number
  // printed back in at most kMaxScalarText). All sized at construction, never grown.
  simdjson::dom::parser batch_parser;
  std::unique_ptr<char[]> joined;
  std::array<std::size_t, extractor::kBatchMessages> starts{};
  std::string arena;  // capacity kBatchBytes + kMaxScalarText · kBatchMessages
  // The adaptation to bad values: the size of the next group, and after a group where
  // nothing was proven whole, how many groups to parse one by one still and how many the
  // next such group will make.
  std::size_t group_limit = extractor::kBatchMessages;
  std::size_t skip_groups = 0;
  std::size_t backoff = 0;

  template <class T>
  std::string_view print(T v) noexcept {
    const auto r = std::to_chars(scalar_text.data(), scalar_text.data() + scalar_text.size(), v);
    return {scalar_text.data(), static_cast<std::size_t>(r.ptr - scalar_text.data())};
  }
  // Copies an item into `into`, within the capacity reserved at construction (no
  // allocation, so the earlier copies stay where they are).
  static std::string_view keep(std::string_view text, std::string& into) noexcept {
    const std::size_t at = into.size();
    into.append(text);  // within the capacity reserved at construction
    return std::string_view(into).substr(at, text.size());
  }
};

extractor::extractor(extractor_options options) : options_(std::move(options)) {
  if (options_.from == item_source::json) {
    json_ = std::make_unique<json_state>();
    json_->path = compile_pointer(options_.json_pointer);
    json_->padded.resize(kInitialJsonCapacity + simdjson::SIMDJSON_PADDING);
    if (json_->parser.allocate(kInitialJsonCapacity) != simdjson::SUCCESS) throw std::bad_alloc();
    if (json_->batch_parser.allocate(kBatchBytes) != simdjson::SUCCESS) throw std::bad_alloc();
    json_->joined = std::make_unique<char[]>(kBatchBytes + simdjson::SIMDJSON_PADDING);
    json_->arena.reserve(kBatchBytes + kMaxScalarText * kBatchMessages);
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
  // A tombstone says a key was deleted: no event, whatever its key or headers hold.
  if (!message.has_value) return {{}, extract_failure::tombstone};
  switch (options_.from) {
    case item_source::key:
      if (!message.has_key) return {{}, extract_failure::null_key};
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

namespace {

bool json_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Writes `in` to `out` with every integer of 19 digits or more put in quotes, and says
// whether there was one. Only a well-formed integer where a value may start (after `[`,
// `,`, `:` or at the start, ending before white space, `,`, `]`, `}` or the end, and not
// followed by a colon) is quoted, so the text is valid JSON exactly when `in` is: a number token
// becomes a string token in the same place. Strings are copied as they are.
bool quote_big_integers(std::string_view in, std::vector<char>& out) {
  out.clear();
  out.reserve(in.size() + 64 + simdjson::SIMDJSON_PADDING);
  bool quoted = false;
  bool in_string = false;
  char last = '[';  // the last byte outside strings and white space
  for (std::size_t i = 0; i < in.size();) {
    const char c = in[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < in.size()) {
        out.push_back(in[i + 1]);
        i += 2;
        continue;
      }
      if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      last = c;
      out.push_back(c);
      ++i;
      continue;
    }
    if ((c == '-' || json_digit(c)) && (last == '[' || last == ',' || last == ':')) {
      std::size_t end = i + (c == '-' ? 1 : 0);
      const std::size_t first_digit = end;
      while (end < in.size() && json_digit(in[end])) ++end;
      const std::size_t digits = end - first_digit;
      const bool ends = end == in.size() || in[end] == ',' || in[end] == ']' || in[end] == '}' ||
                        in[end] == ' ' || in[end] == '\t' || in[end] == '\n' || in[end] == '\r';
      // Not in a key's place (white space, then a colon): quoted, it would make `{"a":1,
      // 123… :1}` valid.
      std::size_t after = end;
      while (after < in.size() &&
             (in[after] == ' ' || in[after] == '\t' || in[after] == '\n' || in[after] == '\r')) {
        ++after;
      }
      const bool key = after < in.size() && in[after] == ':';
      // 19 digits: a negative integer below INT64_MIN has as few.
      if (digits >= 19 && in[first_digit] != '0' && ends && !key) {
        out.push_back('"');
        out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(i),
                   in.begin() + static_cast<std::ptrdiff_t>(end));
        out.push_back('"');
        quoted = true;
      } else {  // as it is (end > i: at least the sign or a digit)
        out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(i),
                   in.begin() + static_cast<std::ptrdiff_t>(end));
      }
      last = '0';
      i = end;
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') last = c;
    out.push_back(c);
    ++i;
  }
  return quoted;
}

}  // namespace

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
  // An empty value may have no bytes at all (a null data pointer): memcpy must not see it.
  if (!value.empty()) std::memcpy(js.padded.data(), value.data(), value.size());
  std::memset(js.padded.data() + value.size(), 0, simdjson::SIMDJSON_PADDING);

  simdjson::dom::element root;
  simdjson::error_code error = js.parser.parse(js.padded.data(), value.size(), false).get(root);
  if (error == simdjson::NUMBER_ERROR) {
    // simdjson takes integers up to 64 bits; a larger one (a 128-bit id written as a
    // number) is valid JSON all the same. Parsed again with such integers quoted: one
    // selected by the pointer is then its digits as written, as every integer is.
    try {
      if (quote_big_integers(value, js.quoted)) {
        const std::size_t size = js.quoted.size();
        js.quoted.resize(size + simdjson::SIMDJSON_PADDING, '\0');
        error = js.parser.parse(js.quoted.data(), size, false).get(root);
      }
    } catch (const std::bad_alloc&) {
      return {{}, extract_failure::oversized};
    }
  }
  if (error != simdjson::SUCCESS) return {{}, extract_failure::invalid_json};
  return item_of(root);
}

extract_result extractor::item_of(const simdjson::dom::element& root) noexcept {
  json_state& js = *json_;
  simdjson::dom::element field = root;
  for (const pointer_token& t : js.path) {
    // As RFC 6901 (and simdjson's at_pointer): a token selects a member of an object, or
    // an element of an array when it is an index; walking into a scalar, an absent member,
    // an index out of bounds or a token that is no index in an array finds nothing.
    simdjson::error_code err = simdjson::NO_SUCH_FIELD;
    if (field.is_object()) {
      err = field.get_object().value_unsafe().at_key(t.key).get(field);
    } else if (field.is_array() && t.index) {
      err = field.get_array().value_unsafe().at(*t.index).get(field);
    }
    if (err != simdjson::SUCCESS) return {{}, extract_failure::missing_field};
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

std::size_t extractor::extract(std::span<const message_view* const> messages,
                               std::span<extract_result> results) noexcept {
  const std::size_t limit = std::min({messages.size(), results.size(), kBatchMessages});
  if (limit == 0) return 0;
  if (options_.from != item_source::json) {
    // Items are bytes of the messages themselves: nothing to keep.
    for (std::size_t i = 0; i < limit; ++i) results[i] = extract(*messages[i]);
    return limit;
  }
  json_state& js = *json_;
  js.arena.clear();
  // The group: as many values as fit in the joined buffer (each followed by a newline),
  // up to group_limit and up to the first blank value (which yields no document).
  std::size_t n = 0;
  std::size_t bytes = 0;
  while (n < std::min(limit, js.group_limit) &&
         bytes + messages[n]->value.size() + 1 <= kBatchBytes && !is_blank(messages[n]->value)) {
    bytes += messages[n++]->value.size() + 1;
  }
  if (n <= 1) {
    // A blank value (a tombstone's is empty), a value larger than the buffer, or a group of
    // one: alone (its item stays valid until the next call without a copy).
    results[0] = extract(*messages[0]);
    return 1;
  }
  const auto alone = [&](std::size_t i) {
    results[i] = extract_json(messages[i]->value);
    if (results[i].failure == extract_failure::none) {
      results[i].item = json_state::keep(results[i].item, js.arena);
    }
  };
  if (js.skip_groups > 0) {
    --js.skip_groups;
    for (std::size_t i = 0; i < n; ++i) alone(i);
    return n;
  }
  const std::size_t whole = extract_joined(messages.first(n), results);
  joined_messages_ += whole;
  if (whole == n) {
    js.backoff = 0;
    js.group_limit = std::min(2 * js.group_limit, kBatchMessages);
    return n;
  }
  if (whole > 0) {
    // Keep the whole ones, take the first doubtful value alone, leave the rest to the next
    // call. The next group is at most twice what this one proved, so that the first stage
    // run over values that are then parsed again stays within about one more pass per
    // value when bad values come often.
    alone(whole);
    js.backoff = 0;
    js.group_limit = std::clamp(2 * (whole + 1), kMinGroup, kBatchMessages);
    return whole + 1;
  }
  // Nothing proven: all alone, and the next groups too, for 1, 2, 4 … 64 groups while this
  // goes on, so that a stream of bad values does not pay for each value twice.
  for (std::size_t i = 0; i < n; ++i) alone(i);
  js.backoff = std::min<std::size_t>(std::max<std::size_t>(1, 2 * js.backoff), 64);
  js.skip_groups = js.backoff;
  js.group_limit = kMinGroup;
  return n;
}

bool extractor::is_blank(std::string_view value) noexcept {
  return std::all_of(value.begin(), value.end(), json_blank);
}

std::size_t extractor::extract_joined(std::span<const message_view* const> messages,
                                      std::span<extract_result> results) noexcept {
  // The values, joined by newlines, are parsed as one stream of documents by simdjson's
  // parse_many (one pass of its first stage over the whole text instead of one per
  // message). A value's result is the one it would get alone only if the value is one
  // whole document; the stream proves it for value i when value i's document starts at
  // its first non-blank byte and the next document starts at value i + 1's (any other
  // byte after a document, even a stray comma, would start a document of its own), or,
  // for the last value, when the stream ends there without error or leftover bytes. A
  // document running past its value's end swallows the newline and the next value's start
  // (or fails: a raw newline inside a string is an error). Returns how many values, from
  // the first, are proven whole; their results are set.
  json_state& js = *json_;
  std::size_t at = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string_view v = messages[i]->value;
    std::size_t first = 0;
    while (first < v.size() && json_blank(v[first])) ++first;
    js.starts[i] = at + first;
    std::memcpy(js.joined.get() + at, v.data(), v.size());
    at += v.size();
    js.joined[at++] = '\n';
  }
  std::memset(js.joined.get() + at, 0, simdjson::SIMDJSON_PADDING);
  simdjson::dom::document_stream stream;
  if (js.batch_parser.parse_many(js.joined.get(), at, kBatchBytes).get(stream) !=
      simdjson::SUCCESS) {
    return 0;
  }
  std::size_t i = 0;     // documents found at their value's start
  std::size_t kept = 0;  // the arena before the last value's item: dropped if it is not whole
  const auto last_not_whole = [&] {
    js.arena.resize(kept);  // shrinking: no allocation
    return i - 1;
  };
  for (auto it = stream.begin(); it != stream.end(); ++it) {
    simdjson::dom::element root;
    const auto error = (*it).get(root);
    // Invalid UTF-8 anywhere in the group fails its first stage: no boundary the stream
    // reports is evidence then, whatever came before (in "1{" then a value that is not
    // UTF-8, simdjson 3.0.1 reports the document "1", then the failure at the second
    // value's start, never the '{'). Found by fuzzing (tests/fuzz/extractor_fuzz.cpp).
    if (error == simdjson::UTF8_ERROR) {
      js.arena.clear();  // the arena holds the items of the values proven whole: none
      return 0;
    }
    // A document elsewhere: value i - 1 ran on, or has more after its document.
    if (i == messages.size() || it.current_index() != js.starts[i]) {
      return i == 0 ? 0 : last_not_whole();
    }
    // A document at value i's start that fails: its start is not taken as the end of value
    // i - 1 either (a failing document's position is the one kind of evidence that the
    // case above showed wrong), so the values before i - 1 are whole.
    if (error != simdjson::SUCCESS) return i == 0 ? 0 : last_not_whole();
    // Each document of the stream is parsed into the same reused document: its item is
    // copied out before the next.
    extract_result r = item_of(root);
    kept = js.arena.size();
    if (r.failure == extract_failure::none) r.item = json_state::keep(r.item, js.arena);
    results[i++] = r;
  }
  if (i == messages.size() && stream.truncated_bytes() == 0) return i;
  return i == 0 ? 0 : last_not_whole();
}

}  // namespace sketchd
