#!/usr/bin/env python3
"""Heartbeat benchmark (issue #14, BENCHMARKS.md): N providers registered with
`liveness: heartbeat`, beating at a 5 s interval (N/5 beats/s, paced by wrk and
tests/bench/heartbeat.lua), then unpaced to find how many beats/s one `dcm serve` holds.
Reports accepted beats/s, the beats' latency p50/p99 (wrk), the CPU% and RSS of `dcm serve`
alone (Kafka runs in its own `dcm dev-kafka` process, wrk in its own), the heartbeat events
written per beat after coalescing, and expiries during the window (must be 0: a false expiry
under load is a defect).

  python3 tests/bench/heartbeat_bench.py --dcm build-bench/src/dcm --providers 20000 --window 60

Prints one JSON line per run.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from harness import Client, Process, wait_until  # noqa: E402
from health_bench import metrics, proc_stat  # noqa: E402

LUA = os.path.join(os.path.dirname(__file__), "heartbeat.lua")
RECORDED = ('dcm_events_applied_total{projection="health",'
            'type="dcm.provider.heartbeat_recorded"}')


def wrk(url, mode, providers, connections, seconds, delay_ms=0, threads=2):
    env = {**os.environ, "MODE": mode, "PROVIDERS": str(providers), "THREADS": str(threads),
           "DELAY_MS": str(delay_ms)}
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency",
                          "-s", LUA, url], env=env, capture_output=True, text=True, check=True)
    return out.stdout


def register(url, providers, threads=2):
    """Registers hb-0..hb-<providers-1> with wrk (MODE=register). wrk runs for its whole duration
    whatever its threads do, so each thread leaves a marker with its failure count once it has
    had all its answers, and wrk is stopped then."""
    done = tempfile.mkdtemp(prefix="dcm-bench-hb-register-")
    env = {**os.environ, "MODE": "register", "PROVIDERS": str(providers),
           "THREADS": str(threads), "DONE_DIR": done}
    load = subprocess.Popen(["wrk", f"-t{threads}", "-c32", "-d600s", "-s", LUA, url], env=env,
                            stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: len(os.listdir(done)) == threads, timeout=600, interval=0.2,
                   what="every heartbeat provider registered")
    finally:
        load.terminate()
        load.wait()
    failed = sum(int(open(os.path.join(done, f)).read()) for f in os.listdir(done))
    assert failed == 0, f"{failed} registrations were not answered 201/200"


def ms(text):
    value, unit = re.match(r"([0-9.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse(text):
    """wrk --latency output -> requests/s, p50/p99 (ms), non-2xx."""
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", text, re.M))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {"wrk_rps": float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1)),
            "p50_ms": round(ms(latency["50"]), 2), "p99_ms": round(ms(latency["99"]), 2),
            "non_2xx": int(non2xx.group(1)) if non2xx else 0}


def window(client, pid, measure):
    """Runs `measure()` (a wrk run) between two scrapes of /metrics and /proc."""
    m0, (cpu0, _), t0 = metrics(client), proc_stat(pid), time.time()
    result = parse(measure())
    m1, (cpu1, rss_kib), t1 = metrics(client), proc_stat(pid), time.time()
    wall = t1 - t0
    beats = m1.get("dcm_heartbeats_total", 0) - m0.get("dcm_heartbeats_total", 0)
    result.update({
        "accepted_beats_per_s": round(beats / wall, 1),
        "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / wall, 1),
        "rss_mib": round(rss_kib / 1024, 1),
        "events_per_beat": round((m1.get(RECORDED, 0) - m0.get(RECORDED, 0)) / max(beats, 1), 4),
        "expiries": m1.get("dcm_heartbeat_expiries_total", 0) -
                    m0.get("dcm_heartbeat_expiries_total", 0),
    })
    return result


def run(args):
    harness.DCM_BIN = args.dcm
    kafka = Process([args.dcm, "dev-kafka", "--partitions", "12"], "dev-kafka")
    bootstrap = kafka.read_line()
    data_dir = tempfile.mkdtemp(prefix="dcm-bench-heartbeat-")
    serve = Process([args.dcm, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                     "--kafka-brokers", bootstrap, "--fetch-wait-max-ms", "10",
                     "--session-timeout-ms", "4000", "--instance-id", "bench",
                     "--log-level", "warn"], "serve", harness.SERVE_ENV)
    url = serve.read_line().split("listening on ")[1].strip()
    client = Client(url)
    try:
        wait_until(lambda: client.get("/readyz").status == 200, timeout=60, what="serve ready")
        t0 = time.time()
        register(url, args.providers)
        register_s = time.time() - t0
        rate = args.providers / args.interval
        # Pacing: each connection beats, waits for the answer, then waits DELAY_MS.
        delay_ms = max(0, int(args.connections * 1000 / rate) - 1)
        # Warm-up: a whole round (every provider's first beat is a recorded transition).
        wrk(url, "beat", args.providers, args.connections, int(args.interval * 2), delay_ms)
        paced = window(client, serve.proc.pid,
                       lambda: wrk(url, "beat", args.providers, args.connections, args.window,
                                   delay_ms))
        unpaced = window(client, serve.proc.pid,
                         lambda: wrk(url, "beat", args.providers, 64, args.saturation_window))
        result = {"providers": args.providers, "interval_s": args.interval,
                  "target_beats_per_s": rate, "register_s": round(register_s, 1),
                  "paced": paced, "unpaced_c64": unpaced,
                  "providers_held_at_interval": int(unpaced["accepted_beats_per_s"] *
                                                    args.interval)}
        print(json.dumps(result), flush=True)
        return result
    finally:
        client.close()
        serve.kill()
        kafka.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dcm", default="build-bench/src/dcm")
    p.add_argument("--providers", type=int, default=20000)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--window", type=int, default=60)
    p.add_argument("--saturation-window", type=int, default=20)
    run(p.parse_args())


if __name__ == "__main__":
    main()
