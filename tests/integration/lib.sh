# shellcheck shell=bash
# Shared helpers of the daemon's integration tests (tests/integration/daemon_*.sh).
# Source it after `set -euo pipefail`:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   itest_init "$@"                  # sketchd path from $1; work dir; EXIT trap; tools
#   start_mock_kafka events:4        # sets $bootstrap
#   port=$(free_port)
#   write a config to "$work/sketchd.yaml", then
#   start_daemon "$work/sketchd.yaml" # sets $daemon_pid; waits for /readyz
#   wait_metric 'sketchd_pipeline_items_total{pipeline="clicks"}' -ge 1000 60
#
# Every process started through start_background is killed by the EXIT trap; a failing
# check prints the logs of every process it started. Nothing here sleeps for a fixed
# long time: waits are bounded poll loops.

# Results go to globals the tests read ($stop_status, $api_status, $metric…), and the
# tests set $port before start_daemon: shellcheck cannot see either side.
# shellcheck disable=SC2034,SC2154

readonly ITEST_SKIP=77
source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"

# itest_init PATH/TO/sketchd: checks the tools, makes the work directory, installs the
# EXIT trap. Exits 77 (skipped) when a client the tests need is not installed, or 1 (failed)
# with SKETCHD_REQUIRE_TOOLS=1, as `make test` sets it: it installs them all, so a missing
# one there is a defect of the package list, not a reason to pass.
itest_init() {
  sketchd=${1:?usage: $0 PATH/TO/sketchd}
  [[ -x $sketchd ]] || { echo "FAIL: $sketchd is not an executable" >&2; exit 1; }
  sketchd=$(cd "$(dirname "$sketchd")" && pwd)/$(basename "$sketchd")  # tests may cd
  require_tools kcat curl python3 ${ITEST_EXTRA_TOOLS[@]+"${ITEST_EXTRA_TOOLS[@]}"}
  # The interpreter itself, not a version manager's shim in front of it (which can cost
  # 0.1 s per start): the checks start python3 often.
  python=$(python3 -c 'import sys; print(sys.executable)')
  work=$(mktemp -d "${TMPDIR:-/tmp}/sketchd-itest.XXXXXX")
  itest_pids=()
  itest_names=()
  trap itest_cleanup EXIT
  # Killed from outside (ctest's timeout, Ctrl-C): clean up too.
  trap 'exit 143' TERM
  trap 'exit 130' INT
}

# Kills every process still running (SIGKILL: a test that got here has failed or is
# done), then removes the work directory unless ITEST_KEEP is set.
itest_cleanup() {
  local status=$?
  local pid
  for pid in "${itest_pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [[ -n ${ITEST_KEEP:-} ]]; then
    echo "work directory kept: $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$status"
}

# fail MESSAGE…: prints the message and the tail of every log, exits 1.
fail() {
  echo "FAIL: $*" >&2
  local i f
  local report='^==[0-9]+==ERROR: |^WARNING: ThreadSanitizer|runtime error: '
  # A sanitizer's report first, from its first line: the tails below may not reach it.
  for i in "${!itest_names[@]}"; do
    f="$work/${itest_names[$i]}.err"
    if [[ -s $f ]] && grep -q -E "$report" "$f"; then
      echo "--- the sanitizer's report in ${f##*/} (its first 40 lines):" >&2
      sed -n -E "/$report/,\$p" "$f" | head -n 40 | cut -c1-300 >&2
    fi
  done
  # Then the threads of a process that did not stop in time (stop_process).
  for f in "$work"/stacks.*.txt; do
    [[ -s $f ]] || continue
    echo "--- the threads of the process that did not stop, ${f##*/} (their frames):" >&2
    grep -E '^(Thread |#)' "$f" | sed -E 's/ \(.*\) at / at /' | head -n 250 | cut -c1-200 >&2
  done
  for i in "${!itest_names[@]}"; do
    for f in "$work/${itest_names[$i]}.out" "$work/${itest_names[$i]}.err"; do
      if [[ -s $f ]]; then
        # Warnings and errors from the start, which the last lines may no longer show.
        if grep -q -E ' (warning|error|critical) ' "$f"; then
          echo "--- warnings and errors of ${f##*/} (the first 30):" >&2
          grep -E ' (warning|error|critical) ' "$f" | head -n 30 | cut -c1-400 >&2
        fi
        echo "--- last lines of ${f##*/}:" >&2
        tail -n 40 "$f" | cut -c1-400 >&2
      fi
    done
  done
  exit 1
}

log() { echo "$(date +%T.%3N) $*"; }

# check PYTHON_EXPRESSION MESSAGE…: fails with MESSAGE unless the expression is true
# (for comparisons of real numbers, which bash cannot do).
check() {
  local expression=$1
  shift
  "$python" -c "import sys; sys.exit(0 if ($expression) else 1)" || fail "$@"
}

# start_background NAME COMMAND…: runs COMMAND with stdout and stderr in
# $work/NAME.out and $work/NAME.err, stdin from $BACKGROUND_STDIN (default /dev/null);
# sets $last_pid. Killed at exit.
start_background() {
  local name=$1
  shift
  : >"$work/$name.out"
  : >"$work/$name.err"
  "$@" <"${BACKGROUND_STDIN:-/dev/null}" >"$work/$name.out" 2>"$work/$name.err" &
  last_pid=$!
  itest_pids+=("$last_pid")
  itest_names+=("$name")
}

# now_us: the wall clock in microseconds.
now_us() { echo "${EPOCHREALTIME/./}"; }

# ITEST_SLOW: how many times slower this build runs than an optimised one (set by ctest
# for sanitizer builds); the waits below allow for it.
slow=${ITEST_SLOW:-1}

# dump_stacks PID: the backtraces of all of PID's threads, in $work/stacks.PID.txt, for
# fail() to print: what a process that does not stop is waiting for. Needs gdb (the
# project's dependency script installs it); without it, or where the process cannot be
# traced, nothing.
dump_stacks() {
  command -v gdb >/dev/null || return 0
  timeout 60 gdb -p "$1" -batch -nx -ex 'set pagination off' -ex 'thread apply all bt' \
    >"$work/stacks.$1.txt" 2>&1 || true
}

# stop_process PID [SECONDS]: sends SIGTERM and waits at most SECONDS (default 5; times
# ITEST_SLOW) for the exit. Sets $stop_status to the exit status and $stop_ms to the time it
# took in ms; returns 1 (after dump_stacks and SIGKILL) when the process did not exit in time.
stop_process() {
  local pid=$1 limit=$((${2:-5} * slow)) signal=${3:-TERM}
  local start
  start=$(now_us)
  kill -"$signal" "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    if (($(now_us) - start > limit * 1000000)); then
      dump_stacks "$pid"
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      stop_status=137
      stop_ms=$((($(now_us) - start) / 1000))
      return 1
    fi
    sleep 0.05
  done
  stop_status=0
  wait "$pid" || stop_status=$?
  stop_ms=$((($(now_us) - start) / 1000))
  return 0
}

# free_port: a TCP port of 127.0.0.1 that nothing listens on now (the kernel picks it).
free_port() {
  "$python" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# start_mock_kafka TOPIC[:PARTITIONS]…: starts `sketchd mock-kafka` with these topics and
# sets $bootstrap and $mock_pid. With MOCK_CONTROL=1 in the environment, the cluster reads
# fault-injection commands (`sketchd mock-kafka --control`) sent by mock_control;
# MOCK_BROKERS=N starts N brokers (default 1).
start_mock_kafka() {
  local args=(--brokers "${MOCK_BROKERS:-1}") t
  for t in "$@"; do args+=(--topic "$t"); done
  if [[ -n ${MOCK_CONTROL:-} ]]; then
    mkfifo "$work/mock-control"
    # Read-write: opening the FIFO does not wait for the other side.
    exec {mock_control_fd}<>"$work/mock-control"
    mock_control_sent=0
    BACKGROUND_STDIN=$work/mock-control start_background mock-kafka "$sketchd" mock-kafka --control "${args[@]}"
  else
    start_background mock-kafka "$sketchd" mock-kafka "${args[@]}"
  fi
  mock_pid=$last_pid
  bootstrap=
  local first
  for _ in $(seq 100); do
    if IFS= read -r first <"$work/mock-kafka.out" && [[ -n $first ]]; then
      [[ $first == "bootstrap: "* ]] || fail "mock-kafka printed \"$first\", not \"bootstrap: …\""
      bootstrap=${first#bootstrap: }
      log "mock-kafka at $bootstrap"
      return 0
    fi
    kill -0 "$mock_pid" 2>/dev/null || fail "sketchd mock-kafka exited before printing its bootstrap line"
    sleep 0.1
  done
  fail "sketchd mock-kafka printed no bootstrap line within 10 s"
}

# mock_control COMMAND…: sends fault-injection commands (down 1, up 1, errors 0 6,7, …) to
# the cluster started with MOCK_CONTROL=1 and waits for their "ok" (at most 10 s). Several
# go in one write, which the cluster applies back to back (`clear 22` and `errors 22 31`
# with no request of the clients served in between, give or take microseconds).
mock_control() {
  local command
  printf '%s\n' "$@" >&"$mock_control_fd"
  mock_control_sent=$((mock_control_sent + $#))
  for _ in $(seq 100); do
    if (($(grep -c '^ok: ' "$work/mock-kafka.out" || true) >= mock_control_sent)); then
      for command in "$@"; do log "mock-kafka: $command"; done
      return 0
    fi
    sleep 0.1
  done
  fail "mock-kafka did not acknowledge \"$*\""
}

# keyed_lines FIRST COUNT: events for kcat -K'|', one per item kI for I in FIRST …
# FIRST+COUNT−1: "kI|{"user":{"id":"kI"}}" (the key is the item, the value its JSON).
keyed_lines() {
  awk -v first="$1" -v count="$2" \
    'BEGIN { for (i = first; i < first + count; i++) printf "k%d|{\"user\":{\"id\":\"k%d\"}}\n", i, i }'
}

# recurring_events SEED DISTINCT REPEATS: writes $work/events, lines for kcat -K'|', each
# item "item-I" (I < DISTINCT) REPEATS times in an order shuffled with SEED:
# "item-I|{"user":{"id":"item-I"},"seq":S}"; sets $events and $distinct.
recurring_events() {
  "$python" - "$work" "$1" "$2" "$3" <<'EOF'
import json, random, sys
work, seed, distinct, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
events = [f"item-{i}" for i in range(distinct) for _ in range(repeats)]
rng.shuffle(events)
with open(f"{work}/events", "w") as f:
    for seq, item in enumerate(events):
        f.write(f'{item}|{json.dumps({"user": {"id": item}, "seq": seq}, separators=(",", ":"))}\n')
EOF
  events=$(wc -l <"$work/events")
  distinct=$(cut -d'|' -f1 "$work/events" | sort -u | wc -l)
  log "stream: $events events, $distinct distinct items"
}

# takeover_member_config FILE PORT GROUP COMMIT_INTERVAL_MS: a member of consumer group
# GROUP reading `events` in batches of 200, committing every COMMIT_INTERVAL_MS, with short
# group timings; its pipeline `orders` takes the item from /user/id and forwards first-seen
# events to `unique` (dedup: 1h, capacity 100,000, FPR 1e-6); HTTP on 127.0.0.1:PORT.
takeover_member_config() {
  cat >"$1" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: $3
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000,
                auto.commit.interval.ms: $4, statistics.interval.ms: 500 }
  batch_size: 200
http:
  listen: "127.0.0.1:$2"
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 100000, fpr: 0.000001, output_topic: unique }
log: { level: info, summary_interval: 0 }
EOF
}

# copies_found LOG SINCE: how many copies of its input the last read-back of output topic
# `unique` that LOG tells of, from SINCE ("the last commit of the partitions taken over"),
# found (the log line "output topic unique: read back N message(s) forwarded since SINCE in
# S s; M of them came from input this instance reads again…"); nothing without one.
copies_found() {
  sed -n "s/.*output topic unique: read back [0-9]* message(s) forwarded since $2 in [0-9.]* s; \([0-9]*\) of them came from input this instance reads again.*/\1/p" "$1" | tail -1
}

# group_member_config FILE PORT GROUP FPR [SCOPE [STATE [HH_WINDOW]]]: a member of consumer
# group GROUP reading `events` in small batches (50) with short group timings; its pipeline
# `orders` takes the item from /user/id, forwards first-seen events to `unique` (dedup: 1h,
# capacity 100,000, FPR) and counts heavy hitters (HH_WINDOW, 5m by default, ε = 0.001);
# its windows are kept per SCOPE (instance, the default, or partition); HTTP on
# 127.0.0.1:PORT; STATE, a YAML line, is its state section.
group_member_config() {
  cat >"$1" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: $3
  batch_size: 50
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 500, auto.commit.interval.ms: 500,
                statistics.interval.ms: 500 }
http:
  listen: "127.0.0.1:$2"
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    scope: ${5:-instance}
    dedup: { window: 1h, capacity: 100000, fpr: $4, output_topic: unique }
    heavy_hitters: { window: ${7:-5m}, top_k: 5, threshold: 0.01, epsilon: 0.001 }
log: { level: info, summary_interval: 0 }
${6:-}
EOF
}

# produce TOPIC [KCAT OPTIONS…] < LINES: produces with kcat and waits for every delivery.
produce() {
  local topic=$1
  shift
  timeout 60 kcat -P -b "$bootstrap" -t "$topic" -X message.timeout.ms=30000 "$@" \
    || fail "kcat could not produce to $topic"
}

# start_daemon CONFIG [NAME]: runs `sketchd run --config CONFIG` (logs in $work/NAME.err,
# NAME defaults to "sketchd"), sets $daemon_pid and $http, and waits until /readyz
# answers 200 (at most 30 s). The config's http.listen must be 127.0.0.1:$port; with
# http.tls, the test sets http_scheme=https (and curl_auth the CA to trust).
start_daemon() {
  local config=$1 name=${2:-sketchd}
  start_background "$name" "$sketchd" run --config "$config"
  daemon_pid=$last_pid
  http="${http_scheme:-http}://127.0.0.1:$port"
  wait_http "$http/readyz" 30 "$daemon_pid"
  log "sketchd ($name, pid $daemon_pid) ready on $http"
}

# make_certificates DIR NAME…: a test CA (DIR/ca.crt, DIR/ca.key) and, for each NAME, a
# certificate for 127.0.0.1 it signs (DIR/NAME.crt, DIR/NAME.key; P-256, valid 2 days),
# made with openssl (ITEST_EXTRA_TOOLS must name it).
make_certificates() {
  local dir=$1 name
  shift
  mkdir -p "$dir"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 2 \
    -subj "/CN=sketchd test CA" 2>"$dir/openssl.err" || fail "openssl: $(cat "$dir/openssl.err")"
  for name in "$@"; do
    openssl req "${ec[@]}" -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" \
      2>>"$dir/openssl.err" || fail "openssl: $(cat "$dir/openssl.err")"
    printf 'subjectAltName=IP:127.0.0.1\n' >"$dir/$name.ext"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
      -CAcreateserial -days 2 -extfile "$dir/$name.ext" -out "$dir/$name.crt" \
      2>>"$dir/openssl.err" || fail "openssl: $(cat "$dir/openssl.err")"
  done
}

# curl_auth: curl's options for sketchd's HTTP API (a test with http.basic_auth_users sets
# it, as in curl_auth=(-u user:password)), used by wait_http, scrape and the API helpers.
# wait_http URL SECONDS [PID]: waits until URL answers 200; fails when PID exits first.
wait_http() {
  local url=$1 limit=$(($2 * slow)) pid=${3:-}
  local deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    if [[ $(curl -s ${curl_auth[@]+"${curl_auth[@]}"} -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true) == 200 ]]; then
      return 0
    fi
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
      fail "the process (pid $pid) exited before $url answered"
    fi
    sleep 0.1
  done
  fail "$url did not answer 200 within $limit s"
}

# scrape: GET $http/metrics into $work/metrics.txt.
scrape() {
  curl -sf ${curl_auth[@]+"${curl_auth[@]}"} --max-time 5 "$http/metrics" >"$work/metrics.txt" ||
    fail "GET $http/metrics failed"
}

# metric_value FILE SERIES: the value of the sample whose name and labels are exactly
# SERIES (as the exposition prints it, e.g. 'sketchd_pipeline_items_total{pipeline="a"}');
# prints nothing when there is no such sample.
metric_value() {
  # Through the environment: `awk -v` would interpret the backslashes of escaped labels.
  SERIES=$2 awk '
    /^#/ { next }
    {
      i = match($0, / [^ ]+$/)       # the value is the last field; labels may hold spaces
      if (i && substr($0, 1, i - 1) == ENVIRON["SERIES"]) { print substr($0, i + 1); exit }
    }' "$1"
}

# metric_series FILE NAME: every sample line of the metric NAME (no comments).
metric_series() {
  NAME=$2 awk '
    /^#/ { next }
    { n = $0; sub(/[{ ].*/, "", n); if (n == ENVIRON["NAME"]) print }' "$1"
}

# require_value FILE SERIES: like metric_value, but fails when the sample is absent.
require_value() {
  local v
  v=$(metric_value "$1" "$2")
  [[ -n $v ]] || fail "no sample $2 in the scrape"
  echo "$v"
}

# expect_values FILE 'SERIES VALUE'…: each SERIES has exactly the sample VALUE in FILE.
expect_values() {
  local file=$1 expectation got
  shift
  for expectation in "$@"; do
    got=$(require_value "$file" "${expectation% *}")
    [[ $got == "${expectation##* }" ]] || fail "${expectation% *} is $got, expected ${expectation##* }"
  done
}

# wait_metric SERIES OP TARGET SECONDS: scrapes until the sample's value satisfies the
# numeric comparison OP (-eq, -ne, -ge, -gt, -le, -lt) with TARGET; fails after SECONDS.
# Leaves the last scrape in $work/metrics.txt and the value in $metric.
wait_metric() {
  local series=$1 op=$2 target=$3 limit=$(($4 * slow))
  local deadline=$((SECONDS + limit))
  metric=
  while ((SECONDS < deadline)); do
    kill -0 "$daemon_pid" 2>/dev/null || fail "sketchd exited while waiting for $series $op $target"
    scrape
    metric=$(metric_value "$work/metrics.txt" "$series")
    if [[ -n $metric ]] && compare "$metric" "$op" "$target"; then
      return 0
    fi
    sleep 0.2
  done
  fail "$series is \"$metric\" after $limit s, expected $op $target"
}

# wait_stable SERIES SECONDS: scrapes once a second until two scrapes in a row give the
# sample the same value, which is left in $metric; fails after SECONDS. For a count whose
# final value is not known beforehand, once what feeds it has stopped.
wait_stable() {
  local series=$1 limit=$(($2 * slow)) last=
  local deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    kill -0 "$daemon_pid" 2>/dev/null || fail "sketchd exited while waiting for $series to settle"
    scrape
    metric=$(metric_value "$work/metrics.txt" "$series")
    [[ -n $metric && $metric == "$last" ]] && return 0
    last=$metric
    sleep 1
  done
  fail "$series did not settle within $limit s (last \"$metric\")"
}

# wait_committed PARTITIONS SECONDS [FRESH]: scrapes until sketchd_kafka_consumer_lag_messages
# has PARTITIONS samples, all 0: the group has committed every message of the partitions
# the daemon holds. The lag comes with the client's statistics (statistics.interval.ms,
# 5 s by default), so it may still show a 0 from before the last messages arrived: FRESH
# seconds (at least twice the interval) are waited first, so that only newer ones count.
wait_committed() {
  local want=$1 limit=$2 lags
  sleep "${3:-0}"
  local deadline=$((SECONDS + limit))
  while :; do
    kill -0 "$daemon_pid" 2>/dev/null || fail "sketchd exited while waiting for its commits"
    scrape
    lags=$(metric_series "$work/metrics.txt" sketchd_kafka_consumer_lag_messages | awk '{ print $NF }')
    if [[ $(grep -c . <<<"$lags") == "$want" ]] && ! grep -qv '^0$' <<<"$lags"; then return 0; fi
    ((SECONDS < deadline)) || fail "consumer lag not 0 on $want partitions within $limit s: $(tr '\n' ' ' <<<"$lags")"
    sleep 0.3
  done
}

# compare A OP B: the numeric comparison OP (-eq, -ne, -ge, -gt, -le, -lt) of two numbers
# in any notation the exposition uses (42, 0.5, 1e-05).
compare() {
  awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN {
    a += 0; b += 0
    if (op == "-eq") r = a == b; else if (op == "-ne") r = a != b
    else if (op == "-ge") r = a >= b; else if (op == "-gt") r = a > b
    else if (op == "-le") r = a <= b; else if (op == "-lt") r = a < b
    else { print "compare: unknown operator " op > "/dev/stderr"; exit 2 }
    exit !r
  }'
}

# api PATH [FILE]: GET $http/PATH (any status) into FILE (default $work/api.json); sets
# $api_status to the HTTP status.
api() {
  local file=${2:-$work/api.json}
  api_status=$(curl -s ${curl_auth[@]+"${curl_auth[@]}"} --max-time 5 -o "$file" -w '%{http_code}' "$http/$1") \
    || fail "GET $http/$1 failed"
}

# json FILE EXPR: evaluates the Python expression EXPR with `d` bound to FILE's JSON and
# prints the result (JSON for containers and booleans, plain text for strings/numbers).
json() {
  "$python" - "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
v = eval(sys.argv[2], {"d": d})
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)
EOF
}

# check_each_once TOTAL WHY: the output topic `unique` holds each of the TOTAL items exactly
# once (its keys); logs the figures, and fails naming WHY for a duplicate.
check_each_once() {
  local total=$1 distinct records
  kcat -C -b "$bootstrap" -t unique -o beginning -e -q -f '%k\n' >"$work/unique.keys" || fail "kcat could not read unique"
  distinct=$(sort -u "$work/unique.keys" | wc -l)
  records=$(wc -l <"$work/unique.keys")
  log "figures: $records events downstream, $distinct distinct of $total items: lost $((total - distinct)), duplicated $((records - distinct))"
  [[ $distinct -eq $total ]] || fail "lost $((total - distinct)) items"
  [[ $records -eq $distinct ]] || fail "$((records - distinct)) items forwarded twice ($2)"
}

# forwarded PORT: sketchd_dedup_forwarded_total of pipeline `orders` of the instance on PORT.
forwarded() {
  curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" >"$work/m.txt" || fail "cannot scrape port $1"
  metric_value "$work/m.txt" 'sketchd_dedup_forwarded_total{pipeline="orders"}'
}

# wait_total COUNT PORT…: until the instances on PORT… have forwarded COUNT in all (their
# pipeline `orders`), within 90 s.
wait_total() {
  local want=$1 deadline=$((SECONDS + 90)) total p
  shift
  while ((SECONDS < deadline)); do
    total=0
    for p in "$@"; do total=$((total + $(forwarded "$p"))); done
    ((total >= want)) && return 0
    sleep 0.3
  done
  fail "forwarded $total in all after 90 s, expected $want"
}

# wait_assigned NAME COUNT: until the log of start_daemon's NAME says COUNT partitions are
# assigned, within 90 s (after a kill -9, the group first waits for the dead member's
# session to expire).
wait_assigned() {
  local deadline=$((SECONDS + 90))
  until grep -q "; $2 assigned now" "$work/$1.err"; do
    ((SECONDS < deadline)) || fail "sketchd $1 did not have $2 partitions within 90 s"
    sleep 0.2
  done
}

# check_log FILE PATTERN: fails unless FILE has a line matching the extended regex.
check_log() {
  grep -Eq -- "$2" "$1" || fail "no line matching /$2/ in ${1##*/}"
}
