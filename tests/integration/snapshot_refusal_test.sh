#!/usr/bin/env bash
# A snapshot that cannot be used stops the start with a clear message, and the explicit
# option sets it aside. A first run writes a snapshot (SIGTERM). Then:
#   - a bit flipped in the middle of the file: exit 1, the file named, "checksum";
#     `check-config` says so too (exit 1, "cannot use the snapshot (… checksum …)"), and
#     with discard_incompatible_snapshot notes that it will be set aside (exit 0), leaving
#     the file as it is;
#   - the file cut short: exit 1, "truncated";
#   - dedup.capacity and heavy_hitters.window of pipeline clicks changed in the
#     configuration, and dedup.capacity of pipeline orders: exit 1, each difference of
#     each pipeline spelt "KEY: A in the snapshot, B in the configuration" in one message,
#     and the option that discards them named;
#   - `check-config` on those configurations says the same before a start: exit 1 naming
#     both pipelines' differences, or, with the option, exit 0 and a note per pipeline;
#   - clicks' changes only, with state.discard_incompatible_snapshot: true: the daemon
#     starts, clicks with empty windows (sketchd_cms_window_incomplete_seconds above 0),
#     orders with its state (k42 seen); the snapshot
#     stays in place and a copy is kept beside as sketchd.snapshot.discarded-…;
#   - the intact snapshot and the original configuration: restored;
#   - a directory in the snapshot's place: exit 1, "not a regular file", the snapshot kept
#     (not set aside, even with discard_incompatible_snapshot); check-config says so too
#     (exit 1), whichever user runs it;
#   - pipeline clicks renamed to views: a warning that the snapshot's clicks is no longer
#     configured, views starts empty, orders is restored (k42 seen), exit 0 at SIGTERM; the
#     snapshot of that stop no longer holds clicks;
#   - a pipeline added: "pipeline sessions is not in the snapshot: its windows start
#     empty" (its heavy-hitter window incomplete), clicks and orders restored;
#   - the state directory removed while sketchd runs: the next periodic snapshot creates
#     it again (with a warning) and writes into it;
#   - the state directory replaced by a file: periodic snapshots fail (counted in
#     sketchd_snapshot_failures_total), and at SIGTERM the final snapshot cannot be written
#     either: exit status 1 and an error saying so (it was exit 0).
#
# Usage: snapshot_refusal_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"

start_mock_kafka events:2
port=$(free_port)

# write_config FILE CAPACITY WINDOW [DISCARD [ORDERS_CAPACITY]]
write_config() {
  cat >"$1" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-refusal
  properties: { session.timeout.ms: 6000, heartbeat.interval.ms: 1000 }
http:
  listen: "127.0.0.1:$port"
state:
  dir: "$work/state"
  snapshot_interval: 1m
  discard_incompatible_snapshot: ${4:-false}
pipelines:
  - name: clicks
    topics: [events]
    item: { from: key }
    clock: wall
    heavy_hitters: { window: $3, buckets: 10, epsilon: 0.01, delta: 0.01, top_k: 5, threshold: 0.1 }
    dedup: { window: 1h, capacity: $2, fpr: 0.01 }
  - name: orders
    topics: [events]
    item: { from: key }
    clock: wall
    dedup: { window: 1h, capacity: ${5:-1000}, fpr: 0.01 }
log: { level: info, summary_interval: 0 }
EOF
}

# refused CONFIG PATTERN…: sketchd must exit 1 within 20 s, its stderr matching each PATTERN.
refused() {
  local config=$1 status=0
  shift
  timeout 20 "$sketchd" run --config "$config" >"$work/refused.out" 2>"$work/refused.err" || status=$?
  [[ $status == 1 ]] || { cat "$work/refused.err" >&2; fail "sketchd exited with $status, not 1, on a bad snapshot"; }
  local p
  for p in "$@"; do check_log "$work/refused.err" "$p"; done
  grep -m1 -E "critical" "$work/refused.err" | cut -c1-300
}

write_config "$work/good.yaml" 10000 5m
seq 1 500 | sed 's/.*/k&|v/' | produce events -K'|'
start_daemon "$work/good.yaml" first
wait_metric 'sketchd_pipeline_items_total{pipeline="clicks"}' -eq 500 60
stop_process "$daemon_pid" 10 || fail "sketchd did not stop"
snapshot="$work/state/sketchd.snapshot"
[[ -s $snapshot ]] || fail "no snapshot written at shutdown"
cp "$snapshot" "$work/snapshot.good"
size=$(stat -c %s "$snapshot")
log "snapshot written: $size bytes"

# A bit flipped in the middle.
"$python" - "$snapshot" <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 2] ^= 0x10
open(sys.argv[1], "wb").write(bytes(data))
EOF
refused "$work/good.yaml" "sketchd.snapshot" "checksum" "discard_incompatible_snapshot"

# check-config reads the snapshot whole, for its checksum: the same refusal before a start
# (exit 1), and with the option that discards it, a note of what the start will do (exit
# 0). It changes nothing in the state directory.
cp "$snapshot" "$work/snapshot.flipped"
status=0
"$sketchd" check-config "$work/good.yaml" >"$work/check.out" 2>"$work/check.err" || status=$?
[[ $status == 1 ]] || fail "check-config exited with $status on a corrupt snapshot, not 1: $(cat "$work/check.err")"
check_log "$work/check.err" \
  ":[0-9]+:[0-9]+: cannot use the snapshot \(.*sketchd\.snapshot.*checksum.*\): sketchd would not start \(state\.discard_incompatible_snapshot: true sets it aside"
write_config "$work/good-discard.yaml" 10000 5m true
"$sketchd" check-config "$work/good-discard.yaml" >"$work/check.out" 2>"$work/check.err" \
  || fail "check-config refused a corrupt snapshot that discard_incompatible_snapshot sets aside: $(cat "$work/check.err")"
check_log "$work/check.err" \
  "note: cannot use the snapshot \(.*checksum.*\): sketchd will set it aside and start every pipeline with empty windows"
check_log "$work/check.out" "ok \(2 pipelines\)"
cmp -s "$snapshot" "$work/snapshot.flipped" || fail "check-config changed the snapshot"
if ls "$work"/state/sketchd.snapshot.discarded-* >/dev/null 2>&1; then
  fail "check-config set the snapshot aside"
fi
log "check-config: the corrupt snapshot refused (exit 1), or noted with the discard option (exit 0)"

# Cut short.
head -c $((size / 3)) "$work/snapshot.good" >"$snapshot"
refused "$work/good.yaml" "truncated"

# Another configuration.
cp "$work/snapshot.good" "$snapshot"
write_config "$work/other.yaml" 20000 10m false 2000
refused "$work/other.yaml" "pipeline clicks: .*dedup.capacity: 10000 in the snapshot, 20000 in the configuration" \
  "heavy_hitters.window: 5m in the snapshot, 10m in the configuration" \
  "pipeline orders: .*dedup.capacity: 1000 in the snapshot, 2000 in the configuration" \
  "discard_incompatible_snapshot"

# check-config reads the snapshot as `run` would restore it.
status=0
"$sketchd" check-config "$work/other.yaml" >"$work/check.out" 2>"$work/check.err" || status=$?
[[ $status == 1 ]] || fail "check-config exited with $status on a configuration the snapshot does not fit, not 1"
check_log "$work/check.err" ":[0-9]+:[0-9]+: pipelines\[0\] \(clicks\): does not fit the snapshot .*heavy_hitters.window: 5m in the snapshot, 10m in the configuration"
check_log "$work/check.err" ":[0-9]+:[0-9]+: pipelines\[1\] \(orders\): does not fit the snapshot .*dedup.capacity: 1000 in the snapshot, 2000 in the configuration"
write_config "$work/discard.yaml" 20000 10m true
"$sketchd" check-config "$work/discard.yaml" >"$work/check.out" 2>"$work/check.err" ||
  fail "check-config refused a configuration whose mismatch discard_incompatible_snapshot accepts: $(cat "$work/check.err")"
check_log "$work/check.err" "note: pipelines\[0\] \(clicks\): .*it will start with empty windows"
check_log "$work/check.out" "ok \(2 pipelines\)"
"$sketchd" check-config "$work/good.yaml" 2>"$work/check.err" >/dev/null || fail "check-config refused the snapshot's own configuration"
[[ ! -s $work/check.err ]] || fail "check-config complained about the snapshot's own configuration: $(cat "$work/check.err")"
log "check-config: the snapshot's mismatches named before a start"

# Clicks' changes only, told to discard what does not fit: orders keeps its state.
start_daemon "$work/discard.yaml" discard
check_log "$work/discard.err" "pipeline clicks: .*this pipeline starts with empty windows"
check_log "$work/discard.err" "kept as .*sketchd.snapshot.discarded-"
ls "$work"/state/sketchd.snapshot.discarded-* >/dev/null 2>&1 || fail "no copy of the snapshot was kept aside"
[[ -s $snapshot ]] || fail "the snapshot was moved away, though pipeline orders was restored from it"
scrape
[[ $(require_value "$work/metrics.txt" 'sketchd_bloom_estimated_items{pipeline="clicks"}') == 0 ]] \
  || fail "the windows of clicks did not start empty"
# Its empty window goes on from the snapshot's input positions: it says it is incomplete.
incomplete=$(require_value "$work/metrics.txt" 'sketchd_cms_window_incomplete_seconds{pipeline="clicks"}')
[[ $incomplete != 0 ]] || fail "the discarded pipeline's heavy-hitter window does not say it is incomplete"
api "api/v1/pipelines/orders/seen?item=k42"
[[ $(json "$work/api.json" 'd["seen"]') == true ]] || fail "orders lost its state when clicks' was discarded: $(cat "$work/api.json")"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop"
rm -f "$work"/state/sketchd.snapshot.discarded-*

# A snapshot that cannot be read as a whole, told to discard it: set aside, all empty.
head -c $((size / 3)) "$work/snapshot.good" >"$snapshot"
start_daemon "$work/discard.yaml" discard-whole
check_log "$work/discard-whole.err" "set aside"
ls "$work"/state/sketchd.snapshot.discarded-* >/dev/null 2>&1 || fail "the snapshot was not set aside"
scrape
[[ $(require_value "$work/metrics.txt" 'sketchd_bloom_estimated_items{pipeline="orders"}') == 0 ]] \
  || fail "the windows did not start empty"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop"

# The intact snapshot with its own configuration is restored.
cp "$work/snapshot.good" "$snapshot"
start_daemon "$work/good.yaml" restored
check_log "$work/restored.err" "restored snapshot"
api "api/v1/pipelines/clicks/seen?item=k42"
[[ $(json "$work/api.json" 'd["seen"]') == true ]] || fail "k42 is not seen after the restore: $(cat "$work/api.json")"
stop_process "$daemon_pid" 10 || fail "sketchd did not stop"

# seen PIPELINE ITEM: true or false, from the running daemon's API.
seen() {
  api "api/v1/pipelines/$1/seen?item=$2"
  [[ $api_status == 200 ]] || fail "GET /api/v1/pipelines/$1/seen: HTTP $api_status: $(cat "$work/api.json")"
  json "$work/api.json" 'd["seen"]'
}
# stopped_cleanly: SIGTERM, exit 0 within 10 s.
stopped_cleanly() {
  stop_process "$daemon_pid" 10 || fail "sketchd did not stop within 10 s of SIGTERM"
  [[ $stop_status == 0 ]] || fail "sketchd exited with status $stop_status after SIGTERM, not 0"
}

# A directory where the snapshot should be: it cannot be read at all, so it is neither
# restored nor set aside, even with discard_incompatible_snapshot: exit 1, kept.
rm -f "$snapshot"
mkdir "$snapshot"
aside_before=$(find "$work/state" -maxdepth 1 -name 'sketchd.snapshot.discarded-*' | wc -l)
refused "$work/good.yaml" "cannot read .*sketchd\.snapshot: not a regular file; not starting \(the snapshot is kept"
refused "$work/discard.yaml" "cannot read .*sketchd\.snapshot: not a regular file; not starting \(the snapshot is kept"
for config in good discard; do
  status=0
  "$sketchd" check-config "$work/$config.yaml" >"$work/check.out" 2>"$work/check.err" || status=$?
  [[ $status == 1 ]] || fail "check-config ($config) exited with $status on a directory in the snapshot's place, not 1: $(cat "$work/check.err")"
  check_log "$work/check.err" "cannot read .*sketchd\.snapshot: not a regular file: sketchd would not start \(the snapshot is kept"
done
[[ -d $snapshot ]] || fail "the directory in the snapshot's place is gone"
[[ $(find "$work/state" -maxdepth 1 -name 'sketchd.snapshot.discarded-*' | wc -l) == "$aside_before" ]] \
  || fail "a snapshot that cannot be read was set aside"
rmdir "$snapshot"
log "a directory in the snapshot's place: exit 1 (and check-config's), kept, with or without the discard option"

# A pipeline renamed (clicks → views) between two runs: the snapshot's clicks is dropped
# with a warning, views starts empty, orders is restored; the stop is clean.
cp "$work/snapshot.good" "$snapshot"
sed 's/^  - name: clicks$/  - name: views/' "$work/good.yaml" >"$work/renamed.yaml"
grep -q "name: views" "$work/renamed.yaml" || fail "could not rename the pipeline in the configuration"
start_daemon "$work/renamed.yaml" renamed
check_log "$work/renamed.err" \
  "warning \[state\] snapshot .*sketchd\.snapshot: pipeline clicks is no longer configured; its state is dropped"
check_log "$work/renamed.err" "pipeline views is not in the snapshot: its windows start empty"
check_log "$work/renamed.err" "restored snapshot .* \(1 pipeline\(s\), 2 partition position\(s\)\)"
[[ $(seen orders k42) == true ]] || fail "orders lost its state when clicks was renamed"
[[ $(seen views k42) == false ]] || fail "the renamed pipeline views did not start empty"
stopped_cleanly
# The snapshot of its stop holds views and orders, no longer clicks.
start_daemon "$work/good.yaml" renamed-back
check_log "$work/renamed-back.err" "pipeline views is no longer configured; its state is dropped"
check_log "$work/renamed-back.err" "pipeline clicks is not in the snapshot: its windows start empty"
[[ $(seen clicks k42) == false ]] || fail "clicks, dropped from the last snapshot, came back with its state"
[[ $(seen orders k42) == true ]] || fail "orders lost its state across the second restart"
stopped_cleanly
log "renamed pipeline: dropped with a warning, the new name empty, the other pipeline restored"

# A pipeline added (sessions): it starts empty, and says so; the others are restored.
cp "$work/snapshot.good" "$snapshot"
{
  sed '/^log:/d' "$work/good.yaml"
  cat <<EOF
  - name: sessions
    topics: [events]
    item: { from: key }
    clock: wall
    heavy_hitters: { window: 5m, buckets: 10, epsilon: 0.01, delta: 0.01, top_k: 5, threshold: 0.1 }
    dedup: { window: 1h, capacity: 1000, fpr: 0.01 }
log: { level: info, summary_interval: 0 }
EOF
} >"$work/added.yaml"
start_daemon "$work/added.yaml" added
check_log "$work/added.err" "pipeline sessions is not in the snapshot: its windows start empty"
check_log "$work/added.err" "restored snapshot .* \(2 pipeline\(s\), 2 partition position\(s\)\)"
if grep -Eq "no longer configured|does not fit" "$work/added.err"; then
  fail "a pipeline added made the restore complain: $(grep -E "no longer configured|does not fit" "$work/added.err")"
fi
[[ $(seen clicks k42) == true ]] || fail "clicks lost its state when a pipeline was added"
[[ $(seen orders k42) == true ]] || fail "orders lost its state when a pipeline was added"
[[ $(seen sessions k42) == false ]] || fail "the added pipeline did not start empty"
scrape
[[ $(require_value "$work/metrics.txt" 'sketchd_bloom_estimated_items{pipeline="sessions"}') == 0 ]] \
  || fail "the added pipeline's dedup window did not start empty"
# Its empty window goes on from the snapshot's input positions: it says it is incomplete.
incomplete=$(require_value "$work/metrics.txt" 'sketchd_cms_window_incomplete_seconds{pipeline="sessions"}')
[[ $incomplete != 0 ]] || fail "the added pipeline's heavy-hitter window does not say it is incomplete"
stopped_cleanly
log "added pipeline: empty (its window incomplete), the others restored"

# The state directory goes away, then becomes a file.
sed 's/snapshot_interval: 1m/snapshot_interval: 1s/' "$work/good.yaml" >"$work/often.yaml"
start_daemon "$work/often.yaml" gone
# Moved away in one step (not rm -rf, which a snapshot written meanwhile would make fail).
mv "$work/state" "$work/state.removed"
for _ in $(seq 100); do
  [[ -s $snapshot ]] && break
  sleep 0.1
done
[[ -s $snapshot ]] || fail "no snapshot within 10 s after the state directory was removed"
check_log "$work/gone.err" "was gone: created it again"
log "state directory removed: created again, snapshot written"
mv "$work/state" "$work/state.removed-again"
echo "not a directory" >"$work/state"
wait_metric 'sketchd_snapshot_failures_total' -ge 1 15
stop_process "$daemon_pid" 20 || fail "sketchd did not stop within 20 s"
[[ $stop_status -eq 1 ]] || fail "sketchd exited with $stop_status after a failed final snapshot, expected 1"
check_log "$work/gone.err" "the final snapshot was not written"
log "state directory replaced by a file: final snapshot not written, exit status 1"
log "PASS"
