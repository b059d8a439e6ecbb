#!/usr/bin/env bash
# SIGTERM stops sketchd cleanly and its committed offsets are exact: after a restart with
# the same group_id nothing is read again and nothing is skipped. One broker, one topic of
# 3 partitions, one consumer group throughout.
#   1. sketchd A consumes 5,000 messages; SIGTERM: exit status 0 within 5 s, the log says
#      it received the signal and stopped.
#   2. sketchd B (same group) starts, 3,000 more are produced: B consumes exactly those
#      3,000 (it resumed at A's committed offsets).
#   3. A paced stream of 30,000 messages (about 5 s) runs; SIGTERM reaches B in the middle
#      of it: exit status 0 within 5 s. An independent consumer (kcat in the same group,
#      committing nothing) counts the messages after the committed offsets, R; at least
#      what B had counted is committed (N3 − R ≥ B's last scraped count − 3,000).
#   4. sketchd C (same group) starts and consumes exactly R messages, then nothing more;
#      SIGHUP: exit status 129 within 5 s (sketchd does not reload, it stops cleanly and
#      asks a supervisor for a restart).
#   5. sketchd D gets SIGTERM as soon as it serves HTTP, while it joins the group (with
#      librdkafka 2.0, destroying a consumer that joined a cooperative group but was never
#      assigned aborts): exit status 0 within 5 s.
#   6. sketchd E consumes 200 new messages, then the broker goes down and E gets SIGTERM:
#      exit status 0 within 20 s (the final commit and the group leave wait at most 5 s
#      each), with a warning that says what did not finish.
#   7. sketchd F, the same with the broker down: a second SIGTERM during the stop is
#      answered in the log (the stop goes on), and a third exits at once with status 1.
#
# Usage: daemon_sigterm_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

topic=events
group=itest-sigterm
n1=5000
n2=3000
n3=30000
consumed_series="sketchd_messages_consumed_total{topic=\"$topic\"}"

MOCK_CONTROL=1 start_mock_kafka "$topic:3"
port=$(free_port)
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: $group
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
  batch_size: 500
http:
  listen: "127.0.0.1:$port"
# Each restart resumes exactly at the commit, which is what is counted: without filling
# the windows from the log (which reads the window's messages before the commit again,
# rebalance_test and group_moves_test cover it).
state: { fill_from_log: false }
pipelines:
  - name: clicks
    topics: [$topic]
    item: { from: key }
    clock: wall
    heavy_hitters: { window: 10m, epsilon: 0.001, top_k: 10, threshold: 0.01 }
    dedup: { window: 1h, capacity: 100k, fpr: 0.001 }
EOF

# stop_daemon NAME [SIGNAL]: SIGTERM (or SIGNAL), exit status 0 within 5 s, and the
# shutdown in the log.
stop_daemon() {
  local name=$1 signal=${2:-TERM} expected=0
  [[ $signal == HUP ]] && expected=129  # a clean stop that asks a supervisor for a restart
  stop_process "$daemon_pid" 5 "$signal" || fail "sketchd $name did not exit within 5 s of SIG$signal"
  [[ $stop_status -eq $expected ]] || fail "sketchd $name exited with status $stop_status after SIG$signal, expected $expected"
  check_log "$work/$name.err" "received signal $(kill -l "$signal")"
  check_log "$work/$name.err" '\] stopped after consuming [0-9]+ message'
  log "sketchd $name stopped in $stop_ms ms with status $expected"
}

# settle_exactly SERIES VALUE: the sample reaches VALUE, and a second later is still VALUE.
settle_exactly() {
  wait_metric "$1" -ge "$2" 60
  sleep 1
  scrape
  local v
  v=$(require_value "$work/metrics.txt" "$1")
  [[ $v -eq $2 ]] || fail "$1 is $v, expected exactly $2"
}

# ---- 1. A consumes n1 messages and stops ---------------------------------------------
keyed_lines 0 "$n1" | produce "$topic" -K'|'
start_daemon "$work/sketchd.yaml" sketchd-a
settle_exactly "$consumed_series" "$n1"
log "sketchd A consumed $n1"
stop_daemon sketchd-a

# ---- 2. B resumes at A's offsets -----------------------------------------------------
start_daemon "$work/sketchd.yaml" sketchd-b
keyed_lines "$n1" "$n2" | produce "$topic" -K'|'
settle_exactly "$consumed_series" "$n2"
settle_exactly 'sketchd_pipeline_items_total{pipeline="clicks"}' "$n2"
# Every item was new to B: none of A's messages came again.
first=$(require_value "$work/metrics.txt" 'sketchd_dedup_first_seen_total{pipeline="clicks"}')
[[ $first -eq $n2 ]] || fail "sketchd B saw $first first-seen items, expected $n2"
log "sketchd B consumed exactly the $n2 new messages"

# ---- 3. SIGTERM in the middle of a stream ----------------------------------------------
# A pacer writes the stream into a FIFO (300 messages every 50 ms) that kcat produces from.
mkfifo "$work/stream"
cat >"$work/pace.py" <<'EOF'
import sys, time
path, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as out:
    for start in range(first, first + count, 300):
        out.write("".join(f'k{i}|{{"user":{{"id":"k{i}"}}}}\n' for i in range(start, min(start + 300, first + count))))
        out.flush()
        time.sleep(0.05)
EOF
start_background pacer "$python" "$work/pace.py" "$work/stream" $((n1 + n2)) "$n3"
pacer_pid=$last_pid
start_background producer kcat -P -b "$bootstrap" -t "$topic" -K'|' -X message.timeout.ms=30000 -l "$work/stream"
producer_pid=$last_pid
wait_metric "$consumed_series" -ge $((n2 + 3000)) 30
kill -0 "$pacer_pid" 2>/dev/null || log "note: the stream had ended before SIGTERM"
b_last=$metric
stop_daemon sketchd-b
log "sketchd B stopped after it had counted at least $((b_last - n2)) messages of the stream"
wait "$pacer_pid" || fail "the pacer failed"
wait "$producer_pid" || fail "kcat could not produce the stream"

# The messages after the group's committed offsets, counted by kcat in the same group.
# It stores and commits nothing (it leaves the offsets as they are).
timeout 30 kcat -b "$bootstrap" -G "$group" -e -q -f '%p %o\n' \
  -X enable.auto.commit=false -X enable.auto.offset.store=false \
  -X auto.offset.reset=earliest -X session.timeout.ms=6000 \
  "$topic" >"$work/remaining" 2>"$work/kcat-group.err" || fail "kcat could not read the group's remaining messages"
remaining=$(wc -l <"$work/remaining")
committed=$((n3 - remaining))
log "the group committed $committed of the $n3 streamed messages; $remaining remain"
((committed >= b_last - n2)) \
  || fail "B had counted $((b_last - n2)) messages of the stream but only $committed are committed"
((remaining > 0)) || log "note: B had consumed the whole stream before it stopped"

# ---- 4. C consumes exactly the rest ----------------------------------------------------
start_daemon "$work/sketchd.yaml" sketchd-c
if ((remaining > 0)); then
  settle_exactly "$consumed_series" "$remaining"
else
  # Nothing to read: wait for the assignment, then nothing may arrive.
  deadline=$((SECONDS + 30))
  until grep -q 'assigned 3 partition' "$work/sketchd-c.err"; do
    ((SECONDS < deadline)) || fail "sketchd C got no partitions within 30 s"
    sleep 0.2
  done
  sleep 1
  scrape
  v=$(require_value "$work/metrics.txt" "$consumed_series")
  [[ $v -eq 0 ]] || fail "sketchd C consumed $v messages, expected none"
fi
log "sketchd C consumed exactly the $remaining remaining messages"
# SIGHUP (a closed terminal, or an operator expecting a reload) stops cleanly too, with
# exit status 129 for a supervisor to start it again: E below reads only messages produced
# after C, so C committed.
stop_daemon sketchd-c HUP
check_log "$work/sketchd-c.err" 'does not reload its configuration'

# ---- 5. SIGTERM while joining the group ------------------------------------------------
start_daemon "$work/sketchd.yaml" sketchd-d
stop_daemon sketchd-d

# ---- 6. SIGTERM with the broker down ----------------------------------------------------
keyed_lines 100000 100 | produce "$topic" -K'|'
# No periodic commit (by default every 5 s): the offsets of E's 200 messages are left for
# the final commit, which cannot be answered.
sed 's/heartbeat.interval.ms: 1000 }/heartbeat.interval.ms: 1000, auto.commit.interval.ms: 600000 }/' \
  "$work/sketchd.yaml" >"$work/sketchd-e.yaml"
grep -q 'auto.commit.interval.ms: 600000' "$work/sketchd-e.yaml" || fail "cannot write sketchd-e.yaml"
start_daemon "$work/sketchd-e.yaml" sketchd-e
settle_exactly "$consumed_series" 100
keyed_lines 100100 100 | produce "$topic" -K'|'
settle_exactly "$consumed_series" 200
mock_control "down 1"
sleep 1
stop_process "$daemon_pid" 20 || fail "sketchd E did not exit within 20 s of SIGTERM with the broker down"
[[ $stop_status -eq 0 ]] || fail "sketchd E exited with status $stop_status after SIGTERM with the broker down"
check_log "$work/sketchd-e.err" 'final commit|leaving the group'
log "with the broker down, sketchd E stopped in $stop_ms ms with status 0"

# ---- 7. Three signals with the broker down ----------------------------------------------
mock_control "up 1"
keyed_lines 100200 100 | produce "$topic" -K'|'
start_daemon "$work/sketchd-e.yaml" sketchd-f
# E's 200 again (its final commit was not answered), and the 100 new ones.
settle_exactly "$consumed_series" 300
mock_control "down 1"
sleep 1
kill -TERM "$daemon_pid"
sleep 0.5
kill -TERM "$daemon_pid"
deadline=$((SECONDS + 5))
until grep -q 'while stopping: the stop goes on' "$work/sketchd-f.err"; do
  ((SECONDS < deadline)) || fail "no answer to a second SIGTERM in sketchd-f.err"
  sleep 0.1
done
kill -0 "$daemon_pid" 2>/dev/null || fail "sketchd F exited after a second SIGTERM"
stop_process "$daemon_pid" 3 || fail "sketchd F did not exit within 3 s of a third SIGTERM"
[[ $stop_status -eq 1 ]] || fail "sketchd F exited with status $stop_status after a third SIGTERM"
check_log "$work/sketchd-f.err" 'a third stop signal, 15 \(SIGTERM\): exiting now'
log "a second SIGTERM was answered in the log; the third stopped sketchd F in $stop_ms ms with status 1"
echo "PASS"
