#!/usr/bin/env bash
# Takeover time: from the revocation of a partition on one member of a group to the first
# event the new owner forwards, for a shard of 1,000,000 items' capacity at an FPR of 0.1%
# (issue 40's goal: under 2 s), with the shard moved through the state topic, beside the
# fill from the log and beside nothing moved at all (the floor: the group's own rebalance).
#
#   1. `sketchd mock-kafka` with an input topic of one partition (so its one shard holds the
#      whole capacity) and an output topic (the state topics are made by sketchd);
#   2. per round and mode, a fresh group: member A alone reads N keyed events (N distinct
#      items, a JSON pipeline with dedup {capacity 1M, fpr 0.001, output_topic} and
#      heavy_hitters at their defaults) and commits them; member B joins (it gets nothing:
#      one partition); a producer starts sending new items at about 500 events/s; A is
#      stopped (SIGTERM): it writes its shard (state topic mode) and leaves the group, and B
#      is assigned the partition;
#   3. the takeover time is from A's "revoked" log line to the first moment B's
#      sketchd_dedup_forwarded_total is above 0 (polled every 20 ms); B's log says how many
#      bytes of shards it read and how long the read took.
#
# The floor is the mock cluster's own: once a member leaves, it waits session.timeout.ms
# less 1 s for the others to rejoin before it assigns (src/rdkafka_mock_cgrp.c), 3 s with
# the session of 4 s the members have here (a shorter session expires during the mock's
# first join, which waits 3 s). "cold" measures it with the rest of a
# rebalance; sketchd's share of a takeover is the difference to it.
#
# Modes:
#   state_topic   state.topic set, fill_from_log false: B restores the shard from the topic,
#                 its dedup window Golomb-coded where smaller (state.compression: auto, the
#                 default);
#   state_topic_plain  the same with state.compression: none: the shard as it is in memory;
#   state_topic_transmission  state_topic with dedup.sizing: transmission: larger, sparser
#                 generations, for a lower rate;
#   fill          no state topic, fill_from_log true (the default): B reads the partition's
#                 log of the window again (N events) into its windows;
#   cold          neither: B starts empty at the commit (what the group's rebalance costs
#                 by itself, and where duplicates come from).
#
# Usage: bench/takeover.sh BUILD_DIR   (N=80000 CAPACITY=1000000 REPEAT=3 MODES="state_topic
# state_topic_plain fill cold" by default). CAPACITY is dedup.capacity: 100000 fills the
# window to 80% (a larger N does not: librdkafka's mock cluster keeps at most 5 MiB and
# 100,000 messages of a partition's log, src/rdkafka_mock.c, and drops the oldest beyond).
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR}
source "$(dirname "${BASH_SOURCE[0]}")/../tests/integration/lib.sh"
itest_init "$build/daemon/sketchd"
n=${N:-80000}
capacity=${CAPACITY:-1000000}
repeat=${REPEAT:-3}
modes=${MODES:-state_topic state_topic_plain fill cold}

start_mock_kafka "events:1" "unique:1"
"$python" - "$n" >"$work/events" <<'EOF'
import json, sys
for i in range(int(sys.argv[1])):
    item = f"u{i}"
    print(f'{item}|{json.dumps({"user": {"id": item}, "seq": i}, separators=(",", ":"))}')
EOF
produce events -K'|' <"$work/events"
log "produced $n events of distinct items"

# member_config FILE PORT GROUP MODE: a state topic per group, so that no round restores
# what an earlier one wrote (shard keys name the pipeline, topic and partition, not the group).
member_config() {
  local state
  case $4 in
    state_topic) state="state: { topic: state-$3, snapshot_interval: 30s, fill_from_log: false }" ;;
    state_topic_plain) state="state: { topic: state-$3, snapshot_interval: 30s, fill_from_log: false, compression: none }" ;;
    state_topic_transmission) state="state: { topic: state-$3, snapshot_interval: 30s, fill_from_log: false }" ;;
    fill) state="state: { fill_from_log: true }" ;;
    cold) state="state: { fill_from_log: false }" ;;
  esac
  local sizing=memory
  [[ $4 == state_topic_transmission ]] && sizing=transmission
  cat >"$1" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: $3
  properties: { session.timeout.ms: 4000, heartbeat.interval.ms: 300 }
http:
  listen: "127.0.0.1:$2"
$state
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    scope: partition
    dedup: { window: 1h, capacity: $capacity, fpr: 0.001, sizing: $sizing, output_topic: unique }
    heavy_hitters: { window: 5m }
log: { level: info, summary_interval: 0 }
EOF
}

# iso_ms "2026-11-29T13:36:47.745Z": milliseconds since the epoch.
iso_ms() { "$python" -c 'import sys, datetime; print(int(datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp() * 1000))' "$1"; }

# round MODE INDEX: one takeover; prints its figures.
round() {
  local mode=$1 index=$2 group="bench-takeover-$1-$2"
  local port_a port_b pid_a pid_b
  port_a=$(free_port)
  port_b=$(free_port)
  member_config "$work/a.yaml" "$port_a" "$group" "$mode"
  member_config "$work/b.yaml" "$port_b" "$group" "$mode"
  port=$port_a
  start_daemon "$work/a.yaml" "a-$mode-$index"
  pid_a=$daemon_pid
  wait_committed 1 120 1
  port=$port_b
  start_daemon "$work/b.yaml" "b-$mode-$index"
  pid_b=$daemon_pid
  sleep 3  # B in the group, with nothing assigned
  # New items while the partition moves: what B forwards first.
  "$python" - "$index" "$mode" 2>/dev/null <<'EOF' | kcat -P -b "$bootstrap" -t events -K'|' -X linger.ms=5 2>/dev/null &
import json, sys, time
for i in range(15000):
    item = f"new-{sys.argv[2]}-{sys.argv[1]}-{i}"
    print(f'{item}|{json.dumps({"user": {"id": item}, "seq": i}, separators=(",", ":"))}', flush=True)
    if i % 50 == 49:
        time.sleep(0.1)
EOF
  local producer=$!
  itest_pids+=("$producer")
  sleep 1
  kill -TERM "$pid_a"
  local first=
  local deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    local v
    v=$(curl -sf --max-time 1 "http://127.0.0.1:$port_b/metrics" |
      awk '$1 ~ /^sketchd_dedup_forwarded_total/ { print $2 }' || true)
    if [[ -n $v && ${v%.*} -gt 0 ]]; then
      first=$(date +%s%3N)
      break
    fi
    sleep 0.02
  done
  wait "$pid_a" 2>/dev/null || true
  [[ -n $first ]] || fail "$mode round $index: B forwarded nothing within 60 s"
  local revoked
  revoked=$(grep -m1 "revoked 1 partition" "$work/a-$mode-$index.err" | cut -d' ' -f1)
  [[ -n $revoked ]] || fail "$mode round $index: A logged no revocation"
  local ms=$((first - $(iso_ms "$revoked")))
  local read_line
  read_line=$(grep -m1 -o "found for the .*" "$work/b-$mode-$index.err" || true)
  echo "figure: $mode round $index: takeover ${ms} ms${read_line:+ (state topic: $read_line)}"
  echo "$mode $ms" >>"$work/results"
  kill -TERM "$pid_b"
  wait "$pid_b" 2>/dev/null || true
  kill "$producer" 2>/dev/null || true
  wait "$producer" 2>/dev/null || true
}

for ((r = 1; r <= repeat; r++)); do
  for mode in $modes; do round "$mode" "$r"; done
done

"$python" - "$work/results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, ms = line.split()
    rows.setdefault(mode, []).append(int(ms))
for mode, values in rows.items():
    print(f"figure: {mode}: median takeover {statistics.median(values):.0f} ms "
          f"(rounds: {', '.join(map(str, values))})")
EOF
