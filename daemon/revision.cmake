# Writes OUTPUT, a source file that defines sketchd::build_revision(): the revision of the
# sources a build compiles. REVISION when it is given (-DSKETCHD_REVISION=… at configure
# time, for a build from a source archive or a container build without .git); else git's
# short commit hash of SOURCE_DIR, with "-dirty" when tracked files differ from that commit;
# else "unknown". daemon/CMakeLists.txt runs this script at every build, and it rewrites
# OUTPUT only when the revision changed, so that an unchanged one recompiles nothing.
if(DEFINED REVISION AND NOT REVISION STREQUAL "")
  set(revision "${REVISION}")
else()
  set(revision "unknown")
  find_package(Git QUIET)
  if(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD
                    WORKING_DIRECTORY ${SOURCE_DIR}
                    OUTPUT_VARIABLE commit
                    OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE commit_status
                    ERROR_QUIET)
    if(commit_status EQUAL 0 AND commit)
      set(revision "${commit}")
      execute_process(COMMAND ${GIT_EXECUTABLE} diff --quiet HEAD --
                      WORKING_DIRECTORY ${SOURCE_DIR}
                      RESULT_VARIABLE diff_status
                      OUTPUT_QUIET ERROR_QUIET)
      if(diff_status EQUAL 1)
        string(APPEND revision "-dirty")
      endif()
    endif()
  endif()
endif()

# The revision becomes a C++ string literal: only characters that need no escaping.
string(REGEX REPLACE "[^A-Za-z0-9._+-]" "_" revision "${revision}")
set(content "// Generated at build time by daemon/revision.cmake; do not edit.
#include \"sketchd/util/build_info.h\"

namespace sketchd {

const char* build_revision() noexcept { return \"${revision}\"; }

}  // namespace sketchd
")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUTPUT}" "${content}")
endif()
