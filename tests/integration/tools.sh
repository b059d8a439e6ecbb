# require_tools TOOL…: each must be on PATH. A missing one skips the test (exit 77), or
# fails it (exit 1) with SKETCHD_REQUIRE_TOOLS=1, as `make test` sets it: it installs them
# all (scripts/install-deps.sh), so a missing one there is a defect of the package list, not
# a reason to pass. Sourced by lib.sh and by the tests that do without it.
require_tools() {
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      if [[ ${SKETCHD_REQUIRE_TOOLS:-0} == 1 ]]; then
        echo "FAIL: $tool is not installed (scripts/install-deps.sh installs it)" >&2
        exit 1
      fi
      echo "SKIP: $tool is not installed"
      exit 77
    fi
  done
}
