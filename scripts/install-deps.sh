#!/usr/bin/env bash
# Installs every Debian package sketchd needs to build, test, benchmark and run its demo.
# Idempotent: packages already present are left alone, and apt is not touched at all
# when nothing is missing. Must run as root when something is missing.
#
#   scripts/install-deps.sh               everything (build, tests, benchmarks, demo)
#   scripts/install-deps.sh --build-only  only what building sketch and sketchd needs
#                                         (configure with -DSKETCHD_BUILD_TESTS=OFF
#                                         -DSKETCHD_BUILD_BENCH=OFF; deploy/Dockerfile does)
#   scripts/install-deps.sh --fuzz        everything, and clang with its libFuzzer
#                                         (`make fuzz`, tests/fuzz/)
set -euo pipefail

BUILD_PACKAGES=(
  # toolchain
  build-essential cmake pkg-config
  # the sketch library and the `sketch` command
  libxxhash-dev libcli11-dev libfmt-dev libabsl-dev
  # the daemon (jemalloc: its allocator, see SKETCHD_JEMALLOC in CMakeLists.txt)
  librdkafka-dev libyaml-cpp-dev libspdlog-dev libsimdjson-dev libcpp-httplib-dev libjemalloc-dev
)

TEST_PACKAGES=(
  git
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # integration tests: a real Kafka client, HTTP client, Prometheus server and promtool,
  # and the compose-file validator
  kcat curl prometheus docker-compose python3
  # benchmarks against the classic shell baselines
  gawk coreutils time wamerican
)

FUZZ_PACKAGES=(
  # clang, and its runtime libraries, which hold libFuzzer and the sanitizers
  clang libclang-rt-14-dev
)

case "${1:-}" in
  "") PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  --build-only) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  --fuzz) PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}") ;;
  *) echo "usage: $0 [--build-only | --fuzz]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: these packages are missing and installing them needs root: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
