#!/usr/bin/env bash
# An input cluster that goes away is visible in the metrics, and nothing is lost while it
# is away. A 1-broker mock cluster with fault injection:
#   1. 2,000 events are consumed and committed; sketchd_kafka_brokers_up is 1;
#   2. the broker goes down: sketchd_kafka_brokers_up falls to 0 within 30 s (statistics
#      come every 5 s), the alert SketchdKafkaUnreachable's condition; sketchd stays alive
#      (/healthz 200) and keeps answering /metrics;
#   3. the broker comes back: sketchd_kafka_brokers_up returns to 1, 2,000 more events are
#      consumed, and the counts match exactly (4,000 items, 4,000 first-seen, since every
#      item occurs once).
# Before sketchd_kafka_brokers_up, an outage of the input showed in no metric: the lag
# gauges kept their last values.
#
# Usage: input_outage_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

chunk=2000
MOCK_CONTROL=1 start_mock_kafka events:2
# chunk_events N: events of items N·chunk … (N+1)·chunk − 1, keyed by item.
chunk_events() { keyed_lines $(($1 * chunk)) "$chunk"; }
chunk_events 0 | produce events -K'|'

port=$(free_port)
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-outage
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
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
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -ge "$chunk" 30
wait_metric 'sketchd_kafka_brokers_up' -eq 1 15
# Committed before the outage: should the group drop sketchd meanwhile, it resumes there,
# and reads nothing twice.
wait_committed 2 30
log "consumed and committed $chunk events; sketchd_kafka_brokers_up 1"

mock_control "down 1"
wait_metric 'sketchd_kafka_brokers_up' -eq 0 30
status=$(curl -s --max-time 3 -o /dev/null -w '%{http_code}' "$http/healthz" || true)
[[ $status == 200 ]] || fail "GET /healthz with the input cluster down: HTTP ${status:-none}"
log "broker down: sketchd_kafka_brokers_up 0, /healthz 200"

mock_control "up 1"
wait_metric 'sketchd_kafka_brokers_up' -eq 1 30
# The log says so, after librdkafka's lines about the brokers being down.
check_log "$work/sketchd.err" "1 broker\(s\) of the input cluster reachable again, after about [0-9]+ s with none"
# librdkafka's lines say which client failed: here the consumer's connections.
check_log "$work/sketchd.err" "error \[kafka\] FAIL \(consumer\): .*Connect to .* failed"
chunk_events 1 | produce events -K'|'
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -ge $((2 * chunk)) 60
sleep 1
scrape
expect_values "$work/metrics.txt" \
  "sketchd_pipeline_items_total{pipeline=\"orders\"} $((2 * chunk))" \
  "sketchd_dedup_first_seen_total{pipeline=\"orders\"} $((2 * chunk))" \
  "sketchd_dedup_duplicates_total{pipeline=\"orders\"} 0"
require_value "$work/metrics.txt" 'sketchd_kafka_consume_errors_total' >/dev/null
log "broker back: $((2 * chunk)) items, each first-seen once"
stop_process "$daemon_pid" 15 || fail "sketchd did not exit within 15 s of SIGTERM"
log "PASS"
