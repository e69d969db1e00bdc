#!/usr/bin/env bash
# Upgrade check: a log and a store written by an older build are verified (`match`) and served by
# this one (tests/e2e/upgrade_check.py). OLD_REV (default: the commit before issue #16) is built
# in Release in a temporary git worktree unless OLD_DCM_BIN names an existing binary.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
OLD_REV=${OLD_REV:-4544933}
BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja >/dev/null
cmake --build "$BUILD" --target dcm
if [[ -z "${OLD_DCM_BIN:-}" ]]; then
  OLD_TREE=${OLD_TREE:-/tmp/dcm-old-$OLD_REV}
  [[ -d "$OLD_TREE" ]] || git worktree add --detach "$OLD_TREE" "$OLD_REV"
  cmake -S "$OLD_TREE" -B "$OLD_TREE/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$OLD_TREE/build" --target dcm
  OLD_DCM_BIN="$OLD_TREE/build/src/dcm"
fi
OLD_DCM_BIN=$(realpath "$OLD_DCM_BIN") DCM_BIN=$(realpath "$BUILD/src/dcm") \
  /usr/bin/python3 -W ignore tests/e2e/upgrade_check.py
