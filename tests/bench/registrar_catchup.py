"""How fast a fresh instance's registrar rebuilds its state from the outcome log (SPEC §7
retention gaps; BENCHMARKS.md "Issue #13: registrar catch-up").

Usage: DCM_BIN=build/src/dcm python3 tests/bench/registrar_catchup.py [PROVIDERS] [RUNS]

Per run: `dcm dev-kafka`, `dcm serve` A registers PROVIDERS providers (8 HTTP clients), A stops,
a fresh `dcm serve` B (empty data dir) starts: it folds every outcome on dcm.providers, then
must refuse one of the early names to another id (409). Prints the fold time (from the log
lines "registrar owns the request partition" to "outcomes folded") and B's time to /readyz.
Keep PROVIDERS under ~7,000: the mock keeps 5 MiB per partition."""

import os
import statistics
import sys
import threading
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from harness import API, Client, Cluster, provider_body  # noqa: E402

SLOW_PROBES = ("--health-check-interval", "300s")


def log_time(line):
    return datetime.strptime(line.split("ts=")[1].split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")


def run(n):
    cluster = Cluster()
    try:
        a = cluster.serve(name="a", extra=SLOW_PROBES)

        def worker(k):
            c = Client(a.url)
            for i in range(k, n, 8):
                r = c.post(f"{API}/providers", provider_body(f"p-{i:06d}"))
                assert r.status == 201, r

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        a.stop()
        t0 = time.monotonic()
        b = cluster.serve(name="b", extra=SLOW_PROBES)
        ready = time.monotonic() - t0
        r = b.client.post(f"{API}/providers?id=00000000-0000-4000-8000-000000000001",
                          provider_body("p-000000"))
        assert r.status == 409, r
        lines = open(b.proc.log.name).read().splitlines()
        owns = next(log_time(x) for x in lines if "owns the request partition" in x)
        folded = next(x for x in lines if "outcomes folded" in x)
        fold = (log_time(folded) - owns).total_seconds()
        print(f"providers={n} fold_s={fold:.3f} ({n / fold:,.0f} outcomes/s) ready_s={ready:.2f}"
              f" | {folded.split('msg=')[1]}")
        return fold, ready
    finally:
        cluster.close()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
    runs = [run(n) for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3)]
    print(f"median fold {statistics.median(f for f, _ in runs):.3f} s, "
          f"median ready {statistics.median(r for _, r in runs):.2f} s")
