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
  # toolchain (make: a minimal Debian 12 lacks it; the README's commands need it first)
  build-essential make cmake pkg-config
  # the sketch library and the `sketch` command
  libxxhash-dev libcli11-dev libfmt-dev libabsl-dev
  # the daemon (jemalloc: its allocator, see SKETCHD_JEMALLOC in CMakeLists.txt)
  librdkafka-dev libyaml-cpp-dev libspdlog-dev libsimdjson-dev libcpp-httplib-dev libjemalloc-dev
  # bcrypt for http.basic_auth_users (libxcrypt; libc6-dev brings it, named here all the same)
  libcrypt-dev
  # HTTPS for http.tls (cpp-httplib is built with it too)
  libssl-dev
  # its metrics registry and text format, and its JSON writer
  prometheus-cpp-dev nlohmann-json3-dev
)

TEST_PACKAGES=(
  git
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # integration tests: a real Kafka client, HTTP client, Prometheus server and promtool,
  # and the compose-file validator
  kcat curl prometheus prometheus-alertmanager docker-compose python3
  # certificates for the HTTPS tests
  openssl
  # the threads of a daemon that does not stop in time, printed by the failing test
  gdb
  # benchmarks against the classic shell baselines
  gawk coreutils time wamerican
  # the Debian package (`make package`, its test): dpkg-shlibdeps computes its Depends
  # (build-essential brings dpkg-dev, named here all the same), and systemd-analyze checks
  # its unit (systemd; installing it does not make it the init of a container)
  dpkg-dev systemd
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

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: these packages are missing and installing them needs root: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2

# Packages that ship a network service which Debian enables and starts when it installs
# them (prometheus: a server on 0.0.0.0:9090 without authentication). The tests
# run their own servers on free ports; a system-wide one left running at every boot would
# also take port 9090 from the docker-compose deployment. So services that this run
# installs are neither started nor left enabled; ones the machine already had are not
# touched.
SERVICE_PACKAGES=(prometheus prometheus-node-exporter prometheus-alertmanager)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
had_before=()
for p in "${SERVICE_PACKAGES[@]}"; do
  if installed "$p"; then had_before+=("$p"); fi
done

# Two measures, because neither is enough alone:
# - During apt-get install, a /usr/sbin/policy-rc.d that answers 101 ("action forbidden")
#   stops the maintainer scripts from starting any service, under systemd and under
#   sysvinit alike (invoke-rc.d and deb-systemd-invoke both ask it), so nothing listens
#   even for a moment. It is only put in place when the machine has none (container
#   images often ship their own, which is left as it is), and a trap removes it whatever
#   way the script ends, so later package upgrades start their services as usual.
# - policy-rc.d does not stop a package from *enabling* its service, so afterwards the
#   services this run installed are disabled (systemctl disable works without a running
#   systemd too; --now only when systemd runs), and on sysvinit their boot links.
#   Without systemctl or update-rc.d (a bare container) there is nothing to disable.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  trap 'rm -f "$policy"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  printf '#!/bin/sh\n# Written by sketchd scripts/install-deps.sh during apt-get install; removed after it.\nexit 101\n' >"$policy"
  chmod 755 "$policy"
fi

export DEBIAN_FRONTEND=noninteractive
# A fresh machine's own apt jobs (apt-daily, unattended-upgrades) often hold apt's locks
# for a while after boot: wait for them, up to 10 minutes, rather than fail at once.
# DPkg::Lock::Timeout covers the install's dpkg lock; `update` takes the lists' lock
# without waiting, so it is tried again every 5 s.
for ((try = 1; ; try++)); do
  apt-get update -qq && break
  ((try < 120)) || { echo "install-deps: apt-get update kept failing" >&2; exit 1; }
  echo "install-deps: apt-get update failed (another apt running?); trying again in 5 s" >&2
  sleep 5
done
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

for p in "${SERVICE_PACKAGES[@]}"; do
  if ! installed "$p" || [[ " ${had_before[*]} " == *" $p "* ]]; then
    continue
  fi
  if command -v systemctl >/dev/null 2>&1 && [ -e "/lib/systemd/system/$p.service" ]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now --quiet "$p.service" ||
        echo "install-deps: warning: could not disable and stop $p.service" >&2
    else
      systemctl disable --quiet "$p.service" ||
        echo "install-deps: warning: could not disable $p.service" >&2
    fi
  elif command -v update-rc.d >/dev/null 2>&1 && [ -e "/etc/init.d/$p" ]; then
    update-rc.d "$p" disable >/dev/null 2>&1 ||
      echo "install-deps: warning: could not disable /etc/init.d/$p" >&2
  fi
done
