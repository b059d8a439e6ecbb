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
#
# Usage: fatal_error_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

MOCK_CONTROL=1 start_mock_kafka events:1
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
log "PASS"
