#!/usr/bin/env bash
# Installs every Debian package sketchd needs to build, test, benchmark and run its demo.
# Idempotent: packages already present are left alone, and apt is not touched at all
# when nothing is missing. Must run as root when something is missing.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config git
  # the sketch library and the `sketch` command
  libxxhash-dev libcli11-dev libfmt-dev libabsl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # the daemon
  librdkafka-dev libyaml-cpp-dev libspdlog-dev libsimdjson-dev libcpp-httplib-dev
  # integration tests: a real Kafka client, HTTP client, Prometheus server and promtool,
  # and the compose-file validator
  kcat curl prometheus docker-compose python3
  # benchmarks against the classic shell baselines
  gawk coreutils time wamerican
)

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
