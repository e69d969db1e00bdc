#!/usr/bin/env bash
# Probe retention soak (SPEC §7, issue #13; BENCHMARKS.md "Issue #13: probe retention"):
# 2,000 simulated providers probed every 1 s with HEALTH_EVENTS_RETENTION=2m for 10 minutes.
# Samples the audit index (keys, oldest probe listed, RocksDB size) and the probes topic and
# dcm.health in Kafka every 30 s, then checks the transitions in history and runs
# `dcm projections verify`. The e2e test tests/e2e/test_retention.py is its 1-minute version.
#   PROVIDERS=2000 INTERVAL=1s WINDOW=2m DURATION=600 ./scripts/soak-retention.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
if [[ ! -x "$BUILD/src/dcm" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" --target dcm
fi
exec python3 tests/bench/soak_retention.py --dcm "$BUILD/src/dcm" \
  --providers "${PROVIDERS:-2000}" --interval "${INTERVAL:-1s}" --window "${WINDOW:-2m}" \
  --duration "${DURATION:-600}" --sample "${SAMPLE:-30}" --partitions "${PARTITIONS:-64}"
