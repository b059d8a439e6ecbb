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
# 2. kill -9 after chunk 2 was forwarded and committed, the last snapshot holding chunk 1
#    only: the restart restores that snapshot and reads chunk 2 again into its windows
#    without forwarding it; then chunk 3:
#      - lost 0: every item counted first-seen is in the output topic;
#      - duplicated 0: everything forwarded before the kill was committed, and chunk 2's
#        items are in the windows again when chunk 3 repeats them.
# 3. The same with a partition that had no message yet when the snapshot was written
#    (chunk 1 on partition 0 only, then chunk 2 on partition 1, committed, kill -9, chunk 3
#    on partition 1): the snapshot holds partition 1 at its start all the same, so the
#    restart reads chunk 2 again into its windows: duplicated 0. (A snapshot that left the
#    partition out had the restart start at the commit and forward again the items of
#    chunk 3 first seen in chunk 2.)
# All check the false-positive allowance of dedup_forward_test.sh, and print the lost and
# duplicated counts as figures.
#
# Usage: restart_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

fpr=0.001
chunk=5000
start_mock_kafka in-term:4 out-term:4 in-kill:4 out-kill:4 in-idle:2 out-idle:2 in-crash:4 out-crash:4

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

# write_config NAME INTERVAL [PROPERTIES]: $work/NAME.yaml reading in-NAME, forwarding to
# out-NAME; PROPERTIES (", name: value…") added to kafka.properties.
write_config() {
  cat >"$work/$1.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-restart-$1
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000, statistics.interval.ms: 500${3:-} }
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

# forward_chunk NAME CHUNK [KCAT ARGS…]: produces $work/CHUNK to in-NAME and waits until
# the running daemon has read its $chunk events and forwarded its first-seen ones, their
# number in $forwarded.
forward_chunk() {
  local name=$1 file=$2
  shift 2
  produce "in-$name" -K'|' "$@" <"$work/$file"
  wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq "$chunk" 60
  forwarded=$(value 'sketchd_dedup_first_seen_total{pipeline="orders"}')
  wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -eq "$forwarded" 30
}

# kill_daemon: kill -9, as a crash.
kill_daemon() {
  kill -KILL "$daemon_pid"
  wait "$daemon_pid" 2>/dev/null || true
}

# stop_daemon: SIGTERM, and a clean exit within 10 s.
stop_daemon() {
  stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
  [[ $stop_status == 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM"
}

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
stop_daemon
wait "$producer" || fail "producing chunk 2 failed"
# Run 1's last batches came after the last scrape: its total is in its last log line.
items1=$(sed -n 's/.*stopped after consuming \([0-9]*\) message.*/\1/p' "$work/term-1.err")
[[ -n $items1 ]] || fail "run 1 did not log how many messages it consumed"
check_log "$work/term-1.err" "final snapshot written to "
start_daemon "$work/term.yaml" term-2
# The snapshot's time in UTC, as the log's own times.
check_log "$work/term-2.err" "restored snapshot .* of [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z \\(1 pipeline"
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

# --- 2. kill -9 after a commit past the snapshot -----------------------------------------
# Run 1 reads chunk 1 and stops (SIGTERM): its snapshot holds chunk 1. Run 2 restores it,
# reads chunk 2, forwards its first-seen events and commits them (the group's offsets move
# past the snapshot's positions, as they do between any two snapshots), and is killed
# before it writes another snapshot (snapshot_interval 1h). Run 3 restores the snapshot of
# chunk 1: it must read chunk 2 again into its windows without forwarding it (its outputs
# were delivered), so that chunk 3's items that occurred in chunk 2 are duplicates. A run 3
# that started at the committed offsets without chunk 2 in its windows forwarded them a
# second time (hundreds of duplicates here).
port=$(free_port)
write_config kill 1h
start_daemon "$work/kill.yaml" kill-1
forward_chunk kill chunk1
fw1=$forwarded
stop_daemon

start_daemon "$work/kill.yaml" kill-2
check_log "$work/kill-2.err" "restored snapshot"
forward_chunk kill chunk2
fw2=$forwarded
# Committed: the lag, from statistics newer than the forwarding (every 500 ms), is 0.
wait_committed 4 60 1
kill_daemon
log "run 2 killed after forwarding and committing chunk 2 ($fw2 first-seen), its snapshot still of chunk 1"

start_daemon "$work/kill.yaml" kill-3
check_log "$work/kill-3.err" "restored snapshot"
wait_assigned kill-3 4
replayed=$(grep -c "go into the windows again without being forwarded" "$work/kill-3.err" || true)
((replayed == 4)) || fail "run 3 read $replayed of 4 partitions again up to their committed offsets"
produce in-kill -K'|' <"$work/chunk3"
# Chunk 2 read again and chunk 3: 2 chunks; then everything forwarded and committed.
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq $((2 * chunk)) 60
wait_committed 4 60 1
# A forward is counted at the turn after its delivery, which may follow the commit: the
# count is read once it holds for a second.
wait_stable 'sketchd_dedup_forwarded_total{pipeline="orders"}' 30
fw3=$metric
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
check_output kill 0 $((fw1 + fw2 + fw3))
log "kill -9: run 3 read chunk 2 again into its windows ($replayed partitions) and forwarded $fw3 of chunk 3"

# --- 3. kill -9, a partition without messages at the snapshot ------------------------------
port=$(free_port)
write_config idle 1h
start_daemon "$work/idle.yaml" idle-1
forward_chunk idle chunk1 -p 0
fw1=$forwarded
stop_daemon

start_daemon "$work/idle.yaml" idle-2
# Partition 1 too, though none of its messages had been read.
check_log "$work/idle-2.err" "restored snapshot .* \\(1 pipeline\\(s\\), 2 partition position\\(s\\)\\)"
forward_chunk idle chunk2 -p 1
fw2=$forwarded
# Committed: partition 1's lag, from statistics newer than the forwarding, is 0. (Partition
# 0, started at its restored position, has no lag series until something is committed.)
sleep 1
wait_metric 'sketchd_kafka_consumer_lag_messages{topic="in-idle",partition="1"}' -eq 0 60
kill_daemon
log "run 2 killed after forwarding and committing chunk 2 on partition 1 ($fw2 first-seen)"

start_daemon "$work/idle.yaml" idle-3
wait_assigned idle-3 2
check_log "$work/idle-3.err" "partition in-idle \\[1\\] starts at offset 0 \\(restored state\\); the $chunk message\\(s\\) before"
produce in-idle -K'|' -p 1 <"$work/chunk3"
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq $((2 * chunk)) 60
sleep 1
wait_metric 'sketchd_kafka_consumer_lag_messages{topic="in-idle",partition="1"}' -eq 0 60
wait_stable 'sketchd_dedup_forwarded_total{pipeline="orders"}' 30
fw3=$metric
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
check_output idle 0 $((fw1 + fw2 + fw3))
log "kill -9, partition 1 without messages at the snapshot: run 3 read chunk 2 again and forwarded $fw3 of chunk 3"

# --- 4. kill -9 before the commit: what was forwarded is read back from the output --------
# Run 2 forwards chunk 2 but commits nothing (auto.commit.interval.ms 1 h) and is killed: the
# group's offsets and the snapshot are both at the end of chunk 1. Run 3 reads chunk 2 again
# from the commit. Before it does, it reads out-crash back from the positions the snapshot
# recorded, finds chunk 2's first-seen events by their provenance headers, and does not
# forward them again. (Without that step, every one of them was forwarded twice.)
port=$(free_port)
write_config crash 1h ", auto.commit.interval.ms: 3600000"
start_daemon "$work/crash.yaml" crash-1
forward_chunk crash chunk1
fw1=$forwarded
stop_daemon

start_daemon "$work/crash.yaml" crash-2
check_log "$work/crash-2.err" "restored snapshot"
forward_chunk crash chunk2
fw2=$forwarded
kill_daemon
log "run 2 killed after forwarding chunk 2 ($fw2 first-seen) without committing it"

start_daemon "$work/crash.yaml" crash-3
check_log "$work/crash-3.err" "output topic out-crash: read back $fw2 message\\(s\\) forwarded since the snapshot in [0-9.]+ s; $fw2 of them came from input this instance reads again"
wait_assigned crash-3 4
# Nothing of chunk 2 was committed: the partitions start at the snapshot's positions, which
# are the group's offsets.
! grep -q "go into the windows again" "$work/crash-3.err" || fail "run 2 committed part of chunk 2"
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq "$chunk" 60
sleep 1
scrape
[[ $(value 'sketchd_dedup_forwarded_total{pipeline="orders"}') == 0 ]] || fail "run 3 forwarded chunk 2 again: $(value 'sketchd_dedup_forwarded_total{pipeline="orders"}') event(s)"
produce in-crash -K'|' <"$work/chunk3"
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq $((2 * chunk)) 60
fw3=$(value 'sketchd_dedup_first_seen_total{pipeline="orders"}')
fw3=$((fw3 - fw2))
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -eq "$fw3" 30
stop_daemon
check_output crash 0 $((fw1 + fw2 + fw3))
log "kill -9 before the commit: run 3 read back the $fw2 events run 2 forwarded and forwarded $fw3 of chunk 3"
log "PASS"
