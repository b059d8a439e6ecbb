// The configuration loader (`sketchd check-config`, and every start): whatever the YAML,
// no crash and no exception, and either a configuration or a list of errors that each
// name the file, a line and a column.
//
// Input: the file's text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz.h"
#include "sketchd/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  const auto result = sketchd::load_config_string(yaml, "fuzz.yaml", fuzz_env);
  FUZZ_CHECK(result.value.has_value() != !result.errors.empty());
  for (const auto& e : result.errors) {
    FUZZ_CHECK(e.file == "fuzz.yaml");
    FUZZ_CHECK(e.line >= 1 && e.column >= 1);
    FUZZ_CHECK(!e.message.empty());
  }
  if (result.value) {
    FUZZ_CHECK(!result.value->pipelines.empty());
    for (const auto& p : result.value->pipelines) {
      FUZZ_CHECK(p.heavy_hitters.has_value() || p.dedup.has_value());
      (void)sketchd::sketch_bytes_at_least(p);
    }
  }
  return 0;
}
