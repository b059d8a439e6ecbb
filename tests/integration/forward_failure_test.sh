#!/usr/bin/env bash
# A final delivery failure is never treated as done. Two brokers: the input topic and the
# consumer group live on broker 1, the output topic on broker 2, which is down. sketchd
# (message.timeout.ms 3 s) reads, cannot deliver, and then:
#   - counts the failures (sketchd_dedup_forward_failures_total > 0), stops consuming
#     (sketchd_consumption_stopped 1, no more items read), answers /readyz 503 with the
#     reason, logs it, and stays up (metrics and the API keep answering);
#   - shows every message read as uncommitted (sketchd_kafka_uncommitted_messages ≥ the
#     items read: a crash would read them all again);
#   - exits with status 1 on SIGTERM, since events were left undelivered;
#   - never stores an offset past the failed messages: after broker 2 is back and sketchd
#     is restarted, every item reaches the output topic (lost 0).
#
# Usage: forward_failure_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

MOCK_CONTROL=1 MOCK_BROKERS=2 start_mock_kafka events:2 unique:2
for p in 0 1; do
  mock_control "leader events $p 1"
  mock_control "leader unique $p 2"
done
mock_control "coordinator group itest-failure 1"
mock_control "down 2"
port=$(free_port)

seq 1 3000 | sed 's/.*/item-&|v&/' | produce events -K'|'
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-failure
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000, message.timeout.ms: 3000 }
  batch_size: 100
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: orders
    topics: [events]
    item: { from: key }
    clock: wall
    dedup: { window: 1h, capacity: 100000, fpr: 0.001, output_topic: unique }
log: { level: info, summary_interval: 1s }
EOF
start_daemon "$work/sketchd.yaml" first
wait_metric 'sketchd_consumption_stopped' -eq 1 60
failures=$(require_value "$work/metrics.txt" 'sketchd_dedup_forward_failures_total{pipeline="orders"}')
((failures > 0)) || fail "consumption stopped without a counted failure"
items=$(require_value "$work/metrics.txt" 'sketchd_pipeline_items_total{pipeline="orders"}')
status=$(curl -s -o "$work/readyz.txt" -w '%{http_code}' "$http/readyz")
[[ $status == 503 ]] || fail "/readyz answered $status after the failure, not 503"
grep -q "forwarding to topic unique failed" "$work/readyz.txt" || fail "/readyz does not say why: $(cat "$work/readyz.txt")"
check_log "$work/first.err" "\\[pipeline\\] orders: forwarding to topic unique failed"
log "stopped after $failures failed deliveries, $items items read: $(cut -c1-160 "$work/readyz.txt")"
sleep 2
scrape
[[ $(require_value "$work/metrics.txt" 'sketchd_pipeline_items_total{pipeline="orders"}') == "$items" ]] \
  || fail "sketchd kept consuming after the failure"
# Nothing was committed: a crash now would read every message read so far again.
wait_metric 'sketchd_kafka_uncommitted_messages' -ge "$items" 15
log "uncommitted messages: $metric (items read: $items)"
# The summaries of a stopped sketchd do not pass for a quiet input: a warning comes with them.
check_log "$work/first.err" "consumption has been stopped for [0-9]+ s, until a restart once the cause is fixed: pipeline orders: forwarding to topic unique failed"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
# Undelivered events at the stop: a supervisor must see a failure.
[[ $stop_status == 1 ]] || fail "sketchd exited with status $stop_status after the failure, not 1"
check_log "$work/first.err" "consumption had stopped after a final forwarding failure"

mock_control "up 2"
start_daemon "$work/sketchd.yaml" second
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -ge 3000 60
kcat -C -b "$bootstrap" -t unique -o beginning -e -q -f '%k\n' | sort -u >"$work/unique.keys" \
  || fail "kcat could not read unique"
lost=$((3000 - $(wc -l <"$work/unique.keys")))
log "figures: after the restart, lost $lost of 3000 items"
((lost == 0)) || fail "$lost items were lost"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop"
log "PASS"
