#include "sketch/memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace sketch {

std::uint64_t usable_memory_bytes() {
  std::uint64_t limit = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                        static_cast<std::uint64_t>(::sysconf(_SC_PAGE_SIZE));
  std::vector<std::string> files = {"/sys/fs/cgroup/memory.max",
                                    "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    if (line.starts_with("0::/") && line.size() > 4) {
      files.push_back("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    }
  }
  for (const std::string& file : files) {
    std::ifstream in(file);
    std::uint64_t value = 0;
    if (in >> value && value > 0) limit = std::min(limit, value);  // "max": no limit
  }
  return limit;
}

}  // namespace sketch
