// The memory a process may use, for callers that size structures from user input and want
// to refuse what can never fit before they allocate it (the structures never call this).
#pragma once

#include <cstdint>

namespace sketch {

// The machine's physical memory, or the limit of the process's cgroup when that is lower
// (v2 memory.max of its own cgroup or of the root of its namespace, v1
// memory.limit_in_bytes of its own cgroup or of the root), or its address-space limit
// (RLIMIT_AS, `ulimit -v`) when that is lower still. Linux; elsewhere the physical memory
// alone.
[[nodiscard]] std::uint64_t usable_memory_bytes();

}  // namespace sketch
