"""Placements through a peer enclave (issue #17's benchmark), against local placements measured
in the same run: two `dcm serve --dev` enclaves on loopback, A (a `vm` SP, FEDERATION_PEERS=b)
and B (exports `container`, one SP without an instance limit).

Per run: COUNT sequential creates of each kind on A (`vm`: placed on A's own SP; `container`:
placed on B through discovery, hold, confirm and B's contract), the latency of each POST
/catalog-item-instances (p50, p99), then COUNT concurrent creates of each kind over CLIENTS
connections (placements/s). Prints each run and the medians over RUNS.

  DCM_BIN=build/src/dcm RUNS=3 COUNT=200 CLIENTS=8 python3 tests/bench/federation_bench.py"""

import concurrent.futures
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from harness import API, Client, DevServer, SpSim, wait_until  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
COUNT = int(os.environ.get("COUNT", "200"))
CLIENTS = int(os.environ.get("CLIENTS", "8"))
QUIET = ["--health-check-interval", "1s"]


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def create(client, service_type):
    begun = time.perf_counter()
    r = client.post(f"{API}/catalog-item-instances", {"spec": {"service_type": service_type}})
    took = time.perf_counter() - begun
    if r.status != 201:
        raise AssertionError(f"{service_type}: {r.status} {r.json()}")
    return took, r.json()["provider_name"]


def sequential(url, service_type):
    client = Client(url)
    try:
        results = [create(client, service_type) for _ in range(COUNT)]
    finally:
        client.close()
    return [t for t, _ in results], {p for _, p in results}


def burst(url, service_type):
    clients = [Client(url) for _ in range(CLIENTS)]
    per_client = [COUNT // CLIENTS + (1 if i < COUNT % CLIENTS else 0) for i in range(CLIENTS)]
    begun = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda i: [create(clients[i], service_type) for _ in range(per_client[i])],
                      range(CLIENTS)))
    took = time.perf_counter() - begun
    for c in clients:
        c.close()
    return COUNT / took


def one_run():
    b = DevServer(extra=[*QUIET, "--enclave-id", "b"],
                  env={"FEDERATION_EXPORT_SERVICE_TYPES": "container"})
    sim_b = SpSim(b.url, 1, name_prefix="benchb", service_types="container")
    a = DevServer(extra=[*QUIET, "--enclave-id", "a"], env={"FEDERATION_PEERS": f"b={b.url}"})
    sim_a = SpSim(a.url, 1, name_prefix="bencha", service_types="vm")
    try:
        sim_b.wait_registered()
        sim_a.wait_registered()
        wait_until(lambda: any(p["health_status"] == "Ready"
                               for p in a.client.get(f"{API}/peers").json()["peers"]),
                   timeout=30, what="A sees B Ready")
        wait_until(lambda: b.client.get("/federation/v1alpha1/flavors").json()["flavors"],
                   timeout=30, what="B's flavour")
        local, local_on = sequential(a.url, "vm")
        remote, remote_on = sequential(a.url, "container")
        assert remote_on == {"peer:b"}, remote_on
        assert not any(p.startswith("peer:") for p in local_on), local_on
        return {
            "local_p50_ms": 1000 * percentile(local, 50),
            "local_p99_ms": 1000 * percentile(local, 99),
            "remote_p50_ms": 1000 * percentile(remote, 50),
            "remote_p99_ms": 1000 * percentile(remote, 99),
            "local_per_s": burst(a.url, "vm"),
            "remote_per_s": burst(a.url, "container"),
        }
    finally:
        for proc in (sim_a, a, sim_b, b):
            proc.stop()


def main():
    runs = []
    for i in range(RUNS):
        r = one_run()
        runs.append(r)
        print(f"run {i + 1}: " + " ".join(f"{k}={v:.1f}" for k, v in r.items()), flush=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print("median: " + " ".join(f"{k}={v:.1f}" for k, v in med.items()))
    print(f"remote/local latency p50 x{med['remote_p50_ms'] / med['local_p50_ms']:.2f}, "
          f"p99 x{med['remote_p99_ms'] / med['local_p99_ms']:.2f}; "
          f"throughput remote/local x{med['remote_per_s'] / med['local_per_s']:.2f}")


if __name__ == "__main__":
    main()
