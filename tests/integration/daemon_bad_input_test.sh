#!/usr/bin/env bash
# Bad input is counted by reason and skipped, never a crash or a stall. One topic, two
# pipelines reading it:
#   - "users" takes the item from the JSON field /user/id (max_item_bytes 1024);
#   - "keys" takes the message key, which may be binary.
# The stream mixes valid JSON (numbers, booleans, escaped and raw UTF-8, an id of exactly
# 1024 bytes, a 1 MiB message with a big padding field) with invalid JSON (syntax errors,
# trailing content, invalid UTF-8 or a raw control character inside a string, binary
# garbage, an empty value), a missing or null field, an empty item, an array or object at
# the pointer, ids over 1024 bytes; and keys that are absent (null), empty, binary (invalid
# UTF-8, quote, backslash, newline), over 1024 bytes, or 300 bytes of two-byte characters;
# and tombstones (null values, produced with kcat -Z, with a key and without), which both
# pipelines count as `tombstone`, the key pipeline too.
# Checked:
#   - sketchd_pipeline_extract_failures_total{reason} equals the expected count of every
#     reason, for both pipelines, and every valid message is an item;
#   - the daemon is alive afterwards, answers, and still consumes (100 more messages);
#   - the top-k of the binary keys is exported with cleaned labels (U+FFFD for invalid
#     bytes, escaped quote/backslash/newline, at most 128 bytes cut at a character
#     boundary), /topk stays valid UTF-8 JSON, and `promtool check metrics` passes;
#   - items from headers (a second topic): a repeated header gives its first value, a
#     missing one is missing_field, an empty one empty_item, and a header name of 300
#     bytes is found like any other;
#   - with log.format json, every line sketchd writes, warnings about the bad input and
#     heavy-hitter lines of binary keys included, is one JSON object with time, level,
#     logger and message; the summary lines carry their figures as fields (pipeline,
#     items_per_second, window_items, top with item, estimate and ratio, bloom_fill…), and
#     so do the heavy-hitter enter/leave lines.
#
# Usage: daemon_bad_input_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

topic=raw
start_mock_kafka "$topic:2" headers:1
port=$(free_port)

# All messages in one file for one kcat run: messages end with $msg_end, and a key, when
# there is one, ends with $key_end (an empty key is "$key_end" at the message start).
# The expected outcome of each message is written to $work/expected as lines
# "PIPELINE OUTCOME COUNT" (OUTCOME: item or a failure reason).
msg_end='<<END-OF-MESSAGE>>'
key_end='<<END-OF-KEY>>'
"$python" - "$work" "$msg_end" "$key_end" <<'EOF'
import collections, json, random, sys
work, msg_end, key_end = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
rng = random.Random(7)
messages = []  # (key or None, value, outcome in "users")

def add(key, value, users, times=1):
    for _ in range(times):
        messages.append((key, value if isinstance(value, bytes) else value.encode(), users))

def user(item):
    return json.dumps({"user": {"id": item}}, separators=(",", ":"))

# Valid items.
for i in range(300):
    add(b"k-valid", user(f"v{i % 30}"), "item")
add(b"k-number", '{"user":{"id":42}}', "item")
add(b"k-bool", '{"user":{"id":true}}', "item")
add(b"k-escaped", '{"user":{"id":"caf\\u00e9"}}', "item")
add(b"k-raw-utf8", '{"user":{"id":"日本語"}}', "item")
add(b"k-max", user("a" * 1024), "item")                       # exactly max_item_bytes
big_head, big_tail = '{"pad":"', '","user":{"id":"big"}}'
big = big_head + "x" * (1024 * 1024 - len(big_head) - len(big_tail)) + big_tail
assert len(big) == 1024 * 1024
add(None, big, "item")                                        # a 1 MiB message
add("é".encode() * 150, user("long-key"), "item", times=3)    # a 300-byte key
add(b"", user("v0"), "item")                                  # an empty key
add(b"K" * 1500, user("v1"), "item")                          # a key over 1024 bytes
add(None, user("v2"), "item", times=2)                        # no key
# invalid_json: syntax errors, trailing content, invalid UTF-8 or a raw control character
# in a string, binary garbage, an empty value.
for bad in ['{"user":', 'not json', '{"user":{"id":"x"}', '{"user":{"id":"x"}} trailing',
            '[1,2', "{'user':1}", '{"user":{"id":"x"},}']:
    add(b"k-bad", bad, "invalid_json")
for bad in [b'{"user":{"id":"\xff\xfe"}}', b'{"user":{"id":"\xc0\xaf"}}',  # overlong "/"
            b'{"user":{"id":"\xed\xa0\x80"}}',                          # a surrogate
            b'{"user":{"id":"a\x01b"}}']:                             # a raw control
    add(b"k-bad-bytes", bad, "invalid_json")
binary_key = b'bin\xff\xfe"\\\nkey'
for _ in range(3):
    add(binary_key, b"\x00\x01" + bytes(rng.randrange(256) for _ in range(510)), "invalid_json")
add(b"k-empty-value", b"", "invalid_json")
# missing_field: absent, null, or the pointer walks into a scalar.
for bad in ['{"other":1}', '{"user":{}}', '{"user":{"id":null}}', '{"user":"scalar"}', '{}']:
    add(b"k-missing", bad, "missing_field")
# not_scalar: an array or an object at the pointer.
for bad in ['{"user":{"id":[1,2]}}', '{"user":{"id":{"a":1}}}', '{"user":{"id":[]}}',
            '{"user":{"id":{}}}']:
    add(b"k-not-scalar", bad, "not_scalar")
add(b"k-empty", user(""), "empty_item", times=3)
add(b"k-oversized", user("b" * 1025), "oversized")
add(b"k-oversized", user("c" * 5000), "oversized")

def key_outcome(key):
    if key is None:
        return "null_key"
    if key == b"":
        return "empty_item"
    return "oversized" if len(key) > 1024 else "item"

expected = collections.Counter()
with open(f"{work}/input", "wb") as f:
    for key, value, users in messages:
        for part in (key or b"", value):
            assert msg_end not in part and key_end not in part
        if key is not None:
            f.write(key + key_end)
        f.write(value + msg_end)
        expected["users", users] += 1
        expected["keys", key_outcome(key)] += 1
# Tombstones: null values, sent by a kcat run of their own with -Z (an empty value or key
# becomes null; kcat sends no message that is empty altogether, so a null key is written
# as an empty one), with keys and without: "tombstone" in both pipelines, whatever the key.
tombstones = [b"k-deleted-1", b"k-deleted-2", b"k-valid", None, None]
with open(f"{work}/tombstones", "wb") as f:
    for key in tombstones:
        f.write((key or b"") + key_end + msg_end)
        expected["users", "tombstone"] += 1
        expected["keys", "tombstone"] += 1
with open(f"{work}/expected", "w") as f:
    for (pipeline, outcome), count in sorted(expected.items()):
        f.write(f"{pipeline} {outcome} {count}\n")
with open(f"{work}/count", "w") as f:
    f.write(f"{len(messages) + len(tombstones)}\n")
EOF
messages=$(<"$work/count")
log "stream: $messages messages; expected outcomes: $(tr '\n' ';' <"$work/expected")"

# The producer's message.max.bytes (default 1,000,000) must let the 1 MiB message through;
# the mock broker takes it as it is.
produce "$topic" -D "$msg_end" -K "$key_end" -X message.max.bytes=2000000 <"$work/input"
produce "$topic" -Z -D "$msg_end" -K "$key_end" <"$work/tombstones"
log "produced $messages messages"

cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-bad-input
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
http:
  listen: "127.0.0.1:$port"
log: { format: json, summary_interval: 1s }
pipelines:
  - name: users
    topics: [$topic]
    item: { from: json, path: /user/id }
    clock: wall
    max_item_bytes: 1024
    heavy_hitters: { window: 10m, epsilon: 0.001, top_k: 50, threshold: 0.01 }
    dedup: { window: 1h, capacity: 10k, fpr: 0.001 }
  - name: keys
    topics: [$topic]
    item: { from: key }
    clock: wall
    heavy_hitters: { window: 10m, epsilon: 0.001, top_k: 50, threshold: 0.01 }
  - name: tenants
    topics: [headers]
    item: { from: header, name: tenant }
    dedup: { window: 1h, capacity: 1k, fpr: 0.001 }
  - name: long
    topics: [headers]
    item: { from: header, name: $(printf 'h%.0s' {1..300}) }
    dedup: { window: 1h, capacity: 1k, fpr: 0.001 }
EOF
start_daemon "$work/sketchd.yaml"

wait_metric "sketchd_messages_consumed_total{topic=\"$topic\"}" -ge "$messages" 60
sleep 0.5
scrape
m=$work/metrics.txt
consumed=$(require_value "$m" "sketchd_messages_consumed_total{topic=\"$topic\"}")
[[ $consumed -eq $messages ]] || fail "sketchd_messages_consumed_total is $consumed, produced $messages"

# Every reason of both pipelines, including the reasons expected to stay at zero.
problems=0
for p in users keys; do
  for outcome in item invalid_json missing_field not_scalar empty_item oversized tombstone null_key; do
    want=$(awk -v p="$p" -v o="$outcome" '$1 == p && $2 == o { print $3 }' "$work/expected")
    want=${want:-0}
    if [[ $outcome == item ]]; then
      series="sketchd_pipeline_items_total{pipeline=\"$p\"}"
    else
      series="sketchd_pipeline_extract_failures_total{pipeline=\"$p\",reason=\"$outcome\"}"
    fi
    got=$(require_value "$m" "$series")
    if [[ $got != "$want" ]]; then
      echo "  $series is $got, expected $want" >&2
      problems=$((problems + 1))
    else
      echo "  $series = $got"
    fi
  done
done
((problems == 0)) || fail "$problems per-reason counts differ from the expected ones"
log "every reason counted exactly, every valid message an item"

# Cleaned item labels of the "keys" top-k, in the exposition's escaping: invalid bytes are
# U+FFFD, quote, backslash and newline are escaped, 300 bytes of "é" are cut to 128.
"$python" - "$m" <<'EOF' || fail "item labels are not cleaned as expected (see above)"
import re, sys
raw = open(sys.argv[1], "rb").read()
problems = []
try:
    text = raw.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit(f"  the scrape is not valid UTF-8: {e}")
def unescape(v):
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], v)
items = {}
for m in re.finditer(r'^sketchd_heavy_hitter_estimated_count\{pipeline="keys",item="((?:[^"\\]|\\.)*)"\} (\S+)$',
                     text, re.M):
    items[unescape(m.group(1))] = float(m.group(2))
expected = {'bin\ufffd\ufffd"\\\nkey': 3, "é" * 64: 3, "k-valid": 300}
for item, count in expected.items():
    if items.get(item) is None or not count <= items[item] <= count + 1:
        problems.append(f"item label {item!r}: {items.get(item)}, expected about {count}")
for item in items:
    if len(item.encode()) > 128:
        problems.append(f"item label of {len(item.encode())} bytes: {item[:40]!r}…")
for p in problems:
    print("  labels:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
log "item labels cleaned: U+FFFD for invalid bytes, escapes, 128-byte cut"

if command -v promtool >/dev/null 2>&1; then
  promtool check metrics <"$m" >"$work/promtool.out" 2>&1 \
    || { cat "$work/promtool.out" >&2; fail "promtool check metrics rejects the scrape"; }
  log "promtool check metrics: ok"
else
  log "promtool is not installed: the exposition check is skipped"
fi

# The HTTP API still answers, in valid UTF-8 JSON, about binary items.
for p in users keys; do
  api "api/v1/pipelines/$p/topk" "$work/topk-$p.json"
  [[ $api_status == 200 ]] || fail "GET /api/v1/pipelines/$p/topk: HTTP $api_status"
  json "$work/topk-$p.json" 'len(d["items"])' >/dev/null || fail "/api/v1/pipelines/$p/topk is not UTF-8 JSON"
done
[[ $(json "$work/topk-keys.json" '"bin\ufffd\ufffd\"\\\nkey" in [e["item"] for e in d["items"]]') == true ]] \
  || fail "the binary key is not in /api/v1/pipelines/keys/topk: $(cut -c1-400 "$work/topk-keys.json")"
# Its exact bytes come with it in base64 (items of valid UTF-8 have no such field), and sent
# back, percent-encoded, they find it.
raw_query=$(json "$work/topk-keys.json" '__import__("urllib.parse").parse.quote(__import__("base64").b64decode(
  [e for e in d["items"] if e["item"].startswith("bin")][0]["item_base64"]), safe="")')
[[ $raw_query == 'bin%FF%FE%22%5C%0Akey' ]] || fail "item_base64 of the binary key decodes to $raw_query"
[[ $(json "$work/topk-keys.json" 'all(("item_base64" in e) == e["item"].startswith("bin") for e in d["items"])') == true ]] \
  || fail "item_base64 on a valid UTF-8 item, or missing: $(cut -c1-400 "$work/topk-keys.json")"
api "api/v1/pipelines/keys/estimate?item=$raw_query" "$work/raw.json"
[[ $(json "$work/raw.json" 'd["estimate"]') -ge 3 && $(json "$work/raw.json" 'd["item_base64"]') == \
  "$(json "$work/topk-keys.json" '[e for e in d["items"] if e["item"].startswith("bin")][0]["item_base64"]')" ]] \
  || fail "estimate of the binary key's bytes: $(cat "$work/raw.json")"
api "api/v1/pipelines/users/estimate?item=big" "$work/big.json"
[[ $(json "$work/big.json" 'd["estimate"]') -ge 1 ]] || fail "the 1 MiB message's item is not counted"

# Alive and still consuming: 100 more valid messages arrive.
for ((i = 0; i < 100; i++)); do printf 'after|{"user":{"id":"after-%d"}}\n' "$i"; done \
  | produce "$topic" -K'|'
users_before=$(require_value "$m" 'sketchd_pipeline_items_total{pipeline="users"}')
wait_metric 'sketchd_pipeline_items_total{pipeline="users"}' -ge $((users_before + 100)) 30
kill -0 "$daemon_pid" 2>/dev/null || fail "sketchd is not running"
api healthz
[[ $api_status == 200 ]] || fail "GET /healthz: HTTP $api_status after bad input"
log "still consuming after the bad input: users items $metric"

# Items from headers, one kcat run per set of headers.
long_name=$(printf 'h%.0s' {1..300})
echo one | produce headers -H tenant=first -H tenant=second
echo two | produce headers -H tenant=first -H tenant=third
echo three | produce headers
echo four | produce headers -H tenant=
echo five | produce headers -H "$long_name=long-value"
wait_metric 'sketchd_messages_consumed_total{topic="headers"}' -ge 5 30
sleep 0.5
scrape
expect_values "$m" 'sketchd_pipeline_items_total{pipeline="tenants"} 2' \
  'sketchd_dedup_first_seen_total{pipeline="tenants"} 1' \
  'sketchd_dedup_duplicates_total{pipeline="tenants"} 1' \
  'sketchd_pipeline_extract_failures_total{pipeline="tenants",reason="missing_field"} 2' \
  'sketchd_pipeline_extract_failures_total{pipeline="tenants",reason="empty_item"} 1' \
  'sketchd_pipeline_items_total{pipeline="long"} 1' \
  'sketchd_pipeline_extract_failures_total{pipeline="long",reason="missing_field"} 4'
api "api/v1/pipelines/tenants/seen?item=first" "$work/seen.json"
[[ $(json "$work/seen.json" 'd["seen"]') == true ]] || fail "the first value of a repeated header is not the item"
log "header items: the first of repeated headers, missing and empty headers counted, a 300-byte name found"

sleep 1.2  # a summary line after the header items
stop_process "$daemon_pid" 5 || fail "sketchd did not exit within 5 s of SIGTERM"
[[ $stop_status -eq 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM"

"$python" - "$work/sketchd.err" <<'EOF' || fail "the JSON log lines are not as expected (above)"
import json, sys
lines = open(sys.argv[1], "rb").read().decode("utf-8").splitlines()  # valid UTF-8 or fails
objects = []
for n, line in enumerate(lines, 1):
    try:
        o = json.loads(line)
    except ValueError as e:
        sys.exit(f"line {n} is not JSON ({e}): {line[:200]!r}")
    if not isinstance(o, dict) or not {"time", "level", "logger", "message"} <= o.keys():
        sys.exit(f"line {n} lacks time, level, logger or message: {line[:200]!r}")
    objects.append(o)
def first(what, pred):
    for o in objects:
        if pred(o):
            return o
    sys.exit(f"no {what} among the {len(objects)} lines")
s = first("summary line of pipeline users with its top",
          lambda o: o.get("pipeline") == "users" and o.get("top"))
for key in ("items_per_second", "window_items", "bloom_fill", "bloom_generations",
            "estimated_fpr", "target_fpr"):
    if not isinstance(s.get(key), (int, float)):
        sys.exit(f"summary field {key} missing or not a number: {s}")
top = s["top"][0]
if not (isinstance(top.get("item"), str) and top.get("estimate", 0) > 0 and 0 < top.get("ratio", 0) <= 1):
    sys.exit(f"summary top entry malformed: {s['top']}")
e = first("heavy-hitter enter line", lambda o: o.get("event") == "enter")
if not (isinstance(e.get("item"), str) and e.get("estimate", 0) >= 10 and e.get("threshold") == 0.01
        and e["window_items"] >= e["estimate"] and e["pipeline"] in ("users", "keys")):
    sys.exit(f"heavy-hitter line fields malformed: {e}")
w = first("warning about skipped messages",
          lambda o: o["level"] == "warning" and "without a usable item" in o["message"])
reasons, example = w.get("reasons"), w.get("example")
if not (w.get("pipeline") in ("users", "keys", "tenants", "long") and isinstance(reasons, dict) and reasons
        and all(isinstance(n, int) and n > 0 for n in reasons.values())
        and w.get("skipped") == sum(reasons.values()) and isinstance(example, dict)
        and example.get("topic") in ("raw", "headers") and isinstance(example.get("offset"), int)):
    sys.exit(f"skipped-messages warning fields malformed: {w}")
print(f"{len(objects)} JSON log lines; summary {s['pipeline']}: top {top['item']!r}")
EOF
log "every log line is a JSON object; summary and heavy-hitter lines carry their fields"
echo "PASS"
