#!/usr/bin/env bash
# A partition revoked while its outputs are undelivered, then given back to the same
# instance, is not committed past those messages before their outputs are delivered
# (docs/SEMANTICS.md, "A revocation with outputs still in flight"). Reading them again,
# the instance finds their items in its own dedup state and forwards nothing, so only the
# first, still queued delivery can bring their outputs.
#
# A 2-broker mock cluster: the input topic and the group's coordinator on broker 1, the
# output topic on broker 2. sketchd uses the eager `range` assignment strategy, with which
# every rebalance revokes every partition and assigns them again.
#   1. 100 events, forwarded and committed (broker 2 up).
#   2. Broker 2 down; 500 more events: processed, their outputs queued.
#   3. A second member (another sketchd, which commits nothing either: its outputs are
#      stuck too) joins the group and leaves: two rebalances; each revocation gives up
#      waiting for the outputs after 10 s, and every partition comes back to sketchd, which
#      reads the 500 events again and finds them duplicates.
#   4. The group's committed offsets stay before the 500 (consumer lag 500 in all): they
#      used to move to the end at once.
#   5. kill -9 (the queued outputs die with it), broker 2 up, sketchd restarted with an
#      empty state: it reads the 500 again and forwards them; the output topic holds all
#      600 items: nothing lost.
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

# --- 3. a member joins and leaves: the partitions come back ----------------------------
# The second member is another sketchd (kcat commits what it reads): it reads the same
# events, finds them first-seen, queues their outputs too, and so commits nothing.
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
log "a second member joined: sketchd's partitions were revoked with outputs undelivered"
stop_process "$pid_b" 30 || fail "the second member did not stop within 30 s"
before=$(assignments)
deadline=$((SECONDS + 90))
until (($(assignments) >= before + 2)) && last_assignment | grep -q '; 2 assigned now'; do
  ((SECONDS < deadline)) || fail "sketchd did not get both partitions back within 90 s"
  sleep 0.5
done
log "the member left: both partitions back with sketchd"

# --- 4. read again, found duplicates, not committed past them ---------------------------
wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -ge 1100 60
sleep 4  # several commit intervals and statistics refreshes
scrape
lags=$(metric_series "$work/metrics.txt" sketchd_kafka_consumer_lag_messages | awk '{ s += $NF; n++ } END { print n, s }')
[[ $lags == "2 500" ]] \
  || fail "consumer lag (partitions, sum) is \"$lags\": the 500 events with undelivered outputs were committed"
log "the 500 events read again are not committed while their outputs are undelivered (lag 500)"

# --- 5. crash, outputs back, restart: nothing lost -------------------------------------
kill -KILL "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
mock_control "up 2"
start_daemon "$work/sketchd.yaml" sketchd-2
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -ge 500 60
kcat -C -b "$bootstrap" -t unique -o beginning -e -q -f '%k\n' >"$work/unique.keys" \
  || fail "kcat could not read unique"
distinct=$(sort -u "$work/unique.keys" | grep -c .)
[[ $distinct == 600 ]] || fail "the output topic holds $distinct of the 600 items"
log "the output topic holds all 600 items"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s"
log "PASS"
