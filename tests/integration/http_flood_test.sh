#!/usr/bin/env bash
# HTTP under a flood of idle connections, as a new user would try it: sketchd with HTTPS,
# basic authentication and http.max_connections: 256, fed through `sketchd mock-kafka`.
#   - 1,000 TCP connections opened on loopback (a bounded loop) and left idle, never
#     sending a byte: sketchd keeps at most 256 of them open (closing the longest idle to
#     make room), so its file descriptors stay below what it held before plus the limit
#     (and 16 for a connection librdkafka may open meanwhile),
#     and its threads do not grow with them (no thread per connection; at most the 64 of
#     the workers' pool);
#   - meanwhile a scrape over TLS with the right user answers 200 within 5 s, and its
#     /metrics are whole;
#   - 5 more floods of 1,000 one after the other leave it the same, and it stops cleanly.
# Prints the figures: descriptors and threads before and during the flood, the scrape's time.
#
# Usage: http_flood_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ITEST_EXTRA_TOOLS=(openssl)
itest_init "$@"

limit=256
flood=1000
# The test's own process holds the 1,000 client ends.
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)"
(($(ulimit -n) > flood + 64)) || fail "the open-files limit ($(ulimit -n)) is below $flood"

start_mock_kafka events:4
make_certificates "$work/tls" server
password="flood-$RANDOM$RANDOM"
hash=$("$python" -W ignore -c 'import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' "$password")
[[ $hash == '$2b$04$'* ]] || fail "python could not make a bcrypt hash: $hash"
http_scheme=https
curl_auth=(-u "scraper:$password" --cacert "$work/tls/ca.crt")
port=$(free_port)
cat >"$work/sketchd.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: itest-flood
http:
  listen: "127.0.0.1:$port"
  max_connections: $limit
  basic_auth_users: { scraper: "$hash" }
  tls: { cert_file: "$work/tls/server.crt", key_file: "$work/tls/server.key" }
pipelines:
  - name: p
    topics: [events]
    item: { from: key }
    dedup: { window: 1m, capacity: 10k, fpr: 0.01 }
log: { level: info, summary_interval: 0 }
EOF
start_daemon "$work/sketchd.yaml"
seq 1 500 | sed 's/^/k:v/' | kcat -P -b "$bootstrap" -t events -K: || fail "kcat could not produce"
# Kafka's connections and threads are made: the events read, and a commit made.
wait_metric 'sketchd_pipeline_items_total{pipeline="p"}' -ge 500 30
sleep 2

fds() { find "/proc/$daemon_pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
threads() { awk '/^Threads:/ {print $2}' "/proc/$daemon_pid/status"; }
fds_before=$(fds)
threads_before=$(threads)
log "before the flood: $fds_before descriptors, $threads_before threads"

# The flood: $flood connections opened and held, idle, until told to close (a line on
# stdin); "open N" once they are all open.
cat >"$work/flood.py" <<'EOF'
import socket, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(count):
    s = socket.socket()
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    held.append(s)
print(f"open {len(held)}", flush=True)
sys.stdin.readline()
EOF

for round in 1 2 3 4 5 6; do
  mkfifo "$work/flood.in.$round"
  "$python" "$work/flood.py" "$port" "$flood" <"$work/flood.in.$round" >"$work/flood.out.$round" &
  flood_pid=$!
  exec {hold}>"$work/flood.in.$round"
  deadline=$((SECONDS + 30))
  until grep -q '^open' "$work/flood.out.$round"; do
    kill -0 "$flood_pid" 2>/dev/null || fail "the flood of round $round ended: $(cat "$work/flood.out.$round")"
    ((SECONDS < deadline)) || fail "the flood of round $round did not open $flood connections in 30 s"
    sleep 0.1
  done
  sleep 0.5  # accepted, and the longest idle closed
  fds_during=$(fds)
  threads_during=$(threads)
  started=$(date +%s%N)
  code=$(curl -s "${curl_auth[@]}" --max-time 5 -o "$work/metrics.txt" -w '%{http_code}' "$http/metrics" || true)
  took_ms=$((($(date +%s%N) - started) / 1000000))
  [[ $code == 200 ]] || fail "round $round: the scrape during the flood answered ${code:-nothing} (within 5 s)"
  grep -q '^sketchd_build_info' "$work/metrics.txt" || fail "round $round: the scrape's /metrics is not whole"
  log "round $round: $flood idle connections: $fds_during descriptors, $threads_during threads; scrape 200 in $took_ms ms"
  # librdkafka may open a connection more meanwhile (a broker, the group's coordinator):
  # 16 descriptors allowed for it.
  ((fds_during <= fds_before + limit + 16)) ||
    fail "round $round: $fds_during descriptors, above $fds_before before plus the limit $limit and 16"
  # The workers are a pool of at most 64 threads, whatever the connections.
  ((threads_during <= threads_before + 64)) ||
    fail "round $round: $threads_during threads, from $threads_before before the flood"
  exec {hold}>&-
  wait "$flood_pid" || true
done

kill -0 "$daemon_pid" || fail "sketchd died during the floods"
grep -i "refused" "$work/sketchd.err" && fail "sketchd refused connections: idle ones should have made room"
stop_process "$daemon_pid" 30 || fail "sketchd did not stop within 30 s of SIGTERM"
((stop_status == 0)) || fail "sketchd exited $stop_status at SIGTERM"
log "PASS"
