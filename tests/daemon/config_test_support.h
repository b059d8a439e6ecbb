// Loading a configuration from a string in the tests of the configuration: a fake
// environment, the errors as the lines check-config prints, and the smallest valid file.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketchd/config/config.h"

namespace sketchd::test_support {

using env_map = std::map<std::string, std::string, std::less<>>;

inline getenv_function fake_env(env_map env) {
  return [env = std::move(env)](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

inline load_result load(std::string_view yaml, env_map env = {}) {
  return load_config_string(yaml, "test.yaml", fake_env(std::move(env)));
}

inline std::vector<std::string> errors_of(const load_result& r) {
  std::vector<std::string> out;
  for (const config_error& e : r.errors) out.push_back(e.to_string());
  return out;
}

// The smallest valid configuration; tests append to it or replace parts of it.
inline constexpr std::string_view kMinimal =
    "kafka:\n"                          // 1
    "  brokers: localhost:9092\n"       // 2
    "pipelines:\n"                      // 3
    "  - name: p\n"                     // 4
    "    topics: [t]\n"                 // 5
    "    item: { from: key }\n"         // 6
    "    dedup: { capacity: 1000 }\n";  // 7

// The errors of kMinimal with its line 7 (dedup) replaced by `tail`, indented by the caller.
inline std::vector<std::string> pipeline_errors(std::string_view tail) {
  return errors_of(
      load(std::string(kMinimal.substr(0, kMinimal.rfind("    dedup"))) + std::string(tail)));
}

}  // namespace sketchd::test_support
