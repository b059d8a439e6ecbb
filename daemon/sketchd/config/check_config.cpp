// `sketchd check-config FILE`.
#include <fmt/format.h>

#include <cstdio>

#include "sketchd/commands.h"
#include "sketchd/config/config.h"
#include "sketchd/util/logging.h"

namespace sketchd {

int check_config_command(const std::string& path) {
  const load_result result = load_config_file(path);
  for (const config_error& e : result.errors) print_stderr(e.to_string() + "\n");
  if (!result.value) return 1;
  const std::size_t n = result.value->pipelines.size();
  fmt::print("{}: ok ({} pipeline{})\n", path, n, n == 1 ? "" : "s");
  return 0;
}

}  // namespace sketchd
