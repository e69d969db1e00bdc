#!/usr/bin/env bash
# The README's run command: builds `dcm`, starts `dcm serve --dev` (embedded in-memory Kafka)
# and `dcm sp-sim` with a few simulated Service Providers that register themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target dcm
LISTEN=${BIND_ADDRESS:-127.0.0.1:8080}
./build/src/dcm serve --dev --listen "$LISTEN" &
SERVE=$!
trap 'kill $SERVE $SIM 2>/dev/null || true; wait 2>/dev/null' EXIT INT TERM
for _ in $(seq 1 100); do curl -sf "http://$LISTEN/readyz" >/dev/null && break; sleep 0.1; done
./build/src/dcm sp-sim --dcm-url "http://$LISTEN" --count "${SP_COUNT:-4}" &
SIM=$!
echo
echo "DCM is up: try  curl -s http://$LISTEN/api/v1alpha1/providers | python3 -m json.tool"
echo "           or open the console at http://$LISTEN/ui/"
echo "Ctrl-C stops everything (dev mode keeps events in memory only)."
wait $SERVE
