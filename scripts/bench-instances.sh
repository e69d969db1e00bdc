#!/usr/bin/env bash
# Reproduces the instance/rehydration figures of BENCHMARKS.md (issue #4): 1,000 catalog item
# instances across 10 simulated vm providers (`dcm sp-sim`), providers 0-4 made Unavailable,
# all 1,000 rehydrated concurrently from 64 client threads against one `dcm serve --dev`, then
# the cleanup queue drained once 0-4 are Ready again. Prints one JSON line per run
# (tests/bench/instances_bench.py, progress on stderr); quote the medians.
#   RUNS=3 ./scripts/bench-instances.sh
#   BUILD_DIR=build-rel BUILD_TYPE=RelWithDebInfo RUNS=5 SWEEP=1 ./scripts/bench-instances.sh
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
RUNS=${RUNS:-3}
INSTANCES=${INSTANCES:-1000}
PROVIDERS=${PROVIDERS:-10}
CLIENTS=${CLIENTS:-64}
BUILD=${BUILD_DIR:-build-bench}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$BUILD" --target dcm
BENCH=(python3 tests/bench/instances_bench.py --dcm "$BUILD/src/dcm" --breakdown
       --instances "$INSTANCES" --providers "$PROVIDERS" --clients "$CLIENTS")

for run in $(seq 1 "$RUNS"); do
  echo "== $INSTANCES instances, $PROVIDERS providers, $CLIENTS clients, run $run =="
  "${BENCH[@]}"
done
if [ -n "${SWEEP:-}" ]; then
  echo "== sweep: --instance-worker-threads 4 and 64 =="
  "${BENCH[@]}" --worker-threads 4
  "${BENCH[@]}" --worker-threads 64
  echo "== latency floor: one client, 200 instances, one operation at a time =="
  python3 tests/bench/instances_bench.py --dcm "$BUILD/src/dcm" --breakdown --instances 200 \
      --providers "$PROVIDERS" --clients 1
fi
