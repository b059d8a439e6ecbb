#!/usr/bin/env bash
# sketchd counts a known stream right. 20,000 JSON events {"user":{"id":…}} with a fixed
# seed: five heavy items (20%, 10%, 6%, 3%, 1.5% of the stream) and a long tail of 5,000
# items (about 2.4 events each), keyed by item over 4 partitions. One pipeline with
# heavy_hitters (a 10-minute wall-clock window: nothing slides during the test) and dedup.
# Compared with the exact counts the script computes:
#   - sketchd_pipeline_items_total and sketchd_messages_consumed_total equal the events
#     produced, and stay there (nothing read twice);
#   - the window holds every item (N), the error bound is ε·N;
#   - every true heavy item (count ≥ φ·N) is in /topk, marked heavy, with
#     true ≤ estimate ≤ true + ε·N, and has its series in the heavy-hitter gauges;
#   - /estimate never undercounts (heavy items, a sample of the tail, an unseen item);
#   - dedup: first_seen + duplicates = items; distinct − allowance ≤ first_seen ≤ distinct
#     (a Bloom filter has no false negatives; false positives at most fpr each);
#     /seen is true for produced items and false for one never produced;
#   - the HTTP API: 404 with a JSON error for an unknown pipeline (or for /topk and
#     /estimate of a pipeline without heavy_hitters), 400 without ?item=, with an empty
#     item or with item twice; an item with '=' in it asked as it is, and one with '+'
#     asked as %2B, are found (httplib's parsing kept only what followed the last '='), 405 for a POST,
#     PUT, PATCH, DELETE or OPTIONS with or without a body, /healthz and /readyz 200, and `promtool check metrics` passes on the
#     scrape.
#
# Usage: daemon_counts_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

pipeline=clicks
topic=events
epsilon=0.001
threshold=0.01
fpr=0.001

start_mock_kafka "$topic:4"
port=$(free_port)

# The stream and its exact counts: $work/events ("KEY|VALUE" lines), $work/truth
# ("ITEM COUNT" lines, most frequent first).
"$python" - "$work" <<'EOF'
import collections, json, random, sys
work = sys.argv[1]
rng = random.Random(20240601)
n = 20000
heavy = {"u1": 0.20, "u2": 0.10, "u3": 0.06, "u4": 0.03, "u5": 0.015}
items = []
for item, share in heavy.items():
    items += [item] * round(share * n)
# Two items that need care in a query string: '=' and '+'.
items += ["id=dXNlcg=="] * 3 + ["a+b"] * 2
tail = [f"t{i}" for i in range(5000)]
items += [rng.choice(tail) for _ in range(n - len(items))]
rng.shuffle(items)
with open(f"{work}/events", "w") as f:
    for item in items:
        f.write(f'{item}|{json.dumps({"user": {"id": item}}, separators=(",", ":"))}\n')
with open(f"{work}/truth", "w") as f:
    for item, count in collections.Counter(items).most_common():
        f.write(f"{item} {count}\n")
EOF
events=$(wc -l <"$work/events")
distinct=$(wc -l <"$work/truth")
log "stream: $events events, $distinct distinct items"

produce "$topic" -K'|' <"$work/events"
log "produced $events events"

cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-counts
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: $pipeline
    topics: [$topic]
    item: { from: json, path: /user/id }
    clock: wall
    heavy_hitters:
      window: 10m
      buckets: 10
      epsilon: $epsilon
      delta: 0.001
      top_k: 10
      threshold: $threshold
    dedup:
      window: 1h
      capacity: 100k
      fpr: $fpr
  # The same stream into a dedup window sized for 1,000 distinct items: about 5,000 arrive
  # within seconds, so generations rotate at their share of capacity (⌈1000/3⌉ = 334 items)
  # and the horizon covered shrinks far below the configured hour.
  - name: overload
    topics: [$topic]
    item: { from: json, path: /user/id }
    clock: wall
    dedup: { window: 1h, capacity: 1000, generations: 4, fpr: $fpr }
log: { level: info, summary_interval: 1s }
EOF
start_daemon "$work/sketchd.yaml"

items_series="sketchd_pipeline_items_total{pipeline=\"$pipeline\"}"
wait_metric "$items_series" -ge "$events" 60
log "items_total reached $metric"
# Published later in the same turn as the items.
wait_metric "sketchd_messages_consumed_total{topic=\"$topic\"}" -ge "$events" 60
# A batch later nothing more may arrive: every message was read once.
sleep 1
scrape
m=$work/metrics.txt
items=$(require_value "$m" "$items_series")
[[ $items -eq $events ]] || fail "sketchd_pipeline_items_total is $items, produced $events events"
consumed=$(require_value "$m" "sketchd_messages_consumed_total{topic=\"$topic\"}")
[[ $consumed -eq $events ]] || fail "sketchd_messages_consumed_total is $consumed, produced $events"
for reason in invalid_json missing_field not_scalar empty_item oversized; do
  v=$(require_value "$m" "sketchd_pipeline_extract_failures_total{pipeline=\"$pipeline\",reason=\"$reason\"}")
  [[ $v -eq 0 ]] || fail "extract failures ($reason) is $v on a clean stream"
done
log "items_total = messages_consumed_total = $events, no extract failures"

# ---- Heavy hitters ----------------------------------------------------------------------
window_items=$(require_value "$m" "sketchd_cms_window_items{pipeline=\"$pipeline\"}")
[[ $window_items -eq $events ]] || fail "sketchd_cms_window_items is $window_items, expected $events"
bound=$(require_value "$m" "sketchd_cms_error_bound_items{pipeline=\"$pipeline\"}")
phi=$(require_value "$m" "sketchd_heavy_hitter_threshold_ratio{pipeline=\"$pipeline\"}")
# The bound is e/w·N with w = ⌈e/ε⌉ (so at most ε·N, and within 0.1% of it for ε = 0.001).
check "0.99 * $epsilon * $events <= $bound <= $epsilon * $events + 1e-9" \
  "error bound $bound is not ε·N = $epsilon·$events"
check "$phi == $threshold" "sketchd_heavy_hitter_threshold_ratio is $phi, not $threshold"

api "api/v1/pipelines/$pipeline/topk" "$work/topk.json"
[[ $api_status == 200 ]] || fail "GET /topk: HTTP $api_status"
log "topk: $(cut -c1-300 "$work/topk.json")"

# Every check of the top-k in one place: the JSON, the truth and the scrape.
"$python" - "$work/topk.json" "$work/truth" "$m" "$events" "$threshold" "$epsilon" "$pipeline" <<'EOF' \
  || fail "the top-k does not match the exact counts (see above)"
import json, re, sys
topk = json.load(open(sys.argv[1]))
truth = {}
for line in open(sys.argv[2]):
    item, count = line.split()
    truth[item] = int(count)
scrape = open(sys.argv[3]).read()
n, phi, eps, pipeline = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
problems = []
if topk["window_items"] != n:
    problems.append(f"window_items {topk['window_items']} != {n}")
bound = topk["error_bound"]
listed = {e["item"]: e for e in topk["items"]}
estimates = [e["estimate"] for e in topk["items"]]
if estimates != sorted(estimates, reverse=True):
    problems.append(f"top-k not sorted by estimate: {estimates}")
if len(topk["items"]) > 10:
    problems.append(f"{len(topk['items'])} items listed, top_k is 10")
heavy = [item for item, count in truth.items() if count >= phi * n]
if len(heavy) != 5:
    problems.append(f"the stream has {len(heavy)} heavy items, expected 5: {heavy}")
def sample(name, item):
    m = re.search(rf'^{name}{{pipeline="{pipeline}",item="{re.escape(item)}"}} (\S+)$', scrape, re.M)
    return float(m.group(1)) if m else None
for item in heavy:
    true = truth[item]
    e = listed.get(item)
    if e is None:
        problems.append(f"heavy item {item} (true count {true}) is not in the top-k")
        continue
    if not (true <= e["estimate"] <= true + bound):
        problems.append(f"{item}: estimate {e['estimate']} not in [true {true}, true + εN {true + bound:.1f}]")
    if not e["heavy"]:
        problems.append(f"{item}: true count {true} ≥ φN = {phi * n:.0f} but heavy is false")
    if abs(e["ratio"] - e["estimate"] / n) > 1e-9:
        problems.append(f"{item}: ratio {e['ratio']} != estimate / N")
    c = sample("sketchd_heavy_hitter_estimated_count", item)
    if c != e["estimate"]:
        problems.append(f"{item}: sketchd_heavy_hitter_estimated_count is {c}, /topk says {e['estimate']}")
    r = sample("sketchd_heavy_hitter_ratio", item)
    if r is None or abs(r - e["estimate"] / n) > 1e-9:
        problems.append(f"{item}: sketchd_heavy_hitter_ratio is {r}, expected {e['estimate'] / n}")
# An item enters the heavy set at φN and leaves below 0.9·φN (hysteresis): the flag is
# certain outside that band, and this stream has no item inside it.
for e in topk["items"]:
    if (e["estimate"] >= phi * n and not e["heavy"]) or (e["estimate"] < 0.9 * phi * n and e["heavy"]):
        problems.append(f"{e['item']}: heavy is {e['heavy']} with estimate {e['estimate']}, φN = {phi * n}")
series = len(re.findall(rf'^sketchd_heavy_hitter_estimated_count{{pipeline="{pipeline}",', scrape, re.M))
if series != len(topk["items"]):
    problems.append(f"{series} sketchd_heavy_hitter_estimated_count series, {len(topk['items'])} top-k items")
for p in problems:
    print("  top-k:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
log "top-k: every heavy item listed with true ≤ estimate ≤ true + εN; gauges agree"

# /estimate: never below the true count, at most εN above it (probability ≥ 1 − δ each):
# the five heavy items, every 500th item of the tail and one never produced. The outcome
# is deterministic: the hash seed and the multiset of items are fixed, and a conservative
# update never exceeds the plain Count-Min estimate, which ignores the arrival order.
"$python" - "$http/api/v1/pipelines/$pipeline" "$work/truth" "$events" "$bound" <<'EOF' \
  || fail "/estimate is outside [true, true + εN] (see above)"
import json, sys, urllib.parse, urllib.request
base, truth_file, n, bound = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
truth = [(item, int(count)) for item, count in (line.split() for line in open(truth_file))]
sample = truth[:5] + truth[5::500] + [("never-produced-item", 0)]
problems = []
for item, true in sample:
    with urllib.request.urlopen(f"{base}/estimate?item={urllib.parse.quote(item)}", timeout=5) as r:
        d = json.load(r)
    if d["item"] != item or d["window_items"] != n or not (true <= d["estimate"] <= true + bound):
        problems.append(f"{item} (true count {true}): {d}")
for p in problems:
    print("  /estimate:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
log "/estimate: produced items and an unseen item within [true, true + εN]"

# ---- Dedup ------------------------------------------------------------------------------
first=$(require_value "$m" "sketchd_dedup_first_seen_total{pipeline=\"$pipeline\"}")
dups=$(require_value "$m" "sketchd_dedup_duplicates_total{pipeline=\"$pipeline\"}")
[[ $((first + dups)) -eq $items ]] \
  || fail "first_seen ($first) + duplicates ($dups) != items ($items)"
# No false negatives: first_seen ≤ distinct. Each first occurrence is a false positive with
# probability ≤ fpr; allow 5× the expected number, plus 5.
allowance=$("$python" -c "print(int($distinct * $fpr * 5 + 5))")
((first <= distinct)) || fail "first_seen $first > $distinct distinct items (a false negative)"
((first >= distinct - allowance)) \
  || fail "first_seen $first < $distinct distinct − $allowance (false positives beyond fpr)"
# The fill-based estimate n̂ = −(m/k)·ln(1 − X/m) of the distinct items (Swamidass and
# Baldi): at a fill of a few percent its standard deviation is well under 1% of n, so 5%
# is far outside the noise.
estimated=$(require_value "$m" "sketchd_bloom_estimated_items{pipeline=\"$pipeline\"}")
check "abs($estimated - $distinct) <= 0.05 * $distinct" \
  "sketchd_bloom_estimated_items is $estimated, $distinct distinct items"
fill=$(require_value "$m" "sketchd_bloom_fill_ratio{pipeline=\"$pipeline\",generation=\"0\"}")
check "0 < $fill < 1" "sketchd_bloom_fill_ratio of the newest generation is $fill"
log "dedup: first_seen $first + duplicates $dups = $items; $distinct distinct (allowance $allowance)"

# The overloaded window: every first-seen item beyond a generation's share rotates one early
# (first_seen / 334 rotations, within one), none by time (1 h), and the horizon covered is
# the few seconds of the test instead of the configured 3,600 s — what the
# SketchdDedupWindowShrunk alert looks for.
o_first=$(require_value "$m" 'sketchd_dedup_first_seen_total{pipeline="overload"}')
o_by_capacity=$(require_value "$m" 'sketchd_bloom_rotations_total{pipeline="overload",reason="capacity"}')
o_by_time=$(require_value "$m" 'sketchd_bloom_rotations_total{pipeline="overload",reason="time"}')
o_effective=$(require_value "$m" 'sketchd_bloom_effective_window_seconds{pipeline="overload"}')
o_window=$(require_value "$m" 'sketchd_bloom_window_seconds{pipeline="overload"}')
check "abs($o_by_capacity - $o_first // 334) <= 1" \
  "overload: $o_by_capacity rotations by capacity for $o_first first-seen items (share 334)"
check "$o_by_time == 0" "overload: $o_by_time rotations by time within the first hour"
check "$o_window == 3600 and $o_effective < 0.9 * $o_window" \
  "overload: effective window $o_effective s, configured $o_window s"
log "overload: $o_by_capacity rotations by capacity for $o_first first-seen items; effective window $o_effective s of $o_window s"
# The log says it too (the summary line's fill and FPR look healthy meanwhile), once.
for _ in $(seq 20); do
  grep -q 'the dedup window holds more distinct items' "$work/sketchd.err" && break
  sleep 0.5
done
check_log "$work/sketchd.err" 'warning \[pipeline\] overload: the dedup window holds more distinct items than dedup.capacity \(1000\): [0-9]+ rotation\(s\) by capacity since sketchd started, and it reaches back [0-9]+m?s instead of 1h'
[[ $(grep -c 'the dedup window holds more distinct items' "$work/sketchd.err") -eq 1 ]] \
  || fail "the capacity warning came more than once within a minute"
# The API says the same: the horizon guaranteed under the configured capacity stays, the
# effective window is the live one, and fill and forwarded figures are there too.
api "api/v1/pipelines/overload" "$work/overload.json"
check "$(json "$work/overload.json" 'd["dedup"]["effective_window_ms"]') < 0.9 * $o_window * 1000 and \
$(json "$work/overload.json" 'd["dedup"]["guaranteed_horizon_ms"]') >= 0.5 * $o_window * 1000 and \
$(json "$work/overload.json" 'int(len(d["dedup"]["fill_ratio"]) == d["dedup"]["generations"] and d["dedup"]["forwarded_total"] == 0)') == 1" \
  "/api/v1/pipelines/overload: $(cat "$work/overload.json")"

# /seen: true for produced items (no false negatives), false for items never produced
# (a false positive has probability ≈ the estimated FPR, about 1e-20 at this fill).
"$python" - "$http/api/v1/pipelines/$pipeline" "$work/truth" <<'EOF' || fail "/seen is wrong (see above)"
import json, sys, urllib.parse, urllib.request
base = sys.argv[1]
produced = [line.split()[0] for line in open(sys.argv[2])]
expected = {item: True for item in produced[:5] + produced[5::300]}
expected.update({"never-produced-item": False, "u6": False, "t5000": False})
problems = []
for item, seen in expected.items():
    with urllib.request.urlopen(f"{base}/seen?item={urllib.parse.quote(item)}", timeout=5) as r:
        d = json.load(r)
    if d["item"] != item or d["seen"] is not seen:
        problems.append(f"{item}: {d}, expected seen {seen}")
for p in problems:
    print("  /seen:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
log "/seen: produced items true, never-produced items false"

# ---- The rest of the HTTP API -----------------------------------------------------------
for path in "api/v1/pipelines/nope" "api/v1/pipelines/nope/topk" "api/v1/pipelines/nope/estimate?item=u1" \
  "api/v1/pipelines/nope/seen?item=u1"; do
  api "$path" "$work/error.json"
  [[ $api_status == 404 ]] || fail "GET /$path: HTTP $api_status, expected 404"
  err=$(json "$work/error.json" 'd["error"]') || fail "GET /$path: the body is not a JSON error: $(cat "$work/error.json")"
  [[ $err == *nope* ]] || fail "GET /$path: the error \"$err\" does not name the pipeline"
done
# The overload pipeline has no heavy_hitters section.
# (Without an item too: the path is answered before the query.)
for path in "api/v1/pipelines/overload/topk" "api/v1/pipelines/overload/estimate?item=u1" \
  "api/v1/pipelines/overload/estimate"; do
  api "$path" "$work/error.json"
  [[ $api_status == 404 ]] || fail "GET /$path: HTTP $api_status, expected 404"
  [[ $(json "$work/error.json" 'd["error"]') == *heavy_hitters* ]] \
    || fail "GET /$path: the error does not name the missing section: $(cat "$work/error.json")"
done
# Read-only: other methods are refused with 405 and the methods allowed, with a body or
# without one (a bodiless POST has no Content-Length).
# (FOO and a lowercase get are methods httplib's parser does not know: 405 all the same.)
for method in POST PUT PATCH DELETE OPTIONS FOO get; do
  for body in '{}' ''; do
    status=$(curl -s --max-time 5 -X "$method" ${body:+-d "$body"} -D "$work/headers" -o "$work/error.json" \
      -w '%{http_code}' "$http/api/v1/pipelines/$pipeline/topk")
    if [[ $status != 405 ]] || ! grep -qi '^allow: GET' "$work/headers"; then
      fail "$method /api/v1/pipelines/$pipeline/topk ${body:+with}${body:-without} a body: HTTP $status," \
        "expected 405 with Allow: GET"
    fi
  done
done
# A refused write followed by a GET from the same client: the GET is answered in full.
curl -s --max-time 5 -X POST -d '{"item":"x"}' -o /dev/null "$http/api/v1/pipelines" \
  --next -s --max-time 5 -o "$work/after-post.json" -w '%{http_code}' "$http/api/v1/pipelines" >"$work/after-post.status"
[[ $(cat "$work/after-post.status") == 200 ]] && json "$work/after-post.json" 'd["pipelines"]' >/dev/null \
  || fail "GET after a refused POST: HTTP $(cat "$work/after-post.status"): $(head -c 300 "$work/after-post.json")"
api "api/v1/pipelines/$pipeline/estimate" "$work/error.json"
[[ $api_status == 400 ]] || fail "GET /estimate without ?item=: HTTP $api_status, expected 400"
json "$work/error.json" 'd["error"]' >/dev/null || fail "GET /estimate without ?item=: no JSON error"
for query in "item=" "item" "item=u1&item=u2"; do
  api "api/v1/pipelines/$pipeline/estimate?$query" "$work/error.json"
  [[ $api_status == 400 ]] || fail "GET /estimate?$query: HTTP $api_status, expected 400"
  json "$work/error.json" 'd["error"]' >/dev/null || fail "GET /estimate?$query: no JSON error"
done
for query in "item=id=dXNlcg==:id=dXNlcg==:3" "item=a%2Bb:a+b:2" "x=1&item=id%3DdXNlcg%3D%3D:id=dXNlcg==:3"; do
  IFS=: read -r q item count <<<"$query"
  api "api/v1/pipelines/$pipeline/estimate?$q" "$work/estimate.json"
  [[ $api_status == 200 ]] || fail "GET /estimate?$q: HTTP $api_status"
  [[ $(json "$work/estimate.json" 'd["item"]') == "$item" ]] \
    || fail "GET /estimate?$q answered for another item: $(cat "$work/estimate.json")"
  (($(json "$work/estimate.json" 'd["estimate"]') >= count)) \
    || fail "GET /estimate?$q: estimate under the true count $count: $(cat "$work/estimate.json")"
done
# Percent-encoding as URLs have it: "%u0070" is no escape (httplib's decoder reads it as
# "p", and "%u0063licks" as "clicks"), and an encoded '/' is part of a pipeline's name,
# not a separator.
api "api/v1/pipelines/$pipeline/estimate?item=%u0070" "$work/estimate.json"
[[ $api_status == 200 && $(json "$work/estimate.json" 'd["item"]') == "%u0070" ]] \
  || fail "GET /estimate?item=%u0070: HTTP $api_status: $(cat "$work/estimate.json")"
for path in "api/v1/pipelines/%u0063${pipeline:1}/topk" "api/v1/pipelines/$pipeline%2Ftopk"; do
  api "$path" "$work/error.json"
  [[ $api_status == 404 ]] || fail "GET /$path: HTTP $api_status, expected 404 (no such pipeline)"
done
# Whole answers only: a Range header is ignored (httplib served 206 parts, or a 416
# without a JSON body).
for range in 0-9 99-; do
  status=$(curl -s --max-time 5 -r "$range" -o "$work/ranged.json" -w '%{http_code}' "$http/healthz")
  [[ $status == 200 ]] && json "$work/ranged.json" 'd["status"]' >/dev/null \
    || fail "GET /healthz with Range: bytes=$range: HTTP $status: $(cat "$work/ranged.json")"
done
# ...and announced to none: HEAD answers as GET does (httplib added Accept-Ranges: bytes to
# HEAD answers only).
for method in -G -I; do
  curl -s --max-time 5 "$method" -D "$work/headers.txt" -o /dev/null "$http/healthz"
  grep -qi '^Accept-Ranges: none' "$work/headers.txt" \
    || fail "$method /healthz: no 'Accept-Ranges: none': $(tr -d '\r' <"$work/headers.txt")"
done
# Compressed for a client that accepts it, and only then: a coding of weight 0 is refused
# (httplib compressed whenever the header named the coding).
encoding() {
  curl -s --max-time 5 -H "Accept-Encoding: $1" -D "$work/headers.txt" -o /dev/null "$http/metrics"
  grep -i '^Vary: Accept-Encoding' "$work/headers.txt" >/dev/null \
    || fail "GET /metrics: no 'Vary: Accept-Encoding': $(tr -d '\r' <"$work/headers.txt")"
  tr -d '\r' <"$work/headers.txt" | sed -n 's/^[Cc]ontent-[Ee]ncoding: //p'
}
[[ $(encoding gzip) == gzip ]] || fail "GET /metrics with Accept-Encoding: gzip is not gzip"
for refused in "gzip;q=0, identity" "br;q=0, gzip;Q=0.000" "gzip; q=0"; do
  [[ -z $(encoding "$refused") ]] || fail "GET /metrics with Accept-Encoding: $refused is compressed"
done
[[ $(encoding "br;q=0, gzip;q=0.5") == gzip ]] || fail "GET /metrics with Accept-Encoding: br;q=0, gzip;q=0.5 is not gzip"
# Never brotli (httplib's takes seconds of a core for a large scrape): gzip when offered
# beside it, as curl --compressed and browsers do, else nothing.
[[ $(encoding "gzip, deflate, br") == gzip ]] || fail "GET /metrics with Accept-Encoding: gzip, deflate, br is not gzip"
[[ -z $(encoding "br") ]] || fail "GET /metrics with Accept-Encoding: br is compressed"
api "api/v1/pipelines" "$work/pipelines.json"
[[ $api_status == 200 ]] || fail "GET /api/v1/pipelines: HTTP $api_status"
[[ $(json "$work/pipelines.json" '[p["name"] for p in d["pipelines"]]') == "[\"$pipeline\", \"overload\"]" ]] \
  || fail "GET /api/v1/pipelines: $(cat "$work/pipelines.json")"
[[ $(json "$work/pipelines.json" 'd["pipelines"][0]["items_total"]') -eq $events ]] \
  || fail "GET /api/v1/pipelines: items_total is not $events"
api "api/v1/pipelines/$pipeline" "$work/pipeline.json"
[[ $api_status == 200 ]] || fail "GET /api/v1/pipelines/$pipeline: HTTP $api_status"
for path in healthz readyz; do
  api "$path" "$work/status.json"
  [[ $api_status == 200 ]] || fail "GET /$path: HTTP $api_status"
done
log "HTTP API: 404 JSON errors for an unknown pipeline or section, 400 without item (or empty, or twice), items with = and + found, %u and %2F taken literally, Range ignored and not announced, compression only where accepted, 405 for writes and unknown methods, /healthz and /readyz 200"

# 200 idle connections (opened, nothing sent) do not hold up other clients: /healthz and
# /metrics answer within 3 s each while they stay open (with a fixed pool of workers, 17
# idle connections held /healthz up for 5 s, 200 for a minute; 3 s leaves room for a busy
# machine and still tells the two apart; a sanitizer build, slower to start the threads of
# 200 connections, has ITEST_SLOW times that).
idle_limit=$((3 * slow))
idle_fds=()
for _ in $(seq 200); do
  exec {fd}<>"/dev/tcp/127.0.0.1/$port"
  idle_fds+=("$fd")
done
for round in 1 2 3; do
  for path in healthz metrics; do
    status=$(curl -s --max-time "$idle_limit" -o /dev/null -w '%{http_code}' "$http/$path" || true)
    [[ $status == 200 ]] || fail "GET /$path with 200 idle connections open (round $round): HTTP ${status:-none} ($idle_limit s limit)"
  done
  sleep 1
done
for fd in "${idle_fds[@]}"; do exec {fd}>&-; done
log "200 idle connections: /healthz and /metrics answered within $idle_limit s, 3 rounds"

if command -v promtool >/dev/null 2>&1; then
  promtool check metrics <"$m" >"$work/promtool.out" 2>&1 \
    || { cat "$work/promtool.out" >&2; fail "promtool check metrics rejects the scrape"; }
  log "promtool check metrics: ok"
fi

stop_process "$daemon_pid" 5 || fail "sketchd did not exit within 5 s of SIGTERM"
[[ $stop_status -eq 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM"
echo "PASS"
