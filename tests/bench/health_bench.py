#!/usr/bin/env python3
"""Prober benchmark (issue #3, BENCHMARKS.md): N simulated providers at a 10 s interval, a
fraction of them black-holed (their health endpoint accepts and never answers, so each probe
runs into the 5 s timeout). Reports probes/s, scheduler lag p50/p99 (from dcm's histogram),
and the CPU% and RSS of `dcm serve` alone: Kafka runs in a separate `dcm dev-kafka` process and
the providers in `dcm sp-sim`, so neither is counted.

  python3 tests/bench/health_bench.py --dcm build-bench/src/dcm --providers 10000 \
      --black-holed 0.1 --window 60

Prints one JSON line per run.
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from harness import Client, Process, SpSim, wait_until  # noqa: E402


def proc_stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu_s = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    with open(f"/proc/{pid}/status") as f:
        rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return cpu_s, rss_kib


def metrics(client):
    """name{labels} -> value, from /metrics."""
    out = {}
    for line in client.get("/metrics").body.decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def histogram_quantile(before, after, name, q):
    """Quantile of a Prometheus histogram's increase between two scrapes (linear in-bucket)."""
    buckets = []
    for key, value in after.items():
        if key.startswith(name + "_bucket{le=\""):
            le = key.split("le=\"")[1].rstrip("\"}")
            bound = float("inf") if le == "+Inf" else float(le)
            buckets.append((bound, value - before.get(key, 0)))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None
    rank, prev_bound, prev_count = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return prev_bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / max(count - prev_count, 1e-9)
        prev_bound, prev_count = bound, count
    return prev_bound


def probes_total(m):
    return sum(v for k, v in m.items() if k.startswith("dcm_probes_total{"))


def run(args):
    harness.DCM_BIN = args.dcm
    kafka = Process([args.dcm, "dev-kafka", "--partitions", "12"], "dev-kafka")
    bootstrap = kafka.read_line()
    data_dir = tempfile.mkdtemp(prefix="dcm-bench-health-")
    serve = Process([args.dcm, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                     "--kafka-brokers", bootstrap, "--fetch-wait-max-ms", args.fetch_wait_max_ms,
                     "--session-timeout-ms", "4000", "--instance-id", "bench",
                     "--health-check-interval", args.interval, "--health-check-timeout",
                     args.timeout, "--log-level", "warn"], "serve", harness.SERVE_ENV)
    line = serve.read_line()
    url = line.split("listening on ")[1].strip()
    client = Client(url)
    sim = None
    try:
        wait_until(lambda: client.get("/readyz").status == 200, timeout=60, what="serve ready")
        sim = SpSim(url, args.providers,
                    extra=["--ports", str(args.ports), "--register-concurrency", "64"])
        t0 = time.time()
        wait_until(lambda: sim.control.get("/sim/stats").json()["registered"] == args.providers,
                   timeout=600, interval=1, what="all providers registered")
        register_s = time.time() - t0
        names = sorted(sim.providers()) if args.black_holed > 0 else []
        holed = names[:int(len(names) * args.black_holed)]
        for name in holed:
            sim.set_fault(name, health="hang")
        time.sleep(args.warmup)  # every provider probed at least twice, backoffs settled
        m0, (cpu0, _), w0 = metrics(client), proc_stat(serve.proc.pid), time.time()
        time.sleep(args.window)
        m1, (cpu1, rss_kib), w1 = metrics(client), proc_stat(serve.proc.pid), time.time()
        wall = w1 - w0
        result = {
            "providers": args.providers,
            "black_holed": len(holed),
            "interval": args.interval,
            "fetch_wait_max_ms": int(args.fetch_wait_max_ms),
            "timeout": args.timeout,
            "window_s": round(wall, 1),
            "register_s": round(register_s, 1),
            "probes_per_s": round((probes_total(m1) - probes_total(m0)) / wall, 1),
            "expected_probes_per_s": round(args.providers / float(args.interval.rstrip("s")), 1),
            "lag_p50_ms": round(1000 * (histogram_quantile(
                m0, m1, "dcm_probe_scheduler_lag_seconds", 0.50) or 0), 2),
            "lag_p99_ms": round(1000 * (histogram_quantile(
                m0, m1, "dcm_probe_scheduler_lag_seconds", 0.99) or 0), 2),
            "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / wall, 1),
            "rss_mib": round(rss_kib / 1024, 1),
            "in_flight": m1.get("dcm_probes_in_flight"),
            "health_events_failed": m1.get("dcm_health_events_failed_total", 0),
        }
        print(json.dumps(result), flush=True)
        return result
    finally:
        if sim:
            sim.stop()
        serve.kill()
        kafka.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dcm", default="build-bench/src/dcm")
    p.add_argument("--providers", type=int, default=10000)
    p.add_argument("--black-holed", type=float, default=0.1)
    p.add_argument("--ports", type=int, default=16)
    p.add_argument("--interval", default="10s")
    p.add_argument("--timeout", default="5s")
    p.add_argument("--warmup", type=float, default=25)
    p.add_argument("--window", type=float, default=60)
    # 10 is what dev mode uses against the mock; 100 is librdkafka's default on real brokers.
    p.add_argument("--fetch-wait-max-ms", default="10")
    run(p.parse_args())


if __name__ == "__main__":
    main()
