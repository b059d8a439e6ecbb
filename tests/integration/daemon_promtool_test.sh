#!/usr/bin/env bash
# The /metrics exposition of a live sketchd: `promtool check metrics` passes, and every
# metric of the contract (DESIGN.md) is there with its HELP, its TYPE and samples:
#   - the sketchd_* families with their labels (pipeline, topic, reason, generation,
#     item, partition), counters as counters;
#   - sketchd_kafka_consumer_lag_messages for each of the 4 partitions, which falls to 0
#     once everything is consumed and committed;
#   - the process_* families, with plausible values;
#   - sketchd_build_info = 1 with version and revision, the configured φ and target FPR.
#
# Usage: daemon_promtool_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ITEST_EXTRA_TOOLS=(promtool)
itest_init "$@"

topic=events
messages=2000
started=$(date +%s)
start_mock_kafka "$topic:4"
port=$(free_port)
# Statistics (the lag) and commits every second instead of every 5 s, to keep this short.
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-promtool
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 1000
    statistics.interval.ms: 1000
    auto.commit.interval.ms: 1000
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: clicks
    topics: [$topic]
    item: { from: json, path: /user/id }
    clock: wall
    heavy_hitters: { window: 10m, epsilon: 0.001, top_k: 5, threshold: 0.05 }
    dedup: { window: 1h, capacity: 100k, fpr: 0.002, output_topic: clicks.unique }
EOF

awk -v n="$messages" 'BEGIN { for (i = 0; i < n; i++) printf "u%d|{\"user\":{\"id\":\"u%d\"}}\n", i % 50, i % 50 }' \
  | produce "$topic" -K'|'
start_daemon "$work/sketchd.yaml"
wait_metric 'sketchd_pipeline_items_total{pipeline="clicks"}' -ge "$messages" 60

# The lag of every partition appears with the statistics and reaches 0 after the commit.
wait_committed 4 30
for p in 0 1 2 3; do
  require_value "$work/metrics.txt" "sketchd_kafka_consumer_lag_messages{topic=\"$topic\",partition=\"$p\"}" >/dev/null
done
log "consumer lag: 4 partitions, all 0"

m=$work/metrics.txt
if ! promtool check metrics <"$m" >"$work/promtool.out" 2>&1; then
  cat "$work/promtool.out" >&2
  fail "promtool check metrics rejects the scrape"
fi
log "promtool check metrics: ok"

# NAME TYPE LABELS (the label names of its samples, comma-separated, "-" for none).
# sketchd_heavy_hitter_estimated_count is a gauge by nature, exposed untyped because
# promtool reserves the "_count" suffix for histograms and summaries.
problems=0
while read -r name type labels; do
  declared=$(awk -v n="$name" '$1 == "#" && $2 == "TYPE" && $3 == n { print $4 }' "$m")
  help=$(awk -v n="$name" '$1 == "#" && $2 == "HELP" && $3 == n { print "yes" }' "$m")
  samples=$(metric_series "$m" "$name")
  if [[ -z $samples ]]; then
    echo "  $name: no sample" >&2
    problems=$((problems + 1))
    continue
  fi
  [[ $declared == "$type" ]] || { echo "  $name: TYPE \"$declared\", expected $type" >&2; problems=$((problems + 1)); }
  [[ $help == yes ]] || { echo "  $name: no HELP" >&2; problems=$((problems + 1)); }
  got=$(head -n 1 <<<"$samples" | "$python" -c '
import re, sys
line = sys.stdin.read()
m = re.match(r"[^{ ]+\{(.*)\} ", line)
print(",".join(re.findall(r"(\w+)=\"(?:[^\"\\\\]|\\\\.)*\"", m.group(1))) if m else "-")')
  [[ $got == "$labels" ]] || { echo "  $name: labels $got, expected $labels" >&2; problems=$((problems + 1)); }
done <<'EOF'
sketchd_build_info gauge version,revision
sketchd_messages_consumed_total counter topic
sketchd_pipeline_items_total counter pipeline
sketchd_pipeline_extract_failures_total counter pipeline,reason
sketchd_cms_window_items gauge pipeline
sketchd_cms_error_bound_items gauge pipeline
sketchd_heavy_hitter_estimated_count untyped pipeline,item
sketchd_heavy_hitter_ratio gauge pipeline,item
sketchd_heavy_hitter_threshold_ratio gauge pipeline
sketchd_dedup_first_seen_total counter pipeline
sketchd_dedup_duplicates_total counter pipeline
sketchd_dedup_forwarded_total counter pipeline
sketchd_dedup_forward_failures_total counter pipeline
sketchd_bloom_fill_ratio gauge pipeline,generation
sketchd_bloom_estimated_false_positive_ratio gauge pipeline
sketchd_bloom_target_false_positive_ratio gauge pipeline
sketchd_bloom_estimated_items gauge pipeline
sketchd_bloom_size_bytes gauge pipeline
sketchd_cms_size_bytes gauge pipeline
sketchd_kafka_consumer_lag_messages gauge topic,partition
process_cpu_seconds_total counter -
process_resident_memory_bytes gauge -
process_open_fds gauge -
process_start_time_seconds gauge -
EOF
((problems == 0)) || fail "$problems problems with the metric families of the contract"
log "every metric of the contract is there, with HELP, TYPE and its labels"

# Values that are known.
build=$(metric_series "$m" sketchd_build_info)
[[ $build =~ ^sketchd_build_info\{version=\"[^\"]+\",revision=\"([^\"]+)\"\}\ 1$ ]] || fail "sketchd_build_info: $build"
# The revision: the one the build was told (-DSKETCHD_REVISION, passed on by ctest), else in
# a git checkout the commit the sources are at, taken at build time (an incremental build
# after a commit must not report the commit of its first configure). Full hashes are
# compared: the length of a short one depends on the repository and git's settings.
revision=${BASH_REMATCH[1]}
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -n ${SKETCHD_REVISION:-} ]]; then
  # As revision.cmake writes it: each byte other than A-Z a-z 0-9 . _ + - becomes "_".
  given=$(printf '%s' "$SKETCHD_REVISION" | LC_ALL=C tr -c 'A-Za-z0-9._+-' '_')
  [[ $revision == "$given" ]] \
    || fail "sketchd_build_info says revision \"$revision\", the build was given \"$SKETCHD_REVISION\" ($given)"
elif head=$(git -C "$source_dir" rev-parse -q --verify HEAD 2>/dev/null); then
  commit=$(git -C "$source_dir" rev-parse -q --verify "${revision%-dirty}^{commit}" 2>/dev/null) || true
  [[ $commit == "$head" ]] \
    || fail "sketchd_build_info says revision \"$revision\", the sources are at $head"
fi
check "$(require_value "$m" 'sketchd_heavy_hitter_threshold_ratio{pipeline="clicks"}') == 0.05" \
  "sketchd_heavy_hitter_threshold_ratio is not the configured 0.05"
check "$(require_value "$m" 'sketchd_bloom_target_false_positive_ratio{pipeline="clicks"}') == 0.002" \
  "sketchd_bloom_target_false_positive_ratio is not the configured 0.002"
[[ $(metric_series "$m" sketchd_bloom_fill_ratio | wc -l) -eq 4 ]] \
  || fail "sketchd_bloom_fill_ratio should have one series per generation (4)"
check "$(require_value "$m" 'sketchd_bloom_window_seconds{pipeline="clicks"}') == 3600" \
  "sketchd_bloom_window_seconds is not the configured 1h"
[[ $(metric_series "$m" sketchd_bloom_rotations_total | wc -l) -eq 2 ]] \
  || fail "sketchd_bloom_rotations_total should have two series (reason time and capacity)"
check "$(require_value "$m" 'sketchd_bloom_rotations_total{pipeline="clicks",reason="capacity"}') == 0" \
  "a stream far below dedup.capacity should not rotate a Bloom generation early"
[[ $(metric_series "$m" sketchd_heavy_hitter_estimated_count | wc -l) -eq 5 ]] \
  || fail "sketchd_heavy_hitter_estimated_count should have top_k = 5 series"
for size in sketchd_bloom_size_bytes sketchd_cms_size_bytes; do
  check "$(require_value "$m" "$size{pipeline=\"clicks\"}") > 0" "$size is not positive"
done
now=$(date +%s)
check "$started - 5 <= $(require_value "$m" process_start_time_seconds) <= $now" \
  "process_start_time_seconds is not the daemon's start"
check "0 < $(require_value "$m" process_cpu_seconds_total) < 600" "process_cpu_seconds_total is implausible"
check "1e6 < $(require_value "$m" process_resident_memory_bytes) < 4e9" "process_resident_memory_bytes is implausible"
check "3 <= $(require_value "$m" process_open_fds) < 10000" "process_open_fds is implausible"
log "known values: build info, φ, target FPR, generations, dedup window, rotations, top-k series, process metrics"

stop_process "$daemon_pid" 5 || fail "sketchd did not exit within 5 s of SIGTERM"
[[ $stop_status -eq 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM"
echo "PASS"
