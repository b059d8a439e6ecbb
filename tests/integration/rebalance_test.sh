#!/usr/bin/env bash
# Two sketchd instances share a consumer group while events keep arriving, and nothing is
# lost across the rebalances. A stream of 24,000 JSON events over 6,000 distinct items
# (each 4 times, fixed seed), keyed by item over 8 partitions, is produced at about
# 1,000 events/s, and its last quarter only once B consumes, so that it outlasts the
# group's rebalances (each takes seconds). Instance A starts alone; B joins the group while
# the stream runs (a cooperative rebalance moves partitions from A to B: A's revoke hook
# delivers its in-flight outputs and stores their offsets first); then A gets SIGTERM (its
# partitions move to B). Both forward first-seen events to an output topic, with small batches so
# that the rebalances land between many batches. Checks:
#   - a rebalance revoked partitions from A while it was consuming, and both instances
#     exit 0 on SIGTERM;
#   - at-least-once: A and B together consumed every event at least once, and the output
#     topic holds every distinct item but at most the Bloom filters' false-positive
#     allowance (mean fpr·distinct plus 5 standard deviations of the binomial) — an item
#     whose partition moved may be forwarded by both, never by neither;
#   - B's lag (committed offset to end of partition) reaches 0 on all 8 partitions: every
#     offset was stored and committed;
#   - sketchd_kafka_assigned_partitions: A's and B's add up to 8 while both run, B's is 8
#     once A has stopped;
#   - B fills the windows of the partitions it takes over from their log (state.fill_from_log:
#     the messages of the last hour, the longest window, up to the group's committed offset,
#     read without being forwarded): it logs the fill, and its heavy-hitter window is
#     complete (sketchd_cms_window_incomplete_seconds 0: the log holds every message since
#     the window's start).
# Prints the duplicates forwarded across the move as a figure.
#
# Usage: rebalance_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

fpr=0.001
partitions=8
start_mock_kafka "events:$partitions" "unique:$partitions"

recurring_events 20261123 6000 4

# config NAME PORT: a member of the group, forwarding first-seen events.
config() { group_member_config "$work/$1.yaml" "$2" itest-rebalance "$fpr"; }

port_a=$(free_port)
config a "$port_a"
port=$port_a
start_daemon "$work/a.yaml" a
pid_a=$daemon_pid

# The producer: 100 events every 0.1 s (about 25 s in all), through one kcat. Before the
# last quarter of the stream it waits (at most 120 s) until the test has seen B consume:
# a group's rebalance can take several 5 s rounds of the broker, and the stream must still
# be running when A is stopped.
export BOOTSTRAP=$bootstrap
"$python" - "$work/events" "$work/b-consuming" <<'EOF' >"$work/producer.log" 2>&1 &
import subprocess, sys, time, os
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
go = sys.argv[2]
bootstrap = os.environ["BOOTSTRAP"]
kcat = subprocess.Popen(["kcat", "-P", "-b", bootstrap, "-t", "events", "-K|", "-X", "linger.ms=5"],
                        stdin=subprocess.PIPE)
hold = len(lines) * 3 // 4 // 100 * 100
for i in range(0, len(lines), 100):
    if i == hold:
        deadline = time.monotonic() + 120
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.1)
    kcat.stdin.write(b"".join(lines[i:i + 100]))
    kcat.stdin.flush()
    time.sleep(0.1)
kcat.stdin.close()
sys.exit(kcat.wait())
EOF
producer_pid=$!
itest_pids+=("$producer_pid")

wait_metric 'sketchd_messages_consumed_total{topic="events"}' -ge 1000 30
log "A consumed ${metric} events; starting B"

port_b=$(free_port)
config b "$port_b"
port=$port_b
start_daemon "$work/b.yaml" b
pid_b=$daemon_pid
# B takes its share of the partitions (cooperative: A keeps the rest and goes on).
wait_metric 'sketchd_messages_consumed_total{topic="events"}' -ge 1 60
log "B is consuming (${metric} events)"
kill -0 "$producer_pid" 2>/dev/null || fail "the stream ended before B took partitions: the test proves nothing"
touch "$work/b-consuming"  # the producer sends the rest of the stream
grep -q 'revoked [1-9][0-9]* partition(s)' "$work/a.err" || fail "no partition was revoked from A when B joined"
# sketchd_kafka_assigned_partitions: the two shares add up to the topic's partitions.
assigned() { curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" | grep '^sketchd_kafka_assigned_partitions ' | cut -d' ' -f2; }
deadline=$((SECONDS + 30 * slow))
until [[ $(assigned "$port_a"):$(assigned "$port_b") =~ ^([1-9][0-9]*):([1-9][0-9]*)$ ]] &&
  ((BASH_REMATCH[1] + BASH_REMATCH[2] == partitions)); do
  ((SECONDS < deadline)) || fail "assigned partitions: A $(assigned "$port_a"), B $(assigned "$port_b"), expected $partitions in all"
  sleep 0.2
done
log "assigned partitions: A ${BASH_REMATCH[1]}, B ${BASH_REMATCH[2]}"

stop_process "$pid_a" 15 || fail "A did not exit within 15 s of SIGTERM"
[[ $stop_status == 0 ]] || fail "A exited with status $stop_status"
consumed_a=$(sed -n 's/.*stopped after consuming \([0-9]*\) message(s).*/\1/p' "$work/a.err")
[[ -n $consumed_a ]] || fail "A did not log how many messages it consumed"
log "A stopped after $consumed_a events"

wait "$producer_pid" || fail "the producer failed: $(cat "$work/producer.log")"
log "produced"

# B now owns every partition; its lag is 0 on all of them once everything is committed.
wait_metric 'sketchd_kafka_assigned_partitions' -eq "$partitions" 30
# B's windows hold the partitions it took over: filled from their log, complete.
check_log "$work/b.err" 'its windows are filled from the log: offsets [0-9]+ to [0-9]+'
incomplete=$(require_value "$work/metrics.txt" 'sketchd_cms_window_incomplete_seconds{pipeline="orders"}')
[[ $incomplete == 0 ]] || fail "B's heavy-hitter window is incomplete for ${incomplete} s more: the fill from the log should have completed it"
wait_committed "$partitions" 60
# (Every output of B is acknowledged by now: an offset is stored only once its outputs are.)
stop_process "$pid_b" 15 || fail "B did not exit within 15 s of SIGTERM"
[[ $stop_status == 0 ]] || fail "B exited with status $stop_status"
consumed_b=$(sed -n 's/.*stopped after consuming \([0-9]*\) message(s).*/\1/p' "$work/b.err")
log "B stopped after $consumed_b events"
((consumed_a + consumed_b >= events)) || fail "A and B consumed $consumed_a + $consumed_b events, fewer than the $events produced"

kcat -C -b "$bootstrap" -t unique -o beginning -e -q -f '%k\n' >"$work/unique.keys" || fail "kcat could not read unique"
"$python" - "$work" "$distinct" "$fpr" <<'EOF' || fail "the output topic lost items"
import math, sys
work, distinct, fpr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
keys = [k for k in open(f"{work}/unique.keys").read().split("\n") if k]
items = {line.split("|", 1)[0] for line in open(f"{work}/events")}
forwarded = set(keys)
unknown = forwarded - items
if unknown:
    sys.exit(f"problem: {len(unknown)} forwarded keys are not in the input")
# Two filters (A's and B's), each a false positive with probability at most fpr per item.
allowance = 2 * fpr * distinct + 5 * math.sqrt(2 * distinct * fpr * (1 - fpr))
lost = distinct - len(forwarded)
print(f"figure: {len(keys)} events forwarded for {distinct} items: {lost} lost "
      f"(allowance {allowance:.1f}), {len(keys) - len(forwarded)} forwarded twice across the moves")
if lost > allowance:
    sys.exit(f"problem: {lost} items never forwarded, more than the allowance {allowance:.1f}")
EOF
log "PASS"
