#!/usr/bin/env bash
# Issue #13 (SPEC §7): heavy reads run off the I/O threads. Loads PROVIDERS (10,000) providers
# into `dcm serve --dev` with tests/bench/register.lua, then floods it with
# `GET /providers?as_of=T` (every provider's events folded again: tests/bench/as_of_list.lua)
# from 16 connections, and measures meanwhile, one after the other, `GET /healthz` and
# `GET /providers/{id}` (tests/bench/get_by_id.lua over 1,000 ids) with wrk -c2 --latency.
# Each of RUNS (3) runs measures both light loads without the flood, then under it.
#   scripts/bench-heavy-reads.sh                     # build/src/dcm
#   DCM=/path/to/other/dcm scripts/bench-heavy-reads.sh   # e.g. a build before the pool
# Prints one line per measurement (p50/p99 in ms, req/s, non-2xx); quote the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
PROVIDERS=${PROVIDERS:-10000}
LIGHT=${LIGHT:-10s}       # each light measurement
DCM=${DCM:-build/src/dcm}
PORT=${PORT:-18480}
URL="http://127.0.0.1:$PORT"
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

"$DCM" serve --dev --no-health-check --listen "127.0.0.1:$PORT" --log-level warn \
  >"$WORK/serve.out" 2>"$WORK/serve.err" &
for _ in $(seq 1 200); do curl -sf "$URL/readyz" >/dev/null && break; sleep 0.1; done

applied() {
  curl -s "$URL/admin/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["registry_events_applied"])'
}
# Two threads of 8 connections, each thread stopping after PROVIDERS/2 answers (a few more may
# be in flight when it stops; wrk itself runs out its -d); then top up if any failed.
MAX_PER_THREAD=$((PROVIDERS / 2)) wrk -t2 -c16 -d45s -s tests/bench/register.lua "$URL" >/dev/null
while [ "$(applied)" -lt "$PROVIDERS" ]; do
  MAX_PER_THREAD=$((PROVIDERS - $(applied))) wrk -t1 -c1 -d5s -s tests/bench/register.lua \
    "$URL" >/dev/null
done
sleep 2
LOADED=$(applied)
export AS_OF
AS_OF=$(date -u +%Y-%m-%dT%H:%M:%S.000Z)
export IDS_FILE="$WORK/ids"
python3 - "$URL" "$IDS_FILE" <<'PY'
import json, sys, urllib.request
url, out = sys.argv[1], sys.argv[2]
ids, token = [], None
while len(ids) < 1000:
    q = "&page_token=" + token if token else ""
    page = json.load(urllib.request.urlopen(f"{url}/api/v1alpha1/providers?max_page_size=100{q}"))
    ids += [p["id"] for p in page["providers"]]
    token = page.get("next_page_token")
    if not token:
        break
open(out, "w").write("\n".join(ids) + "\n")
PY
ONE=$( { time -p curl -s -o /dev/null "$URL/api/v1alpha1/providers?max_page_size=100&as_of=$AS_OF"; } 2>&1 | awk '/real/ {print $2}')
echo "dcm: $DCM; providers (registry events applied): $LOADED; one as_of list alone: ${ONE}s"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# wrk --latency output -> "p50=.. p99=.. rps=.. non2xx=.." (latencies in ms)
summary() {
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    $1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) }
    /Requests\/sec/ { rps = $2 } /Non-2xx/ { non = $5 } /Socket errors/ { err = $0 }
    END { printf "p50=%.2fms p99=%.2fms rps=%s non2xx=%s %s\n", p50, p99, rps, non + 0, err }'
}
light() {  # light NAME: /healthz then GET by id, LIGHT each
  echo "  $1 healthz: $(wrk -t1 -c2 -d"$LIGHT" --latency "$URL/healthz" | summary)"
  echo "  $1 by-id:   $(wrk -t1 -c2 -d"$LIGHT" --latency -s tests/bench/get_by_id.lua "$URL" | summary)"
}
SECS=${LIGHT%s}
for run in $(seq 1 "$RUNS"); do
  echo "run $run (load $(cut -d' ' -f1 /proc/loadavg))"
  light idle
  wrk -t2 -c16 -d$((2 * SECS + 4))s --latency -s tests/bench/as_of_list.lua "$URL" \
    >"$WORK/flood.$run" &
  FLOOD=$!
  sleep 2
  light flood
  wait "$FLOOD"
  echo "  flood as_of: $(summary <"$WORK/flood.$run")"
done
echo "server metrics: $(curl -s "$URL/metrics" | grep -E '^dcm_http_heavy_reads_total|^dcm_http_heavy_read_wait_seconds_(sum|count)' | tr '\n' ' ')"
