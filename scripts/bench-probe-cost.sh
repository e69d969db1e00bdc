#!/usr/bin/env bash
# What one periodic health probe costs, per thread of `dcm serve --dev` (issue #16: the write
# path's p99 at the default 10 s interval is set by the re-probes of the warm-up's providers).
#
# Per run: a fresh `dcm serve --dev --http-threads 1 --health-check-interval INTERVAL`, with
# failures never counted as Unavailable (so every provider stays on the interval, no backoff),
# N providers registered through tests/bench/register.lua, SETTLE seconds, then SECS seconds of
# probes only (no registrations). It prints the probes the window saw (dcm_probes_total), the
# process's CPU per probe and the CPU per probe of each thread (by thread name; the embedded mock
# broker's rdk:* threads are in the process). Medians of RUNS runs at the end.
#
#   ./scripts/bench-probe-cost.sh                      # N=6000 INTERVAL=2s: ~3,000 probes/s
#   RUNS=5 DCM=/work/baseline/build-bench/src/dcm ./scripts/bench-probe-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
DCM=${DCM:-build-bench/src/dcm}
RUNS=${RUNS:-3}
N=${N:-6000}
INTERVAL=${INTERVAL:-2s}
SETTLE=${SETTLE:-5}
SECS=${SECS:-10}
PORT=${PORT:-18191}
URL="http://127.0.0.1:$PORT"
OUT=$(mktemp -d /tmp/bench-probe-cost-XXXXXX)
[ -x "$DCM" ] || { echo "not executable: $DCM (build it: ninja -C build-bench dcm)" >&2; exit 1; }

# Ticks (utime + stime) per thread name of process $1, one "name<TAB>ticks" line each.
thread_ticks() {
  python3 - "$1" <<'EOF'
import collections, os, sys
acc = collections.Counter()
for t in os.listdir(f"/proc/{sys.argv[1]}/task"):
    try:
        s = open(f"/proc/{sys.argv[1]}/task/{t}/stat").read()
    except OSError:
        continue
    f = s[s.rindex(")") + 2:].split()
    acc[s[s.index("(") + 1:s.rindex(")")]] += int(f[11]) + int(f[12])
for name, ticks in sorted(acc.items()):
    print(f"{name}\t{ticks}")
EOF
}
probes() { curl -s "$URL/metrics" | awk '/^dcm_probes_total/ {s += $2} END {print s + 0}'; }

for run in $(seq 1 "$RUNS"); do
  "$DCM" serve --dev --listen "127.0.0.1:$PORT" --http-threads 1 \
    --health-check-interval "$INTERVAL" --health-check-max-consecutive-failures 1000 \
    >"$OUT/serve.out" 2>"$OUT/serve.err" &
  pid=$!
  wait_ready
  MAX_PER_THREAD=$N wrk -t1 -c16 -d60s -s tests/bench/register.lua "$URL" >/dev/null
  sleep "$SETTLE"
  p0=$(probes)
  thread_ticks "$pid" >"$OUT/t0"
  sleep "$SECS"
  p1=$(probes)
  thread_ticks "$pid" >"$OUT/t1"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 - "$OUT/t0" "$OUT/t1" "$((p1 - p0))" "$(getconf CLK_TCK)" "$run" "$SECS" <<'EOF' |
import sys
def read(path):
    return {l.split("\t")[0]: int(l.split("\t")[1]) for l in open(path) if l.strip()}
t0, t1 = read(sys.argv[1]), read(sys.argv[2])
n, ticks, run, secs = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], float(sys.argv[6])
us = {k: (t1[k] - t0.get(k, 0)) / ticks * 1e6 / max(n, 1) for k in t1}
print(f"run {run}: {n / secs:.0f} probes/s cpu {sum(us.values()):.1f} us/probe")
for k, v in sorted(us.items(), key=lambda kv: -kv[1]):
    if v >= 0.5:
        print(f"run {run}:   {k:<16} {v:6.1f} us/probe")
EOF
    tee -a "$OUT/runs"
done
echo "== medians of $RUNS runs =="
python3 - "$OUT/runs" <<'EOF'
import collections, re, statistics, sys
total, per = [], collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"run \d+: (\d+) probes/s cpu ([\d.]+) us/probe", line)
    if m:
        total.append(float(m.group(2)))
        continue
    m = re.match(r"run \d+:\s+(\S+)\s+([\d.]+) us/probe", line)
    if m:
        per[m.group(1)].append(float(m.group(2)))
print(f"cpu per probe: {statistics.median(total):.1f} us")
for k, v in sorted(per.items(), key=lambda kv: -statistics.median(kv[1])):
    print(f"  {k:<16} {statistics.median(v):6.1f} us")
EOF
rm -rf "$OUT"
