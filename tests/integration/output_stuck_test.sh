#!/usr/bin/env bash
# The HTTP side stays answerable while forwarding is stuck, and one address serves one
# sketchd. A 2-broker mock cluster: the input topic led by broker 1, the output topic by
# broker 2, which is down when sketchd starts; the producer's queue holds 100 messages
# (queue.buffering.max.messages), so sketchd soon waits on it, as it does when an output
# cluster is down for long. Checks:
#   - while it waits (sketchd_producer_queue_messages at the queue's bound), /metrics,
#     /api/v1/pipelines, /healthz and /readyz each answer 200 within 3 s, 8 times over
#     (they used to hang: the pipelines' state stayed locked while forwarding waited, and
#     four hung requests took every HTTP worker, /healthz included);
#   - while it waits, longer than max.poll.interval.ms (6 s here), it stays in its group
#     (the input is held: its partitions paused, the consumer polled on) and its
#     statistics stay current (sketchd_kafka_uncommitted_messages counts what it read; the
#     consumer was not polled, so the member left its group after max.poll.interval.ms and
#     the statistics stood still);
#   - a second sketchd given the same http.listen exits 1 with "cannot listen" and joins
#     no group (httplib's SO_REUSEPORT let it start and share the port); one given the
#     same state.dir exits 1 saying it is in use;
#   - once broker 2 is back, every first-seen event is forwarded: nothing lost;
#   - broker 2 down again with fewer outputs in flight than the queue holds: the periodic
#     snapshot waits for them (up to 30 s) while more input comes, and sketchd stays in
#     its group all the same (the snapshot holds the input too: the member left its group
#     after max.poll.interval.ms);
#   - with broker 2 down again, SIGTERM stops sketchd within 25 s (a periodic
#     snapshot waiting for the outputs held a stop for 30 s more).
#
# Usage: output_stuck_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

events=3000
MOCK_CONTROL=1 MOCK_BROKERS=2 start_mock_kafka events:2 unique:2
for p in 0 1; do
  mock_control "leader events $p 1"
  mock_control "leader unique $p 2"
done
keyed_lines 1 "$events" >"$work/events"
produce events -K'|' <"$work/events"
log "produced $events events over $events distinct items"
mock_control "down 2"

port=$(free_port)
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-stuck
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000, queue.buffering.max.messages: 100,
                max.poll.interval.ms: 6000, statistics.interval.ms: 500 }
  batch_size: 100
http:
  listen: "127.0.0.1:$port"
state:
  dir: "$work/state"
  snapshot_interval: 1s
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 10000, fpr: 0.001, output_topic: unique }
log: { level: info, summary_interval: 0 }
EOF
start_daemon "$work/sketchd.yaml"
wait_metric 'sketchd_producer_queue_messages' -ge 100 30
stuck_at=$SECONDS
log "forwarding waits on the full producer queue"

for round in $(seq 8); do
  for path in metrics api/v1/pipelines healthz readyz; do
    status=$(curl -s --max-time 3 -o "$work/answer" -w '%{http_code}' "$http/$path" || true)
    [[ $status == 200 ]] || fail "round $round: GET /$path while forwarding waits: HTTP ${status:-none} (3 s limit)"
  done
  sleep 0.25
done
log "/metrics, /api/v1/pipelines, /healthz and /readyz answered 8 times while forwarding waited"

# expect_refused NAME WHAT MESSAGE SED…: a second sketchd, its configuration the first's
# edited by SED… (and another group), exits 1 with MESSAGE, before it joins a group.
expect_refused() {
  local name=$1 what=$2 message=$3 status=0
  shift 3
  sed -e 's/group_id: itest-stuck/group_id: itest-second/' "$@" "$work/sketchd.yaml" >"$work/$name.yaml"
  timeout 30 "$sketchd" run --config "$work/$name.yaml" >"$work/$name.out" 2>"$work/$name.err" || status=$?
  [[ $status == 1 ]] || fail "a second sketchd on $what exited with $status, expected 1"
  check_log "$work/$name.err" "$message"
  if grep -q 'assigned [0-9]* partition' "$work/$name.err"; then fail "the second sketchd joined its group"; fi
  log "a second sketchd on $what exits 1: $(grep -m1 "$message" "$work/$name.err" | cut -c1-160)"
}
expect_refused second "the same address" "cannot listen on 127\.0\.0\.1:$port" \
  -e "s|$work/state|$work/state-second|"
# On another address but the same state.dir: it would restore the first one's positions
# and write over its snapshots.
expect_refused third "the same state.dir" "is in use by another sketchd" \
  -e "s|127.0.0.1:$port|127.0.0.1:$(free_port)|"

# Stuck for longer than max.poll.interval.ms: still in the group, its statistics current.
while ((SECONDS - stuck_at < 10)); do sleep 0.5; done
wait_metric 'sketchd_kafka_uncommitted_messages' -gt 0 10
scrape
[[ $(require_value "$work/metrics.txt" 'sketchd_kafka_assigned_partitions') == 2 ]] \
  || fail "sketchd does not hold its 2 partitions after $((SECONDS - stuck_at)) s waiting on its outputs"
if grep -Eq "MAXPOLL|assignment lost" "$work/sketchd.err"; then
  fail "sketchd left its group while waiting on its outputs: $(grep -Em1 "MAXPOLL|assignment lost" "$work/sketchd.err")"
fi
log "waiting on its outputs for $((SECONDS - stuck_at)) s: in its group, $(require_value "$work/metrics.txt" sketchd_kafka_uncommitted_messages) message(s) read and not committed"

mock_control "up 2"
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -ge "$events" 90
scrape
first_seen=$(require_value "$work/metrics.txt" 'sketchd_dedup_first_seen_total{pipeline="orders"}')
forwarded=$(require_value "$work/metrics.txt" 'sketchd_dedup_forwarded_total{pipeline="orders"}')
[[ $forwarded == "$first_seen" ]] || fail "forwarded $forwarded of $first_seen first-seen events"
log "broker 2 back: $forwarded of $first_seen first-seen events forwarded"

# Outputs in flight, the queue not full: the periodic snapshot waits for them, and the
# input that comes meanwhile fills the read-ahead.
mock_control "down 2"
keyed_lines 4001 40 | produce events -K'|'
stalled_at=$SECONDS
sleep 2
keyed_lines 4101 600 | produce events -K'|'
while ((SECONDS - stalled_at < 10)); do sleep 0.5; done
scrape
[[ $(require_value "$work/metrics.txt" 'sketchd_kafka_assigned_partitions') == 2 ]] \
  || fail "sketchd does not hold its 2 partitions after a snapshot waited $((SECONDS - stalled_at)) s on its outputs"
if grep -Eq "MAXPOLL|assignment lost" "$work/sketchd.err"; then
  fail "sketchd left its group while a snapshot waited on its outputs: $(grep -Em1 "MAXPOLL|assignment lost" "$work/sketchd.err")"
fi
mock_control "up 2"
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -ge $((events + 640)) 90
log "a snapshot waiting $((SECONDS - stalled_at)) s on its outputs: still in the group; all forwarded once broker 2 was back"

# SIGTERM while the output is down again: a bounded stop (the periodic snapshot stops
# waiting, the final one waits 10 s, the last delivery try 2 s, the commit and the group
# leave at most 5 s each), exit 1: the final snapshot could not be written (outputs
# undelivered), which the log says.
mock_control "down 2"
keyed_lines 5001 600 | produce events -K'|'
wait_metric 'sketchd_producer_queue_messages' -ge 100 30
sleep 2
stop_process "$daemon_pid" 30 || fail "sketchd did not stop within 30 s of SIGTERM with the output down"
[[ $stop_status -eq 1 ]] || fail "sketchd exited with status $stop_status after SIGTERM, expected 1 (no final snapshot)"
((stop_ms <= 25000 * slow)) || fail "sketchd took $stop_ms ms to stop with the output down, expected at most $((25 * slow)) s"
check_log "$work/sketchd.err" "the final snapshot was not written"
log "SIGTERM with the output down: stopped in $stop_ms ms with status 1, final snapshot not written"
log "PASS"
