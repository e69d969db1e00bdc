#!/usr/bin/env bash
# The ASan+UBSan lane: builds everything with -fsanitize=address,undefined into build-asan and
# runs the unit and integration tests (e2e too with ALL=1). Run before you stop; CI runs the
# normal build only, to stay within its time budget.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDCM_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
LABELS='unit|integration'
[ "${ALL:-0}" = 1 ] && LABELS='unit|integration|e2e'
ctest --test-dir build-asan -L "$LABELS" --output-on-failure -j"$(nproc)" --timeout 600
