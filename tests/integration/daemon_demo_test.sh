#!/usr/bin/env bash
# The demo (`sketchd run --config config/demo.yaml`: embedded broker, Zipf generator at
# 20,000 events/s over u0…u999999, one pipeline) works out of the box, its listen address
# moved by SKETCHD_LISTEN. While it runs:
#   - sketchd_pipeline_items_total grows between two scrapes, with no extract failures;
#   - the top-k has items and u0 (about 12% of a Zipf(1.1) stream over a million users)
#     is the top item, marked heavy;
#   - the Bloom filter fills (fill ratio > 0), and both first-seen and duplicate items
#     are counted;
#   - the periodic summary line is logged; SIGTERM stops it with status 0 within 5 s.
#
# Usage: daemon_demo_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"
demo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../config" && pwd)/demo.yaml

port=$(free_port)
SKETCHD_LISTEN="127.0.0.1:$port" start_daemon "$demo"

items_series='sketchd_pipeline_items_total{pipeline="clicks"}'
wait_metric "$items_series" -gt 0 60
first=$metric
log "items_total $first"
# The top of a Zipf stream settles quickly: with 30,000 items u0 (~12%) leads u1 (~6%)
# by about 1,900 events, many standard deviations.
wait_metric 'sketchd_cms_window_items{pipeline="clicks"}' -ge 30000 60
wait_metric "$items_series" -gt "$first" 30
log "items_total grew from $first to $metric"

m=$work/metrics.txt
for reason in invalid_json missing_field not_scalar empty_item oversized; do
  v=$(require_value "$m" "sketchd_pipeline_extract_failures_total{pipeline=\"clicks\",reason=\"$reason\"}")
  [[ $v -eq 0 ]] || fail "the generator's events gave $v extract failures ($reason)"
done

api api/v1/pipelines/clicks/topk "$work/topk.json"
[[ $api_status == 200 ]] || fail "GET /api/v1/pipelines/clicks/topk: HTTP $api_status"
[[ $(json "$work/topk.json" 'len(d["items"])') -gt 0 ]] || fail "the top-k is empty: $(cat "$work/topk.json")"
top=$(json "$work/topk.json" 'd["items"][0]["item"]')
[[ $top == u0 ]] || fail "the top item is \"$top\", expected u0: $(cut -c1-400 "$work/topk.json")"
[[ $(json "$work/topk.json" 'd["items"][0]["heavy"]') == true ]] || fail "u0 is not marked heavy"
log "top-k: $(json "$work/topk.json" '", ".join("%s %d" % (e["item"], e["estimate"]) for e in d["items"][:5])')"

fill=$(require_value "$m" 'sketchd_bloom_fill_ratio{pipeline="clicks",generation="0"}')
check "0 < $fill < 1" "sketchd_bloom_fill_ratio of the newest generation is $fill"
first_seen=$(require_value "$m" 'sketchd_dedup_first_seen_total{pipeline="clicks"}')
duplicates=$(require_value "$m" 'sketchd_dedup_duplicates_total{pipeline="clicks"}')
((first_seen > 0 && duplicates > 0)) || fail "first_seen $first_seen, duplicates $duplicates: both should be > 0"
api api/v1/pipelines/clicks/seen?item=u0 "$work/seen.json"
[[ $(json "$work/seen.json" 'd["seen"]') == true ]] || fail "/seen?item=u0 is not true"
log "dedup: fill $fill, first_seen $first_seen, duplicates $duplicates"

# The summary line (every 10 s in the demo), naming u0 at the top.
deadline=$((SECONDS + 20))
until grep -Eq '\[pipeline\] clicks: [0-9]+ items/s, window [0-9]+ items, top: "u0" ' "$work/sketchd.err"; do
  ((SECONDS < deadline)) || fail "no summary line with u0 on top within 20 s"
  sleep 0.5
done
log "summary: $(grep -E '\[pipeline\] clicks: [0-9]+ items/s' "$work/sketchd.err" | tail -1 | cut -c1-200)"

stop_process "$daemon_pid" 5 || fail "sketchd did not exit within 5 s of SIGTERM"
[[ $stop_status -eq 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM"
echo "PASS"
