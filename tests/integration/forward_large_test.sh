#!/usr/bin/env bash
# A message as large as a default Kafka broker accepts is forwarded like any other, and so
# is a larger one the input topic holds compressed: the output broker judges a message's
# size, not sketchd's producer (librdkafka's producer refuses messages over its
# message.max.bytes, 1,000,000 by default, before compressing them; sketchd's defaults to
# 100,000,000). One dedup pipeline with output_topic reads a few small events (one of them
# a duplicate), then an event of 1,040,000 bytes (a JSON document with the item field,
# first-seen), then, once that one is forwarded, one more small event. Checks:
#   - every first-seen event reaches the output topic, the large one byte-identical (same
#     key, same value: length and SHA-256), in input order; the duplicate does not;
#   - no forward failure, sketchd_consumption_stopped stays 0 and /readyz 200, and the
#     event produced after the large one is forwarded too (sketchd keeps consuming);
#   - an event of 2,000,000 bytes produced with lz4 (as an upstream producer compressing
#     its batches would) is forwarded too (the mock broker sets no size limit);
#   - restarted with message.max.bytes: 500000 in kafka.properties, a message over it is
#     not dropped: consumption stops and /readyz answers 503 with the reason
#     (MSG_SIZE_TOO_LARGE), as when an output broker refuses a message; the event after
#     it is not forwarded (it is read again after a restart).
#
# Usage: forward_large_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

large_size=1040000
start_mock_kafka events:1 unique:1
port=$(free_port)

# The large event: {"user":{"id":"large"},"pad":"xxx…"}, exactly $large_size bytes.
"$python" - "$work" "$large_size" <<'EOF'
import sys
work, size = sys.argv[1], int(sys.argv[2])
head, tail = '{"user":{"id":"large"},"pad":"', '"}'
with open(f"{work}/large", "w") as f:
    f.write("large|" + head + "x" * (size - len(head) - len(tail)) + tail + "\n")
EOF
for i in 1 2 3 4 5 2; do printf 'item-%d|{"user":{"id":"item-%d"}}\n' "$i" "$i"; done >"$work/small"
produce events -K'|' <"$work/small"
# kcat's own producer needs the higher limit too (librdkafka's default is 1,000,000).
produce events -K'|' -X message.max.bytes=2000000 <"$work/large"
log "produced 6 small events (one duplicate) and one of $large_size bytes"

cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-large
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: orders
    topics: [events]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 1000, fpr: 0.001, output_topic: unique }
log: { level: info, summary_interval: 0 }
EOF
start_daemon "$work/sketchd.yaml"

# wait_forwarded COUNT: waits until COUNT first-seen events are delivered; fails at once,
# with /readyz's reason, when consumption stops instead.
wait_forwarded() {
  local want=$1
  local deadline=$((SECONDS + 60)) forwarded stopped
  while ((SECONDS < deadline)); do
    kill -0 "$daemon_pid" 2>/dev/null || fail "sketchd exited while waiting for $want forwarded events"
    scrape
    forwarded=$(metric_value "$work/metrics.txt" 'sketchd_dedup_forwarded_total{pipeline="orders"}')
    stopped=$(metric_value "$work/metrics.txt" 'sketchd_consumption_stopped')
    if [[ $stopped == 1 ]]; then
      api readyz "$work/readyz.txt"
      fail "consumption stopped after $forwarded forwarded events (expected $want): $(cat "$work/readyz.txt")"
    fi
    [[ -n $forwarded ]] && ((forwarded >= want)) && return 0
    sleep 0.2
  done
  fail "sketchd_dedup_forwarded_total is \"$forwarded\" after 60 s, expected $want"
}

wait_forwarded 6
log "the 5 first-seen small events and the large one are forwarded"

# Still consuming: an event produced now is forwarded too.
echo 'after|{"user":{"id":"after"}}' | produce events -K'|'
wait_forwarded 7
scrape
expect_values "$work/metrics.txt" 'sketchd_dedup_first_seen_total{pipeline="orders"} 7' \
  'sketchd_dedup_duplicates_total{pipeline="orders"} 1' \
  'sketchd_dedup_forward_failures_total{pipeline="orders"} 0' \
  'sketchd_consumption_stopped 0'
api readyz
[[ $api_status == 200 ]] || fail "GET /readyz: HTTP $api_status after the large event: $(cat "$work/api.json")"
log "still consuming after the large event; /readyz 200"

# The output topic, read back whole: the large event must be the input's, byte for byte.
kcat -C -b "$bootstrap" -t unique -o beginning -e -q -J >"$work/unique.json" || fail "kcat could not read unique"
"$python" - "$work" <<'EOF' || fail "the output topic does not hold the first-seen events intact"
import hashlib, json, sys
work = sys.argv[1]
expected = []
for name in ("small", "large"):
    for line in open(f"{work}/{name}", encoding="utf-8").read().splitlines():
        key, value = line.split("|", 1)
        if key not in [k for k, _ in expected]:
            expected.append((key, value))
expected.append(("after", '{"user":{"id":"after"}}'))
out = [json.loads(line) for line in open(f"{work}/unique.json", encoding="utf-8") if line.strip()]
got = [(m["key"], m["payload"]) for m in out]
def digest(v):
    return f"{len(v.encode())} bytes, sha256 {hashlib.sha256(v.encode()).hexdigest()[:16]}"
for (k, v), (gk, gv) in zip(expected, got):
    print(f"  {k}: input {digest(v)}; output {gk}: {digest(gv)}")
if got != expected:
    sys.exit(f"  output keys {[k for k, _ in got]}, expected {[k for k, _ in expected]} "
             "(or a value differs, see above)")
EOF
log "the output topic holds the 7 first-seen events in order, the large one byte-identical"

# Larger than a default broker takes, compressed on the way in: the producer leaves the
# judgment to the output broker.
"$python" - "$work" <<'EOF'
import sys
head, tail = '{"user":{"id":"compressed"},"pad":"', '"}'
with open(f"{sys.argv[1]}/compressed", "w") as f:
    f.write("compressed|" + head + "x" * (2000000 - len(head) - len(tail)) + tail + "\n")
EOF
produce events -K'|' -X message.max.bytes=3000000 -X compression.type=lz4 <"$work/compressed"
wait_forwarded 8
log "an event of 2,000,000 bytes, produced with lz4, is forwarded too"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"

# Over a limit set in kafka.properties: not dropped, consumption stops with the reason.
sed -i 's/heartbeat.interval.ms: 1000 }/heartbeat.interval.ms: 1000, message.max.bytes: 500000 }/' "$work/sketchd.yaml"
grep -q 'message.max.bytes: 500000' "$work/sketchd.yaml" || fail "could not set message.max.bytes"
# Both events are in the topic before sketchd starts, and together under the consumer's
# max.partition.fetch.bytes (1 MiB), so that one fetch, and sketchd's first batch, holds both.
"$python" - "$work" <<'EOF'
import sys
head, tail = '{"user":{"id":"oversized"},"pad":"', '"}'
with open(f"{sys.argv[1]}/oversized", "w") as f:
    f.write("oversized|" + head + "x" * (600000 - len(head) - len(tail)) + tail + "\n")
    f.write('later|{"user":{"id":"later"}}\n')
EOF
produce events -K'|' -X message.max.bytes=2000000 <"$work/oversized"
start_daemon "$work/sketchd.yaml" sketchd-limited
wait_metric 'sketchd_consumption_stopped' -eq 1 30
api readyz "$work/readyz.txt"
[[ $api_status == 503 ]] || fail "/readyz answered $api_status after the oversized event, not 503"
grep -q "forwarding to topic unique failed (MSG_SIZE_TOO_LARGE" "$work/readyz.txt" \
  || fail "/readyz does not say why: $(cat "$work/readyz.txt")"
[[ $(require_value "$work/metrics.txt" 'sketchd_dedup_forwarded_total{pipeline="orders"}') == 0 ]] \
  || fail "the oversized event counts as forwarded"
log "an event over the limit stops consumption: $(cut -c1-200 "$work/readyz.txt")"

stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
# The event after the oversized one (in the same batch) is not forwarded either: it is
# read again after a restart, and forwarding it now would
# deliver it twice, and before the one that failed.
kcat -C -b "$bootstrap" -t unique -o beginning -e -q -f '%k\n' >"$work/unique.keys" || fail "kcat could not read unique"
grep -qx later "$work/unique.keys" && fail "the event after the oversized one was forwarded: $(tr '\n' ' ' <"$work/unique.keys")"
[[ $(wc -l <"$work/unique.keys") == 8 ]] || fail "the output topic holds $(wc -l <"$work/unique.keys") events, expected 8"
log "nothing after the failed event was forwarded"
log "PASS"
