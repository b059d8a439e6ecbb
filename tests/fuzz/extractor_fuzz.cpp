// The JSON extractor: whatever the bytes, no crash, and a batch gives exactly what the
// messages give one at a time (the batch path joins values and parses them together, then
// proves each one whole; see extractor.h).
//
// Input: byte 0 picks the JSON pointer, byte 1 the item size limit; the rest is a sequence
// of message values separated by 0x1E (a byte JSON never holds raw). At most 600 values.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.h"
#include "sketchd/pipeline/extractor.h"

namespace {

constexpr std::string_view kPointers[] = {"", "/user/id", "/a/0", "/a~1b/~0c", "/k", "/"};
constexpr std::size_t kLimits[] = {1024, 1, 8, 200};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  sketchd::extractor_options options;
  options.from = sketchd::item_source::json;
  options.json_pointer = std::string(kPointers[data[0] % std::size(kPointers)]);
  options.max_item_bytes = kLimits[data[1] % std::size(kLimits)];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::vector<std::string_view> values;
  for (std::size_t start = 0; values.size() < 600;) {
    const std::size_t end = rest.find('\x1e', start);
    values.push_back(rest.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  std::vector<sketchd::message_view> messages(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) messages[i].value = values[i];

  // One at a time.
  sketchd::extractor single(options);
  std::vector<std::string> items(values.size());
  std::vector<sketchd::extract_failure> failures(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto r = single.extract(messages[i]);
    items[i] = std::string(r.item);
    failures[i] = r.failure;
    FUZZ_CHECK(r.failure == sketchd::extract_failure::none ? !r.item.empty() : r.item.empty());
    FUZZ_CHECK(r.item.size() <= options.max_item_bytes);
  }

  // In batches, as the pipeline calls it.
  sketchd::extractor batched(options);
  std::vector<const sketchd::message_view*> pointers(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) pointers[i] = &messages[i];
  std::vector<sketchd::extract_result> results(sketchd::extractor::kBatchMessages);
  for (std::size_t done = 0; done < messages.size();) {
    const std::span<const sketchd::message_view* const> rest_of(pointers.data() + done,
                                                                pointers.size() - done);
    const std::size_t n = batched.extract(rest_of, results);
    FUZZ_CHECK(n >= 1 && n <= rest_of.size() && n <= results.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (results[i].failure != failures[done + i] || results[i].item != items[done + i]) {
        std::fprintf(
            stderr, "value %zu (%zu bytes): one at a time %s \"%s\", in a batch of %zu %s \"%s\"\n",
            done + i, values[done + i].size(),
            std::string(sketchd::to_string(failures[done + i])).c_str(), items[done + i].c_str(), n,
            std::string(sketchd::to_string(results[i].failure)).c_str(),
            std::string(results[i].item).c_str());
      }
      FUZZ_CHECK(results[i].failure == failures[done + i]);
      FUZZ_CHECK(results[i].item == items[done + i]);
    }
    done += n;
  }
  return 0;
}
