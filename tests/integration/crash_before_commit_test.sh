#!/usr/bin/env bash
# A member killed with kill -9 before its first commit: the member that takes its
# partitions over forwards nothing that the dead one forwarded (docs/SEMANTICS.md,
# "Crashes: reading the output back"). The group never committed those partitions, so their
# new owner reads them from their start (auto.offset.reset earliest, sketchd's default); no
# commit carries the outputs' positions, so it reads the output topic back from its start.
# The same happens when a member's every commit is refused before its partitions move (the
# mock cluster refuses commits while the group is joining or syncing): found by
# group_moves, where the second member forwarded again all the first had forwarded.
#   1. A, whose auto.commit.interval.ms is an hour, forwards 2,000 events and never commits;
#   2. A is killed (kill -9);
#   3. B joins the group, is given the 4 partitions once A's session has expired, reads the
#      output back from its start and finds A's 2,000 copies by their provenance headers;
#   4. 2,000 more events, forwarded by B.
# Checks: the output topic holds each of the 4,000 items exactly once, and B's log says it
# found the 2,000 copies of A's.
#
# Usage: crash_before_commit_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

chunk=2000
start_mock_kafka events:4 unique:4

# config NAME PORT COMMIT_INTERVAL_MS: A's or B's configuration.
config() { takeover_member_config "$work/$1.yaml" "$2" itest-crash-before-commit "$3"; }
port_a=$(free_port)
port_b=$(free_port)
config a "$port_a" 3600000
config b "$port_b" 500

port=$port_a start_daemon "$work/a.yaml" a
pid_a=$daemon_pid
wait_assigned a 4
keyed_lines 0 "$chunk" | produce events -K'|'
wait_total "$chunk" "$port_a"
a_forwarded=$(forwarded "$port_a")
kill -KILL "$pid_a"
wait "$pid_a" 2>/dev/null || true
log "1-2. A forwarded the first $a_forwarded events, never committed them, and was killed"

port=$port_b start_daemon "$work/b.yaml" b
pid_b=$daemon_pid
wait_assigned b 4
check_log "$work/b.err" "4 partition\(s\) taken over that the group never committed"
found=$(copies_found "$work/b.err" "the topic's start (partitions never committed)")
[[ $found == "$a_forwarded" ]] || fail "B found ${found:-no} copies of A's, not the $a_forwarded A forwarded"
log "3. B took the partitions over and found the $found copies A forwarded"

keyed_lines "$chunk" "$chunk" | produce events -K'|'
http="http://127.0.0.1:$port_b"
daemon_pid=$pid_b
wait_committed 4 60 1
sleep 1
log "4. B read both chunks and forwarded the second"

check_each_once $((2 * chunk)) "B forwarded A's work again?"

stop_process "$pid_b" 15 || fail "B did not exit within 15 s of SIGTERM"
[[ $stop_status -eq 0 ]] || fail "B exited with status $stop_status"
log "PASS"
