// Extracting one item per message: the `item:` section of a pipeline.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/config/config.h"

namespace simdjson::dom {
class element;
}  // namespace simdjson::dom

namespace sketchd {

// Why a message yielded no item. A bounded set: each becomes a `reason` label of
// sketchd_pipeline_extract_failures_total.
enum class extract_failure : std::uint8_t {
  none = 0,
  invalid_json,   // the value is not valid JSON (or not valid UTF-8, which JSON requires)
  missing_field,  // the JSON pointer or the header is absent (or JSON null)
  not_scalar,     // the JSON pointer names an object or an array
  empty_item,     // the item is zero bytes long
  oversized,      // the item is longer than max_item_bytes
  tombstone,      // the value is null (a tombstone: a deletion marker), whatever the item's source
  null_key,       // the key is null, and the item is the key
};
inline constexpr std::size_t kExtractFailureCount = 8;

[[nodiscard]] std::string_view to_string(extract_failure f) noexcept;

// What an extractor sees of a message. Headers are looked up through a callback so that
// nothing Kafka-specific leaks here.
struct message_view {
  std::string_view key;
  std::string_view value;
  bool has_key = false;
  bool has_value = true;  // false for a null value (a tombstone), not an empty one
  // Returns true and sets `*out` when the message has a header `name` (the first one, if
  // repeated).
  bool (*find_header)(const void* context, std::string_view name, std::string_view* out) = nullptr;
  const void* header_context = nullptr;
};

struct extract_result {
  std::string_view item;  // valid until the next call of extract() on the same extractor
  extract_failure failure = extract_failure::none;
};

struct extractor_options {
  item_source from = item_source::value;
  std::string json_pointer;  // for `json`: "" is the whole document, else "/a/b/0"
  std::string header_name;   // for `header`
  std::size_t max_item_bytes = 1024;
};

// Turns a message into its item. JSON is parsed by simdjson into a reused document, so
// after the first message of a given size nothing is allocated (but for a document with an
// integer beyond 64 bits, which simdjson refuses: it is parsed again with such integers
// quoted, which keeps a valid document valid and an invalid one invalid); the whole document is
// validated (a message with a trailing syntax error is `invalid_json`, even when the field
// comes before it). A JSON string item is its unescaped text; a number or boolean is its
// JSON text ("42", "true"). The JSON pointer is split into its tokens once, at
// construction. Not thread-safe; one per pipeline.
class extractor {
 public:
  explicit extractor(extractor_options options);
  ~extractor();
  extractor(extractor&&) noexcept;
  extractor& operator=(extractor&&) noexcept;

  [[nodiscard]] extract_result extract(const message_view& message) noexcept;

  // The items of several messages at once: results[i] is what extract(*messages[i]) would
  // return, for the first n messages, where n, returned, is at least 1 when both spans are
  // non-empty and at most kBatchMessages (and, for `json`, as many as fit in kBatchBytes).
  // The items stay valid until the next call of either extract(). For `json` the values are
  // joined and parsed together (simdjson's parse_many), and a value takes its result from
  // that parse only when the parse proves it one whole JSON document; the first doubtful
  // value is parsed alone, and the next group is shorter while bad values come often
  // (down to kMinGroup). After a group where nothing was proven whole, the next groups are
  // parsed one by one for a while (1, 2, 4 … 64 groups). No allocation per message, except
  // for a single message larger than every earlier one (as extract()); per joined group,
  // Debian's simdjson (built with threads) allocates and frees the small worker of its
  // parse_many stream, and takes its mutex: twice per group of up to 256 messages.
  static constexpr std::size_t kBatchMessages = 256;
  static constexpr std::size_t kMinGroup = 8;
  static constexpr std::size_t kBatchBytes = 256 * 1024;
  [[nodiscard]] std::size_t extract(std::span<const message_view* const> messages,
                                    std::span<extract_result> results) noexcept;
  [[nodiscard]] const extractor_options& options() const noexcept { return options_; }
  // Messages whose item came from a joined parse of their group, since construction.
  [[nodiscard]] std::uint64_t joined_messages() const noexcept { return joined_messages_; }

 private:
  extract_result finish(std::string_view item) const noexcept;
  extract_result extract_json(std::string_view value) noexcept;
  // The item at the pointer in a parsed document (a number printed back is valid until the
  // next one is printed).
  extract_result item_of(const simdjson::dom::element& root) noexcept;
  std::size_t extract_joined(std::span<const message_view* const> messages,
                             std::span<extract_result> results) noexcept;
  static bool is_blank(std::string_view value) noexcept;

  struct json_state;
  extractor_options options_;
  std::unique_ptr<json_state> json_;
  std::uint64_t joined_messages_ = 0;
};

}  // namespace sketchd
