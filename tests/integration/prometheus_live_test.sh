#!/usr/bin/env bash
# The dashboard and the alert rules against a real Prometheus server (Debian's prometheus
# package) on loopback, scraping a live sketchd fed through `sketchd mock-kafka`:
#   - `promtool check rules` passes on deploy/prometheus/rules/sketchd-alerts.yml and
#     `promtool check config` on the test's Prometheus configuration;
#   - the dashboard's variables (instance, pipeline) list the sketchd target and both
#     pipelines, and every query of every panel of dashboards/sketchd-overview.json, with
#     the variables filled in as Grafana does, returns data (each query and its number of
#     series is printed; a failure names the panels whose queries stayed empty);
#   - SketchdHeavyHitter fires for the hot item of the skewed pipeline, with the pipeline
#     and item labels, and is never pending nor firing for the uniform pipeline; sketchd,
#     a fresh instance reading the topics from their start, has complete windows at once
#     (sketchd_cms_window_incomplete_seconds 0), and the alert is pending within 10 s of
#     Prometheus' first scrape;
#   - SketchdBloomFillHigh and SketchdDedupWindowShrunk fire for the uniform pipeline, whose
#     dedup window is sized below its distinct items, and never for the skewed one;
#   - sketchd serves HTTPS with client certificates (http.tls with client_ca_file; a CA, and
#     the server's and Prometheus' certificates it signs, made here with openssl) and asks
#     for a user (http.basic_auth_users, a bcrypt hash): Prometheus scrapes over TLS with its
#     certificate and basic_auth (`up` is 1); no user, a wrong password or an unknown user
#     get a 401, /healthz answers without one; plain HTTP gets a 400 saying to use https,
#     a client without a certificate no answer; neither the password, its hash nor the
#     private key is ever logged.
#
# The streams, produced continuously (kcat) for the whole test, keyed by item:
#   skewed:  blocks of 600 events in a random order: 400 distinct items once each and
#            "hot" 200 times, so hot is 1/3 of the window, far above the threshold φ = 0.05;
#   uniform: blocks of 400 distinct items in a random order, each once per block.
# In any stretch of N consecutive uniform events an item occurs at most N/400 + 2 times
# (a partial block at each end), and a Count-Min estimate exceeds the true count by at
# most εN (probability 1 − δ = 0.99; ε = 0.001). The estimated share of any uniform item
# is then at most 1/400 + 2/N + 0.001, below φ = 0.05 once N > 43. Prometheus starts only
# once the uniform window holds 500 items (share ≤ 0.0075); N only grows from there until
# the window (20 s, 4 buckets) first slides, and then holds at least 15 s of events
# (thousands). Reaching φ would take an overestimate of
# over 40εN, which by Markov's inequality has a probability below 1/(40e) per row, and
# (1/(40e))^5 < 1e-10 over the sketch's d = ⌈ln(1/δ)⌉ = 5 rows.
#
# The shipped rules wait 2 minutes (`for: 2m`) before firing; the test evaluates a copy
# whose `for:` durations are rewritten to 3s, to finish in well under 90 s. The
# expressions are the shipped ones, unchanged.
#
# Usage: prometheus_live_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ITEST_EXTRA_TOOLS=(prometheus promtool openssl)
itest_init "$@"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dashboard=$repo/dashboards/sketchd-overview.json
rules=$repo/deploy/prometheus/rules/sketchd-alerts.yml
checker=$repo/tests/integration/dashboard_check.py
[[ -f $dashboard ]] || fail "no dashboard at $dashboard"
[[ -f $rules ]] || fail "no alert rules at $rules"
rate=300 # events per second on each topic

# --- the shipped rules, and the copy the test evaluates --------------------------------
promtool check rules "$rules" >"$work/promtool-rules.out" 2>&1 \
  || { cat "$work/promtool-rules.out" >&2; fail "promtool check rules rejects $rules"; }
log "promtool check rules: $(grep -m1 SUCCESS "$work/promtool-rules.out" || true)"
"$python" - "$rules" "$work/rules.yml" <<'EOF' || fail "could not rewrite the for: durations of $rules"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
fast, n = re.subn(r"(?m)^(\s+)for:\s*\S+\s*$", r"\1for: 3s", text)
assert n > 0, "no for: line"
open(sys.argv[2], "w", encoding="utf-8").write(fast)
print(f"rules: {n} for: durations rewritten to 3s")
EOF

# --- broker, producers, sketchd ---------------------------------------------------------
start_mock_kafka skewed:2 uniform:2 skewed.unique:2 skewed.dups:2 skewed.heavy:1 skewed.dlq:1
mkfifo "$work/skewed.fifo" "$work/uniform.fifo"
for topic in skewed uniform; do
  BACKGROUND_STDIN=$work/$topic.fifo start_background "kcat-$topic" \
    kcat -P -b "$bootstrap" -t "$topic" -K'|' -X message.timeout.ms=30000 -X linger.ms=20
done
# The generator's script is a file: start_background gives its command /dev/null as stdin.
cat >"$work/generator.py" <<'EOF'
import random, sys, time
work, rate = sys.argv[1], int(sys.argv[2])
rng = random.Random(20261130)
def blocks(items):
    while True:
        block = list(items)
        rng.shuffle(block)
        yield from block
skewed = blocks([f"s{i}" for i in range(400)] + ["hot"] * 200)
uniform = blocks([f"u{i}" for i in range(400)])
out = [(open(f"{work}/skewed.fifo", "w"), skewed), (open(f"{work}/uniform.fifo", "w"), uniform)]
tick, seq = 0.05, 0
start = time.monotonic()
while True:
    for f, items in out:
        for _ in range(int(rate * tick)):
            item = next(items)
            f.write(f'{item}|{{"item":"{item}","seq":{seq}}}\n')
            seq += 1
        f.flush()
    start += tick
    time.sleep(max(0.0, start - time.monotonic()))
EOF
start_background generator "$python" "$work/generator.py" "$work" "$rate"
generator_pid=$last_pid

port=$(free_port)
mkdir "$work/state"
# Every endpoint but /healthz asks for a user (http.basic_auth_users), and Prometheus
# scrapes with it. The bcrypt hash (cost 4: quick) is made by libcrypt through Python.
password="scrape-$RANDOM$RANDOM"
hash=$("$python" -W ignore -c 'import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' "$password")
[[ $hash == '$2b$04$'* ]] || fail "python could not make a bcrypt hash: $hash"
# HTTPS with client certificates: a CA, and the server's and Prometheus' certificates.
tls=$work/tls
make_certificates "$tls" server prometheus
key_line=$(sed -n 2p "$tls/server.key")  # a line of the private key, never to be logged
http_scheme=https
tls_curl=(--cacert "$tls/ca.crt" --cert "$tls/prometheus.crt" --key "$tls/prometheus.key")
curl_auth=(-u "prometheus:$password" "${tls_curl[@]}")
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-prometheus
  # Statistics (the consumer lag) and commits every second.
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000, statistics.interval.ms: 1000, auto.commit.interval.ms: 1000 }
http:
  listen: "127.0.0.1:$port"
  basic_auth_users: { prometheus: "$hash" }
  tls: { cert_file: "$tls/server.crt", key_file: "$tls/server.key", client_ca_file: "$tls/ca.crt" }
state:
  dir: "$work/state"
  snapshot_interval: 2s
pipelines:
  - name: skewed
    topics: [skewed]
    item: { from: key }
    clock: wall
    # No malformed event comes: its dead-letter series stay at 0, for the dashboard's panel.
    dead_letter_topic: skewed.dlq
    heavy_hitters: { window: 20s, buckets: 4, epsilon: 0.001, delta: 0.01, top_k: 10, threshold: 0.05, alerts_topic: skewed.heavy }
    dedup: { window: 1m, capacity: 100k, fpr: 0.001, output_topic: skewed.unique, duplicates_topic: skewed.dups }
  - name: uniform
    topics: [uniform]
    item: { from: key }
    clock: wall
    heavy_hitters: { window: 20s, buckets: 4, epsilon: 0.001, delta: 0.01, top_k: 10, threshold: 0.05 }
    # Sized for 300 distinct items per minute while 400 recur: an overloaded dedup window.
    dedup: { window: 1m, capacity: 300, fpr: 0.001 }
log: { level: info, summary_interval: 0 }
EOF
start_daemon "$work/sketchd.yaml"
# Basic authentication: no user or a wrong password is refused (401, asking for one),
# /healthz stays open.
for auth in "" "-u prometheus:wrong" "-u nobody:$password"; do
  # shellcheck disable=SC2086
  code=$(curl -s $auth "${tls_curl[@]}" -o "$work/401.json" -w '%{http_code}' --max-time 5 "$http/metrics")
  [[ $code == 401 ]] || fail "GET /metrics with '${auth:-no user}' answered $code, not 401"
done
grep -q "authentication required" "$work/401.json" || fail "the 401 does not say why: $(cat "$work/401.json")"
code=$(curl -s "${tls_curl[@]}" -o /dev/null -w '%{http_code}' --max-time 5 "$http/healthz")
[[ $code == 200 ]] || fail "GET /healthz without a user answered $code, not 200"
log "basic auth: 401 without a user or with a wrong password, 200 with it; /healthz open"
# Plain HTTP is told to use https; a client without a certificate gets no answer.
code=$(curl -s -o "$work/plain.json" -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/healthz" || true)
[[ $code == 400 ]] && grep -q "speaks HTTPS" "$work/plain.json" ||
  fail "plain HTTP answered $code: $(cat "$work/plain.json")"
if curl -s --cacert "$tls/ca.crt" -o /dev/null --max-time 5 "$http/healthz"; then
  fail "a client without a certificate was answered"
fi
log "TLS: plain HTTP refused (400, use https), a client without a certificate refused"
wait_metric 'sketchd_cms_window_items{pipeline="uniform"}' -ge 500 30
kill -0 "$generator_pid" 2>/dev/null || fail "the event generator exited"
log "uniform window holds $metric items"

# --- Prometheus ---------------------------------------------------------------------------
prom_port=$(free_port)
prom="http://127.0.0.1:$prom_port"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $work/rules.yml
scrape_configs:
  - job_name: sketchd
    scheme: https
    tls_config: { ca_file: "$tls/ca.crt", cert_file: "$tls/prometheus.crt", key_file: "$tls/prometheus.key" }
    basic_auth: { username: prometheus, password: "$password" }
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF
promtool check config "$work/prometheus.yml" >"$work/promtool-config.out" 2>&1 \
  || { cat "$work/promtool-config.out" >&2; fail "promtool check config rejects the configuration"; }
log "promtool check config: ok"
start_background prometheus prometheus --config.file="$work/prometheus.yml" \
  --storage.tsdb.path="$work/tsdb" --web.listen-address="127.0.0.1:$prom_port"
prom_pid=$last_pid
prom_started=$SECONDS
wait_http "$prom/-/ready" 30 "$prom_pid"
log "prometheus ready on $prom"
# Its first scrape of sketchd, with the user: `up` is 1 (a refused scrape sets it to 0).
deadline=$((SECONDS + 30))
until [[ $(curl -sf --max-time 5 "$prom/api/v1/query?query=up%3D%3D1" | "$python" -c 'import json, sys; print(len(json.load(sys.stdin)["data"]["result"]))' 2>/dev/null) == 1 ]]; do
  ((SECONDS < deadline)) || fail "Prometheus did not scrape sketchd (over TLS, with its user) within 30 s"
  sleep 0.2
done
first_scrape=$SECONDS
scrape_s=$(curl -sf --max-time 5 "$prom/api/v1/query?query=scrape_duration_seconds%7Bjob%3D%22sketchd%22%7D" |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])' 2>/dev/null || true)
log "Prometheus scrapes sketchd over TLS with a client certificate and basic auth: up 1, scrape ${scrape_s:-?} s"

# --- every query of the dashboard ---------------------------------------------------------
"$python" "$checker" --queries "$dashboard" >"$work/queries.jsonl" || fail "could not read the dashboard's queries"
"$python" - "$prom" "$work/queries.jsonl" "127.0.0.1:$port" <<'EOF' || fail "dashboard queries without data (above)"
import json, re, sys, time, urllib.parse, urllib.request
prom, path, target = sys.argv[1], sys.argv[2], sys.argv[3]
entries = [json.loads(line) for line in open(path, encoding="utf-8")]
variables = [e for e in entries if "variable" in e]
targets = [e for e in entries if "panel" in e]
# Grafana's built-in intervals, for a 1 s scrape interval: $__rate_interval is
# max(4 × scrape interval, $__interval + scrape interval).
builtins = {"__rate_interval": "4s", "__interval": "1s", "__interval_ms": "1000", "__range": "1m",
            "__range_s": "60", "__range_ms": "60000"}

def get(api, **params):
    url = f"{prom}/api/v1/{api}?{urllib.parse.urlencode(params, doseq=True)}"
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{api} {params}: {body}")
    return body["data"]

def regex_value(values):
    # Grafana's multi-value format for Prometheus: each value regex-escaped (the backslash
    # doubled inside a PromQL string), joined with |, in parentheses.
    escaped = [re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"

def substitute(text, values):
    def one(m):
        name = m.group(1) or m.group(2)
        if name in builtins:
            return builtins[name]
        if name not in values:
            raise KeyError(f"variable ${name} has no value")
        return values[name]
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", one, text)

deadline = time.monotonic() + 40
values, listed = {}, {}
# The variables, in order (pipeline depends on instance), the way Grafana asks for
# label_values(SELECTOR, LABEL): /api/v1/label/LABEL/values?match[]=SELECTOR.
while True:
    try:
        values, listed = {}, {}
        for v in variables:
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", v["query"])
            assert m, f"variable {v['variable']}: not a label_values() query: {v['query']}"
            found = get(f"label/{m.group(2)}/values", **{"match[]": substitute(m.group(1), values)})
            listed[v["variable"]] = found
            if not found:
                raise LookupError(f"variable {v['variable']} has no values yet")
            values[v["variable"]] = regex_value(found)
        break
    except LookupError as e:
        if time.monotonic() > deadline:
            print(f"FAIL: {e}")
            sys.exit(1)
        time.sleep(0.5)
print(f"variables: {json.dumps(listed)}")
ok = listed.get("instance") == [target] and sorted(listed.get("pipeline", [])) == ["skewed", "uniform"]
if not ok:
    print(f"FAIL: expected instance [{target}] and pipelines skewed, uniform")

# Every target until all have data (rates need two samples inside $__rate_interval, the
# snapshot age a first snapshot, the lag librdkafka's first statistics).
while True:
    results = []
    for t in targets:
        expr = substitute(t["expr"], values)
        data = get("query", query=expr)
        results.append((t, expr, len(data["result"]) if isinstance(data["result"], list) else 1))
    empty = [r for r in results if r[2] == 0]
    if not empty or time.monotonic() > deadline:
        break
    time.sleep(1)
for t, expr, n in results:
    print(f'{"ok   " if n else "EMPTY"} {n:3d} series  panel {t["id"]} "{t["panel"]}" {t["ref"]}: {expr}')
if empty:
    print(f"FAIL: {len(empty)} of {len(results)} queries returned no data, in panels: "
          + ", ".join(sorted({f'"{t["panel"]}"' for t, _, _ in empty})))
    ok = False
else:
    print(f"all {len(results)} queries of {len({t['id'] for t in targets})} panels returned data")
sys.exit(0 if ok else 1)
EOF
log "dashboard queries: all returned data"

# --- the heavy-hitter alert ---------------------------------------------------------------
# A fresh instance reads the topics from their start (a new group, auto.offset.reset at
# earliest): its windows are complete from the first batch (the log holds every message
# since the window's start), so the alert's guard does not hold it back, and it is pending
# within 10 s of Prometheus' first scrape.
scrape
expect_values "$work/metrics.txt" 'sketchd_cms_window_incomplete_seconds{pipeline="skewed"} 0'
deadline=$((first_scrape + 10))
while :; do
  curl -sf --max-time 5 "$prom/api/v1/alerts" >"$work/alerts.json" || fail "GET $prom/api/v1/alerts failed"
  active=$(json "$work/alerts.json" '[a["state"] for a in d["data"]["alerts"] if a["labels"].get("alertname") == "SketchdHeavyHitter" and a["labels"].get("pipeline") == "skewed" and a["labels"].get("item") == "hot"]')
  [[ $active != "[]" ]] && break
  ((SECONDS < deadline)) || fail "SketchdHeavyHitter is not pending for skewed/hot 10 s after Prometheus' first scrape: $(cat "$work/alerts.json")"
  sleep 0.5
done
log "SketchdHeavyHitter $active $((SECONDS - first_scrape)) s after Prometheus' first scrape"
deadline=$((SECONDS + 30))
while :; do
  curl -sf --max-time 5 "$prom/api/v1/alerts" >"$work/alerts.json" || fail "GET $prom/api/v1/alerts failed"
  firing=$(json "$work/alerts.json" '[a for a in d["data"]["alerts"] if a["labels"].get("alertname") == "SketchdHeavyHitter" and a["labels"].get("pipeline") == "skewed" and a["labels"].get("item") == "hot" and a["state"] == "firing"]')
  [[ $firing != "[]" ]] && break
  ((SECONDS < deadline)) || fail "SketchdHeavyHitter is not firing for skewed/hot after 30 s: $(cat "$work/alerts.json")"
  sleep 0.5
done
log "SketchdHeavyHitter firing $((SECONDS - prom_started)) s after Prometheus started: $firing"
json "$work/alerts.json" '[a for a in d["data"]["alerts"] if a["labels"].get("alertname") == "SketchdHeavyHitter"]' >"$work/hh.json"
others=$(json "$work/hh.json" '[(a["labels"]["pipeline"], a["labels"].get("item"), a["state"]) for a in d if (a["labels"].get("pipeline"), a["labels"].get("item")) != ("skewed", "hot")]')
[[ $others == "[]" ]] || fail "SketchdHeavyHitter also active for $others"
severity=$(json "$work/hh.json" '[a["labels"].get("severity") for a in d][0]')
[[ $severity == warning ]] || fail "SketchdHeavyHitter has severity \"$severity\", not warning"
# never_active ALERTNAME_REGEX PIPELINE: fails unless no alert matching the regex has been
# pending or firing for the pipeline since Prometheus started (ALERTS holds a sample for
# every evaluation in which an alert was pending or firing).
never_active() {
  curl -sf --max-time 5 "$prom/api/v1/query" \
    --data-urlencode "query=count_over_time(ALERTS{alertname=~\"$1\", pipeline=\"$2\"}[5m])" \
    >"$work/never.json" || fail "query of ALERTS failed"
  [[ $(json "$work/never.json" 'd["data"]["result"]') == "[]" ]] \
    || fail "$1 was pending or firing for the $2 pipeline: $(cat "$work/never.json")"
}
never_active SketchdHeavyHitter uniform
log "uniform pipeline: SketchdHeavyHitter never pending nor firing"

# --- the overload alerts --------------------------------------------------------------------
# uniform's dedup window holds 300 distinct items per minute and sees 400 recurring ones:
# every generation rotates at its share (100 items), forgets, and the horizon stays far
# below the minute. skewed's (100k) never fills.
overload='SketchdBloomFillHigh SketchdDedupWindowShrunk'
deadline=$((SECONDS + 30))
while :; do
  curl -sf --max-time 5 "$prom/api/v1/alerts" >"$work/alerts.json" || fail "GET $prom/api/v1/alerts failed"
  firing=$(json "$work/alerts.json" 'sorted({a["labels"]["alertname"] for a in d["data"]["alerts"] if a["labels"].get("pipeline") == "uniform" and a["state"] == "firing"} & {"SketchdBloomFillHigh", "SketchdDedupWindowShrunk"})')
  [[ $firing == '["SketchdBloomFillHigh", "SketchdDedupWindowShrunk"]' ]] && break
  ((SECONDS < deadline)) || fail "$overload not both firing for the overloaded uniform pipeline after 30 s: $(cat "$work/alerts.json")"
  sleep 0.5
done
log "uniform pipeline (dedup overloaded): $firing firing $((SECONDS - prom_started)) s after Prometheus started"
never_active 'SketchdBloomFillHigh|SketchdDedupWindowShrunk' skewed
log "skewed pipeline (dedup within capacity): neither overload alert ever pending nor firing"
log "active alerts: $(json "$work/alerts.json" '", ".join(sorted({a["labels"]["alertname"] + "/" + a["state"] for a in d["data"]["alerts"]})) or "none"')"

kill -0 "$daemon_pid" 2>/dev/null || fail "sketchd exited during the test"
kill -0 "$generator_pid" 2>/dev/null || fail "the event generator exited during the test"
# Neither the password, its hash nor the private key is ever logged.
! grep -qF -e "$password" -e "$hash" -e "$key_line" "$work"/sketchd.out "$work"/sketchd.err ||
  fail "sketchd's log shows the password, its hash or the private key"
log "PASS"
