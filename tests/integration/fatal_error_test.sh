#!/usr/bin/env bash
# A fatal error of the consumer stops sketchd with exit status 1, instead of leaving it up,
# ready and consuming nothing. A static member of a group (group.instance.id) is fenced when
# another process joins with the same id, as in a rolling deploy gone wrong; the mock
# cluster is told to answer the next heartbeats with FENCED_INSTANCE_ID (error 82), which
# librdkafka raises as a fatal error. A consumer in a group receives its fatal error from
# its poll, not through the error callback; sketchd only watched the callback and stayed up.
# Checks:
#   - the events before the fault are consumed (sketchd works with static membership);
#   - after the fault, sketchd exits by itself, with status 1, within 30 s;
#   - its log names the fatal error.
# Then the producer's side: a pipeline with an output_topic forwards through an idempotent
# producer, which needs a producer id (InitProducerId, API 22) before it can deliver. The
# cluster answers those requests with COORDINATOR_LOAD_IN_PROGRESS (14, retried) while
# sketchd consumes 100 events, so their outputs stay queued, undelivered; then with
# CLUSTER_AUTHORIZATION_FAILED (31), which librdkafka makes a fatal error of the producer:
#   - sketchd exits by itself with status 1, its log naming the error ("fatal Kafka error,
#     stopping: … (CLUSTER_AUTHORIZATION_FAILED)");
#   - nothing was delivered to the output topic, and nothing was committed past what was
#     delivered: a second run of the same group (the faults cleared) reads the 100 events
#     again and forwards each item exactly once.
#
# Usage: fatal_error_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

MOCK_CONTROL=1 start_mock_kafka events:1 forward:1 out:1
keyed_lines 0 100 | produce events -K'|'

port=$(free_port)
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-fatal
  properties: { group.instance.id: member-1, session.timeout.ms: 6000, heartbeat.interval.ms: 500 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 100000, fpr: 0.000001 }
log: { level: info, summary_interval: 0 }
EOF
start_daemon "$work/sketchd.yaml"
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -ge 100 30
log "static member consumed 100 events"

# Heartbeat is API 12; a few errors in a row, in case one is spent on a request in flight.
mock_control "errors 12 82,82,82"
start=$(now_us)
while kill -0 "$daemon_pid" 2>/dev/null; do
  (($(now_us) - start < 30 * slow * 1000000)) \
    || fail "sketchd still running 30 s after being fenced (a fatal error): $(tail -5 "$work/sketchd.err")"
  sleep 0.1
done
status=0
wait "$daemon_pid" || status=$?
[[ $status == 1 ]] || fail "sketchd exited with status $status after a fatal error, not 1"
grep -q "fatal Kafka error, stopping: .*FENCED_INSTANCE_ID" "$work/sketchd.err" "$work/sketchd.out" \
  || fail "no 'fatal Kafka error' naming FENCED_INSTANCE_ID in the log: $(tail -5 "$work/sketchd.err")"
log "fenced: sketchd exited with status 1 after $((($(now_us) - start) / 1000)) ms, the fatal error logged"
# The heartbeat errors the fenced member did not take would fence the next consumer too.
mock_control "clear 12"

# --- A fatal error of the producer ---------------------------------------------------------
keyed_lines 0 100 | produce forward -K'|'
port=$(free_port)
cat >"$work/forward.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-fatal-producer
  # The second run joins the group the first one left: the mock cluster waits
  # session.timeout.ms − 1 s for the old member. (With 2 s, the mock cluster's first
  # join, which takes 3 s, never completed.)
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 500 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: orders
    topics: [forward]
    item: { from: key }
    clock: wall
    dedup: { window: 1h, capacity: 100000, fpr: 0.000001, output_topic: out }
log: { level: info, summary_interval: 0 }
EOF
# InitProducerId is API 22. COORDINATOR_LOAD_IN_PROGRESS (14) is retried about every 0.5 s:
# 200 of them hold the producer without an id far longer than the test needs.
mock_control "errors 22 $(printf '14,%.0s' $(seq 199))14"
start_daemon "$work/forward.yaml" producer-1
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq 100 30
expect_values "$work/metrics.txt" \
  'sketchd_dedup_first_seen_total{pipeline="orders"} 100' \
  'sketchd_dedup_forwarded_total{pipeline="orders"} 0'
log "100 events consumed, their 100 outputs queued behind a producer without an id"
# The retries cleared, the next one is refused: CLUSTER_AUTHORIZATION_FAILED (31). Both in
# one write: a retry between the two would get its id, and deliver.
mock_control "clear 22" "errors 22 31,31,31,31,31,31,31,31"
start=$(now_us)
while kill -0 "$daemon_pid" 2>/dev/null; do
  (($(now_us) - start < 30 * slow * 1000000)) \
    || fail "sketchd still running 30 s after a fatal error of its producer: $(tail -5 "$work/producer-1.err")"
  sleep 0.1
done
status=0
wait "$daemon_pid" || status=$?
[[ $status == 1 ]] || fail "sketchd exited with status $status after a fatal error of its producer, not 1"
check_log "$work/producer-1.err" \
  "fatal Kafka error, stopping: .*Cluster authorization failed.*\(CLUSTER_AUTHORIZATION_FAILED\)"
# The events the closing producer dropped are not reported as a forwarding failure of
# their own: the fatal error is the one cause in the log.
if grep -q "forwarding to topic .* failed" "$work/producer-1.err"; then
  fail "a forwarding failure reported besides the fatal error: $(grep -m1 "forwarding to topic" "$work/producer-1.err")"
fi
log "producer fatal: sketchd exited with status 1 after $((($(now_us) - start) / 1000)) ms, the fatal error logged"
delivered=$(kcat -C -b "$bootstrap" -t out -o beginning -e -q -f '%k\n' | grep -c . || true)
[[ $delivered == 0 ]] || fail "$delivered event(s) in the output topic, though the producer never had an id"

# Nothing was delivered, so nothing may have been committed: the next run reads the 100
# events again and forwards each item once.
mock_control "clear 22"
start_daemon "$work/forward.yaml" producer-2
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq 100 60
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -eq 100 30
stop_process "$daemon_pid" 15 || fail "sketchd did not stop within 15 s of SIGTERM"
[[ $stop_status == 0 ]] || fail "the second run exited with status $stop_status after SIGTERM"
# Its total, batches after the last scrape included, is in its last log line.
items2=$(sed -n 's/.*stopped after consuming \([0-9]*\) message.*/\1/p' "$work/producer-2.err")
[[ $items2 == 100 ]] || fail "the second run consumed ${items2:-?} message(s), not the 100 the first one did not deliver"
kcat -C -b "$bootstrap" -t out -o beginning -e -q -f '%k\n' >"$work/out.raw" \
  || fail "kcat could not read the output topic"
grep . "$work/out.raw" | sort >"$work/out.keys" || true
keyed_lines 0 100 | cut -d'|' -f1 | sort >"$work/expected.keys"
cmp -s "$work/out.keys" "$work/expected.keys" \
  || fail "the output topic holds $(wc -l <"$work/out.keys") key(s), not k0 … k99 once each"
log "second run: the 100 events read again and forwarded once each: nothing was committed past what was delivered"
log "PASS"
