#!/usr/bin/env bash
# An error in place of a message is counted and logged, and consumption goes on after it.
# A mock cluster (`sketchd mock-kafka --control`), 1 partition: 100 events are consumed,
# then the cluster answers the next Fetch request (API 1) with TOPIC_AUTHORIZATION_FAILED
# (29), as a broker does while an ACL denies the topic. librdkafka hands that error to the
# poll in place of a message and backs the partition's fetches off (10 ×
# fetch.error.backoff.ms, at least 1 s: 5 s with the default 500 ms; 100 ms here, so 1 s).
# Checks:
#   - the log's "consume error [topic events, partition 0]: … Topic authorization failed";
#   - sketchd_kafka_consume_errors_total counts it: exactly 1 (one Fetch answered so, for
#     one partition);
#   - sketchd stays up and ready;
#   - consumption resumes: 100 events produced after the error are counted within 30 s;
#   - nothing is skipped or read twice across the error: 200 items, 200 first-seen, 0
#     duplicates.
#
# Usage: fetch_error_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

MOCK_CONTROL=1 start_mock_kafka events:1
port=$(free_port)
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-fetch-error
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000, fetch.error.backoff.ms: 100 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: clicks
    topics: [events]
    item: { from: key }
    clock: wall
    dedup: { window: 1h, capacity: 10000, fpr: 0.0001 }
log: { level: info, summary_interval: 0 }
EOF
start_daemon "$work/sketchd.yaml"
keyed_lines 0 100 | produce events -K'|'
wait_metric 'sketchd_pipeline_items_total{pipeline="clicks"}' -eq 100 30
[[ $(require_value "$work/metrics.txt" 'sketchd_kafka_consume_errors_total') == 0 ]] \
  || fail "consume errors counted before any fault was injected"
log "100 events consumed"

# Fetch is Kafka API 1; 29 is TOPIC_AUTHORIZATION_FAILED. The consumer always has a Fetch
# waiting for data (fetch.wait.max.ms): the next one gets the error.
mock_control "errors 1 29"
wait_metric 'sketchd_kafka_consume_errors_total' -ge 1 30
check_log "$work/sketchd.err" \
  "warning \[kafka\] consume error \[topic events, partition 0\]: .*Topic authorization failed"
for endpoint in healthz readyz; do
  status=$(curl -s --max-time 3 -o /dev/null -w '%{http_code}' "$http/$endpoint" || true)
  [[ $status == 200 ]] || fail "GET /$endpoint after a consume error: HTTP ${status:-none}"
done
log "consume error logged and counted; /healthz and /readyz 200"

keyed_lines 100 100 | produce events -K'|'
start=$(now_us)
wait_metric 'sketchd_pipeline_items_total{pipeline="clicks"}' -ge 200 30
log "consumption resumed: the 100 events produced after the error counted within $((($(now_us) - start) / 1000)) ms"
sleep 1
scrape
expect_values "$work/metrics.txt" \
  'sketchd_pipeline_items_total{pipeline="clicks"} 200' \
  'sketchd_dedup_first_seen_total{pipeline="clicks"} 200' \
  'sketchd_dedup_duplicates_total{pipeline="clicks"} 0' \
  'sketchd_kafka_consume_errors_total 1'
stop_process "$daemon_pid" 15 || fail "sketchd did not stop within 15 s of SIGTERM"
[[ $stop_status == 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM"
log "PASS"
