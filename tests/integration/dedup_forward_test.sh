#!/usr/bin/env bash
# sketchd forwards first-seen events, and only those, with the message intact. A stream of
# 6,600 JSON events over 2,001 distinct items (every item occurs 1 to 5 times, fixed seed,
# and one item "hot" 600 times), keyed by item over 4 partitions, each with a header;
# values differ per occurrence ("seq"). One dedup pipeline with output_topic and
# duplicates_topic, and a heavy-hitter pipeline on the same topic with an alerts_topic.
# Checks:
#   - sketchd_dedup_forwarded_total = first_seen, duplicates forwarded = duplicates;
#   - the output topic holds each item at most once, and at least distinct − allowance of
#     them: a Bloom filter has no false negatives, and each first occurrence is a false
#     positive with probability at most fpr (allowance: mean fpr·distinct plus 5 standard
#     deviations of the binomial, sqrt(distinct·fpr·(1 − fpr)));
#   - every forwarded event is the first occurrence of its item in the input: same key,
#     value, header and timestamp, plus the provenance headers sketchd-source-topic,
#     -partition and -offset naming that occurrence (decimal text); its output partition is
#     the key's (murmur2, like the Java client), so all events of a key stay together;
#   - the duplicates topic holds exactly the other events, each with the provenance of an
#     input event of the same key and value;
#   - the alerts topic holds the JSON event of "hot" entering the heavy set, with every
#     field (pipeline, event, item, estimate, ratio, window_items, error_bound, threshold,
#     time), and sketchd_heavy_hitter_alerts_sent_total counts it.
# Prints the lost and duplicated counts as figures.
#
# Usage: dedup_forward_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

fpr=0.001
start_mock_kafka events:4 unique:4 dups:4 alerts:1
port=$(free_port)

"$python" - "$work" <<'EOF'
import json, random, sys
work = sys.argv[1]
rng = random.Random(20261122)
events = []
for i in range(2000):
    events += [f"item-{i}"] * rng.randint(1, 5)
events += ["hot"] * 600
rng.shuffle(events)
with open(f"{work}/events", "w") as f:
    for seq, item in enumerate(events):
        f.write(f'{item}|{json.dumps({"user": {"id": item}, "seq": seq}, separators=(",", ":"))}\n')
EOF
events=$(wc -l <"$work/events")
distinct=$(cut -d'|' -f1 "$work/events" | sort -u | wc -l)
log "stream: $events events, $distinct distinct items"
produce events -K"|" -H source=itest -H trace=abc <"$work/events"
log "produced"

cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-forward
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dedup:
      window: 1h
      capacity: 100000
      fpr: $fpr
      output_topic: unique
      duplicates_topic: dups
  - name: hot
    topics: [events]
    item: { from: key }
    clock: wall
    heavy_hitters: { window: 10m, buckets: 10, epsilon: 0.001, delta: 0.01, top_k: 5, threshold: 0.05, alerts_topic: alerts }
log: { level: info, summary_interval: 0 }
EOF
start_daemon "$work/sketchd.yaml"

wait_metric 'sketchd_pipeline_items_total{pipeline="orders"}' -eq "$events" 60
first_seen=$(require_value "$work/metrics.txt" 'sketchd_dedup_first_seen_total{pipeline="orders"}')
duplicates=$(require_value "$work/metrics.txt" 'sketchd_dedup_duplicates_total{pipeline="orders"}')
wait_metric 'sketchd_dedup_forwarded_total{pipeline="orders"}' -eq "$first_seen" 60
wait_metric 'sketchd_dedup_duplicates_forwarded_total{pipeline="orders"}' -eq "$duplicates" 60
failures=$(require_value "$work/metrics.txt" 'sketchd_dedup_forward_failures_total{pipeline="orders"}')
[[ $failures == 0 ]] || fail "$failures forward failures"
log "first seen $first_seen, duplicates $duplicates, all forwarded"

# Both topics as JSON envelopes (key, payload, headers, timestamp, partition).
kcat -C -b "$bootstrap" -t unique -o beginning -e -J -q >"$work/unique.json" || fail "kcat could not read unique"
kcat -C -b "$bootstrap" -t dups -o beginning -e -J -q >"$work/dups.json" || fail "kcat could not read dups"
kcat -C -b "$bootstrap" -t events -o beginning -e -J -q >"$work/events.json" || fail "kcat could not read events"

"$python" - "$work" "$distinct" "$first_seen" "$duplicates" "$fpr" <<'EOF' || fail "the output topics do not match the input"
import json, math, sys
work, distinct, first_seen, duplicates, fpr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
def read(name):
    with open(f"{work}/{name}.json") as f:
        return [json.loads(line) for line in f if line.strip()]
inp, out, dups = read("events"), read("unique"), read("dups")
# The first occurrence of each item: items are keys, so all of an item's events are in one
# partition, in offset order.
first = {}
for m in sorted(inp, key=lambda m: (m["partition"], m["offset"])):
    first.setdefault(m["key"], m)
by_place = {(m["partition"], m["offset"]): m for m in inp}
# kcat -J writes headers as [name, value, name, value, ...]: the input's own ones, and the
# provenance sketchd adds (decimal text).
PROVENANCE = ("sketchd-source-topic", "sketchd-source-partition", "sketchd-source-offset")
def split_headers(m):
    h = m.get("headers") or []
    pairs = list(zip(h[0::2], h[1::2]))
    own = [x for pair in pairs if pair[0] not in PROVENANCE for x in pair]
    prov = {name: value for name, value in pairs if name in PROVENANCE}
    return own, prov
def provenance_of(m):
    return {"sketchd-source-topic": "events", "sketchd-source-partition": str(m["partition"]),
            "sketchd-source-offset": str(m["offset"])}
ok = True
def problem(text):
    global ok
    ok = False
    print("problem:", text)
keys = [m["key"] for m in out]
if len(keys) != len(set(keys)):
    problem(f"{len(keys) - len(set(keys))} items forwarded more than once")
if len(out) != first_seen:
    problem(f"{len(out)} events in the output topic, {first_seen} counted first-seen")
allowance = fpr * distinct + 5 * math.sqrt(distinct * fpr * (1 - fpr))
lost = distinct - len(set(keys))
if lost > allowance:
    problem(f"{lost} items never forwarded, more than the false-positive allowance {allowance:.1f}")
partition_of = {}
for m in out:
    f = first.get(m["key"])
    if f is None:
        problem(f"forwarded item {m['key']} was never produced")
        continue
    own, prov = split_headers(m)
    for field, got, want in (("payload", m.get("payload"), f.get("payload")),
                             ("headers", own, f.get("headers") or []), ("ts", m.get("ts"), f.get("ts")),
                             ("provenance", prov, provenance_of(f))):
        if got != want:
            problem(f"{m['key']}: {field} {got!r} differs from the first occurrence's {want!r}")
            break
for m in dups:
    _, prov = split_headers(m)
    try:
        source = by_place[(int(prov["sketchd-source-partition"]), int(prov["sketchd-source-offset"]))]
    except (KeyError, ValueError):
        problem(f"duplicate {m['key']}: no usable provenance in {m.get('headers')!r}")
        break
    if prov["sketchd-source-topic"] != "events" or (source["key"], source["payload"]) != (m["key"], m["payload"]):
        problem(f"duplicate {m['key']}: its provenance {prov!r} names another event")
        break
if len(dups) != duplicates:
    problem(f"{len(dups)} events in the duplicates topic, {duplicates} counted")
if len(out) + len(dups) != len(inp):
    problem(f"{len(out)} + {len(dups)} forwarded events for {len(inp)} consumed")
# Partitioned by key: every event of a key is in one output partition.
for m in out + dups:
    if partition_of.setdefault(m["key"], m["partition"]) != m["partition"]:
        problem(f"key {m['key']} is in several output partitions")
        break
print(f"figures: {len(inp)} events, {distinct} distinct; forwarded {len(out)} first-seen + {len(dups)} duplicates; "
      f"lost (false positives) {lost} (allowance {allowance:.1f}); duplicated downstream {len(keys) - len(set(keys))}")
sys.exit(0 if ok else 1)
EOF

wait_metric 'sketchd_heavy_hitter_alerts_sent_total{pipeline="hot"}' -ge 1 30
kcat -C -b "$bootstrap" -t alerts -o beginning -e -q -f '%k\t%s\n' >"$work/alerts.txt" || fail "kcat could not read alerts"
"$python" - "$work/alerts.txt" <<'EOF' || fail "no valid alert event for hot in the alerts topic: $(cat "$work/alerts.txt")"
import json, sys
events = [line.split("\t", 1) for line in open(sys.argv[1]).read().splitlines() if line]
hot = [json.loads(v) for k, v in events if k == "hot"]
enter = [e for e in hot if e["event"] == "enter"]
assert enter, "no enter event"
e = enter[0]
assert set(e) >= {"pipeline", "event", "item", "estimate", "ratio", "window_items", "error_bound", "threshold", "time"}, e
assert e["pipeline"] == "hot" and e["item"] == "hot" and e["threshold"] == 0.05, e
assert e["ratio"] >= 0.05 and abs(e["ratio"] - e["estimate"] / e["window_items"]) < 1e-9, e
assert 0 < e["error_bound"] <= 0.001 * e["window_items"] * 1.0001, e
print("alert:", json.dumps(e))
EOF
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
[[ $stop_status == 0 ]] || fail "sketchd exited with status $stop_status"
log "PASS"
