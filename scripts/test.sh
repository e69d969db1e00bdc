#!/usr/bin/env bash
# The README's test command: installs dependencies, builds everything with -Werror, checks
# formatting and runs the whole suite (unit, integration on the embedded mock Kafka, e2e), then a
# libFuzzer smoke when FUZZ_SMOKE_SECONDS is set.
# Set KAFKA_BROKERS=host:9092 to also run the Kafka tests against a real broker.
#
# For CI's 30-minute budget on 2 cores (docs/testing.md): everything compiles at -O1 (~24% less
# compile time than -O2; benchmarks use their own Release build), with line tables only (-g1:
# file:line backtraces, no variable locations; -g costs ~25% of the compile). The tests mostly wait
# (timeouts, rebalances, probe intervals: ~0.4 of a core at -j2), so unit and integration tests
# run at -j 2 x cores, then the e2e tests at -j 2 x cores weighted by their PROCESSORS
# (tests/e2e/CMakeLists.txt). Each phase prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
phase() { echo "== test.sh: $1 (${SECONDS}s since start)"; }
./scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=$(nproc)
phase "build"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"
./scripts/check-format.sh
./scripts/check-sizes.py  # issue #16: file and function size limits
phase "unit and integration tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"${TEST_JOBS:-$((2 * JOBS))}" --timeout 300 \
  -LE e2e "$@"
phase "e2e tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"${E2E_JOBS:-$((2 * JOBS))}" --timeout 300 \
  -L e2e "$@"
# libFuzzer smoke (clang, ASan+UBSan, coverage-guided) of the trust boundary's parsers: bearer
# tokens, JWKS documents, AUTH_CERT_ROLES, CIDRs and endpoint hosts. Off in CI (FUZZ_SMOKE_SECONDS
# unset): installing clang and building the targets costs ~3.5 of CI's 30 minutes, and ctest above
# already ran every fuzz target's corpus through the g++ driver. Run before each stop:
# FUZZ_SMOKE_SECONDS=20 ./scripts/test.sh, or scripts/fuzz.sh for longer (docs/testing.md).
if [ "${FUZZ_SMOKE_SECONDS:-0}" -gt 0 ]; then
  phase "libFuzzer smoke"
  FUZZ_BUILD_DIR="$BUILD_DIR-fuzz-smoke" ./scripts/fuzz.sh "$FUZZ_SMOKE_SECONDS" \
    fuzz_token fuzz_outbound_policy
fi
phase "done"
