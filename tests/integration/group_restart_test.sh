#!/usr/bin/env bash
# A member of a scaled-out group restarted with its snapshot does not forward again what
# the group processed while it was away. Two instances, A and B, in one group over 4
# partitions, each with its own state.dir, forward first-seen events (every item occurs
# once, so every event is first-seen) to an output topic:
#   1. both consume the first 2,000 events; B gets SIGTERM (its snapshot records its
#      partitions' positions) and A takes over all 4 partitions;
#   2. 2,000 more events: A forwards them, B's partitions included, and commits them;
#   3. B starts again on its state.dir: it restores its snapshot and gets partitions back;
#      those of its snapshot start at its snapshot's positions, behind the group's
#      committed offsets: the messages between (A's work) go into B's windows again but
#      are not forwarded (forwarding them again put 1,000 duplicates downstream in an
#      audit's run);
#   4. 2,000 more events, consumed by both.
# Checks: the output topic holds each of the 6,000 items exactly once (lost 0, duplicated
# 0), and B's log says which partitions it read again up to the committed offsets.
#
# Usage: group_restart_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

chunk=2000
start_mock_kafka events:4 unique:4
# chunk N: events of items N·chunk … (N+1)·chunk − 1, keyed by item.
chunk_events() { keyed_lines $(($1 * chunk)) "$chunk"; }

# config NAME: A's or B's configuration (its own port and state directory).
config() {
  cat >"$work/$1.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-group-restart
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000, statistics.interval.ms: 500 }
  batch_size: 200
http:
  listen: "127.0.0.1:$2"
state:
  dir: "$work/state-$1"
  snapshot_interval: 1h
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 100000, fpr: 0.000001, output_topic: unique }
log: { level: info, summary_interval: 0 }
EOF
}
port_a=$(free_port)
port_b=$(free_port)
config a "$port_a"
config b "$port_b"


port=$port_a start_daemon "$work/a.yaml" a
pid_a=$daemon_pid
port=$port_b start_daemon "$work/b.yaml" b
pid_b=$daemon_pid
wait_assigned b 2
chunk_events 0 | produce events -K'|'
wait_total "$chunk" "$port_a" "$port_b"
b_before=$(forwarded "$port_b")
((b_before > 0)) || fail "B forwarded nothing of the first chunk"
stop_process "$pid_b" 15 || fail "B did not exit within 15 s of SIGTERM"
[[ $stop_status -eq 0 ]] || fail "B exited with status $stop_status"
log "1. A and B forwarded the first $chunk events (B $b_before); B stopped"

daemon_pid=$pid_a
wait_assigned a 4
a_before=$(forwarded "$port_a")
chunk_events 1 | produce events -K'|'
wait_total $((a_before + chunk)) "$port_a"
# B's return starts a rebalance, during which the mock cluster refuses commits (a real
# broker takes those of the current generation until the members have rejoined): A's
# work must be committed before, or the group's offsets would still be B's snapshot's.
# Statistics come every 500 ms here: those of one second from now are newer than the chunk.
http="http://127.0.0.1:$port_a"
wait_committed 4 60 1
log "2. A forwarded the second $chunk events alone and committed them"

port=$port_b start_daemon "$work/b.yaml" b-again
wait_assigned b-again 2
check_log "$work/b-again.err" "restored snapshot"
# Each partition of B's snapshot that B gets back (the assignor may give it others) is
# behind the group's committed offset (A forwarded chunk 2 on it): read again up to it.
restored=$(grep -c "starts at offset [0-9]* (restored state)" "$work/b-again.err" || true)
past=$(grep -c "(restored state); the [1-9][0-9]* message(s) before offset [0-9]*, which the group has committed, go into the windows again without being forwarded" "$work/b-again.err" || true)
((restored == past)) || fail "B started $((restored - past)) partition(s) of its snapshot without reading A's work on them again"
# A's count before the chunk is produced: read after, it may hold part of the chunk already.
a_now=$(forwarded "$port_a")
chunk_events 2 | produce events -K'|'
wait_total $((a_now + chunk)) "$port_a" "$port_b"
sleep 1
log "3-4. B restarted: $past of its snapshot's partitions back, each read again up to the committed offset; both forwarded the third $chunk events"

check_each_once $((3 * chunk)) "B forwarded A's work again?"

stop_process "$daemon_pid" 15 || fail "B did not exit within 15 s of SIGTERM"
stop_process "$pid_a" 15 || fail "A did not exit within 15 s of SIGTERM"
log "PASS"
