#!/usr/bin/env bash
# Restarts lose nothing. Two runs of the same pipeline (dedup, output_topic, state.dir with
# snapshots), each against a stream of 3 chunks of 5,000 JSON events over 6,000 distinct
# items keyed by item on 4 partitions; the daemon is stopped in mid-stream and started
# again on the same state directory and consumer group.
#
# 1. SIGTERM while chunk 2 is being read: sketchd finishes its batch, waits for its outputs,
#    writes a snapshot, commits, exits 0. After the restart:
#      - the two runs together read every event exactly once (items run 1 + run 2 = events);
#      - the output topic holds each first-seen item once: lost 0, duplicated 0.
# 2. kill -9 after chunk 2 (the last snapshot was taken after chunk 1): after the restart,
#    which restores that snapshot and reads again from its positions,
#      - lost 0: every item counted first-seen is in the output topic;
#      - duplicates downstream at most the first-seen events forwarded between the last
#        snapshot and the kill (the documented bound, docs/SEMANTICS.md).
# Both also check the false-positive allowance of dedup_forward_test.sh, and print the
# lost and duplicated counts as figures.
#
# Usage: restart_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

fpr=0.001
chunk=5000
start_mock_kafka in-term:4 out-term:4 in-kill:4 out-kill:4

"$python" - "$work" "$chunk" <<'EOF'
import json, random, sys
work, chunk = sys.argv[1], int(sys.argv[2])
rng = random.Random(99)
for c in range(3):
    with open(f"{work}/chunk{c + 1}", "w") as f:
        for i in range(chunk):
            item = f"r{rng.randrange(6000)}"
            f.write(f'{item}|{json.dumps({"user": {"id": item}, "seq": c * chunk + i}, separators=(",", ":"))}\n')
EOF
cat "$work"/chunk1 "$work"/chunk2 "$work"/chunk3 >"$work/all"
events=$(wc -l <"$work/all")
distinct=$(cut -d'|' -f1 "$work/all" | sort -u | wc -l)
log "stream: $events events in 3 chunks, $distinct distinct items"

# write_config NAME INTERVAL: $work/NAME.yaml reading in-NAME, forwarding to out-NAME.
write_config() {
  cat >"$work/$1.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-restart-$1
  properties: { session.timeout.ms: 6000, statistics.interval.ms: 500 }
  batch_size: 200
http:
  listen: "127.0.0.1:$port"
state:
  dir: "$work/state-$1"
  snapshot_interval: $2
pipelines:
  - name: orders
    topics: [in-$1]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 100000, fpr: $fpr, output_topic: out-$1 }
log: { level: info, summary_interval: 0 }
EOF
}

# value SERIES: the sample of the last scrape.
value() { require_value "$work/metrics.txt" "$1"; }

# check_output NAME MAX_DUPLICATES FIRST_SEEN: the output topic against the input.
check_output() {
  kcat -C -b "$bootstrap" -t "out-$1" -o beginning -e -q -f '%k\n' >"$work/out-$1.keys" || fail "kcat could not read out-$1"
  "$python" - "$work/out-$1.keys" "$distinct" "$2" "$3" "$fpr" "$1" <<'EOF' || fail "$1: the output topic lost events, or holds too many duplicates"
import collections, math, sys
path, distinct, max_dups, first_seen, fpr, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
keys = [k for k in open(path).read().split("\n") if k]
counts = collections.Counter(keys)
duplicated = sum(c - 1 for c in counts.values())
lost = first_seen - len(keys)  # events counted first-seen but not in the topic
missing = distinct - len(counts)
allowance = fpr * distinct + 5 * math.sqrt(distinct * fpr * (1 - fpr))
print(f"figures ({name}): {len(keys)} events downstream for {distinct} distinct items: lost {max(lost, 0)}, "
      f"duplicated {duplicated} (bound {max_dups}), items missing (false positives) {missing} (allowance {allowance:.1f})")
sys.exit(0 if lost <= 0 and len(keys) == first_seen and duplicated <= max_dups and missing <= allowance else 1)
EOF
}

# --- 1. SIGTERM in mid-stream --------------------------------------------------------
port=$(free_port)
write_config term 1s
produce in-term -K'|' <"$work/chunk1"
start_daemon "$work/term.yaml" term-1
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq "$chunk" 60
produce in-term -K'|' <"$work/chunk2" &
producer=$!
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -gt "$chunk" 60
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
[[ $stop_status == 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM"
wait "$producer" || fail "producing chunk 2 failed"
# Run 1's last batches came after the last scrape: its total is in its last log line.
items1=$(sed -n 's/.*stopped after consuming \([0-9]*\) message.*/\1/p' "$work/term-1.err")
[[ -n $items1 ]] || fail "run 1 did not log how many messages it consumed"
start_daemon "$work/term.yaml" term-2
check_log "$work/term-2.err" "restored snapshot"
produce in-term -K'|' <"$work/chunk3"
# Run 2 reads exactly what run 1 did not: everything after the snapshot's positions.
deadline=$((SECONDS + 60))
while :; do
  scrape
  items2=$(value 'sketchd_pipeline_items_total{pipeline="orders"}')
  fs2=$(value 'sketchd_dedup_first_seen_total{pipeline="orders"}')
  fw2=$(value 'sketchd_dedup_forwarded_total{pipeline="orders"}')
  if ((items1 + items2 >= 3 * chunk)) && [[ $fw2 == "$fs2" ]]; then
    sleep 1
    scrape
    [[ $(value 'sketchd_pipeline_items_total{pipeline="orders"}') == "$items2" ]] && break
  fi
  ((SECONDS < deadline)) || fail "run 2 did not settle (items $items2, first seen $fs2, forwarded $fw2)"
  sleep 0.3
done
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
((items1 + items2 == 3 * chunk)) || fail "runs 1 and 2 read $items1 + $items2 events, not $((3 * chunk)): some were read twice"
check_output term 0 "$(kcat -C -b "$bootstrap" -t out-term -o beginning -e -q -f '%k\n' | wc -l)"
log "SIGTERM: run 1 read $items1 events, run 2 the other $items2: each event read once"

# --- 2. kill -9 in mid-stream ---------------------------------------------------------
port=$(free_port)
write_config kill 3s
produce in-kill -K'|' <"$work/chunk1"
start_daemon "$work/kill.yaml" kill-1
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq "$chunk" 60
# A snapshot that holds chunk 1, then chunk 2 read and forwarded before the kill.
snap_after=$EPOCHREALTIME
wait_metric 'sketchd_snapshot_last_success_timestamp_seconds' -ge "$snap_after" 30
fs_snapshot=$(value 'sketchd_dedup_first_seen_total{pipeline="orders"}')
produce in-kill -K'|' <"$work/chunk2"
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq $((2 * chunk)) 60
fs_kill=$(value 'sketchd_dedup_first_seen_total{pipeline="orders"}')
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -eq "$fs_kill" 30
kill -KILL "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
bound=$((fs_kill - fs_snapshot))
log "killed with $fs_kill first-seen forwarded, $fs_snapshot of them in the last snapshot"

start_daemon "$work/kill.yaml" kill-2
check_log "$work/kill-2.err" "restored snapshot"
produce in-kill -K'|' <"$work/chunk3"
deadline=$((SECONDS + 60))
while :; do
  scrape
  items2=$(value 'sketchd_pipeline_items_total{pipeline="orders"}')
  fs2=$(value 'sketchd_dedup_first_seen_total{pipeline="orders"}')
  fw2=$(value 'sketchd_dedup_forwarded_total{pipeline="orders"}')
  if ((items2 >= chunk)) && [[ $fw2 == "$fs2" ]]; then
    # Every event of in-kill consumed and committed (its outputs delivered): the lag, from
    # statistics newer than chunk 3 (every 500 ms), is 0 on the 4 partitions.
    wait_committed 4 60 1
    items2=$(value 'sketchd_pipeline_items_total{pipeline="orders"}')
    fs2=$(value 'sketchd_dedup_first_seen_total{pipeline="orders"}')
    [[ $(value 'sketchd_dedup_forwarded_total{pipeline="orders"}') == "$fs2" ]] && break
  fi
  ((SECONDS < deadline)) || fail "run 2 did not settle (items $items2, first seen $fs2, forwarded $fw2)"
  sleep 0.3
done
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
check_output kill "$bound" $((fs_kill + fs2))
log "kill -9: run 2 read $items2 events again or anew"
log "PASS"
