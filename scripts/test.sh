#!/usr/bin/env bash
# The README's test command: installs dependencies, builds everything with -Werror, checks
# formatting and runs the whole suite (unit, integration on the embedded mock Kafka, e2e), then a
# short libFuzzer smoke.
# Set KAFKA_BROKERS=host:9092 to also run the Kafka tests against a real broker.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
./scripts/check-format.sh
./scripts/check-sizes.py  # issue #16: file and function size limits
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 300 "$@"
# libFuzzer smoke (clang, ASan+UBSan, coverage-guided) of the trust boundary's parsers: bearer
# tokens, JWKS documents, AUTH_CERT_ROLES, CIDRs and endpoint hosts. ctest above already ran every
# fuzz target through the g++ driver; scripts/fuzz.sh runs them for longer.
FUZZ_BUILD_DIR="$BUILD_DIR-fuzz-smoke" ./scripts/fuzz.sh "${FUZZ_SMOKE_SECONDS:-20}" \
  fuzz_token fuzz_outbound_policy
