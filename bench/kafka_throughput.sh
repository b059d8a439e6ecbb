#!/usr/bin/env bash
# sketchd's consume-and-process rate beside a bare librdkafka consumer, and its forward
# path beside a bare consume-and-produce pipe, on the same broker and topic, with the same
# consumer settings (the goals: ≥ 95% and ≥ 85% of the bare rates).
#
#   1. `sketchd mock-kafka` with an input topic of 32 partitions (the mock keeps at most
#      5 MiB per partition: N is sized so that nothing is dropped, which the script checks);
#   2. N small JSON events {"user":{"id":"uK"},"seq":S}, K Zipf(1.1)-distributed over
#      1,000,000 items (fixed seed), keyed by item, produced once with kcat;
#   3. REPEAT rounds, alternating, each with a fresh consumer group:
#        bare consume   kafka_bare consume: reads N messages, does nothing per message;
#                       it uses the daemon's allocator (jemalloc in a default build);
#        bare libc      the same on glibc's allocator (kafka_bare_libc), what a plain
#                       librdkafka application gets (not a goal: shown for the allocator's
#                       share);
#        sketchd        sketchd run with a heavy_hitters + dedup pipeline on the topic;
#        sketchd key    the same pipeline taking its item from the message key (which is
#                       the same item): no JSON to parse, the rest of sketchd's work alike
#                       (not a goal: it shows the JSON extraction's share of the gap);
#        bare pipe      kafka_bare pipe: reads N messages, produces each to an output topic;
#        sketchd fwd    sketchd run with dedup.output_topic: forwards the first-seen events.
#      A rate is N / (time from the first consumed message to the Nth). For sketchd the
#      times come from polling sketchd_messages_consumed_total every 20 ms (the resolution
#      of its figure), so the group join before the first message is not counted for
#      either side.
#      Each sketchd round also prints sketchd's CPU time per message by thread over the
#      same interval, from /proc (10 ms ticks): main (processing), poller (sketchd-poll,
#      the source's read-ahead), librdkafka (its threads), other (HTTP, …), and the
#      scraping observer's own (observer: a cost the bare consumer's rounds do not carry).
#      With a core per busy thread, the rate is bounded by the busiest one; on 2 cores, by
#      their sum. The bare consumer prints the same for its threads: app (polling) and
#      librdkafka. Both print the share of the machine's CPU time left idle over the
#      interval, and the share a virtual machine's CPUs waited for the host (steal); both
#      their page faults over the interval. A sketchd round's "between scrapes" rate is that
#      of the messages counted between the first and the last scrape that saw the count
#      move: without the rounding of the first and the last time to the scrape interval,
#      which at N = 600,000 and 3M msg/s (0.2 s) moves the rate by up to ±10%.
#   4. medians and ranges of the rates; the ratio of sketchd to the bare consumer in each
#      round (the two run back to back on the same broker, so a round's ratio is steadier
#      than the ratio of medians) with its median and range; the goals.
#
# PIN=1 pins the broker to CPU 0 and every client (kcat, the bare clients, sketchd) to
# CPU 1 with taskset, so that neither takes the other's core: the figures of a machine with a
# core for the broker and one for the consumer, where the default lets the scheduler share
# both cores among all of them.
#
# Note the forward comparison: the bare pipe forwards every message, sketchd only the
# first-seen ones (here about a third), so the ratio is of input rates for the same job
# of reading every message and forwarding what must be forwarded.
#
# bench/pipeline_bench measures the part that is sketchd's own (extract, hash, sketches,
# processing step) without Kafka, with far less noise.
#
# Usage: bench/kafka_throughput.sh BUILD_DIR   (N=600000 REPEAT=3 PIN=0 by default)
#
# To compare two builds of sketchd on the same broker and events, set OTHER_SKETCHD to the
# other build's daemon/sketchd: each round then also runs it next to this build's
# consume-only round (after it in odd rounds, before it in even ones), and the medians
# include its row.
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR}
sketchd=$build/daemon/sketchd
other=${OTHER_SKETCHD:-}
[[ -z $other || -x $other ]] || { echo "$0: OTHER_SKETCHD=$other is not an executable" >&2; exit 1; }
bare=$build/bench/kafka_bare
bare_libc=$build/bench/kafka_bare_libc
for exe in "$sketchd" "$bare" "$bare_libc"; do
  [[ -x $exe ]] || { echo "$0: $exe not found: build with -DSKETCHD_BUILD_BENCH=ON" >&2; exit 1; }
done
command -v kcat >/dev/null || { echo "$0: kcat is not installed" >&2; exit 1; }
n=${N:-600000}
repeat=${REPEAT:-3}
partitions=32
broker_cpu=()
client_cpu=()
if [[ ${PIN:-0} == 1 ]]; then
  command -v taskset >/dev/null || { echo "$0: PIN=1 needs taskset (util-linux)" >&2; exit 1; }
  (($(nproc) >= 2)) || { echo "$0: PIN=1 needs 2 CPUs" >&2; exit 1; }
  broker_cpu=(taskset -c 0)
  client_cpu=(taskset -c 1)
fi

work=$(mktemp -d)
pids=()
cleanup() {
  # mock-kafka exits cleanly on SIGTERM; wait, so the shell reports no killed job.
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# An output topic per forward round: a new consumer group reads an output topic back from its
# start before it forwards (docs/SEMANTICS.md, "A partition the group never committed"), and
# would find every copy an earlier round forwarded there, and forward nothing.
outputs=()
for r in $(seq "$repeat"); do outputs+=(--topic "out-$r:$partitions"); done
"${broker_cpu[@]}" "$sketchd" mock-kafka --topic "in:$partitions" "${outputs[@]}" --topic "pipe:$partitions" \
  >"$work/mock.out" 2>"$work/mock.err" &
pids+=($!)
for _ in $(seq 100); do
  bootstrap=$(sed -n 's/^bootstrap: //p' "$work/mock.out")
  [[ -n $bootstrap ]] && break
  sleep 0.1
done
[[ -n $bootstrap ]] || { echo "mock-kafka did not start" >&2; exit 1; }

python3 - "$n" >"$work/events" <<'EOF'
import bisect, itertools, random, sys
n = int(sys.argv[1])
rng = random.Random(1)
u, s = 1_000_000, 1.1
cdf = list(itertools.accumulate(1 / (k ** s) for k in range(1, u + 1)))
total = cdf[-1]
out = sys.stdout
for seq in range(n):
    k = bisect.bisect_left(cdf, rng.random() * total)
    out.write(f'u{k}|{{"user":{{"id":"u{k}"}},"seq":{seq}}}\n')
EOF
distinct=$(cut -d'|' -f1 "$work/events" | sort -u | wc -l)
"${client_cpu[@]}" kcat -P -b "$bootstrap" -t in -K'|' -X linger.ms=50 -X batch.num.messages=10000 <"$work/events"
stored=$(kcat -C -b "$bootstrap" -t in -o beginning -e -q -f '.\n' | wc -l)
[[ $stored == "$n" ]] || { echo "the topic holds $stored of $n messages: lower N" >&2; exit 1; }
echo "== $n events ($distinct distinct items) in topic in ($partitions partitions) at $bootstrap"
if [[ ${PIN:-0} == 1 ]]; then echo "== pinned: the broker on CPU 0, the clients on CPU 1"; fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# sketchd_rate NAME OUTPUT [ITEM]: runs sketchd on topic `in` (forwarding to OUTPUT unless
# empty; the item from ITEM, by default the JSON field /user/id), prints its rate in msg/s.
sketchd_rate() {
  local name=$1 output=$2 item=${3:-"{ from: json, path: /user/id }"} port
  port=$(free_port)
  cat >"$work/$name.yaml" <<EOF
kafka:
  brokers: "$bootstrap"
  group_id: bench-$name
  properties: { session.timeout.ms: 6000 }
http:
  listen: "127.0.0.1:$port"
pipelines:
  - name: clicks
    topics: [in]
    item: $item
    clock: wall
    heavy_hitters: { window: 5m, buckets: 10, epsilon: 0.0001, delta: 0.001, top_k: 20, threshold: 0.01 }
    dedup: { window: 1h, capacity: 2M, fpr: 0.001${output:+, output_topic: $output} }
log: { level: warn }
EOF
  "${client_cpu[@]}" "${SKETCHD:-$sketchd}" run --config "$work/$name.yaml" >"$work/$name.out" 2>"$work/$name.err" &
  local pid=$!
  pids+=("$pid")
  local status=0
  python3 - "$port" "$n" "$output" "$pid" "$work/$name.threads" <<'EOF' || status=$?
import http.client, os, re, sys, time
port, n, output, pid, threads_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
tick = os.sysconf("SC_CLK_TCK")
def thread_cpu():
    """CPU seconds by thread (main, poller, librdkafka, other), from /proc."""
    cpu = {"main": 0.0, "poller": 0.0, "librdkafka": 0.0, "other": 0.0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = ("main" if tid == pid else "poller" if comm == "sketchd-poll"
                else "librdkafka" if comm.startswith("rdk:") else "other")
        cpu[kind] += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return cpu
def machine_times():
    """Idle CPU seconds of the whole machine (idle + iowait of every CPU), and the seconds its
    CPUs waited for a virtual machine's host (steal), from /proc/stat."""
    fields = open("/proc/stat").readline().split()
    return (int(fields[4]) + int(fields[5])) / tick, int(fields[8]) / tick
def page_faults():
    """The sketchd process's minor and major page faults, from /proc."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[9])
connection = None
def scrape():
    """The metrics page, over one kept-alive connection (reopened after an error)."""
    global connection
    try:
        if connection is None:
            connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=2)
        connection.request("GET", "/metrics")
        return connection.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        if connection is not None:
            connection.close()
        connection = None
        return ""
def value(text, name):
    m = re.search(r"^" + re.escape(name) + r"(?:\{[^}]*\})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0
deadline = time.time() + 300
first = last = None
inside = []  # (time, consumed) of the scrapes that saw 0 < consumed < n
while time.time() < deadline:
    t = time.monotonic()
    text = scrape()
    consumed = value(text, "sketchd_messages_consumed_total")
    if consumed > 0 and first is None:
        first = t
        cpu_first = thread_cpu()
        machine_first = machine_times()
        faults_first = page_faults()
        observer_first = time.process_time()
    if 0 < consumed < n:
        inside.append((t, consumed))
    if consumed >= n:
        last = t
        cpu_last = thread_cpu()
        machine_last = machine_times()
        faults_last = page_faults()
        observer_last = time.process_time()
        break
    time.sleep(0.02)
if last is None:
    sys.exit("sketchd did not consume every message in time")
if output:  # the forward path: until every first-seen event is delivered
    delivered = False
    while time.time() < deadline:
        text = scrape()
        if value(text, "sketchd_dedup_forwarded_total") >= value(text, "sketchd_dedup_first_seen_total") > 0:
            last = time.monotonic()
            delivered = True
            break
        time.sleep(0.02)
    if not delivered:
        sys.exit("sketchd did not forward every first-seen event in time")
if last == first:
    sys.exit(f"N={n} is too small to measure: every message was consumed between two scrapes"
             " (20 ms apart); use a larger N")
with open(threads_file, "w") as f:  # CPU ns per message by thread, while consuming
    f.write(" ".join(f"{k}={(cpu_last[k] - cpu_first[k]) / n * 1e9:.0f}" for k in cpu_last))
    f.write(f" observer={(observer_last - observer_first) / n * 1e9:.0f}")
    f.write(f"; page faults {faults_last[0] - faults_first[0]} minor, {faults_last[1] - faults_first[1]} major")
    cpu_seconds = (last - first) * os.cpu_count()
    f.write(f"; machine idle {(machine_last[0] - machine_first[0]) / cpu_seconds:.0%}"
            f", steal {(machine_last[1] - machine_first[1]) / cpu_seconds:.0%}")
    # Between the first and the last scrape that saw the count move, both taken at known
    # times: the rate without the scrape interval's rounding at either end.
    if len(inside) >= 2 and inside[-1][1] > inside[0][1]:
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        f.write(f"; between scrapes {(c1 - c0) / (t1 - t0):.0f} msg/s over {c1 - c0:.0f} messages")
    f.write("\n")
print(f"{n / (last - first):.0f}")
EOF
  kill -TERM "$pid"
  wait "$pid" || true
  return "$status"
}

# bare_rate MODE GROUP [ARGS…]: runs kafka_bare (or $BARE), prints its rate in msg/s (its
# whole output stays in $work/GROUP.out).
bare_rate() {
  local mode=$1 group=$2
  shift 2
  "${client_cpu[@]}" "${BARE:-$bare}" "$mode" --brokers "$bootstrap" --topic in --group "$group" --count "$n" "$@" >"$work/$group.out" || return
  sed -n 's/^rate: \([0-9]*\).*/\1/p' "$work/$group.out"
}

declare -A rates
for r in $(seq "$repeat"); do
  rates[bare_consume]+=" $(bare_rate consume "bare-consume-$r")"
  rates[bare_libc]+=" $(BARE=$bare_libc bare_rate consume "bare-libc-$r")"
  # With OTHER_SKETCHD, the two builds take turns at going first.
  if [[ -n $other ]] && ((r % 2 == 0)); then rates[other]+=" $(SKETCHD=$other sketchd_rate "other-$r" "")"; fi
  rates[sketchd]+=" $(sketchd_rate "sketchd-$r" "")"
  rates[sketchd_key]+=" $(sketchd_rate "key-$r" "" "{ from: key }")"
  if [[ -n $other ]]; then
    if ((r % 2 == 1)); then rates[other]+=" $(SKETCHD=$other sketchd_rate "other-$r" "")"; fi
    echo "round $r: sketchd ${rates[sketchd]##* }, other build ${rates[other]##* } (msg/s); CPU ns per message by thread: other build $(cat "$work/other-$r.threads")"
  fi
  rates[bare_pipe]+=" $(bare_rate pipe "bare-pipe-$r" --output pipe)"
  rates[sketchd_forward]+=" $(sketchd_rate "forward-$r" "out-$r")"
  echo "round $r: bare consume ${rates[bare_consume]##* }, bare libc ${rates[bare_libc]##* }, sketchd ${rates[sketchd]##* }, sketchd key ${rates[sketchd_key]##* }, bare pipe ${rates[bare_pipe]##* }, sketchd forward ${rates[sketchd_forward]##* } (msg/s)"
  echo "         CPU ns per message by thread: sketchd $(cat "$work/sketchd-$r.threads")"
  echo "                                       sketchd key $(cat "$work/key-$r.threads")"
  echo "                                       bare consumer $(sed -n 's/^cpu ns per message: //p' "$work/bare-consume-$r.out")"
  echo "                                       bare libc $(sed -n 's/^cpu ns per message: //p' "$work/bare-libc-$r.out")"
done

python3 - "${rates[bare_consume]}" "${rates[sketchd]}" "${rates[bare_pipe]}" "${rates[sketchd_forward]}" \
  "${rates[bare_libc]}" "${rates[other]:-}" "${rates[sketchd_key]}" <<'EOF'
import statistics, sys
bare_c, sk, bare_p, fwd, bare_l, other, key = ([float(x) for x in a.split()] for a in sys.argv[1:8])
def row(name, xs):
    return f"| {name} | {statistics.median(xs):,.0f} | {min(xs):,.0f}–{max(xs):,.0f} |"
print("\n| run | median msg/s | range |\n|---|---|---|")
for name, xs in (("bare consumer", bare_c), ("bare consumer, glibc's allocator", bare_l),
                 ("sketchd (heavy hitters + dedup)", sk),
                 *((("the other build of sketchd (OTHER_SKETCHD)", other),) if other else ()),
                 ("sketchd, the item from the key (no JSON)", key),
                 ("bare consume-produce pipe", bare_p), ("sketchd forwarding first-seen", fwd)):
    print(row(name, xs))
c = statistics.median(sk) / statistics.median(bare_c)
f = statistics.median(fwd) / statistics.median(bare_p)
per_round = [a / b for a, b in zip(sk, bare_c)]
print("\nsketchd / bare consumer, round by round: "
      + ", ".join(f"{x:.2f}" for x in per_round)
      + f"; median {statistics.median(per_round):.2f}, range {min(per_round):.2f}–{max(per_round):.2f}")
print(f"sketchd / bare consumer, ratio of the medians: {c:.0%} (goal ≥ 95%: {'met' if c >= 0.95 else 'not met'})")
print(f"sketchd forward / bare pipe: {f:.0%} (goal ≥ 85%: {'met' if f >= 0.85 else 'not met'})")
if other:
    print(f"the other build / bare consumer: {statistics.median(other) / statistics.median(bare_c):.0%}; "
          f"this build faster in {sum(a > b for a, b in zip(sk, other))} of {len(sk)} rounds")
print(f"sketchd with the item from the key / bare consumer: {statistics.median(key) / statistics.median(bare_c):.0%}"
      " (not a goal: the share of the JSON extraction)")
print(f"sketchd / bare consumer on glibc's allocator: {statistics.median(sk) / statistics.median(bare_l):.0%}"
      " (not a goal: the baselines above use sketchd's allocator)")
EOF
