#!/usr/bin/env bash
# Rebuild benchmark (issue #5, BENCHMARKS.md "Rebuild"): 1,000,000 mixed events on the mock
# cluster (its own process: `dcm dev-kafka`, so its memory does not count), then RUNS rebuilds of
# every projection into a fresh side store, each in a new process measured by /usr/bin/time.
#
#   scripts/bench-rebuild.sh [BUILD_DIR] [EVENTS] [RUNS] [BASELINE_BUILD_DIR]
#                                                       (defaults: build 1000000 3, no baseline)
#
# With a baseline build (another commit's build directory with its own rebuild_bench), each run
# rebuilds the same log with the baseline and then with BUILD_DIR, so both see the same machine
# state: compare their medians and their ratio (this shared VM drifts by ±15% over an hour).
#
# 192 partitions per entity topic keep every partition under the mock's 5 MiB retention
# (800k probes of 10,000 providers × ~540 B / 192 ≈ 2.3 MB); the rebuild warns if a partition lost its head.
set -euo pipefail
BUILD=${1:-build}
EVENTS=${2:-1000000}
RUNS=${3:-3}
BASELINE=${4:-}
DCM=$BUILD/src/dcm
WORK=$(mktemp -d /tmp/dcm-bench-rebuild-XXXXXX)
"$DCM" dev-kafka --partitions 192 --topic-prefix bench. >"$WORK/kafka.out" 2>"$WORK/kafka.err" &
KAFKA_PID=$!
trap 'kill $KAFKA_PID 2>/dev/null; wait $KAFKA_PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [[ -s $WORK/kafka.out ]] && break; sleep 0.1; done
BROKERS=$(head -1 "$WORK/kafka.out")
echo "# mock cluster $BROKERS (pid $KAFKA_PID); load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/tests/bench/rebuild_bench" produce --brokers "$BROKERS" --prefix bench. --events "$EVENTS" \
  --providers 10000
rebuild() {  # BUILD_DIR LABEL
  echo "# run $run $2; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f '{"step":"time","max_rss_kb":%M,"elapsed_s":%e,"cpu_percent":"%P"}' \
    "$1/tests/bench/rebuild_bench" rebuild --brokers "$BROKERS" --prefix bench. --dir "$WORK/side"
}
for run in $(seq "$RUNS"); do
  [[ -n $BASELINE ]] && rebuild "$BASELINE" baseline
  rebuild "$BUILD" build
done
