#!/usr/bin/env bash
# Configuration errors stop sketchd before anything starts.
#   - `sketchd check-config` on a file with seven errors (a bad count, an unknown key with
#     a suggestion, a bad duration, two values out of range, an unknown enum value, an
#     unset environment variable) prints exactly those seven, as FILE:LINE:COL: lines at
#     the right positions, and exits 1; a YAML syntax error and a missing file exit 1 too.
#     With --format json: one JSON object on stdout with the same problems at the same
#     positions (null ones for a missing file) and the same exit status.
#   - `sketchd run --config` on the same file exits 1 with the same lines and nothing
#     else, even while its HTTP port is taken: it never got as far as binding it.
#   - A valid configuration whose HTTP port is taken: exit 1 and a message that names the
#     address, promptly.
#   - config/demo.yaml and config/example.yaml are valid (exit 0).
#   - Missing arguments are usage errors (exit 2).
#   - stdout or stderr on a full disk: exit 1 (2 for a usage error), never an abort.
#   - A valid configuration whose sketches need more memory than the machine has: exit 1
#     at once with the figures.
#
# Usage: daemon_config_test.sh PATH/TO/sketchd
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_init "$@"
config_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../config" && pwd)

port=$(free_port)
cd "$work"
unset ITEST_SURELY_UNSET_VARIABLE
cat >bad.yaml <<EOF
kafka:
  brokers: "127.0.0.1:1"
  group_id: "\${ITEST_SURELY_UNSET_VARIABLE}"
  batch_size: lots
http:
  listen: "127.0.0.1:$port"
  lisen: "127.0.0.1:1"
pipelines:
  - name: clicks
    topics: [events]
    item: { from: json, path: /user/id }
    heavy_hitters:
      window: 5 minutes
      epsilon: 2
      threshold: 0.01
    dedup:
      capacity: 1M
      fpr: 0.7
log: { level: loud }
EOF
# LINE:COL and a pattern of each expected message (the value's position, the "${" of an
# unset variable, or the key's for an unknown key).
cat >expected <<'EOF'
3:14 kafka\.group_id.*ITEST_SURELY_UNSET_VARIABLE
4:15 kafka\.batch_size.*lots
7:3 "lisen".*did you mean "listen"
13:15 pipelines\[0\]\.heavy_hitters\.window.*5 minutes
14:16 pipelines\[0\]\.heavy_hitters\.epsilon
18:12 pipelines\[0\]\.dedup\.fpr
19:15 log\.level.*loud
EOF

# check_errors FILE: FILE holds exactly the expected lines, in order of position.
check_errors() {
  local file=$1
  local want have
  want=$(wc -l <expected)
  have=$(grep -c . "$file" || true)
  [[ $have -eq $want ]] || { cat "$file" >&2; fail "$have lines in ${file##*/}, expected the $want errors"; }
  local i=0 pos pattern line
  while read -r pos pattern; do
    i=$((i + 1))
    line=$(sed -n "${i}p" "$file")
    [[ $line == "bad.yaml:$pos: "* ]] || { cat "$file" >&2; fail "error $i is \"$line\", expected at bad.yaml:$pos"; }
    grep -Eq -- "$pattern" <<<"$line" || { cat "$file" >&2; fail "error $i \"$line\" does not match /$pattern/"; }
  done <expected
}

status=0
"$sketchd" check-config bad.yaml >check.out 2>check.err || status=$?
[[ $status -eq 1 ]] || fail "check-config on bad.yaml exited $status, expected 1"
check_errors check.err
log "check-config: exit 1, $(wc -l <check.err) errors at FILE:LINE:COL"

# The same as JSON for CI systems: one object on stdout, nothing on stderr, the same exit
# status, and the same problems at the same positions.
status=0
"$sketchd" check-config --format json bad.yaml >check.json 2>check-json.err || status=$?
[[ $status -eq 1 ]] || fail "check-config --format json on bad.yaml exited $status, expected 1"
[[ ! -s check-json.err ]] || fail "check-config --format json wrote to stderr: $(head -3 check-json.err)"
"$python" - check.json check.err <<'EOF' || fail "check-config --format json does not give the text's problems"
import json, sys
d = json.load(open(sys.argv[1]))
text = [l.rstrip("\n") for l in open(sys.argv[2])]
assert d["file"] == "bad.yaml" and d["valid"] is False and d["pipelines"] is None, d
as_text = [f'{p["file"]}:{p["line"]}:{p["column"]}: {p["message"]}' for p in d["problems"]]
assert all(p["severity"] == "error" for p in d["problems"]), d["problems"]
assert as_text == text, (as_text, text)
EOF

# `run` with the same file, while something else listens on its HTTP port: were the port
# bound (or anything started) before the configuration is checked, the output would say so.
start_background holder "$python" -c "
import socket, sys, time
s = socket.socket()
s.bind(('127.0.0.1', $port))
s.listen()
print('listening', flush=True)
time.sleep(120)"
for _ in $(seq 100); do
  grep -q listening "$work/holder.out" && break
  sleep 0.05
done
grep -q listening "$work/holder.out" || fail "could not hold port $port"

status=0
timeout 10 "$sketchd" run --config bad.yaml >run.out 2>run.err || status=$?
[[ $status -eq 1 ]] || fail "run --config bad.yaml exited $status, expected 1"
[[ ! -s run.out ]] || fail "run --config bad.yaml wrote to stdout: $(head -3 run.out)"
cmp -s check.err run.err || { diff check.err run.err >&2 || true; fail "run prints other errors than check-config"; }
log "run --config bad.yaml: exit 1, the same errors and nothing else (no bind, no Kafka)"

# A valid configuration, its port taken: a clear error and exit 1, not a hang.
sed -e '/ITEST_SURELY_UNSET_VARIABLE/d' -e '/batch_size/d' -e '/lisen/d' -e 's/5 minutes/5m/' \
  -e 's/epsilon: 2/epsilon: 0.001/' -e 's/fpr: 0.7/fpr: 0.001/' -e 's/loud/info/' bad.yaml >taken.yaml
"$sketchd" check-config taken.yaml >/dev/null 2>taken-check.err \
  || { cat taken-check.err >&2; fail "the corrected configuration is not valid"; }
status=0
timeout 20 "$sketchd" run --config taken.yaml >taken.out 2>taken.err || status=$?
[[ $status -eq 1 ]] || fail "run with a taken HTTP port exited $status, expected 1"
grep -q "cannot listen on 127.0.0.1:$port: Address already in use" taken.err \
  || { cat taken.err >&2; fail "the error does not say that 127.0.0.1:$port is in use"; }
log "a taken HTTP port: exit 1, \"$(grep -o 'cannot listen.*' taken.err | head -1)\""
# Said before anything else starts (the state lock, the clients): no other line before it.
[[ $(grep -c . taken.err) -le 3 ]] && ! grep -q 'embedded Kafka\|consuming topic' taken.err \
  || { cat taken.err >&2; fail "the taken port was found only after the start began"; }
# An address no interface of this machine has (TEST-NET-1): said so, not "in use". (Not
# where the kernel lets programs bind such addresses: net.ipv4.ip_nonlocal_bind.)
if [[ $(cat /proc/sys/net/ipv4/ip_nonlocal_bind 2>/dev/null || echo 0) == 0 ]]; then
sed "s/127.0.0.1:$port/192.0.2.1:$port/" taken.yaml >foreign.yaml
status=0
timeout 20 "$sketchd" run --config foreign.yaml >/dev/null 2>foreign.err || status=$?
[[ $status -eq 1 ]] || fail "run with a foreign http.listen address exited $status, expected 1"
grep -q "cannot listen on 192.0.2.1:$port: Cannot assign requested address (no network interface" \
  foreign.err || { cat foreign.err >&2; fail "the error does not say the address is not this machine's"; }
log "an address of no interface: exit 1, \"$(grep -o 'cannot listen.*' foreign.err | head -1)\""
fi
# A host name that does not resolve: said so, not "address in use".
sed "s/127.0.0.1:$port/nonexistent.invalid:$port/" taken.yaml >unresolved.yaml
status=0
# One try of one second per name server, no search domains: an offline machine whose name
# server does not answer would otherwise take longer than the limit.
RES_OPTIONS="timeout:1 attempts:1" LOCALDOMAIN="" \
  timeout 20 "$sketchd" run --config unresolved.yaml >/dev/null 2>unresolved.err || status=$?
[[ $status -eq 1 ]] || fail "run with an unresolvable http.listen host exited $status, expected 1"
grep -q "cannot resolve nonexistent.invalid" unresolved.err \
  || { cat unresolved.err >&2; fail "the error does not say that the host does not resolve"; }
log "an unresolvable HTTP host: exit 1, \"$(grep -o 'cannot listen.*' unresolved.err | head -1)\""

# A YAML syntax error and a missing file.
printf 'kafka:\n  brokers: [\n' >syntax.yaml
status=0
"$sketchd" check-config syntax.yaml >/dev/null 2>syntax.err || status=$?
[[ $status -eq 1 ]] || fail "check-config on a YAML syntax error exited $status, expected 1"
grep -Eq '^syntax\.yaml:[0-9]+:[0-9]+: ' syntax.err || { cat syntax.err >&2; fail "no FILE:LINE:COL for a syntax error"; }
status=0
"$sketchd" check-config missing.yaml >/dev/null 2>missing.err || status=$?
[[ $status -eq 1 ]] || fail "check-config on a missing file exited $status, expected 1"
grep -q '^missing\.yaml: ' missing.err || { cat missing.err >&2; fail "the missing file is not named"; }
log "YAML syntax error and missing file: exit 1 with the file named"

# The shipped configurations are valid.
for f in demo.yaml example.yaml; do
  status=0
  # state.dir in the test's own directory: the default /var/lib/sketchd may hold another
  # run's snapshot, or not be this user's to create (a note).
  SKETCHD_STATE_DIR="$PWD/state-$f" "$sketchd" check-config "$config_dir/$f" >"$f.out" 2>"$f.err" || status=$?
  [[ $status -eq 0 ]] || { cat "$f.err" >&2; fail "check-config config/$f exited $status, expected 0"; }
  [[ ! -s $f.err ]] || { cat "$f.err" >&2; fail "check-config config/$f printed errors"; }
done
log "config/demo.yaml and config/example.yaml: valid"
SKETCHD_STATE_DIR="$PWD/state-json" "$sketchd" check-config --format json "$config_dir/demo.yaml" \
  >valid.json || fail "check-config --format json on config/demo.yaml failed"
[[ $("$python" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["valid"], d["problems"], d["pipelines"] > 0)' valid.json) == "True [] True" ]] ||
  fail "check-config --format json on a valid file: $(cat valid.json)"
# A problem of the whole file (missing): null line and column.
status=0
"$sketchd" check-config --format json missing.yaml >missing.json || status=$?
[[ $status -eq 1 ]] || fail "check-config --format json on a missing file exited $status, expected 1"
[[ $("$python" -c 'import json, sys; p = json.load(open(sys.argv[1]))["problems"][0]; print(p["file"], p["line"], p["column"], p["severity"])' missing.json) == "missing.yaml None None error" ]] ||
  fail "check-config --format json on a missing file: $(cat missing.json)"
log "check-config --format json: the same problems, positions and exit status"

# A state.dir that run could not create: a file in its place is a problem.
touch not-a-dir
status=0
SKETCHD_STATE_DIR="$PWD/not-a-dir/state" "$sketchd" check-config "$config_dir/example.yaml" \
  >/dev/null 2>state-file.err || status=$?
[[ $status -eq 1 ]] || fail "check-config with state.dir under a file exited $status, expected 1"
# At the position of state.dir's value, as the file's own errors.
dir_line=$(grep -n '^  dir:' "$config_dir/example.yaml" | cut -d: -f1)
grep -q "^$config_dir/example.yaml:$dir_line:8: state.dir: $PWD/not-a-dir is not a directory: sketchd would not start\$" \
  state-file.err || { cat state-file.err >&2; fail "check-config does not say at state.dir that it cannot be a directory"; }
log "state.dir under a file: check-config exit 1, \"$(head -1 state-file.err)\""

# Usage errors: exit status 2 and one line.
for args in "run" "check-config" "run --config" "mock-kafka --topic events --topic events:2"; do
  status=0
  # shellcheck disable=SC2086  # the arguments are words on purpose
  "$sketchd" $args >/dev/null 2>usage.err || status=$?
  [[ $status -eq 2 ]] || fail "sketchd $args exited $status, expected 2 (usage error)"
  [[ $(wc -l <usage.err) -eq 1 ]] || fail "sketchd $args: the usage error is not one line: $(cat usage.err)"
done
log "usage errors: exit 2 with one line"

# A valid configuration whose sketches cannot fit in memory (16 pipelines of 65.5 GiB of
# Bloom filters each, 1 TiB in all, more than any machine this runs on): refused at once
# with the figures, exit 1 (it used to start zeroing memory until the OOM killer came).
{
  echo 'kafka: { brokers: "127.0.0.1:1" }'
  echo "http: { listen: \"127.0.0.1:$port\" }"
  echo 'pipelines:'
  for i in $(seq 16); do
    printf '  - { name: p%d, topics: [t], item: { from: key }, dedup: { window: 1h, capacity: 30G, fpr: 0.01 } }\n' "$i"
  done
} >huge.yaml
"$sketchd" check-config huge.yaml >/dev/null || fail "huge.yaml is not a valid configuration"
status=0
start_us=$(now_us)
timeout 20 "$sketchd" run --config huge.yaml >/dev/null 2>huge.err || status=$?
[[ $status -eq 1 ]] || { cat huge.err >&2; fail "run with 1 TiB of sketches exited $status, expected 1"; }
grep -q "sketches need at least 1.0[0-9]*e+03 GiB\|sketches need at least 10[0-9][0-9] GiB" huge.err \
  || { cat huge.err >&2; fail "run with 1 TiB of sketches: no message with the memory needed"; }
# At once: before any allocation (which would take minutes to zero, or be killed), so well
# under 10 s even on a busy machine under a sanitizer.
(($(now_us) - start_us < 10000000)) || fail "run with 1 TiB of sketches took more than 10 s to refuse"
log "1 TiB of sketches: refused at once: $(grep -o 'sketches need at least [^(]*' huge.err)"

# Output that cannot be written: the exit status says so, never an abort (it was SIGABRT:
# the failed write of an error line threw) nor a 0 for a verdict that was lost.
for case in "check-config bad.yaml:2>/dev/full:1" "run --config bad.yaml:2>/dev/full:1" \
  "check-config $config_dir/demo.yaml:>/dev/full:1" "--help:>/dev/full:1" "run:2>/dev/full:2"; do
  IFS=: read -r args redirect expected <<<"$case"
  status=0
  # shellcheck disable=SC2086  # the arguments are words on purpose
  if [[ $redirect == ">/dev/full" ]]; then
    "$sketchd" $args >/dev/full 2>write.err || status=$?
  else
    "$sketchd" $args >/dev/null 2>/dev/full || status=$?
  fi
  [[ $status -eq $expected ]] || fail "sketchd $args $redirect exited $status, expected $expected"
done
log "stdout or stderr on a full disk: exit 1 (2 for a usage error), no abort"
echo "PASS"
