#!/usr/bin/env bash
# The deployment files are valid for the tools that read them, with no Docker engine:
#   - promtool check config  deploy/prometheus/prometheus.yml (and the rules it loads)
#   - promtool check rules   deploy/prometheus/rules/*.yml
#   - promtool test rules    deploy/prometheus/tests/*.yml (each alert fires when it
#                            should and stays silent when it should not)
#   - amtool check-config    deploy/alertmanager/alertmanager.yml, and Debian's
#                            Alertmanager on loopback with it: each inhibition rule mutes
#                            its target alert on the same instance (and pipeline) while
#                            its source fires, and not on another instance
#   - docker-compose config  docker-compose.yml: valid, the expected services, every
#                            bind-mounted file present, the Dockerfile present
#   - sketchd check-config   config/compose.yaml, the configuration the compose file runs,
#                            whose topics kafka-init creates and whose port Prometheus scrapes
#   - deploy/Dockerfile      its build stage builds the targets whose files it strips and
#                            copies into the image, and its runtime stage installs the
#                            Debian package of every shared library those files load (a
#                            mistake there fails only when the image is built or run,
#                            which this test cannot do without an engine)
#
# Usage: deploy_test.sh PATH/TO/sketchd BUILD_DIR TARGET=FILE…  (every executable target of
# the project with its file, under BUILD_DIR)
set -euo pipefail

sketchd=${1:?usage: $0 PATH/TO/sketchd BUILD_DIR TARGET=FILE…}
build_dir=${2:?usage: $0 PATH/TO/sketchd BUILD_DIR TARGET=FILE…}
shift 2
declare -A target_of  # a file's path relative to the build directory -> its target
for pair in "$@"; do
  file=${pair#*=}
  target_of[${file#"$build_dir"/}]=${pair%%=*}
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

source "$root/tests/integration/tools.sh"
require_tools promtool amtool prometheus-alertmanager docker-compose curl python3

failures=0
check() {  # check DESCRIPTION COMMAND…: runs it, prints its output on failure
  local what=$1
  shift
  local out
  if out=$("$@" 2>&1); then
    echo "ok: $what"
  else
    echo "FAIL: $what" >&2
    echo "$out" >&2
    failures=$((failures + 1))
  fi
}
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# --- Prometheus ---------------------------------------------------------------------
check "promtool check config deploy/prometheus/prometheus.yml" \
  promtool check config deploy/prometheus/prometheus.yml
check "promtool check rules" promtool check rules deploy/prometheus/rules/*.yml
# The test files name their rule files relative to themselves.
for t in deploy/prometheus/tests/*.yml; do
  check "promtool test rules $t" \
    bash -c 'cd "$(dirname "$1")" && promtool test rules "$(basename "$1")"' _ "$t"
done
# Every alert of the rules has at least one unit test.
for alert in $(sed -n 's/^ *- alert: *\([A-Za-z0-9]*\).*/\1/p' deploy/prometheus/rules/*.yml); do
  grep -q "alertname: *$alert\b" deploy/prometheus/tests/*.yml || fail "alert $alert has no promtool test"
done

# --- Alertmanager -----------------------------------------------------------------------
check "amtool check-config deploy/alertmanager/alertmanager.yml" \
  amtool check-config deploy/alertmanager/alertmanager.yml
work=$(mktemp -d)
am_pid=
cleanup() {
  [[ -n $am_pid ]] && kill "$am_pid" 2>/dev/null && wait "$am_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
am_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prometheus-alertmanager --config.file=deploy/alertmanager/alertmanager.yml \
  --storage.path="$work" --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= \
  >"$work/alertmanager.log" 2>&1 &
am_pid=$!
am="http://127.0.0.1:$am_port/api/v2"
for _ in $(seq 100); do
  curl -sf "$am/status" >/dev/null 2>&1 && break
  sleep 0.1
done
if ! curl -sf "$am/status" >/dev/null 2>&1; then
  fail "Alertmanager did not start: $(tail -5 "$work/alertmanager.log")"
else
  # Every rule's source and target on instance a (and pipeline p), and its target alone on
  # an instance of its own, bN: each target on a is suppressed by its source, every target
  # on its bN is not (an instance per rule, since an alert may be one rule's target and
  # another's source).
  python3 - "$am" deploy/alertmanager/alertmanager.yml <<'EOF' || fail "the Alertmanager inhibition rules do not mute what they should"
import json, re, sys, time, urllib.request
am, config = sys.argv[1], open(sys.argv[2]).read()
rules = re.findall(r"source_matchers: \[alertname = (\w+)\]\s*target_matchers: \[alertname = (\w+)\]", config)
assert len(rules) == config.count("source_matchers"), "a rule the test cannot read"
alerts = []
for n, (source, target) in enumerate(rules):
    for name, instance in ((source, "a:9464"), (target, "a:9464"), (target, f"b{n}:9464")):
        alerts.append({"labels": {"alertname": name, "instance": instance, "job": "sketchd",
                                  "pipeline": "p", "severity": "critical"}})
request = urllib.request.Request(f"{am}/alerts", json.dumps(alerts).encode(),
                                 {"Content-Type": "application/json"})
urllib.request.urlopen(request).read()
deadline = time.monotonic() + 10
while True:
    state = {}
    for a in json.load(urllib.request.urlopen(f"{am}/alerts")):
        state[(a["labels"]["alertname"], a["labels"]["instance"])] = a["status"]["state"]
    problems = [f"{target} on a:9464 is {state.get((target, 'a:9464'))}, not suppressed by {source}"
                for source, target in rules if state.get((target, "a:9464")) != "suppressed"]
    problems += [f"{target} on b{n}:9464 is {state.get((target, f'b{n}:9464'))}, not active"
                 for n, (_, target) in enumerate(rules) if state.get((target, f"b{n}:9464")) != "active"]
    if not problems:
        print(f"ok: {len(rules)} inhibition rules mute their targets on the same instance only")
        break
    if time.monotonic() > deadline:
        sys.exit("\n".join(problems))
    time.sleep(0.2)
EOF
fi

# --- docker-compose.yml -----------------------------------------------------------------
# The engine-independent parts only: docker-compose reads, interpolates and validates the
# file without contacting a Docker daemon.
export GRAFANA_ADMIN_PASSWORD=test
check "docker-compose config -q" docker-compose -f docker-compose.yml config -q
if rendered=$(docker-compose -f docker-compose.yml config 2>&1); then
  services=$(docker-compose -f docker-compose.yml config --services | sort | tr '\n' ' ')
  [[ $services == "alertmanager grafana kafka kafka-init prometheus sketchd " ]] ||
    fail "docker-compose services are '$services'"
  # Bind mounts ("- /abs/host/path:/container/path[:ro]"): the host side must exist.
  while read -r src; do
    [[ -e $src ]] || fail "docker-compose.yml mounts $src, which does not exist"
  done < <(sed -n 's/^ *- \(\/[^:]*\):\/.*/\1/p' <<<"$rendered")
  [[ -f deploy/Dockerfile ]] || fail "deploy/Dockerfile is missing"
  grep -q 'dockerfile: deploy/Dockerfile' <<<"$rendered" || fail "sketchd is not built from deploy/Dockerfile"
fi
# The image's runtime stage runs as a non-root user and ships the compose configuration.
grep -q '^USER sketchd' deploy/Dockerfile || fail "deploy/Dockerfile does not drop root"
grep -q '^FROM debian:bookworm' deploy/Dockerfile || fail "deploy/Dockerfile is not based on Debian bookworm"

# The build stage builds (`cmake --build build … --target A B`) every file it strips or the
# runtime stage copies from build/.
built=" $(sed -n 's/.*cmake --build build .*--target \([^\\&]*\).*/\1/p' deploy/Dockerfile | xargs) "
[[ $built != "  " ]] || fail "deploy/Dockerfile builds no --target"
while read -r file; do
  target=${target_of[$file]:-}
  [[ -n $target ]] || fail "deploy/Dockerfile uses build/$file, which no target of the project builds"
  [[ -z $target || $built == *" $target "* ]] ||
    fail "deploy/Dockerfile uses build/$file but builds only${built% }: add target $target"
done < <(grep -o '/src/build/[^ ]*\|[ =]build/[a-z][^ ]*' deploy/Dockerfile | sed 's,.*build/,,' | sort -u)

# The runtime stage installs the package of each shared library the binaries load
# directly (their own dependencies come with them); libc6, libgcc-s1 and libstdc++6 are
# part of the base image.
if command -v dpkg >/dev/null && command -v readelf >/dev/null && command -v ldconfig >/dev/null; then
  installed=" libc6 libgcc-s1 libstdc++6 $(sed -n '/^FROM debian:bookworm-slim/,$p' deploy/Dockerfile |
    sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' | grep -E '^lib[a-z0-9.+-]+$' | xargs) "
  for pair in "$@"; do
    file=${pair#*=}
    while read -r library; do
      # awk reads to the end: an early exit would end ldconfig with SIGPIPE, which
      # pipefail and set -e turn into a silent exit of this script.
      path=$(ldconfig -p | awk -v l="$library" '$1 == l && !found { print $NF; found = 1 }')
      package=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null || true)
      package=${package%%:*}
      [[ -n $package ]] || { fail "cannot tell which package holds $library (${file##*/} loads it)"; continue; }
      [[ $installed == *" $package "* ]] ||
        fail "${file##*/} loads $library from package $package, which deploy/Dockerfile's runtime stage does not install"
    done < <(readelf -d "$file" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
  done
fi

# --- config/compose.yaml ------------------------------------------------------------------
check "sketchd check-config config/compose.yaml" \
  env KAFKA_BROKERS=kafka:9092 SKETCHD_STATE_DIR="$work/state" "$sketchd" check-config config/compose.yaml
# The topics the configuration reads and writes are those kafka-init creates.
created=$(sed -n 's/.*for spec in \(.*\); do.*/\1/p' docker-compose.yml | tr ' ' '\n' | cut -d: -f1 | sort | tr '\n' ' ')
used=$( { sed -n 's/^ *topics: *\[\(.*\)\].*/\1/p' config/compose.yaml | tr ',' '\n'
          sed -n 's/^ *\(output_topic\|duplicates_topic\|alerts_topic\|topic\): *\([^ #]*\).*/\2/p' config/compose.yaml
        } | tr -d ' ' | sort -u | tr '\n' ' ')
[[ -n $created && $created == "$used" ]] ||
  fail "kafka-init creates topics '$created' but config/compose.yaml uses '$used'"
# Prometheus scrapes the port sketchd listens on, by its compose service name.
port=$(sed -n 's/^ *listen: *"0\.0\.0\.0:\([0-9]*\)".*/\1/p' config/compose.yaml)
grep -q "\"sketchd:$port\"" deploy/prometheus/prometheus.yml ||
  fail "deploy/prometheus/prometheus.yml does not scrape sketchd:$port"

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
