#!/usr/bin/env bash
# Reproduces the prober figures of BENCHMARKS.md (issue #3): `dcm serve` probing N simulated
# providers at a 10 s interval, 10% black-holed, with Kafka (`dcm dev-kafka`) and the providers
# (`dcm sp-sim --ports 16`) in their own processes so only the prober's instance is measured.
# Prints one JSON line per run (tests/bench/health_bench.py); quote the medians.
#   RUNS=3 WINDOW=60 ./scripts/bench-health.sh
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
RUNS=${RUNS:-3}
WINDOW=${WINDOW:-60}
BUILD=${BUILD_DIR:-build-bench}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target dcm
BENCH=(python3 tests/bench/health_bench.py --dcm "$BUILD/src/dcm" --window "$WINDOW")

echo "== idle baseline: no providers =="
"${BENCH[@]}" --providers 0 --warmup 5
for run in $(seq 1 "$RUNS"); do
  echo "== 10,000 providers, 10% black-holed, run $run =="
  "${BENCH[@]}" --providers 10000 --black-holed 0.1
  echo "== 10,000 providers, none black-holed, run $run =="
  "${BENCH[@]}" --providers 10000 --black-holed 0
done
echo "== growth: 1,000 and 50,000 providers, 10% black-holed =="
"${BENCH[@]}" --providers 1000 --black-holed 0.1
"${BENCH[@]}" --providers 50000 --black-holed 0.1 --warmup 40
echo "== production-like fetch wait (100 ms) at 10,000 =="
"${BENCH[@]}" --providers 10000 --black-holed 0.1 --fetch-wait-max-ms 100
