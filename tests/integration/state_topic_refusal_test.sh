#!/usr/bin/env bash
# Shards on the state topic that do not fit are refused with a clear message, and the
# partition falls back on the fill from the log; shards that fit are restored.
#
#   1. a member with state.topic reads 300 keyed events (200 distinct items) of 2 partitions
#      and stops (SIGTERM): its final snapshot writes each partition's shard;
#   2. the same group, dedup.capacity changed: each shard is "not used", "made under other
#      parameters" (sketchd_state_topic_shards_refused_total 2), the partitions are filled
#      from the log instead, so the 300 events produced again are all duplicates (nothing
#      forwarded);
#   3. a topic holding shards of the original configuration with dedup.sizing: transmission
#      (state-b, written at the stop of a run in another group) and a member of a new group
#      with that configuration: both shards restored, none refused; the derived sizing is
#      logged.
#
# Usage: state_topic_refusal_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

start_mock_kafka events:2 unique:2 state-a:2 state-b:2
port=$(free_port)

# write_config FILE GROUP STATE_TOPIC CAPACITY [SIZING]
write_config() {
  cat >"$1" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: $2
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 500, statistics.interval.ms: 500 }
http:
  listen: "127.0.0.1:$port"
state:
  topic: $3
  snapshot_interval: 1m
pipelines:
  - name: orders
    topics: [events]
    item: { from: key }
    clock: wall
    dedup: { window: 1h, capacity: $4, fpr: 0.001, sizing: ${5:-memory}, output_topic: unique }
log: { level: info, summary_interval: 0 }
EOF
}

events() {
  "$python" -c '
for i in range(300):
    print(f"k{i % 200}|v{i}")'
}

# run NAME GROUP STATE_TOPIC CAPACITY [SIZING]: starts a member, produces the 300 events, waits until
# they are committed, and leaves it running.
run() {
  write_config "$work/$1.yaml" "$2" "$3" "$4" "${5:-}"
  start_daemon "$work/$1.yaml" "$1"
  wait_assigned "$1" 2
  events | produce events -K'|'
  wait_committed 2 60 1
}

# value SERIES: its value in a scrape now.
value() {
  scrape
  require_value "$work/metrics.txt" "$1"
}

# 1. The first run: 200 first-seen items forwarded, its shards written at the stop.
run first itest-state-refusal state-a 10000
# (A forward is counted at the turn after its delivery, which may follow the commit.)
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -eq 200 30
stop_process "$daemon_pid" 20 || fail "the first run did not stop within 20 s"
check_log "$work/first.err" "final snapshot written to the state topic state-a"

# 2. Other parameters: refused, the fill takes over, nothing forwarded again.
run changed itest-state-refusal state-a 20000
check_log "$work/changed.err" "is not used: .*made under other parameters than this configuration's"
refused=$(value sketchd_state_topic_shards_refused_total)
restored=$(value sketchd_state_topic_shards_restored_total)
forwarded=$(value 'sketchd_dedup_forwarded_total{pipeline="orders"}')
check "$refused == 2 and $restored == 0" "refused $refused, restored $restored: not 2 and 0"
check "$forwarded == 0" "the fill from the log missed items: $forwarded forwarded again"
stop_process "$daemon_pid" 20 || fail "the changed run did not stop within 20 s"

# 3. A new group on a topic holding shards of its parameters: restored, nothing forwarded.
write_config "$work/third.yaml" itest-state-refusal-2 state-b 10000 transmission
# state-b gets the shards: a run of the same configuration in its own group writes them.
run seed itest-state-refusal-3 state-b 10000 transmission
check_log "$work/seed.err" "pipeline orders: dedup sized for transmission: generations of [0-9.]+ MB for a window rate of 0\.000401 \(fpr 0\.001; sized for memory, [0-9.]+ MB each\)"
stop_process "$daemon_pid" 20 || fail "the seeding run did not stop within 20 s"
start_daemon "$work/third.yaml" third
wait_assigned third 2
check_log "$work/third.err" "restored at offset"
refused=$(value sketchd_state_topic_shards_refused_total)
restored=$(value sketchd_state_topic_shards_restored_total)
check "$refused == 0 and $restored == 2" "refused $refused, restored $restored: not 0 and 2"
log "PASS"
