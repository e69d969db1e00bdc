#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers that take outside input (SPEC §5.5): CloudEvents from
# Kafka, provider registration bodies, endpoint URLs, the outbound policy and SP reply summaries,
# bearer tokens, JWKS documents and AUTH_CERT_ROLES (SPEC §6). Builds the targets in tests/fuzz/
# with clang++ -fsanitize=fuzzer,address,undefined and runs each for a while.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# Corpora grow in $FUZZ_BUILD_DIR/fuzz-corpus/<target>/ (kept between runs); crashes land in
# $FUZZ_BUILD_DIR/fuzz-artifacts/. Replay one under g++ with
#   build/tests/fuzz/<target> --runs=0 <crash file>
# CI does not need clang: ctest runs the same targets through tests/fuzz/standalone_main.cc.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(fuzz_cloud_event fuzz_provider_spec fuzz_url fuzz_health_body fuzz_outbound_policy
           fuzz_token)
fi
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "clang++ not found: installing clang (libFuzzer ships with it)" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq clang
fi

SANITIZE="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$SANITIZE" -DDCM_LIBFUZZER=ON >/dev/null
cmake --build "$BUILD_DIR" --target "${TARGETS[@]}"

mkdir -p "$BUILD_DIR/fuzz-artifacts"
status=0
for target in "${TARGETS[@]}"; do
  binary="$BUILD_DIR/tests/fuzz/$target"
  corpus="$BUILD_DIR/fuzz-corpus/$target"
  DCM_FUZZ_WRITE_SEEDS="$corpus" "$binary" >/dev/null
  extra=()
  if [ "$target" = fuzz_cloud_event ]; then extra=(events/golden); fi
  echo "== $target: ${SECONDS_PER_TARGET}s"
  if ! "$binary" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$BUILD_DIR/fuzz-artifacts/$target-" \
      "$corpus" "${extra[@]}"; then
    echo "!! $target found a failure; see $BUILD_DIR/fuzz-artifacts/" >&2
    status=1
  fi
done
exit $status
