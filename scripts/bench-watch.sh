#!/usr/bin/env bash
# Watch streams under load (issue #15, BENCHMARKS.md "Issue #15: watch streams"). Two parts, each
# on a fresh `dcm serve --dev` (release build) per run, RUNS times:
#
# 1. Fan-out cost: SUBJECT watchers of one provider's events (`/events?watch=true&subject=`) and
#    ALL watchers of every event, during RATE writes/s (RATE-10 new registrations, 10 updates of
#    the watched provider) for DURATION s after WARMUP s. Per scale (0/0, 100/10, 500/50,
#    1000/100 watchers by default): delivery latency p50/p99 (event `time` to receipt, per
#    message), dcm CPU (% of one core over the writes) and RSS (VmRSS at the end, VmHWM peak).
# 2. Storm: wrk -c64 registrations (tests/bench/register.lua) for STORM s, alternating without
#    watchers and with STORM_WATCHERS watchers of `/events` plus one that never reads. The watches
#    carry `since`/`until` around the storm, so each must end with exactly the events that
#    `GET /events` lists for that range; the stalled one must be cut off. Prints req/s of both and
#    their ratio, and dcm's VmHWM.
#
#   ninja -C build-bench dcm watch_load && RUNS=3 ./scripts/bench-watch.sh
#   PART=storm RUNS=5 ./scripts/bench-watch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
DCM=${DCM:-build-bench/src/dcm}
LOAD=${LOAD:-build-bench/tests/bench/watch_load}
RUNS=${RUNS:-3}
PART=${PART:-all}
RATE=${RATE:-200}
WARMUP=${WARMUP:-5}
DURATION=${DURATION:-20}
SCALES=${SCALES:-"0:0 100:10 500:50 1000:100"}
STORM=${STORM:-10}
STORM_WATCHERS=${STORM_WATCHERS:-20}
PORT=${PORT:-18191}
URL="http://127.0.0.1:$PORT"
API="$URL/api/v1alpha1"
TICKS=$(getconf CLK_TCK)
OUT=$(mktemp -d /tmp/bench-watch-XXXXXX)
for b in "$DCM" "$LOAD"; do
  [ -x "$b" ] || { echo "not executable: $b (ninja -C build-bench dcm watch_load)" >&2; exit 1; }
done
echo "results in $OUT"
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; true' EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# "<thread name> <ticks>" per thread name of process $1.
thread_ticks() {
  for t in /proc/"$1"/task/*/stat; do
    sed -E 's/^[0-9]+ \((.*)\) . (.*)$/\1|\2/' "$t" 2>/dev/null |
      awk -F'|' '{split($2, f, " "); gsub(/ /, "_", $1); print $1, f[11] + f[12]}'
  done | awk '{s[$1] += $2} END {for (k in s) print k, s[k]}' | sort
}
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
iso_ms() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.%3NZ; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "n/a")}'; }

start_serve() {
  rm -rf "$OUT/data"
  DCM_MAX_CONNECTIONS_PER_CLIENT=0 "$DCM" serve --dev --listen "127.0.0.1:$PORT" \
    --data-dir "$OUT/data" --http-threads 1 >"$OUT/serve.out" 2>&1 &
  PID=$!
  wait_ready
}
stop_serve() { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }

# Part 1 at one scale: $1 subject watchers, $2 all-event watchers; appends a result line.
fanout_run() {
  local subj=$1 all=$2 t0 t1 json
  start_serve
  curl -sf -XPOST "$API/providers?id=watched" -H 'Content-Type: application/json' \
    -d '{"name":"watched-watched","endpoint":"http://127.0.0.1:9/api","service_type":"vm"}' \
    >/dev/null
  local args=(--port "$PORT" --warmup "$WARMUP" --duration "$((WARMUP + DURATION))"
    --register-rate "$((RATE - 10))" --update-id watched --update-rate 10)
  [ "$subj" -gt 0 ] && args+=(--watch "/api/v1alpha1/events?watch=true&subject=watched"
    --count "$subj")
  [ "$all" -gt 0 ] && args+=(--watch "/api/v1alpha1/events?watch=true" --count "$all")
  "$LOAD" "${args[@]}" >"$OUT/load.json" &
  local load=$!
  sleep $((2 + WARMUP))  # watches connect (1.5 s), then the writes warm up
  t0=$(cpu_ticks "$PID")
  sleep "$DURATION"
  t1=$(cpu_ticks "$PID")
  local rss hwm
  rss=$(status_kb "$PID" VmRSS)
  hwm=$(status_kb "$PID" VmHWM)
  wait "$load"
  stop_serve
  json=$(cat "$OUT/load.json")
  python3 - "$subj" "$all" "$t0" "$t1" "$TICKS" "$DURATION" "$rss" "$hwm" "$json" \
    <<'EOF' | tee -a "$OUT/fanout"
import json, sys
subj, all_, t0, t1, ticks, dur, rss, hwm = map(float, sys.argv[1:9])
r = json.loads(sys.argv[9])
g = {x["path"].endswith("subject=watched") and "subject" or "all": x for x in r["groups"]}
def lat(k, p): return g[k]["latency_ms"][p] if k in g else 0
def per(k): return g[k]["per_connection_min"] if k in g else 0
print(f"subject={int(subj)} all={int(all_)} cpu_pct={(t1 - t0) / ticks / dur * 100:.1f} "
      f"rss_mib={rss / 1024:.1f} hwm_mib={hwm / 1024:.1f} "
      f"subject_p50={lat('subject', 'p50')} subject_p99={lat('subject', 'p99')} "
      f"all_p50={lat('all', 'p50')} all_p99={lat('all', 'p99')} "
      f"subject_msgs_per_conn={per('subject')} all_msgs_per_conn={per('all')} "
      f"writes_ok={r['registrations']['ok'] + r['updates']['ok']} "
      f"writes_failed={r['registrations']['failed'] + r['updates']['failed']}")
EOF
}

# Counts the events GET /events lists between $1 and $2 (RFC 3339), following page tokens.
count_events() {
  python3 - "$API" "$1" "$2" <<'EOF'
import json, sys, urllib.parse, urllib.request
api, since, until = sys.argv[1:4]
n, token = 0, ""
while True:
    q = {"since": since, "until": until, "max_page_size": "100"}
    if token: q["page_token"] = token
    with urllib.request.urlopen(f"{api}/events?{urllib.parse.urlencode(q)}") as r:
        page = json.load(r)
    n += len(page["events"])
    token = page.get("next_page_token") or ""
    if not token: break
print(n)
EOF
}

# Part 2, one run: $1 = 0 (no watchers) or 1 (STORM_WATCHERS + 1 stalled); appends a result line.
storm_run() {
  local with=$1 now since until load="" rps hwm listed json
  start_serve
  now=$(date +%s.%N)
  since=$(iso_ms "$now")
  until=$(iso_ms "$(echo "$now + $STORM + 6" | bc)")
  if [ "$with" = 1 ]; then
    local path="/api/v1alpha1/events?watch=true&since=$since&until=$until"
    "$LOAD" --port "$PORT" --duration "$((STORM + 6))" --drain 120 --watch "$path" \
      --count "$STORM_WATCHERS" --stalled "$path" --count 1 >"$OUT/storm.json" &
    load=$!
    sleep 1.5
  fi
  wrk -t1 -c64 -d2s -s tests/bench/register.lua "$URL" >/dev/null  # warm-up
  thread_ticks "$PID" >"$OUT/threads.before"
  local t0 t1
  t0=$(cpu_ticks "$PID")
  rps=$(wrk -t1 -c64 -d"${STORM}s" -s tests/bench/register.lua "$URL" |
    awk '/Requests\/sec/ {print $2}')
  t1=$(cpu_ticks "$PID")
  thread_ticks "$PID" >"$OUT/threads.after"
  # The busiest threads over the storm, in % of one core.
  echo "threads (watchers=$with): $(join "$OUT/threads.before" "$OUT/threads.after" |
    awk -v t="$TICKS" -v d="$STORM" '{printf "%s %.0f\n", $1, ($3 - $2) / t / d * 100}' |
    sort -k2 -nr | head -8 | tr '\n' ' ')" >>"$OUT/threads"
  hwm=$(status_kb "$PID" VmHWM)
  if [ -n "$load" ]; then
    wait "$load"
    sleep 1
    listed=$(count_events "$since" "$until")
    json=$(cat "$OUT/storm.json")
  else
    listed=0 json='{}'
  fi
  stop_serve
  python3 - "$with" "$rps" "$hwm" "$listed" "$json" "$t0" "$t1" "$TICKS" "$STORM" \
    <<'EOF' | tee -a "$OUT/storm"
import json, sys
with_, rps, hwm, listed, r = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
t0, t1, ticks, dur = map(float, sys.argv[6:10])
line = (f"watchers={with_} rps={rps:.0f} hwm_mib={hwm / 1024:.1f} "
        f"dcm_cpu_pct={(t1 - t0) / ticks / dur * 100:.0f}")
if with_ == "1":
    g = r["groups"][0]
    line += (f" listed={listed} per_watcher_min={g['per_connection_min']} "
             f"per_watcher_max={g['per_connection_max']} ended={g['ended']}/{g['connections']} "
             f"stalled_cut_off={r['stalled_cut_off']}/{r['stalled']} "
             f"lossless={g['per_connection_min'] == g['per_connection_max'] == listed} "
             f"p50={g['latency_ms']['p50']} p99={g['latency_ms']['p99']} "
             f"watch_load_cpu_s={r['cpu_s']}")
print(line)
EOF
}

if [ "$PART" = all ] || [ "$PART" = fanout ]; then
  for run in $(seq 1 "$RUNS"); do
    for scale in $SCALES; do
      echo -n "fanout run $run: "
      fanout_run "${scale%%:*}" "${scale##*:}"
    done
  done
  echo "== fan-out medians of $RUNS"
  for scale in $SCALES; do
    s=${scale%%:*} a=${scale##*:}
    line="subject=$s all=$a"
    for k in cpu_pct hwm_mib subject_p50 subject_p99 all_p50 all_p99; do
      v=$(grep "^subject=$s all=$a " "$OUT/fanout" | grep -o " $k=[^ ]*" | cut -d= -f2 | median)
      line+=" $k=$v"
    done
    echo "$line"
  done
fi

if [ "$PART" = all ] || [ "$PART" = storm ]; then
  for run in $(seq 1 "$RUNS"); do
    echo -n "storm run $run: "; storm_run 0
    echo -n "storm run $run: "; storm_run 1
  done
  without=$(grep '^watchers=0' "$OUT/storm" | grep -o 'rps=[^ ]*' | cut -d= -f2 | median)
  with=$(grep '^watchers=1' "$OUT/storm" | grep -o 'rps=[^ ]*' | cut -d= -f2 | median)
  echo "== storm medians of $RUNS: without watchers $without req/s, with $with req/s," \
    "ratio $(echo "scale=2; $with / $without" | bc)"
  cat "$OUT/threads"
fi
