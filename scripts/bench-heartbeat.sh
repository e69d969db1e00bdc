#!/usr/bin/env bash
# Reproduces the heartbeat figures of BENCHMARKS.md (issue #14): 20,000 providers with
# `liveness: heartbeat` beating every 5 s (4,000 beats/s) against one `dcm serve`, then unpaced to
# find how many it holds. Kafka (`dcm dev-kafka`) and the load (wrk) run in their own processes.
# Prints one JSON line per run (tests/bench/heartbeat_bench.py); quote the medians.
#   RUNS=3 WINDOW=60 ./scripts/bench-heartbeat.sh
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
RUNS=${RUNS:-3}
WINDOW=${WINDOW:-60}
BUILD=${BUILD_DIR:-build-bench}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target dcm
for run in $(seq 1 "$RUNS"); do
  echo "== 20,000 heartbeat providers at 5 s, run $run =="
  python3 tests/bench/heartbeat_bench.py --dcm "$BUILD/src/dcm" --providers 20000 \
    --window "$WINDOW"
done
echo "== growth: 100,000 heartbeat providers at 5 s (20,000 beats/s), once =="
python3 tests/bench/heartbeat_bench.py --dcm "$BUILD/src/dcm" --providers 100000 \
  --connections 200 --window "$WINDOW"
