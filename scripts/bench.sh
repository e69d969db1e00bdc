#!/usr/bin/env bash
# Reproduces BENCHMARKS.md: registration throughput/latency and GET throughput with wrk against
# `dcm serve --dev`, and replay throughput with tests/bench/replay_bench. Runs each figure
# RUNS times (default 3) and prints every run; quote the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
BUILD=${BUILD_DIR:-build-bench}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target dcm replay_bench
DCM="$BUILD/src/dcm"
PORT=${PORT:-18090}
URL="http://127.0.0.1:$PORT"

start_dcm() {
  "$DCM" serve --dev --listen "127.0.0.1:$PORT" --http-threads 1 >/tmp/dcm-bench.out 2>/tmp/dcm-bench.err &
  DCM_PID=$!
  for _ in $(seq 1 100); do curl -sf "$URL/readyz" >/dev/null && break; sleep 0.1; done
  # The registrar's first group join takes ~3 s on the mock: wait until it owns the partition.
  for _ in $(seq 1 100); do
    curl -s "$URL/admin/info" | grep -q '"registrar_owner":true' && break; sleep 0.1
  done
}
stop_dcm() { kill "$DCM_PID"; wait "$DCM_PID" 2>/dev/null || true; }

echo "== registration: POST /providers, 64 connections, read-your-writes =="
for run in $(seq 1 "$RUNS"); do
  start_dcm
  wrk -t1 -c64 -d3s -s tests/bench/register.lua "$URL" >/dev/null  # warm-up
  wrk -t1 -c64 -d"$DURATION" --latency -s tests/bench/register.lua "$URL" |
    grep -E "Requests/sec|^ +(50|99)%|Non-2xx" | tr -s ' ' | paste -sd' ' | sed "s/^/run $run: /"
  stop_dcm
done

echo "== GET /providers/{id} and GET /providers, 64 connections =="
for run in $(seq 1 "$RUNS"); do
  start_dcm
  IDS_FILE=$(mktemp)
  for i in $(seq 1 1000); do
    curl -s -X POST "$URL/api/v1alpha1/providers" -H 'Content-Type: application/json' \
      -d "{\"name\":\"get-$i\",\"endpoint\":\"http://127.0.0.1:9/x\",\"service_type\":\"vm\"}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' >>"$IDS_FILE"
  done
  IDS_FILE=$IDS_FILE wrk -t1 -c64 -d"$DURATION" --latency -s tests/bench/get_by_id.lua "$URL" |
    grep -E "Requests/sec|^ +(50|99)%|Non-2xx" | tr -s ' ' | paste -sd' ' | sed "s/^/run $run by id: /"
  wrk -t1 -c64 -d"$DURATION" --latency "$URL/api/v1alpha1/providers?max_page_size=10" |
    grep -E "Requests/sec|^ +(50|99)%|Non-2xx" | tr -s ' ' | paste -sd' ' | sed "s/^/run $run list(10): /"
  rm -f "$IDS_FILE"
  stop_dcm
done

echo "== replay: events/s folded from offset 0 =="
"$BUILD/tests/bench/replay_bench" --events="${EVENTS:-300000}" --benchmark_repetitions="$RUNS" \
  --benchmark_report_aggregates_only=false 2>/dev/null | grep -E "BM_"
