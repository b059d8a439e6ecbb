// Which sources this binary was built from, for `sketchd --version` and the metric
// sketchd_build_info (beside SKETCHD_VERSION, the project's version, a compile definition).
#pragma once

namespace sketchd {

// The revision of the sources this binary was built from: git's short commit hash, with
// "-dirty" when tracked files differed from it; -DSKETCHD_REVISION=… when given at
// configure time; else "unknown". Taken at build time (daemon/revision.cmake), so that an
// incremental build never reports the commit of its first configure.
[[nodiscard]] const char* build_revision() noexcept;

}  // namespace sketchd
