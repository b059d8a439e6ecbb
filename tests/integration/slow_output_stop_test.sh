#!/usr/bin/env bash
# A stop while the output is slow, not down, is still clean. One broker, answering every
# request 300 ms late (`rtt 1 300`); the producer's queue holds 500 messages
# (queue.buffering.max.messages), so sketchd waits on it for most of each batch of 1,000
# events (30,000 JSON events over 12,000 items, about 40% first-seen). SIGTERM in the
# middle of the backlog:
#   - the batch in hand is still queued (a stop gives up on a full queue only after 5 s),
#     its outputs delivered and the final snapshot written: exit status 0 within 15 s, no
#     "snapshot not written" (a stop used to give up at once, leave the batch half
#     forwarded, and exit 1 without a snapshot);
#   - the restart (the broker at full speed again) restores that snapshot and reads the
#     rest: lost 0, duplicated 0 in the output topic.
#
# Usage: slow_output_stop_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

events=30000
MOCK_CONTROL=1 start_mock_kafka in:4 out:4

"$python" - "$work/events" "$events" <<'EOF'
import json, random, sys
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
with open(path, "w") as f:
    for i in range(n):
        item = f"s{rng.randrange(12000)}"
        f.write(f'{item}|{json.dumps({"user": {"id": item}, "seq": i}, separators=(",", ":"))}\n')
EOF
distinct=$(cut -d'|' -f1 "$work/events" | sort -u | wc -l)
produce in -K'|' <"$work/events"
log "input: $events events over $distinct items"

port=$(free_port)
cat >"$work/slow.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-slow-output
  properties:
    queue.buffering.max.messages: 500
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
  batch_size: 1000
http:
  listen: "127.0.0.1:$port"
state:
  dir: "$work/state"
  snapshot_interval: 1h
pipelines:
  - name: orders
    topics: [in]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 100000, fpr: 0.000001, output_topic: out }
log: { level: info, summary_interval: 0 }
EOF

mock_control "rtt 1 300"
start_daemon "$work/slow.yaml" run-1
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -ge 3000 60
scrape
queued=$(require_value "$work/metrics.txt" sketchd_producer_queue_messages)
log "SIGTERM after $(require_value "$work/metrics.txt" 'sketchd_pipeline_items_total{pipeline="orders"}') events read, $queued outputs queued"
stop_process "$daemon_pid" 15 || fail "sketchd did not stop within 15 s of SIGTERM"
[[ $stop_status == 0 ]] || { tail -5 "$work/run-1.err" >&2; fail "sketchd exited with status $stop_status after SIGTERM"; }
! grep -q "snapshot not written" "$work/run-1.err" || fail "the final snapshot was not written"
items1=$(sed -n 's/.*stopped after consuming \([0-9]*\) message.*/\1/p' "$work/run-1.err")
[[ -n $items1 ]] || fail "run 1 did not log how many messages it consumed"
log "run 1 stopped in $stop_ms ms after reading $items1 events, exit status 0, final snapshot written"

mock_control "rtt 1 0"
start_daemon "$work/slow.yaml" run-2
check_log "$work/run-2.err" "restored snapshot"
# Run 2 reads exactly what run 1 did not (the snapshot's positions are run 1's last).
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq $((events - items1)) 60
fs=$(require_value "$work/metrics.txt" 'sketchd_dedup_first_seen_total{pipeline="orders"}')
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -eq "$fs" 30
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"

kcat -C -b "$bootstrap" -t out -o beginning -e -q -f '%k\n' >"$work/out.keys" || fail "kcat could not read out"
"$python" - "$work/out.keys" "$distinct" <<'EOF' || fail "the output topic lost or repeated first-seen events"
import collections, sys
keys = [k for k in open(sys.argv[1]).read().split("\n") if k]
distinct = int(sys.argv[2])
counts = collections.Counter(keys)
duplicated = sum(c - 1 for c in counts.values())
lost = distinct - len(counts)
print(f"figures: {len(keys)} events downstream for {distinct} distinct items: lost {lost}, duplicated {duplicated}")
sys.exit(0 if lost == 0 and duplicated == 0 else 1)
EOF
log "PASS"
