#!/usr/bin/env bash
# Dead letters (dead_letter_topic) against a broker. Two pipelines read one topic of 2
# partitions: `orders` takes its item from the JSON value (/user/id), `keys` from the key;
# each has a dead-letter topic of its own. The input, produced with kcat with a header on
# every message, mixes valid events, invalid JSON, events without /user/id, valid events
# with a null key (no key at all, as Kafka has it), and real tombstones (null values, kcat
# -Z), keyed and not. Checks:
#   - orders.dlq holds exactly the invalid-JSON and missing-path messages, keys.dlq exactly
#     the null-key ones (a message both pipelines skip would be in both); no tombstone in
#     either;
#   - each dead letter is its input message unchanged — key (null stays null), value,
#     headers, timestamp — followed by sketchd-source-topic, -partition and -offset naming
#     it, then sketchd-error-reason (the metric's reason) and sketchd-pipeline;
#   - sketchd_dead_letters_total{pipeline,reason} counts them, every reason at 0 from the
#     start, and sketchd_dead_letter_failures_total is 0;
#   - at-least-once: more input, sketchd killed with kill -9 while it sends their dead
#     letters, then restarted: every dead letter is in its topic (again, for some, which
#     at-least-once allows), none is lost.
#
# Usage: dead_letter_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

start_mock_kafka events:2 unique:2 orders.dlq:2 keys.dlq:1
port=$(free_port)

# make_input NAME FIRST COUNT: $work/NAME (for kcat -K '|' -D '\n') and $work/NAME.tomb (for
# kcat -Z): COUNT messages of each kind in turn, from sequence number FIRST.
make_input() {
  "$python" - "$work/$1" "$2" "$3" <<'EOF'
import json, sys
path, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as f, open(path + ".tomb", "w") as t:
    for seq in range(first, first + count):
        event = json.dumps({"user": {"id": f"u{seq % 50}"}, "seq": seq}, separators=(",", ":"))
        kind = seq % 5
        if kind == 0:
            f.write(f"k{seq}|{event}\n")                    # valid
        elif kind == 1:
            f.write(f'k{seq}|{{"user": {{"id": "u{seq}"\n')  # invalid JSON
        elif kind == 2:
            f.write(f'k{seq}|{{"seq":{seq}}}\n')              # no /user/id
        elif kind == 3:
            f.write(f"{event}\n")                            # a null key
        else:
            t.write(f"k{seq}|\n" if seq % 2 else "|\n")      # a tombstone, keyed or not
EOF
}

cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-dead-letters
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dead_letter_topic: orders.dlq
    dedup: { window: 1h, capacity: 10000, output_topic: unique }
  - name: keys
    topics: [events]
    item: { from: key }
    clock: wall
    dead_letter_topic: keys.dlq
    heavy_hitters: { window: 10m, buckets: 10, epsilon: 0.001, delta: 0.01, top_k: 5, threshold: 0.05 }
log: { level: info, summary_interval: 0 }
EOF

# The counters are there at 0 before any input.
start_daemon "$work/sketchd.yaml"
scrape
for pipeline in orders keys; do
  for reason in invalid_json missing_field not_scalar empty_item oversized null_key; do
    expect_values "$work/metrics.txt" "sketchd_dead_letters_total{pipeline=\"$pipeline\",reason=\"$reason\"} 0"
  done
  expect_values "$work/metrics.txt" "sketchd_dead_letter_failures_total{pipeline=\"$pipeline\"} 0"
done
[[ -z $(metric_value "$work/metrics.txt" 'sketchd_dead_letters_total{pipeline="orders",reason="tombstone"}') ]] ||
  fail "a tombstone series among the dead letters"
log "dead-letter counters at 0 from the start"

make_input first 0 500
produce events -K '|' -H source=itest -H trace=abc <"$work/first"
produce events -Z -K '|' -H source=itest <"$work/first.tomb"
log "produced 500 messages"
# A dead letter is counted when its delivery is reported, and the two partitions of
# orders.dlq report on their own: each counter is waited for, none is read once.
wait_metric 'sketchd_pipeline_items_total{pipeline="keys"}' -eq 300 60
wait_metric 'sketchd_dead_letters_total{pipeline="orders",reason="missing_field"}' -eq 100 60
wait_metric 'sketchd_dead_letters_total{pipeline="orders",reason="invalid_json"}' -eq 100 60
wait_metric 'sketchd_pipeline_extract_failures_total{pipeline="orders",reason="tombstone"}' -eq 100 60
expect_values "$work/metrics.txt" 'sketchd_dead_letter_failures_total{pipeline="orders"} 0'
wait_metric 'sketchd_dead_letters_total{pipeline="keys",reason="null_key"}' -eq 100 60
wait_metric 'sketchd_pipeline_extract_failures_total{pipeline="keys",reason="tombstone"}' -eq 100 60
expect_values "$work/metrics.txt" 'sketchd_dead_letters_total{pipeline="keys",reason="invalid_json"} 0' \
  'sketchd_dead_letter_failures_total{pipeline="keys"} 0'

# read_topics: the input and both dead-letter topics as kcat's JSON envelopes.
read_topics() {
  local t
  for t in events orders.dlq keys.dlq; do
    kcat -C -b "$bootstrap" -t "$t" -o beginning -e -J -q >"$work/$t.json" || fail "kcat could not read $t"
  done
}

# check_dead_letters MODE: MODE exact (each dead letter once) or at_least_once.
check_dead_letters() {
  read_topics
  "$python" - "$work" "$1" <<'EOF' || fail "the dead-letter topics do not match the input"
import collections, json, sys
work, mode = sys.argv[1], sys.argv[2]
def read(name):
    with open(f"{work}/{name}.json") as f:
        return [json.loads(line) for line in f if line.strip()]
inp = read("events")
def reason(pipeline, m):
    if m.get("payload") is None:
        return None  # a tombstone: never a dead letter
    if pipeline == "keys":
        return "null_key" if m.get("key") is None else None
    try:
        doc = json.loads(m["payload"])
    except ValueError:
        return "invalid_json"
    return None if isinstance(doc.get("user"), dict) and "id" in doc["user"] else "missing_field"
problems = []
for pipeline in ("orders", "keys"):
    want = {(m["partition"], m["offset"]): (m, reason(pipeline, m)) for m in inp}
    want = {k: v for k, v in want.items() if v[1]}
    got = collections.Counter()
    for d in read(f"{pipeline}.dlq"):
        h = d.get("headers") or []
        pairs = list(zip(h[0::2], h[1::2]))
        tail = dict(pairs[-5:])
        try:
            place = (int(tail["sketchd-source-partition"]), int(tail["sketchd-source-offset"]))
        except (KeyError, ValueError):
            problems.append(f"{pipeline}: a dead letter without provenance: {d!r}")
            continue
        got[place] += 1
        if place not in want:
            problems.append(f"{pipeline}: input {place} is no dead letter, yet is in the topic")
            continue
        m, why = want[place]
        expected_headers = list(m.get("headers") or []) + [
            "sketchd-source-topic", "events", "sketchd-source-partition", str(place[0]),
            "sketchd-source-offset", str(place[1]), "sketchd-error-reason", why,
            "sketchd-pipeline", pipeline]
        for field, a, b in (("key", d.get("key"), m.get("key")), ("payload", d.get("payload"), m.get("payload")),
                            ("ts", d.get("ts"), m.get("ts")), ("headers", h, expected_headers)):
            if a != b:
                problems.append(f"{pipeline} {place}: {field} {a!r}, expected {b!r}")
    missing = [p for p in want if got[p] == 0]
    if missing:
        problems.append(f"{pipeline}: {len(missing)} dead letter(s) missing, e.g. {missing[:3]}")
    repeated = sum(n - 1 for n in got.values() if n > 1)
    if mode == "exact" and repeated:
        problems.append(f"{pipeline}: {repeated} dead letter(s) sent twice")
    print(f"{pipeline}: {len(want)} dead letters expected, {sum(got.values())} in the topic, {repeated} repeated")
for p in problems[:20]:
    print("problem:", p)
sys.exit(1 if problems else 0)
EOF
}
check_dead_letters exact
log "each dead letter once, unchanged, with its headers; no tombstone"

# At-least-once across kill -9: more input, produced over about 3 s while sketchd runs,
# which is killed once some of its dead letters are counted, then restarted.
make_input second 500 6000
produce events -Z -K '|' -H source=itest <"$work/second.tomb"
"$python" -c '
import sys, time
for i, line in enumerate(sys.stdin):
    sys.stdout.write(line)
    if i % 100 == 99:
        sys.stdout.flush()
        time.sleep(0.05)
' <"$work/second" | produce events -K '|' -H source=itest -H trace=def &
producer=$!
wait_metric 'sketchd_dead_letters_total{pipeline="orders",reason="invalid_json"}' -gt 200 60
kill -KILL "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
log "sketchd killed with kill -9 at $metric invalid-JSON dead letters of orders (1,300 in all)"
wait "$producer" || fail "the second input could not be produced"
start_daemon "$work/sketchd.yaml" sketchd-again
wait_committed 2 60 12
scrape
[[ $(require_value "$work/metrics.txt" 'sketchd_dead_letter_failures_total{pipeline="orders"}') == 0 ]] ||
  fail "dead letters failed after the restart"
check_dead_letters at_least_once
log "no dead letter lost across kill -9"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop on SIGTERM"
[[ $stop_status == 0 ]] || fail "sketchd exited $stop_status"
log "PASS"
