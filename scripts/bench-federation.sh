#!/usr/bin/env bash
# Issue #17's benchmark: placements per second through a peer enclave, and the added latency of
# a remote placement against a local one (p50/p99), both measured in the same run on two
# `dcm serve --dev` enclaves on loopback (tests/bench/federation_bench.py says how).
#
#   RUNS=3 COUNT=200 CLIENTS=8 ./scripts/bench-federation.sh
#   DCM_BIN=build-bench/src/dcm ./scripts/bench-federation.sh     # a Release build
set -euo pipefail
cd "$(dirname "$0")/.."
export DCM_BIN=${DCM_BIN:-build/src/dcm}
[ -x "$DCM_BIN" ] || { echo "not executable: $DCM_BIN (build it: ninja -C build dcm)" >&2; exit 1; }
echo "machine: $(nproc) cores, $(uname -r); dcm: $DCM_BIN"
exec python3 -W ignore tests/bench/federation_bench.py
