#!/usr/bin/env bash
# Issue #16's write-path A/B in one command: the build before the change (OLD_DCM) against this
# one (NEW_DCM), alternating run by run (old, new, old, new, ...) so both see the same machine.
#
# Per run and build:
#   - registrations: a fresh `dcm serve --dev --http-threads 1`, wrk -c64 WARMUP (3 s) then
#     DURATION (10 s) with tests/bench/register.lua; prints req/s, p50, p99, non-2xx;
#   - dcm CPU per registration: utime+stime of the dcm process (/proc/PID/stat) over the measured
#     wrk run, divided by the requests wrk completed (the embedded mock broker's threads are in
#     the dcm process, so this includes the broker);
#   - broker messages per registration: the high watermarks of every topic (kcat -Q) before and
#     after the measured run, summed, divided by the requests;
# then, per build, the idle single-client latency: `dcm dev-kafka` in its own process, `dcm serve
# --dev --kafka-brokers <it>` WITHOUT --fetch-wait-max-ms, IDLE_POSTS (200) sequential curl POSTs,
# median and p99 of curl's time_total (IDLE_POSTS=0 skips it). Medians of every figure at the end.
#
#   RUNS=5 ./scripts/bench-write-path.sh
#   OLD_DCM=/work/baseline/build-bench/src/dcm NEW_DCM=build-bench/src/dcm PEER=1 ./scripts/...
#
# PEER=1 also runs ../shared/bench/peer-postgres/run.sh (pgbench, 64 clients) in the same session.
# PEER_EACH_RUN=1 also starts one PostgreSQL cluster as run.sh does (its schema, its 50,000 seed
# rows) and runs the same pgbench load (dcm_like.sql, 64 clients) for DURATION after each new run:
# the peer then sees the machine of the runs next to it, and each round gives a new/peer ratio.
# The cluster is stopped (a fast shutdown: a checkpoint) whenever dcm runs.
# This host's speed drifted by up to 40 % within minutes (BENCHMARKS.md, issue #16, session 22).
#
# HEALTH_INTERVAL=10m passes --health-check-interval to both builds' registration runs (not the
# idle runs). With the default 10 s, every provider registered in the first ~3 s of the warm-up
# is probed again inside the measured window (and those of the window's first seconds near its
# end): ~0.4 periodic probes per registration, which cost ~15 % of the CPU (BENCHMARKS.md,
# session 25). Their number depends on where the window sits, not on the registration path, so
# a longer interval holds them out; each registration's own immediate probe stays in.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
RUNS=${RUNS:-5}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
IDLE_POSTS=${IDLE_POSTS:-200}
PORT=${PORT:-18190}
OLD_DCM=${OLD_DCM:-/work/baseline/build-bench/src/dcm}
NEW_DCM=${NEW_DCM:-build-bench/src/dcm}
PEER_SCRIPT=${PEER_SCRIPT:-/work/shared/bench/peer-postgres/run.sh}
SERVE_ARGS=()
[ -n "${HEALTH_INTERVAL:-}" ] && SERVE_ARGS+=(--health-check-interval "$HEALTH_INTERVAL")
URL="http://127.0.0.1:$PORT"
TICKS=$(getconf CLK_TCK)
OUT=$(mktemp -d /tmp/bench-write-path-XXXXXX)
for b in "$OLD_DCM" "$NEW_DCM"; do
  [ -x "$b" ] || { echo "not executable: $b (build it: ninja -C <build-dir> dcm)" >&2; exit 1; }
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

PEER_DIR=$(dirname "$PEER_SCRIPT")
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_PORT=${PG_PORT:-55433}
PG_WORK=""
pg_up() {
  su postgres -c "$PG_BIN/pg_ctl -D $PG_WORK/data -w -o '-p $PG_PORT -k $PG_WORK \
    -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=512MB' \
    -l $PG_WORK/log start" >/dev/null
}
# A fast shutdown ends with a checkpoint, so no write-back or autovacuum of the peer's run
# overlaps the dcm runs after it (session 35 saw dcm's p99 triple beside a live cluster).
pg_down() { su postgres -c "$PG_BIN/pg_ctl -D $PG_WORK/data -w stop -m fast" >/dev/null; }
peer_start() {
  PG_WORK=$(mktemp -d)
  chown postgres "$PG_WORK"
  su postgres -c "$PG_BIN/initdb -D $PG_WORK/data" >/dev/null
  pg_up
  local psql=(psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres)
  "${psql[@]}" -f "$PEER_DIR/schema.sql" postgres 2>/dev/null
  "${psql[@]}" -c "insert into providers (id,name,endpoint,service_type,schema_version,metadata)
    select gen_random_uuid()::text, 'seed-'||g, 'https://x'||g, 'vm','v1alpha1',
    '{\"region_code\":\"us-east-1\"}' from generate_series(1,50000) g" postgres
  pg_down
}
peer_stop() {
  [ -n "$PG_WORK" ] || return 0
  pg_down 2>/dev/null || true
  rm -rf "$PG_WORK"
  PG_WORK=""
}
# One pgbench run of the peer's registration load (label: the run number).
peer_run() {
  local tps
  pg_up
  tps=$(pgbench -n -h 127.0.0.1 -p "$PG_PORT" -U postgres -c 64 -j 2 -T "${DURATION%s}" \
    -f "$PEER_DIR/dcm_like.sql" postgres 2>&1 | sed -nE 's/^tps = ([0-9.]+).*/\1/p')
  pg_down
  echo "peer run $1: $tps tps" | tee -a "$OUT/peer-each"
}
trap peer_stop EXIT

# Sum of the high watermarks of every partition of every topic at bootstrap $1.
sum_watermarks() {
  local boot=$1 args=() topic parts p
  while read -r topic parts; do
    for p in $(seq 0 $((parts - 1))); do args+=(-t "$topic:$p:-1"); done
  done < <(kcat -b "$boot" -L 2>/dev/null |
    sed -nE 's/^ *topic "([^"]+)" with ([0-9]+) partitions:.*/\1 \2/p' | grep -v '^__')
  kcat -b "$boot" -Q "${args[@]}" 2>/dev/null |
    awk '{for (i = 1; i <= NF; i++) if ($i == "offset") s += $(i + 1)} END {print s + 0}'
}

# One registration run of build $1 (label $2): prints one result line, appends it to $OUT/$2.
register_run() {
  local dcm=$1 label=$2 run=$3
  "$dcm" serve --dev --listen "127.0.0.1:$PORT" --http-threads 1 "${SERVE_ARGS[@]}" \
    >"$OUT/serve.out" 2>"$OUT/serve.err" &
  local pid=$!
  wait_ready
  local boot
  boot=$(sed -n 's/^kafka bootstrap servers: //p' "$OUT/serve.out")
  wrk -t1 -c64 -d"$WARMUP" -s tests/bench/register.lua "$URL" >/dev/null
  local marks0 cpu0 cpu1 marks1
  marks0=$(sum_watermarks "$boot")
  cpu0=$(cpu_ticks "$pid")
  wrk -t1 -c64 -d"$DURATION" --latency -s tests/bench/register.lua "$URL" >"$OUT/wrk.txt"
  cpu1=$(cpu_ticks "$pid")
  marks1=$(sum_watermarks "$boot")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 - "$OUT/wrk.txt" "$label" "$run" "$cpu0" "$cpu1" "$marks0" "$marks1" "$TICKS" \
    <<'EOF' | tee -a "$OUT/$label"
import re, sys
text = open(sys.argv[1]).read()
label, run = sys.argv[2], sys.argv[3]
cpu0, cpu1, m0, m1, ticks = (float(x) for x in sys.argv[4:9])
def ms(s):
    v, unit = re.match(r"([\d.]+)(us|ms|s)", s).groups()
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
n = int(re.search(r"(\d+) requests in", text).group(1))
p50 = ms(re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1))
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
cpu_us = (cpu1 - cpu0) / ticks * 1e6 / max(n, 1)
msgs = (m1 - m0) / max(n, 1)
print(f"{label} run {run}: {rps:.0f} req/s p50 {p50:.2f} ms p99 {p99:.2f} ms "
      f"cpu {cpu_us:.0f} us/reg msgs {msgs:.2f}/reg non2xx {bad.group(1) if bad else 0}")
EOF
}

# Idle single client against `dcm dev-kafka` (its own process, default fetch wait).
idle_run() {
  local dcm=$1 label=$2
  "$dcm" dev-kafka >"$OUT/kafka.out" 2>"$OUT/kafka.err" &
  local kpid=$!
  for _ in $(seq 1 100); do [ -s "$OUT/kafka.out" ] && break; sleep 0.1; done
  local boot
  boot=$(head -1 "$OUT/kafka.out")
  rm -rf "$OUT/data"
  "$dcm" serve --dev --kafka-brokers "$boot" --data-dir "$OUT/data" --listen "127.0.0.1:$PORT" \
    --http-threads 1 >"$OUT/serve.out" 2>"$OUT/serve.err" &
  local pid=$!
  wait_ready
  : >"$OUT/idle.txt"
  for i in $(seq 1 "$IDLE_POSTS"); do
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X POST \
      -H 'Content-Type: application/json' \
      -d "{\"name\":\"idle-$label-$i\",\"endpoint\":\"http://127.0.0.1:9/api/vm\",\"service_type\":\"vm\"}" \
      "$URL/api/v1alpha1/providers" >>"$OUT/idle.txt"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  kill "$kpid"
  wait "$kpid" 2>/dev/null || true
  python3 - "$OUT/idle.txt" "$label" <<'EOF' | tee -a "$OUT/idle-$label"
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
t = sorted(float(r[1]) * 1000 for r in rows)
bad = sum(1 for r in rows if r[0] != "201")
p99 = t[min(len(t) - 1, int(round(0.99 * (len(t) - 1))))]
print(f"{sys.argv[2]} idle: {len(t)} sequential POSTs p50 {statistics.median(t):.2f} ms "
      f"p99 {p99:.2f} ms non201 {bad}")
EOF
}

echo "== registrations: wrk -c64 $DURATION, alternating old/new, $RUNS runs each =="
echo "old: $OLD_DCM"
echo "new: $NEW_DCM"
echo "health check interval: ${HEALTH_INTERVAL:-the default (10s)}"
[ "${PEER_EACH_RUN:-0}" = 1 ] && peer_start
for run in $(seq 1 "$RUNS"); do
  register_run "$OLD_DCM" old "$run"
  register_run "$NEW_DCM" new "$run"
  if [ "${PEER_EACH_RUN:-0}" = 1 ]; then peer_run "$run"; fi
done
peer_stop
if [ "$IDLE_POSTS" -gt 0 ]; then
  echo "== idle single client against dcm dev-kafka ($IDLE_POSTS sequential POSTs) =="
  idle_run "$OLD_DCM" old
  idle_run "$NEW_DCM" new
fi
if [ "${PEER:-0}" = 1 ]; then
  echo "== PostgreSQL peer: $PEER_SCRIPT =="
  "$PEER_SCRIPT" | tee "$OUT/peer"
fi

echo "== medians =="
python3 - "$OUT" <<'EOF'
import os, re, statistics, sys
out = sys.argv[1]
def runs(label):
    path = os.path.join(out, label)
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path):
        m = re.search(r"(\d+) req/s p50 ([\d.]+) ms p99 ([\d.]+) ms cpu (\d+) us/reg msgs ([\d.]+)", line)
        if m:
            rows.append([float(x) for x in m.groups()])
    return rows
med = {}
for label in ("old", "new"):
    rows = runs(label)
    if not rows:
        continue
    cols = list(zip(*rows))
    med[label] = [statistics.median(c) for c in cols]
    r = med[label]
    print(f"{label}: {r[0]:.0f} req/s, p50 {r[1]:.2f} ms, p99 {r[2]:.2f} ms, "
          f"{r[3]:.0f} us CPU/registration, {r[4]:.2f} broker messages/registration "
          f"(median of {len(rows)})")
if "old" in med and "new" in med:
    print(f"new/old registrations/s: {med['new'][0] / med['old'][0]:.2f}x; "
          f"CPU per registration: {med['new'][3] / med['old'][3]:.2f}x")
peer = os.path.join(out, "peer")
if os.path.exists(peer) and "new" in med:
    tps = [float(m.group(1)) for m in re.finditer(r"register.*tps = ([\d.]+)", open(peer).read())]
    if tps:
        p = statistics.median(tps)
        print(f"PostgreSQL peer: {p:.0f} tps (median of {len(tps)}); new/peer: "
              f"{med['new'][0] / p:.2f}x; old/peer: {med['old'][0] / p:.2f}x")
each = os.path.join(out, "peer-each")
if os.path.exists(each) and "new" in med:
    peer = [float(x) for x in re.findall(r"peer run \d+: ([\d.]+) tps", open(each).read())]
    new = [r[0] for r in runs("new")]
    if peer:
        ratios = [n / p for n, p in zip(new, peer)]
        print(f"PostgreSQL peer after each new run: {statistics.median(peer):.0f} tps (median of "
              f"{len(peer)}: {', '.join(f'{p:.0f}' for p in peer)}); new/peer per run: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f}x")
for label in ("old", "new"):
    path = os.path.join(out, "idle-" + label)
    if os.path.exists(path):
        print(open(path).read().strip())
EOF
rm -rf "$OUT"
