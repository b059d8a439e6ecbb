#!/usr/bin/env bash
# A member killed with kill -9: the member that takes its partitions over forwards nothing
# that the dead one forwarded after its last commit (docs/SEMANTICS.md, "Crashes: reading
# the output back"). Two instances, A and B, in one group over 4 partitions, without state
# directories, forward first-seen events (every item occurs once, so every event is
# first-seen) to an output topic. A commits every 500 ms; B's auto.commit.interval.ms is an
# hour, so that what B forwards is never committed.
#   1. A alone forwards the first 2,000 events and commits them, each commit with where the
#      output topic ended then;
#   2. B joins, and is given 2 of the partitions;
#   3. 2,000 more events, forwarded by both; then B is killed (kill -9), its part of them
#      forwarded and not committed;
#   4. A takes B's partitions over once B's session expires, at the group's committed
#      offsets: before reading them it reads the output back from the positions committed
#      with those offsets, finds B's copies by their provenance headers, and does not forward
#      those messages again when it reads them (forwarding them again put about 1,000
#      duplicates downstream before);
#   5. 2,000 more events, forwarded by A.
# Checks: the output topic holds each of the 6,000 items exactly once (lost 0, duplicated
# 0), and A's log says how many copies it found: B's part of chunk 2.
#
# Usage: crash_takeover_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

chunk=2000
start_mock_kafka events:4 unique:4
# chunk N: events of items N·chunk … (N+1)·chunk − 1, keyed by item.
chunk_events() { keyed_lines $(($1 * chunk)) "$chunk"; }

# config NAME PORT COMMIT_INTERVAL_MS: A's or B's configuration.
config() { takeover_member_config "$work/$1.yaml" "$2" itest-crash-takeover "$3"; }
port_a=$(free_port)
port_b=$(free_port)
config a "$port_a" 500
config b "$port_b" 3600000

# assignments NAME: how many times the log of NAME says it holds 4 partitions.
assignments() { grep -c "; 4 assigned now" "$work/$1.err" || true; }

port=$port_a start_daemon "$work/a.yaml" a
pid_a=$daemon_pid
wait_assigned a 4
chunk_events 0 | produce events -K'|'
wait_total "$chunk" "$port_a"
http="http://127.0.0.1:$port_a"
wait_committed 4 60 1
log "1. A forwarded the first $chunk events alone, and committed them"

port=$port_b start_daemon "$work/b.yaml" b
pid_b=$daemon_pid
wait_assigned b 2
log "2. B joined: A handed 2 partitions over"

a_before=$(forwarded "$port_a")
chunk_events 1 | produce events -K'|'
wait_total $((2 * chunk)) "$port_a" "$port_b"
b_forwarded=$(forwarded "$port_b")
((b_forwarded > 0)) || fail "B forwarded nothing of the second chunk"
kill -KILL "$pid_b"
wait "$pid_b" 2>/dev/null || true
log "3. A and B forwarded the second $chunk events (B $b_forwarded, none committed); B killed"

deadline=$((SECONDS + 60))
until (($(assignments a) >= 2)); do
  ((SECONDS < deadline)) || fail "A did not take B's partitions over within 60 s"
  sleep 0.2
done
check_log "$work/a.err" "[0-9]+ partition\(s\) taken over with the outputs' positions of their last commit"
found=$(copies_found "$work/a.err" "the last commit of the partitions taken over")
[[ $found == "$b_forwarded" ]] || fail "A found ${found:-no} copies of B's, not the $b_forwarded B forwarded"
log "4. A took B's partitions over and found the $found copies B forwarded"

a_now=$(forwarded "$port_a")
chunk_events 2 | produce events -K'|'
wait_total $((a_now + chunk)) "$port_a"
sleep 1
log "5. A forwarded the third $chunk events"

check_each_once $((3 * chunk)) "A forwarded B's work again?"

stop_process "$pid_a" 15 || fail "A did not exit within 15 s of SIGTERM"
[[ $stop_status -eq 0 ]] || fail "A exited with status $stop_status"
log "PASS"
