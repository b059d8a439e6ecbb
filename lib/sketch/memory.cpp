#include "sketch/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <string_view>
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
    // cgroup v1: "ID:CONTROLLERS:/PATH", the memory controller among the controllers.
    const std::size_t colon = line.find(':');
    const std::size_t second = line.find(':', colon + 1);
    if (colon == std::string::npos || second == std::string::npos) continue;
    const std::string_view controllers =
        std::string_view(line).substr(colon + 1, second - colon - 1);
    const std::string_view path = std::string_view(line).substr(second + 1);
    bool memory = false;
    for (std::size_t start = 0; start <= controllers.size();) {
      const std::size_t end = std::min(controllers.find(',', start), controllers.size());
      memory = memory || controllers.substr(start, end - start) == "memory";
      start = end + 1;
    }
    if (memory && path.size() > 1) {
      std::string file = "/sys/fs/cgroup/memory";
      file.append(path);
      file.append("/memory.limit_in_bytes");
      files.push_back(std::move(file));
    }
  }
  for (const std::string& file : files) {
    std::ifstream in(file);
    std::uint64_t value = 0;
    if (in >> value && value > 0) limit = std::min(limit, value);  // "max": no limit
  }
  // The address-space limit (ulimit -v), beyond which every allocation fails.
  rlimit address_space{};
  if (::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    limit = std::min(limit, static_cast<std::uint64_t>(address_space.rlim_cur));
  }
  return limit;
}

}  // namespace sketch
