#!/usr/bin/env bash
# Reproduces the trust-boundary figures of BENCHMARKS.md (issue #12): what bearer-token
# authentication costs, as same-run ratios against authentication disabled.
#   - GET /providers/{id}, wrk -c64: `dcm serve --dev` (auth off) against `dcm serve --dev` with
#     AUTH_JWKS_FILE and a valid RS256 token on every request (verified once, then cached).
#   - POST /providers (registration with read-your-writes), wrk -c64, the same two setups, each
#     run on a fresh server.
# The two setups alternate, RUNS times each (default 5); quote the medians and their ratio.
#   scripts/bench-auth.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
RUNS=${1:-5}
DURATION=${DURATION:-10s}
BUILD=${BUILD_DIR:-build-bench}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target dcm >/dev/null
DCM="$BUILD/src/dcm"
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

# A JWKS file and a token with the roles both workloads need (tests/e2e/pki.py, PyJWT).
TOKEN=$(/usr/bin/python3 - "$WORK/jwks.json" <<'PY'
import sys
sys.path.insert(0, "tests/e2e")
from pki import SigningKeys
keys = SigningKeys()
keys.write_jwks(sys.argv[1])
print(keys.token("bench-sp", ["dcm-provider", "dcm-reader"], exp=2000000000))
PY
)

# start_dcm NAME PORT [auth]: `dcm serve --dev` on PORT, with the JWKS file when "auth".
start_dcm() {
  local name=$1 port=$2 mode=${3:-}
  local env=()
  [ "$mode" = auth ] && env=(AUTH_JWKS_FILE="$WORK/jwks.json" AUTH_JWT_AUDIENCE=dcm
                             AUTH_ISSUER_URL=https://idp.test/realms/dcm)
  env "${env[@]}" "$DCM" serve --dev --listen "127.0.0.1:$port" --http-threads 1 \
    --log-level warn >"$WORK/$name.out" 2>"$WORK/$name.err" &
  eval "PID_$name=$!"
  local auth=()
  [ "$mode" = auth ] && auth=(-H "Authorization: Bearer $TOKEN")
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  for _ in $(seq 1 100); do
    curl -s "${auth[@]}" "http://127.0.0.1:$port/admin/info" | grep -q '"registrar_owner":true' \
      && break
    # (a provider token cannot read /admin/info: fall back to a registration answering 201)
    [ "$mode" = auth ] && curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" \
      -H 'Content-Type: application/json' -X POST "http://127.0.0.1:$port/api/v1alpha1/providers" \
      -d "{\"name\":\"warm-$RANDOM\",\"endpoint\":\"http://127.0.0.1:9/x\",\"service_type\":\"vm\"}" \
      | grep -q 201 && break
    sleep 0.1
  done
}
stop_dcm() { local pid_var="PID_$1"; kill "${!pid_var}"; wait "${!pid_var}" 2>/dev/null || true; }

report() { grep -E "Requests/sec|^ +(50|99)%|Non-2xx" | tr -s ' ' | paste -sd' ' | sed "s/^/$1: /"; }

echo "== GET /providers/{id}, 64 connections, 1,000 providers =="
start_dcm off 18191
start_dcm auth 18192 auth
for port in 18191 18192; do
  : >"$WORK/ids.$port"
  for i in $(seq 1 1000); do
    curl -s -X POST "http://127.0.0.1:$port/api/v1alpha1/providers" -H "Authorization: Bearer $TOKEN" \
      -H 'Content-Type: application/json' \
      -d "{\"name\":\"get-$i\",\"endpoint\":\"http://127.0.0.1:9/x\",\"service_type\":\"vm\"}" |
      /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' >>"$WORK/ids.$port"
  done
done
for run in $(seq 1 "$RUNS"); do
  IDS_FILE="$WORK/ids.18191" wrk -t1 -c64 -d"$DURATION" --latency -s tests/bench/get_by_id.lua \
    http://127.0.0.1:18191 | report "run $run auth off"
  IDS_FILE="$WORK/ids.18192" DCM_TOKEN="$TOKEN" wrk -t1 -c64 -d"$DURATION" --latency \
    -s tests/bench/get_by_id.lua http://127.0.0.1:18192 | report "run $run token   "
done
stop_dcm off
stop_dcm auth

echo "== registration: POST /providers, 64 connections, read-your-writes, fresh server per run =="
for run in $(seq 1 "$RUNS"); do
  start_dcm off 18191
  wrk -t1 -c64 -d3s -s tests/bench/register.lua http://127.0.0.1:18191 >/dev/null
  wrk -t1 -c64 -d"$DURATION" --latency -s tests/bench/register.lua http://127.0.0.1:18191 |
    report "run $run auth off"
  stop_dcm off
  start_dcm auth 18192 auth
  DCM_TOKEN="$TOKEN" wrk -t1 -c64 -d3s -s tests/bench/register.lua http://127.0.0.1:18192 >/dev/null
  DCM_TOKEN="$TOKEN" wrk -t1 -c64 -d"$DURATION" --latency -s tests/bench/register.lua \
    http://127.0.0.1:18192 | report "run $run token   "
  stop_dcm auth
done
