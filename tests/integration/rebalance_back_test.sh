#!/usr/bin/env bash
# A partition revoked while its outputs are undelivered, then given back to the same
# instance, is not committed past those messages before their outputs are delivered
# (docs/SEMANTICS.md, "A revocation with outputs still in flight"). Reading them again,
# the instance finds their items in its own dedup state and forwards nothing, so only the
# first, still queued delivery can bring their outputs.
#
# A 2-broker mock cluster: the input topic and the group's coordinator on broker 1, the
# output topic on broker 2. sketchd uses the eager `range` assignment strategy, with which
# every rebalance revokes every partition and assigns the partitions anew.
#   1. 100 events, forwarded and committed (broker 2 up).
#   2. Broker 2 down; 500 more events: processed, their outputs queued.
#   3. A second member joins (another sketchd, which commits nothing either: its outputs
#      are stuck too). The rebalance revokes both partitions from the first, which gives
#      up waiting for their outputs after 10 s, and gives one back to it: it reads that
#      partition's events again from the committed offset, and finds them duplicates.
#   4. That partition's committed offset stays before them (its consumer lag is not 0):
#      it used to move to the end at once, so that a crash before the queued outputs
#      were delivered lost them. sketchd reports the lag of that partition only (the
#      revoked one's lag used to stay, from librdkafka's statistics of a stopped fetch).
#   5. Broker 2 up: the queued outputs are delivered, the partition is committed to its
#      end, the output topic holds all 600 items, and both members stop cleanly.
#
# Usage: rebalance_back_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

group=itest-back
MOCK_CONTROL=1 MOCK_BROKERS=2 start_mock_kafka events:2 unique:2
for p in 0 1; do
  mock_control "leader events $p 1"
  mock_control "leader unique $p 2"
done
mock_control "coordinator group $group 1"

port=$(free_port)
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: $group
  properties:
    partition.assignment.strategy: range
    # Longer than the revocation's 10 s wait for the outputs, during which the member
    # sends no heartbeat.
    session.timeout.ms: 15000
    statistics.interval.ms: 1000
    auto.commit.interval.ms: 500
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 10000, fpr: 0.001, output_topic: unique }
log: { level: info, summary_interval: 0 }
EOF

# --- 1. forwarded and committed ------------------------------------------------------
keyed_lines 1 100 | produce events -K'|'
start_daemon "$work/sketchd.yaml"
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -ge 100 60
wait_committed 2 60 3
log "100 events forwarded and committed"

# --- 2. outputs stuck ----------------------------------------------------------------
mock_control "down 2"
keyed_lines 101 500 | produce events -K'|'
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -ge 600 60
wait_metric 'sketchd_producer_queue_messages' -ge 500 30
log "500 more events processed, their outputs queued with broker 2 down"

# --- 3. a member joins: one partition comes back ----------------------------------------
# The second member is another sketchd (kcat commits what it reads).
assignments() { grep -c 'assigned now' "$work/sketchd.err" || true; }
last_assignment() { grep 'assigned now' "$work/sketchd.err" | tail -n 1; }
before=$(assignments)
port_a=$port http_a=$http pid_a=$daemon_pid
port=$(free_port)
sed -e "s/127.0.0.1:$port_a/127.0.0.1:$port/" "$work/sketchd.yaml" >"$work/member.yaml"
start_daemon "$work/member.yaml" member
pid_b=$daemon_pid
port=$port_a http=$http_a daemon_pid=$pid_a
deadline=$((SECONDS + 90))
# Revoked (after the 10 s wait for the outputs), then assigned one of the two.
until (($(assignments) >= before + 2)) && last_assignment | grep -q '; 1 assigned now'; do
  ((SECONDS < deadline)) || fail "sketchd did not share the partitions within 90 s of a second member joining"
  sleep 0.5
done
check_log "$work/sketchd.err" "outputs still undelivered after 10 s"
log "a second member joined: both partitions revoked with outputs undelivered, one given back"

# --- 4. read again, found duplicates, not committed past them ---------------------------
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -gt 600 60
sleep 4  # several commit intervals and statistics refreshes
# The lag of the partition given back shows once librdkafka's statistics know its committed
# offset and its end: a statistics interval or two after the assignment (longer under a
# sanitizer, on a busy machine).
deadline=$((SECONDS + 30 * slow))
while :; do
  scrape
  lag=$(metric_series "$work/metrics.txt" sketchd_kafka_consumer_lag_messages | awk '{ print $NF }')
  [[ $(grep -c . <<<"$lag") == 1 ]] && break
  ((SECONDS < deadline)) || fail "expected the lag of one partition, got: $lag"
  sleep 0.5
done
((lag > 0)) || fail "the partition's events with undelivered outputs were committed (lag 0)"
log "the partition given back is not committed while its outputs are undelivered (lag $lag)"

# --- 5. outputs back: delivered, committed, nothing lost --------------------------------
mock_control "up 2"
wait_committed 1 60 3
# The other partition's items are the second member's, whose deliveries are not waited for
# above: the topic is read again until it holds them all, or the deadline.
deadline=$((SECONDS + 30 * slow))
while :; do
  kcat -C -b "$bootstrap" -t unique -o beginning -e -q -f '%k\n' >"$work/unique.keys" \
    || fail "kcat could not read unique"
  distinct=$(sort -u "$work/unique.keys" | grep -c .)
  [[ $distinct == 600 ]] && break
  ((SECONDS < deadline)) || fail "the output topic holds $distinct of the 600 items"
  sleep 1
done
log "broker 2 back: the partition committed to its end, the output topic holds all 600 items"
stop_process "$pid_b" 20 || fail "the second member did not stop within 20 s"
[[ $stop_status == 0 ]] || fail "the second member exited with $stop_status"
stop_process "$daemon_pid" 20 || fail "sketchd did not stop within 20 s"
[[ $stop_status == 0 ]] || fail "sketchd exited with $stop_status"
log "PASS"
