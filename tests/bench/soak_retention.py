#!/usr/bin/env python3
"""Probe retention soak (SPEC §7, issue #13; BENCHMARKS.md "Issue #13: probe retention"):
`dcm serve` probing N simulated providers (`dcm sp-sim`) every INTERVAL with
HEALTH_EVENTS_RETENTION=WINDOW, for DURATION, with Kafka in its own `dcm dev-kafka`. One
provider fails for a while at the start (transitions). Every SAMPLE seconds it records:

- the audit index: its keys (the `<hex>-<keys>` digest of /admin/projections), the probes it
  lists (/events?type=dcm.provider.health_probed, first/oldest page only: the oldest time), and
  the size of serve's RocksDB directory;
- the probes topic and dcm.health in Kafka: messages retained (high − low watermark over the
  partitions, read with `kcat -Q`);
- serve's CPU and RSS.

At the end: the failing provider's history still lists its transitions (older than the window),
and `dcm projections verify` (same retention) must say `match` for every projection.

  python3 tests/bench/soak_retention.py --dcm build/src/dcm --providers 2000 --interval 1s \
      --window 2m --duration 600

Prints one JSON line per sample and a JSON summary line.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from harness import API, Client, Process, SpSim, rfc3339_ms, wait_until  # noqa: E402


def proc_stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu_s = (int(fields[11]) + int(fields[12])) / ticks
    with open(f"/proc/{pid}/status") as f:
        rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return cpu_s, rss_kib


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def retained(bootstrap, topic, partitions):
    """Messages between the low and high watermarks, summed over the partitions."""
    def query(ts):
        args = ["kcat", "-b", bootstrap, "-Q"]
        for p in range(partitions):
            args += ["-t", f"{topic}:{p}:{ts}"]
        out = subprocess.run(args, capture_output=True, text=True, timeout=30)
        offsets = {}
        for line in out.stdout.splitlines():
            # "<topic> [<partition>] offset <n>"
            parts = line.split()
            if len(parts) >= 4 and parts[2] == "offset":
                offsets[int(parts[1].strip("[]"))] = int(parts[3])
        return offsets
    low, high = query(-2), query(-1)
    return sum(high[p] - low.get(p, 0) for p in high)


def audit_keys(client):
    for p in client.get("/admin/projections").json()["projections"]:
        if p["name"] == "audit":
            return int(p["digest"].rsplit("-", 1)[1])
    return None


def oldest_probe_ms(client):
    r = client.get(f"{API}/events?type=dcm.provider.health_probed&max_page_size=1")
    if r.status != 200:  # counted in the summary: a read that failed during a sweep
        print(json.dumps({"events_status": r.status, "body": r.body[:200].decode()}), flush=True)
        return None
    page = r.json()
    return rfc3339_ms(page["events"][0]["time"]) if page["events"] else None


def history(client, pid):
    events, token = [], ""
    while True:
        page = client.get(f"{API}/providers/{pid}/history?max_page_size=100" +
                          (f"&page_token={token}" if token else "")).json()
        events += page["events"]
        token = page.get("next_page_token")
        if not token:
            return events


def run(args):
    harness.DCM_BIN = args.dcm
    prefix = "soak."
    kafka = Process([args.dcm, "dev-kafka", "--partitions", str(args.partitions),
                     "--topic-prefix", prefix], "dev-kafka")
    bootstrap = kafka.read_line()
    data_dir = tempfile.mkdtemp(prefix="dcm-soak-retention-")
    env = {**harness.SERVE_ENV, "HEALTH_EVENTS_RETENTION": args.window}
    serve = Process([args.dcm, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                     "--kafka-brokers", bootstrap, "--topic-prefix", prefix,
                     "--partitions", str(args.partitions), "--fetch-wait-max-ms", "10",
                     "--session-timeout-ms", "4000", "--instance-id", "soak",
                     "--health-check-interval", args.interval,
                     "--health-check-base-backoff-interval", args.interval,
                     "--health-check-max-backoff-interval", args.interval], "serve", env)
    url = serve.read_line().split("listening on ")[1].strip()
    client = Client(url)
    wait_until(lambda: client.get("/readyz").status == 200, timeout=60, what="serve ready")
    sim = SpSim(url, args.providers, name_prefix="soak",
                extra=["--ports", "16", "--register-concurrency", "64"])
    started = time.time()
    try:
        pids = {n: p["id"] for n, p in sim.wait_registered(timeout=300).items()}
        failing = sorted(pids)[0]
        print(json.dumps({"registered": len(pids), "s": round(time.time() - started, 1)}),
              flush=True)
        sim.set_fault(failing, health="503")
        time.sleep(10)
        sim.set_fault(failing, health="healthy")
        samples = []
        t0 = time.time()
        while time.time() - t0 < args.duration:
            time.sleep(args.sample)
            cpu_s, rss_kib = proc_stat(serve.proc.pid)
            oldest = oldest_probe_ms(client)
            sample = {
                "t_s": round(time.time() - t0),
                "audit_keys": audit_keys(client),
                "oldest_probe_age_s": round((time.time() * 1000 - oldest) / 1000, 1)
                if oldest else None,
                "store_mib": round(dir_bytes(os.path.join(data_dir, "state")) / 2**20, 1),
                "probes_topic_msgs": retained(bootstrap, prefix + "health-probes",
                                              args.partitions),
                "health_topic_msgs": retained(bootstrap, prefix + "health", args.partitions),
                "serve_cpu_s": round(cpu_s, 1),
                "serve_rss_mib": round(rss_kib / 1024),
            }
            samples.append(sample)
            print(json.dumps(sample), flush=True)
        hist = history(client, pids[failing])
        changes = [(e["time"], e["event"]["data"]["to"]) for e in hist
                   if e["type"] == "dcm.provider.health_changed"]
        verify = subprocess.run(
            [args.dcm, "projections", "verify", "--data-dir", data_dir, "--kafka-brokers",
             bootstrap, "--topic-prefix", prefix, "--no-progress", "--fetch-wait-max-ms", "10",
             "--timeout", "120"],
            capture_output=True, text=True, timeout=1800,
            env={**os.environ, "HEALTH_EVENTS_RETENTION": args.window})
        print(verify.stdout, flush=True)
        print(json.dumps({
            "providers": args.providers, "interval": args.interval, "window": args.window,
            "duration_s": args.duration,
            "transitions_in_history": changes,
            "oldest_transition_age_s": round(time.time() - rfc3339_ms(changes[0][0]) / 1000)
            if changes else None,
            "verify_exit": verify.returncode,
            "verify_match": verify.stdout.count(" match\n"),
        }), flush=True)
        return 0 if verify.returncode == 0 else 1
    finally:
        sim.stop()
        serve.kill()
        kafka.kill()
        if not args.keep:
            subprocess.run(["rm", "-rf", data_dir])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dcm", required=True)
    p.add_argument("--providers", type=int, default=2000)
    p.add_argument("--interval", default="1s")
    p.add_argument("--window", default="2m")
    p.add_argument("--duration", type=int, default=600)
    p.add_argument("--sample", type=int, default=30)
    # The mock keeps ~5 MiB per partition, not a time window: enough partitions that it holds
    # more than the window of probes, or verify cannot find them (KAFKA-NOTES).
    p.add_argument("--partitions", type=int, default=64)
    p.add_argument("--keep", action="store_true")
    sys.exit(run(p.parse_args()))


if __name__ == "__main__":
    main()
