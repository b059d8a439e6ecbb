#!/usr/bin/env bash
# `sketchd mock-kafka` serves real Kafka clients: kcat produces 1000 keyed messages to a
# 3-partition topic and reads every one of them back, then SIGTERM stops the server with
# exit status 0.
#
# Usage: mock_kafka_test.sh PATH/TO/sketchd
# Exit status 0 on success, 77 (skipped) when kcat is not installed, 1 on failure.
set -euo pipefail

readonly sketchd=${1:?usage: $0 PATH/TO/sketchd}
readonly messages=1000
readonly partitions=3

if ! command -v kcat >/dev/null 2>&1; then
  if [[ ${SKETCHD_REQUIRE_TOOLS:-0} == 1 ]]; then  # as make test sets it (see lib.sh)
    echo "FAIL: kcat is not installed (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
  echo "SKIP: kcat is not installed"
  exit 77
fi

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  if [[ -s $work/server.err ]]; then
    echo "--- sketchd mock-kafka stderr:" >&2
    cat "$work/server.err" >&2
  fi
  exit 1
}

: >"$work/server.out"  # exists before the server opens it, for the reads below
"$sketchd" mock-kafka --topic "events:$partitions" >"$work/server.out" 2>"$work/server.err" &
server_pid=$!

# The first line on stdout is "bootstrap: HOST:PORT[,HOST:PORT…]".
bootstrap=
for _ in $(seq 100); do
  if IFS= read -r first <"$work/server.out" && [[ -n $first ]]; then
    [[ $first == "bootstrap: "* ]] || fail "first line is \"$first\", not \"bootstrap: …\""
    bootstrap=${first#bootstrap: }
    break
  fi
  kill -0 "$server_pid" 2>/dev/null \
    || fail "sketchd mock-kafka exited before printing the bootstrap line"
  sleep 0.1
done
[[ -n $bootstrap ]] || fail "no bootstrap line within 10 s"
[[ $bootstrap =~ ^127\.0\.0\.1:[0-9]+$ ]] \
  || fail "bootstrap \"$bootstrap\" is not one loopback address"
echo "bootstrap: $bootstrap"

# Distinct keys, so the default partitioner spreads them over every partition (the chance
# that 1000 hashed keys miss one of 3 partitions is 3·(2/3)^1000, nil).
for ((i = 0; i < messages; i++)); do
  printf 'user-%04d:event %d\n' "$i" "$i"
done >"$work/sent"

timeout 30 kcat -P -b "$bootstrap" -t events -K: -X message.timeout.ms=10000 <"$work/sent" \
  || fail "kcat could not produce"

timeout 30 kcat -C -b "$bootstrap" -t events -e -q -o beginning -f '%p %k:%s\n' >"$work/received" \
  || fail "kcat could not consume"

count=$(wc -l <"$work/received")
[[ $count -eq $messages ]] || fail "consumed $count messages, produced $messages"
if ! diff <(sort "$work/sent") <(cut -d' ' -f2- "$work/received" | sort) >"$work/diff"; then
  head -20 "$work/diff" >&2
  fail "consumed messages differ from the produced ones"
fi
used=$(cut -d' ' -f1 "$work/received" | sort -u | wc -l)
[[ $used -eq $partitions ]] || fail "messages landed in $used partitions, not $partitions"
echo "round trip: $count messages over $used partitions"

# SIGTERM stops the server cleanly within a few seconds (the mock cluster's thread polls
# once a second, so about 1 s is expected).
kill -TERM "$server_pid"
for _ in $(seq 50); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$server_pid" 2>/dev/null; then
  fail "sketchd mock-kafka still runs 5 s after SIGTERM"
fi
status=0
wait "$server_pid" || status=$?
server_pid=
[[ $status -eq 0 ]] || fail "sketchd mock-kafka exited with status $status after SIGTERM"
echo "PASS"
