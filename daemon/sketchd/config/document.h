// The one YAML document of a configuration file, parsed safely: yaml-cpp's endless empty
// documents on a stray ',' (jbeder/yaml-cpp#1040), aliases that repeat more than any
// configuration holds, nesting too deep and syntax errors are each one error with its
// position, before anything is read. Internal to the configuration loader.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string_view>

#include "sketchd/config/checker.h"

namespace sketchd::config_detail {

// The root of the first document of `text` (the file the checker `c` reads), or nullopt
// when there is nothing to read: invalid YAML, aliases that repeat too much, or an empty
// document. Every problem is reported to `c`, a second document too (the first is still
// returned, to be read). Tells `c` where the nodes start.
[[nodiscard]] std::optional<YAML::Node> read_document(std::string_view text, checker& c);

}  // namespace sketchd::config_detail
