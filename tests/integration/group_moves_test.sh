#!/usr/bin/env bash
# A consumer group of sketchd instances that grows, shrinks and loses members to kill -9
# while keyed events recur, and what reaches the output topic. The figures of issue 40's
# harness: events lost, duplicates downstream, and each instance's memory with 1, 2 and 3
# members.
#
# The stream: 3,500 distinct items, each 4 times (fixed seed), keyed by item over 8
# partitions, produced at about 140 events/s (100 s, about the time the moves take).
# Members come and go while it runs:
#   A alone → B joins → C joins (3 members) → B and C stop (SIGTERM: 1 member) → B joins
#   again → B is killed (kill -9) and started again, KILLS times (default 2).
# Every instance forwards first-seen events to `unique`. Once the stream has ended and the
# group has committed everything, the output is read back.
#
# Checks:
#   - at-least-once: every distinct item reaches the output but at most the Bloom filters'
#     false-positive allowance (mean fpr·distinct per filter that saw the item, plus 5
#     standard deviations of the binomial);
#   - no duplicate downstream, kill -9 included;
#   - every instance stopped with SIGTERM exits 0;
#   - with scope: partition, the members' heavy-hitter estimates add up: after every move,
#     no sum of 64 items' estimates over the members exceeds the item's count in what was
#     produced so far plus Σ εN (nothing counted twice); once the stream is consumed, every
#     item's sum lies within [count, count + Σ εN] (see below).
# Prints as figures: events forwarded, items lost, duplicates downstream (one item
# forwarded more than once), and each member's resident memory at 1, 2 and 3 members.
# Each instance keeps one Bloom filter over the partitions it reads; a partition's new
# owner fills it from the partition's log (state.fill_from_log) up to the group's committed
# offset, so a move forwards nothing twice (2,600 duplicates without the fill); after a
# crash it also reads back, from the output positions committed with the offsets, what the
# killed member forwarded after its last commit, and does not forward it again (about 130
# duplicates without).
#
# With SCOPE=partition, each member keeps one shard of windows per partition it owns
# (scope: partition): the same checks hold, and a member's Bloom memory at 3 members is
# below what the one member took alone (sketchd_bloom_size_bytes).
#
# With STATE_TOPIC=1 (scope partition; ctest runs it with KILLS=10, 5 under a sanitizer),
# the members keep their shards on a state topic (state.topic, written every 2 s and at
# each revocation) and do not fill windows from the log: a partition's new owner restores
# its shards from the topic, and the same checks
# hold (without the topic, about 2,600 duplicates). Every member must have restored shards.
#
# Usage: [SCOPE=instance|partition] [KILLS=N] [STATE_TOPIC=1] group_moves_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

fpr=0.001
partitions=8
kills=${KILLS:-2}
scope=${SCOPE:-instance}
state=
if [[ ${STATE_TOPIC:-0} == 1 ]]; then
  scope=partition
  state="state: { topic: sketchd-state, snapshot_interval: 2s, fill_from_log: false }"
fi
# The state topic (used with STATE_TOPIC=1) has a partition per input partition, as sketchd
# would create it: the mock cluster's metadata request would make it with 4.
start_mock_kafka "events:$partitions" "unique:$partitions" "sketchd-state:$partitions"

recurring_events 20261129 3500 4

# config NAME PORT: a member of the group, forwarding first-seen events.
# The heavy-hitter window (5 minutes; HH_WINDOW_S seconds). A run that outlasts it (KILLS=10)
# checks the final sums' upper bound only.
hh_window_s=${HH_WINDOW_S:-300}
config() {
  group_member_config "$work/$1.yaml" "$2" itest-moves "$fpr" "$scope" "$state" "${hh_window_s}s"
}

declare -A pid_of port_of
filters=0  # the Bloom filters that have seen items: one per start of a member

# member_start NAME: starts (or starts again) member NAME and waits until it is ready.
member_start() {
  local name=$1
  [[ -n ${port_of[$name]:-} ]] || port_of[$name]=$(free_port)
  config "$name" "${port_of[$name]}"
  port=${port_of[$name]}
  start_daemon "$work/$name.yaml" "$name-$filters"
  pid_of[$name]=$daemon_pid
  filters=$((filters + 1))
}

# member_stop NAME: SIGTERM, and a clean exit within 20 s.
member_stop() {
  stop_process "${pid_of[$1]}" 20 || fail "$1 did not exit within 20 s of SIGTERM"
  [[ $stop_status == 0 ]] || fail "$1 exited with status $stop_status"
  unset "pid_of[$1]"
  log "$1 stopped"
}

# member_kill NAME: kill -9.
member_kill() {
  kill -KILL "${pid_of[$1]}"
  wait "${pid_of[$1]}" 2>/dev/null || true
  unset "pid_of[$1]"
  log "$1 killed (kill -9)"
}

# assigned NAME: the partitions member NAME holds now (empty when it does not answer).
assigned() {
  curl -sf --max-time 5 "http://127.0.0.1:${port_of[$1]}/metrics" |
    awk '$1 == "sketchd_kafka_assigned_partitions" { print $2 }' || true
}

# settle: waits (at most 60 s) until the running members hold every partition between
# them, each at least one; then, once the stream runs, checks the heavy-hitter sums.
settle() {
  local deadline=$((SECONDS + 60 * slow)) name sum shares
  while :; do
    sum=0
    shares=
    for name in "${!pid_of[@]}"; do
      local n
      n=$(assigned "$name")
      [[ -n $n && $n -gt 0 ]] || { sum=-1; break; }
      sum=$((sum + n))
      shares+="$name $n "
    done
    if ((sum == partitions)); then
      log "group settled: $shares"
      [[ -z ${producer_pid:-} ]] || hh_sums during
      return 0
    fi
    ((SECONDS < deadline)) || fail "the group did not settle within 60 s (${shares:-a member holds none})"
    sleep 0.3
  done
}

# bloom_bytes NAME: the memory of member NAME's Bloom filters (sketchd_bloom_size_bytes).
bloom_bytes() {
  curl -sf --max-time 5 "http://127.0.0.1:${port_of[$1]}/metrics" |
    awk '$1 ~ /^sketchd_bloom_size_bytes/ { printf "%d\n", $2 }' || true
}

# rss MEMBERS: prints each running member's resident memory and Bloom memory as a figure.
rss() {
  local name out=
  for name in $(printf '%s\n' "${!pid_of[@]}" | sort); do
    out+="$name $(awk '/^VmRSS/ { print $2 " " $3 }' "/proc/${pid_of[$name]}/status"), Bloom $(bloom_bytes "$name") B; "
  done
  echo "figure: scope $scope, memory with ${#pid_of[@]} member(s): $out"
}

# Heavy hitters that add up: the sum over the members of an item's estimate lies within
# [count, count + the sum of their εN] (a Count-Min sketch never undercounts, and each
# member's overcount is at most its εN with probability ≥ 1 − δ). With scope: partition, a
# moved partition's counts leave with its shard, so nothing is counted twice; with
# scope: instance, the member a partition left keeps counting its items in the one sketch it
# has, and the sums are only printed.
# hh_sums during: after a move, while the stream runs, for the stream's first 64 distinct
# items: only the upper bound, against their counts in what the producer has written so far
# (the file `produced`, written before each chunk goes out, read after the estimates): a
# moving partition's counts are in transit while its new owner restores or fills them.
# hh_sums end: once everything is consumed, both bounds for every item; the lower one only
# when the stream began less than a heavy-hitter window ago.
cat >"$work/hh_sums.py" <<'EOF'
import json, math, os, sys, urllib.parse, urllib.request
from collections import Counter
events, scope, mode, elapsed, window_s = sys.argv[1:6]
elapsed, window_s = int(elapsed), int(window_s)
produced_file, ports = sys.argv[6], sys.argv[7:]
lines = [line.split("|", 1)[0] for line in open(events)]
if mode == "during":
    items = list(dict.fromkeys(lines))[:64]
else:
    items = list(dict.fromkeys(lines))
delta = 0.001  # heavy_hitters.delta's default
bound = 0.0
sums = Counter()
for port in ports:
    base = f"http://127.0.0.1:{port}/api/v1/pipelines/orders/estimate?item="
    for item in items:
        with urllib.request.urlopen(base + urllib.parse.quote(item), timeout=5) as r:
            e = json.load(r)
        sums[item] += e["estimate"]
    bound += e["error_bound"]
if mode == "end":
    produced = len(lines)
else:  # nothing yet before the producer's first chunk
    produced = int(open(produced_file).read() or 0) if os.path.exists(produced_file) else 0
truth = Counter(lines[:produced])
under = sum(1 for i in items if sums[i] < truth[i])
over = sum(1 for i in items if sums[i] > truth[i] + bound)
worst = max(sums[i] - truth[i] for i in items)
# Each member's estimate of an item exceeds its εN with probability at most δ.
allowance = len(ports) * delta * len(items) + 5 * math.sqrt(len(ports) * delta * len(items))
what = "after a move" if mode == "during" else "at the end"
print(f"figure: heavy-hitter sums {what}, {len(ports)} member(s), scope {scope}, {produced} "
      f"events produced: {over} of {len(items)} items over count + εN (εN summed: "
      f"{bound:.1f}; allowance {allowance:.1f}), largest excess over the count {worst}"
      + (f", {under} under their count" if mode == "end" else ""))
if scope != "partition":
    sys.exit(0)
if mode == "end" and under and elapsed < window_s - 30:
    sys.exit(f"problem: {under} items estimated below their count: a member lost counts")
if over > allowance:
    sys.exit(f"problem: {over} items over count + εN: counted twice")
EOF
hh_sums() {
  local name ports=
  for name in "${!pid_of[@]}"; do ports+="${port_of[$name]} "; done
  # shellcheck disable=SC2086
  "$python" "$work/hh_sums.py" "$work/events" "$scope" "$1" "$((SECONDS - ${stream_started:-SECONDS}))" \
    "$hh_window_s" "$work/produced" $ports || fail "the members' heavy-hitter estimates do not add up ($1)"
}

member_start a

export BOOTSTRAP=$bootstrap PRODUCED=$work/produced
# A pause of 0.35 s after every 50 events (about 100 s of stream), longer with more kills,
# so that the stream lasts through every move: about 60 s before the kills, and 30 s per
# kill (the session timeout, the group's rebalance, the rejoin).
PAUSE=$(awk -v k="$kills" 'BEGIN { p = (60 + 30 * k) / 280; print (p < 0.35 ? 0.35 : p) }')
export PAUSE
"$python" - "$work/events" <<'EOF' >"$work/producer.log" 2>&1 &
import os, subprocess, sys, time
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
kcat = subprocess.Popen(["kcat", "-P", "-b", os.environ["BOOTSTRAP"], "-t", "events", "-K|",
                         "-X", "linger.ms=5"], stdin=subprocess.PIPE)
for i in range(0, len(lines), 50):
    # What may be in the topic, written before it is: the sums' upper bound (hh_sums).
    with open(os.environ["PRODUCED"] + ".new", "w") as f:
        f.write(str(min(i + 50, len(lines))))
    os.replace(os.environ["PRODUCED"] + ".new", os.environ["PRODUCED"])
    kcat.stdin.write(b"".join(lines[i:i + 50]))
    kcat.stdin.flush()
    time.sleep(float(os.environ["PAUSE"]))
kcat.stdin.close()
sys.exit(kcat.wait())
EOF
producer_pid=$!
itest_pids+=("$producer_pid")
stream_started=$SECONDS

settle
# A's shards are made by the first messages of their partitions: wait until A holds all 8.
deadline=$((SECONDS + 30 * slow))
until [[ $(curl -sf --max-time 5 "http://127.0.0.1:${port_of[a]}/metrics" |
  awk '$1 ~ /^sketchd_pipeline_shards/ { printf "%d", $2 }') == "$partitions" || $scope != partition ]]; do
  ((SECONDS < deadline)) || fail "A did not hold a shard of each of the $partitions partitions within 30 s"
  sleep 0.3
done
rss
alone=$(bloom_bytes a)
member_start b
settle
rss
member_start c
settle
rss
if [[ $scope == partition ]]; then
  # Each holds the shards of its partitions only.
  for name in a b c; do
    bytes=$(bloom_bytes "$name")
    [[ -n $bytes && -n $alone && $bytes -lt $alone ]] ||
      fail "member $name's Bloom memory at 3 members is ${bytes:-unknown} bytes, not below the ${alone:-unknown} bytes A took alone"
  done
fi
member_stop b
member_stop c
settle
member_start b
settle
for ((k = 1; k <= kills; k++)); do
  sleep $((1 + k % 3))  # a crash at a different point of the stream each time
  member_kill b
  settle  # A alone, once the group has expelled B (its session timeout)
  member_start b
  settle
done

kill -0 "$producer_pid" 2>/dev/null || log "note: the stream ended before the last move"
wait "$producer_pid" || fail "the producer failed: $(cat "$work/producer.log")"
log "produced"

# Everything committed: the lag of every partition is 0 on the members that hold them.
for name in "${!pid_of[@]}"; do
  port=${port_of[$name]}
  http="http://127.0.0.1:$port"
  daemon_pid=${pid_of[$name]}
  wait_committed "$(assigned "$name")" 60 1
done
hh_sums end
for name in "${!pid_of[@]}"; do member_stop "$name"; done

# Each forwarded event: its key, where it is in unique, when, and its provenance headers.
kcat -C -b "$bootstrap" -t unique -o beginning -e -q -f '%k\t%p\t%o\t%T\t%h\n' >"$work/unique.tsv" ||
  fail "kcat could not read unique"
"$python" - "$work" "$distinct" "$fpr" "$filters" <<'EOF' || fail "the output topic lost items or holds duplicates"
import math, sys
from collections import Counter
work, distinct, fpr, filters = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
forwarded = [line.rstrip("\n").split("\t") for line in open(f"{work}/unique.tsv") if line.strip()]
keys = Counter(f[0] for f in forwarded)
items = {line.split("|", 1)[0] for line in open(f"{work}/events")}
unknown = set(keys) - items
if unknown:
    sys.exit(f"problem: {len(unknown)} forwarded keys are not in the input")
# An item is lost only to a false positive of a filter that saw it: at most one per start.
allowance = filters * fpr * distinct + 5 * math.sqrt(filters * distinct * fpr * (1 - fpr))
lost = distinct - len(keys)
duplicates = sum(keys.values()) - len(keys)
print(f"figure: {sum(keys.values())} events forwarded for {distinct} items: {lost} lost "
      f"(allowance {allowance:.1f}), {duplicates} duplicates downstream, "
      f"{sum(1 for c in keys.values() if c > 1)} items forwarded more than once")
if lost > allowance:
    sys.exit(f"problem: {lost} items never forwarded, more than the allowance {allowance:.1f}")
if duplicates:
    # Which copies: unique's partition and offset, the time, and the input they came from.
    twice = [k for k, c in keys.items() if c > 1]
    for k in twice[:10]:
        print(f"  {k}: " + "; ".join(" ".join(f[1:]) for f in forwarded if f[0] == k))
    sys.exit(f"problem: {duplicates} duplicates downstream")
EOF
if [[ ${STATE_TOPIC:-0} == 1 ]]; then
  # Each move was served by the state topic: some start of every member restored shards.
  restored=$(cat "$work"/*.err | grep -c "restored at offset" || true)
  echo "figure: partitions restored from the state topic: $restored"
  ((restored > 0)) || fail "no partition was restored from the state topic"
  for name in a b c; do
    grep -q "restored at offset" "$work/$name"-*.err ||
      fail "member $name never restored a partition from the state topic"
  done
fi
log "PASS"
