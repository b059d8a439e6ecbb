#!/usr/bin/env bash
# Commits of the input offsets that fail show, and what a crash would read again is
# measured. A mock cluster (`sketchd mock-kafka --control`), 2 partitions; sketchd commits
# every 500 ms and reads librdkafka's statistics every 500 ms. Then:
#   - 200 events processed with commits working: sketchd_kafka_uncommitted_messages comes
#     back to 0, sketchd_kafka_commit_failures_total stays 0;
#   - the cluster fails the next 40 OffsetCommit requests (REBALANCE_IN_PROGRESS, as while
#     a group rebalances; about 20 s of commits): 300 more events are processed, and the
#     uncommitted messages reach 300 (a crash now would read them all again), with the
#     failures counted and logged (one warning every 10 s at most, with the reason);
#   - the faults cleared: the uncommitted messages come back to 0.
#
# Usage: commit_faults_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

MOCK_CONTROL=1 start_mock_kafka events:2
port=$(free_port)
cat >"$work/sketchd.yaml" <<YAML
kafka:
  brokers: "$bootstrap"
  group_id: itest-commit-faults
  properties: { auto.commit.interval.ms: 500, statistics.interval.ms: 500 }
http: { listen: "127.0.0.1:$port" }
pipelines:
  - { name: payments, topics: [events], item: { from: key },
      dedup: { window: 1h, capacity: 10000, fpr: 0.01 } }
log: { level: info, summary_interval: 0 }
YAML
start_daemon "$work/sketchd.yaml"
wait_metric 'sketchd_kafka_assigned_partitions' -eq 2 30

seq 1 200 | sed 's/.*/a&|v/' | produce events -K'|'
wait_metric 'sketchd_messages_consumed_total{topic="events"}' -eq 200 30
wait_committed 2 30 2
scrape
log "uncommitted after commit: $(metric_value "$work/metrics.txt" 'sketchd_kafka_uncommitted_messages')"
wait_metric 'sketchd_kafka_uncommitted_messages' -eq 0 15
[[ $(require_value "$work/metrics.txt" 'sketchd_kafka_commit_failures_total') == 0 ]] ||
  fail "commits failed before any fault was injected"
log "200 events committed"

# OffsetCommit is Kafka API 8; 27 is REBALANCE_IN_PROGRESS.
mock_control "errors 8 $(printf '27,%.0s' $(seq 39))27"
seq 1 300 | sed 's/.*/b&|v/' | produce events -K'|'
wait_metric 'sketchd_messages_consumed_total{topic="events"}' -eq 500 30
wait_metric 'sketchd_kafka_uncommitted_messages' -eq 300 15
# The statistics can show the 300 before the next commit (every auto.commit.interval.ms)
# has been tried and failed.
wait_metric 'sketchd_kafka_commit_failures_total' -ge 1 15
failures=$metric
check_log "$work/sketchd.err" "committing the input offsets failed: .*REBALANCE_IN_PROGRESS"
log "commits failing: 300 messages uncommitted, $failures failed commit(s) counted"

mock_control "clear 8"
wait_metric 'sketchd_kafka_uncommitted_messages' -eq 0 30
log "faults cleared: everything committed"
stop_process "$daemon_pid" 15 || fail "sketchd did not stop within 15 s of SIGTERM"
log "PASS"
