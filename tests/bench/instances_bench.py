#!/usr/bin/env python3
"""Instances and rehydration benchmark (issue #4, BENCHMARKS.md): N catalog item instances
across P simulated vm providers, half the providers made Unavailable, every instance rehydrated
concurrently, then the cleanup queue drained once the old providers come back.

One `dcm serve --dev` (embedded mock Kafka, fast health settings, short cleanup interval) and
one `dcm sp-sim --count P`. Phases, all through the public HTTP API:

  1. create   N `POST /catalog-item-instances` from C client threads (keep-alive, one
              connection each): the baseline. Per-provider spread from sp-sim's instance_ids.
  2. outage   providers 0..P/2-1 answer /health with 503; wait until dcm says Unavailable.
  3. rehydrate all N `POST /catalog-item-instances/{id}:rehydrate` from C threads: wall time,
              p50/p99/max per request (a 202 is read-your-writes: the saga completed), CPU and
              peak RSS of `dcm serve`. Checks: N × 202, every new resource on the healthy half
              (sp-sim instance_ids), no DELETE reached the Unavailable half.
  4. cleanup  the old instances on the healthy half are deleted by the next cleanup cycles,
              the Unavailable half's records are parked (PENDING_PROVIDER): timed.
  5. recovery the Unavailable half is made healthy; from the moment all P are Ready again until
              `GET /cleanup-queue` is empty: records/s. Checks via sp-sim that every old id was
              deleted exactly once (deleted_ids, deletes_received) and only the new ids remain.

  python3 tests/bench/instances_bench.py --dcm build-bench/src/dcm --instances 1000 \
      --providers 10 --clients 64 --breakdown

--breakdown reads both topics back with kcat at the end and adds, per operation type, the p50
and p99 of each hop (client send → operation_requested → operation_started → each fact →
client receive; event times are ms, stamped when produced) and the cleanup cycles (facts of
the cleanup worker grouped by time: how many records each parked and attempted, how long it
took). --perf-out FILE runs `perf record -p <dcm serve>` over the rehydrate phase.

Prints one JSON line per run (progress on stderr).
"""

import argparse
import collections
import json
import os
import math
import queue
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the shared e2e harness
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from harness import API, Client, Process, SpSim, wait_until  # noqa: E402
from health_bench import histogram_quantile, metrics, proc_stat  # noqa: E402


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(values, q):
    """Nearest-rank percentile of a list (q in 0..1)."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def ms(x):
    return None if x is None else round(1000 * x, 1)


class Sampler:
    """Samples VmRSS of a process every `period` s; keeps the peak."""

    def __init__(self, pid, period=0.05):
        self.pid, self.period, self.peak_kib = pid, period, 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop_flag.is_set():
            try:
                _, rss = proc_stat(self.pid)
                self.peak_kib = max(self.peak_kib, rss)
            except OSError:
                return
            time.sleep(self.period)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join()


def other_cpu(sim):
    """CPU seconds of the load generator (this process) and of sp-sim."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"client": ru.ru_utime + ru.ru_stime, "sp_sim": proc_stat(sim.proc.proc.pid)[0]}


def cpu_percents(before, after, wall):
    return {f"{k}_cpu_percent": round(100 * (after[k] - before[k]) / wall, 1) for k in before}


class DeletePoller:
    """Polls sp-sim's delete counter every `period` s: [(monotonic, deletes since start)]."""

    def __init__(self, sim, base, period=0.02):
        self.control = Client(f"http://{sim.control.host}:{sim.control.port}")
        self.base, self.period, self.samples = base, period, []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop_flag.is_set():
            d = self.control.get("/sim/stats").json()["deletes_received"] - self.base
            self.samples.append((time.monotonic(), d))
            time.sleep(self.period)

    def stop(self):
        self.stop_flag.set()
        self.thread.join()
        self.control.close()


def run_concurrently(url, clients, items, request):
    """`request(client, item)` -> (status, body) for every item, from `clients` threads with one
    keep-alive connection each. Returns (wall_s, [(item, status, body, latency_s, sent_unix_s,
    received_unix_s)])."""
    work = queue.Queue()
    for item in items:
        work.put(item)
    results, lock = [], threading.Lock()
    start = threading.Barrier(clients + 1)

    def worker():
        client = Client(url, timeout=120)
        mine = []
        start.wait()
        while True:
            try:
                item = work.get_nowait()
            except queue.Empty:
                break
            w0, t0 = time.time(), time.perf_counter()
            try:
                status, body = request(client, item)
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                status, body = 0, repr(e)
            mine.append((item, status, body, time.perf_counter() - t0, w0, time.time()))
        client.close()
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, results


def latency_summary(results, ok_status):
    lat = [r[3] for r in results]
    statuses = collections.Counter(r[1] for r in results)
    errors = [{"item": r[0], "status": r[1], "body": (r[2] or "")[:300]}
              for r in results if r[1] != ok_status]
    return {"p50_ms": ms(pct(lat, 0.50)), "p99_ms": ms(pct(lat, 0.99)), "max_ms": ms(max(lat)),
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "errors": errors[:10]}


def event_ms(event):
    return harness.rfc3339_ms(event["time"])


def breakdown(requests, facts, results, operation):
    """Where one operation's time goes, from the event times (ms, stamped when produced) on
    dcm.instance-requests and dcm.instances and the client's send/receive times: median and p99
    of each hop, over the operations of type `operation` answered in `results`."""
    asked = {r[0]: (r[4], r[5]) for r in results}
    req_of = {}
    for e in requests:
        d = e["data"]
        if d.get("operation") == operation and d.get("root") in asked:
            req_of[e["id"]] = (d["root"], event_ms(e))  # the event id is the request id
    steps = collections.defaultdict(list)
    for e in facts:  # in log order: one partition per root
        rid = e["data"].get("request_id")
        if rid in req_of:
            steps[rid].append((event_ms(e), e["type"].removeprefix("dcm.")))
    hops = collections.defaultdict(list)
    for rid, (root, t_req) in req_of.items():
        sent, received = asked[root]
        chain = [(sent * 1000, "client_send"), (t_req, "requested")] + steps[rid] + \
            [(received * 1000, "client_receive")]
        for (t0, a), (t1, b) in zip(chain, chain[1:]):
            hops[f"{a}->{b}"].append(t1 - t0)
    common = [k for k in hops if len(hops[k]) >= len(req_of) // 2]  # the usual chain
    return {k: {"p50_ms": round(pct(hops[k], 0.5), 1), "p99_ms": round(pct(hops[k], 0.99), 1)}
            for k in common}


def cleanup_cycles(facts, t0_ms):
    """The cleanup worker's facts grouped into cycles (a gap > 500 ms starts a new one): start
    (ms after t0), duration, and how many records were parked and attempted in each."""
    marks = sorted((event_ms(e), e["type"].rsplit(".", 1)[1]) for e in facts
                   if e["type"] in ("dcm.cleanup.parked", "dcm.cleanup.attempted"))
    cycles = []
    for t, kind in marks:
        if not cycles or t - cycles[-1]["end"] > 500:
            cycles.append({"start": t, "end": t, "parked": 0, "attempted": 0})
        cycles[-1]["end"] = t
        cycles[-1][kind] += 1
    return [{"start_ms": c["start"] - t0_ms, "duration_ms": c["end"] - c["start"],
             "parked": c["parked"], "attempted": c["attempted"]} for c in cycles]


def list_all(client, path, key):
    out, token = [], None
    while True:
        sep = "&" if "?" in path else "?"
        page = client.get(f"{path}{sep}max_page_size=100"
                          + (f"&page_token={token}" if token else ""))
        assert page.status == 200, page
        body = page.json()
        out += body[key]
        token = body.get("next_page_token")
        if not token:
            return out


def health_by_name(client):
    providers = list_all(client, f"{API}/providers", "providers")
    return {p["name"]: p["health_status"] for p in providers}


def sim_providers(sim):
    return sim.providers()


def run(args):
    harness.DCM_BIN = args.dcm
    data_dir = tempfile.mkdtemp(prefix="dcm-bench-instances-")
    serve = Process([args.dcm, "serve", "--dev", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                     "--instance-id", "bench", "--log-level", "warn",
                     "--http-threads", str(args.http_threads),
                     "--health-check-interval", args.health_interval,
                     "--health-check-base-backoff-interval", args.backoff_base,
                     "--health-check-max-backoff-interval", args.backoff_max,
                     "--cleanup-interval", args.cleanup_interval,
                     "--instance-worker-threads", str(args.worker_threads),
                     "--operation-timeout", "120s", *args.serve_arg], "serve")
    line = serve.read_line()
    assert "listening on " in line, line
    url = line.split("listening on ")[1].strip()
    bootstrap = serve.read_line().split(": ", 1)[1]
    pid = serve.proc.pid
    client = Client(url)
    sim = None
    result = {"instances": args.instances, "providers": args.providers, "clients": args.clients,
              "worker_threads": args.worker_threads, "http_threads": args.http_threads,
              "cleanup_interval": args.cleanup_interval, "health_interval": args.health_interval}
    try:
        wait_until(lambda: client.get("/readyz").status == 200, timeout=60, what="serve ready")
        sim = SpSim(url, args.providers, extra=["--register-concurrency", str(args.providers)],
                    name_prefix="bench")
        names = [f"bench-vm-{i}" for i in range(args.providers)]
        down, up = set(names[:args.providers // 2]), set(names[args.providers // 2:])
        wait_until(lambda: all(s == "Ready" for s in health_by_name(client).values())
                   and len(health_by_name(client)) == args.providers,
                   timeout=60, interval=0.2, what="all providers Ready")
        log(f"serve pid {pid} at {url}; {args.providers} providers Ready")

        # ---- 1. create (baseline) ------------------------------------------------------------
        ids = [f"cii-{i:05d}" for i in range(args.instances)]

        def create(c, cid):
            r = c.post(f"{API}/catalog-item-instances?id={cid}",
                       {"display_name": cid, "spec": {"service_type": "vm", "cpu": 2,
                                                      "memory": "4GiB"}})
            return r.status, r.body.decode(errors="replace")

        m0, (cpu0, _), others0 = metrics(client), proc_stat(pid), other_cpu(sim)
        create_wall, created = run_concurrently(url, args.clients, ids, create)
        m1, (cpu1, _), others1 = metrics(client), proc_stat(pid), other_cpu(sim)
        result["create"] = {"wall_s": round(create_wall, 2),
                            "per_s": round(len(ids) / create_wall, 1),
                            **latency_summary(created, 201),
                            "saga_p50_ms": ms(histogram_quantile(
                                m0, m1, "dcm_instance_operation_seconds", 0.5)),
                            "saga_p99_ms": ms(histogram_quantile(
                                m0, m1, "dcm_instance_operation_seconds", 0.99)),
                            "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / create_wall, 1),
                            **cpu_percents(others0, others1, create_wall)}
        old_resource = {r[0]: json.loads(r[2])["resource_id"] for r in created if r[1] == 201}
        sp = sim_providers(sim)
        result["create"]["spread"] = {n: len(sp[n]["instance_ids"]) for n in names}
        old_on = {n: set(sp[n]["instance_ids"]) for n in names}
        log(f"create: {result['create']}")

        # ---- 2. outage -----------------------------------------------------------------------
        for n in sorted(down):
            sim.set_fault(n, health="503")
        t0 = time.time()
        wait_until(lambda: all(health_by_name(client)[n] == "Unavailable" for n in down),
                   timeout=60, interval=0.2, what="half the providers Unavailable")
        result["unavailable_after_s"] = round(time.time() - t0, 1)
        deletes_before = {n: sp_now["deletes_received"] for n, sp_now in sim_providers(sim).items()}

        # ---- 3. rehydrate --------------------------------------------------------------------
        def rehydrate(c, cid):
            r = c.post(f"{API}/catalog-item-instances/{cid}:rehydrate")
            return r.status, r.body.decode(errors="replace")

        m0, (cpu0, _), others0 = metrics(client), proc_stat(pid), other_cpu(sim)
        deletes = DeletePoller(sim, sum(deletes_before.values()))
        perf = None
        if args.perf_out:
            perf = subprocess.Popen(["perf", "record", "-F", "999", *args.perf_arg, "-p", str(pid),
                                     "-o", args.perf_out], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        t_reh_start = time.monotonic()
        with Sampler(pid) as rss:
            reh_wall, rehydrated = run_concurrently(url, args.clients, ids, rehydrate)
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        t_reh_end = time.monotonic()
        m1, (cpu1, rss_end), others1 = metrics(client), proc_stat(pid), other_cpu(sim)
        ok = [r for r in rehydrated if r[1] == 202]
        replies = {r[0]: json.loads(r[2]) for r in ok}
        new_provider = collections.Counter(b["provider_name"] for b in replies.values())
        sp = sim_providers(sim)
        deletes_down_during = sum(sp[n]["deletes_received"] - deletes_before[n] for n in down)
        new_ids = {b["resource_id"] for b in replies.values()}
        new_on_up = set().union(*(sp[n]["instance_ids"] for n in up))
        old_ok = all(b["old_resource_id"] == old_resource.get(cid) for cid, b in replies.items())
        result["rehydrate"] = {
            "wall_s": round(reh_wall, 2), "per_s": round(len(ids) / reh_wall, 1),
            **latency_summary(rehydrated, 202),
            "count_202": len(ok),
            "saga_p50_ms": ms(histogram_quantile(m0, m1, "dcm_instance_operation_seconds", 0.5)),
            "saga_p99_ms": ms(histogram_quantile(m0, m1, "dcm_instance_operation_seconds", 0.99)),
            "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / reh_wall, 1),
            "cpu_s": round(cpu1 - cpu0, 2),
            **cpu_percents(others0, others1, reh_wall),
            "peak_rss_mib": round(rss.peak_kib / 1024, 1), "rss_end_mib": round(rss_end / 1024, 1),
            "new_spread": {n: new_provider.get(n, 0) for n in names},
            "all_new_on_healthy_half": all(b["provider_name"] in up for b in replies.values())
            and new_ids <= new_on_up,
            "old_resource_ids_match": old_ok,
            "deletes_to_unavailable_during": deletes_down_during,
            "cleanup_deletes_on_healthy_half_during": sum(
                sp[n]["deletes_received"] - deletes_before[n] for n in up),
        }
        result["rehydrate_vs_create"] = round(reh_wall / create_wall, 2)
        # other work on the machine (the benchmark shares 2 cores with whatever else runs)
        result["loadavg_1m_after_rehydrate"] = round(os.getloadavg()[0], 2)
        log(f"rehydrate: { {k: v for k, v in result['rehydrate'].items() if k != 'errors'} }")

        # ---- 4. cleanup of the healthy half, parking of the other ---------------------------
        old_down = set().union(*(old_on[n] for n in down))
        old_up = set().union(*(old_on[n] for n in up))

        def queue_state():
            recs = list_all(client, f"{API}/cleanup-queue", "records")
            by = collections.Counter(
                ("down" if r["provider_name"] in down else "up", r["status"]) for r in recs)
            return recs, by

        recs, by = queue_state()
        result["queue_at_rehydrate_end"] = {f"{k[0]}:{k[1]}": v for k, v in sorted(by.items())}

        t_up_gone = t_parked = None
        while t_up_gone is None or t_parked is None:
            now = time.monotonic()
            if now - t_reh_end > 120:
                raise AssertionError(f"healthy half not cleaned / not parked: {dict(by)}")
            _, by = queue_state()
            if t_up_gone is None and sum(v for k, v in by.items() if k[0] == "up") == 0:
                t_up_gone = now
            if t_parked is None and by.get(("down", "PENDING_PROVIDER"), 0) == len(old_down):
                t_parked = now
            time.sleep(0.1)
        deletes.stop()
        up_deletes = [t for t, d in deletes.samples if d > 0]
        result["healthy_half_cleanup"] = {
            "records": len(old_up),
            "first_delete_s": round(up_deletes[0] - t_reh_start, 2) if up_deletes else None,
            "last_delete_s": round(min((t for t, d in deletes.samples if d >= len(old_up)),
                                       default=t_up_gone) - t_reh_start, 2),
            "queue_free_of_healthy_half_s": round(t_up_gone - t_reh_start, 2),
            "all_parked_s": round(t_parked - t_reh_start, 2),
            "rehydrate_wall_s": round(reh_wall, 2)}
        h = result["healthy_half_cleanup"]
        if h["first_delete_s"] is not None:
            h["records_per_s_delete_window"] = round(
                len(old_up) / max(h["last_delete_s"] - h["first_delete_s"], 0.02), 1)
        sp = sim_providers(sim)
        dup_up = [n for n in up if sp[n]["deletes_received"] != len(old_on[n])
                  or sorted(sp[n]["deleted_ids"]) != sorted(old_on[n])]
        result["healthy_half_cleanup"]["each_old_id_deleted_once"] = not dup_up

        # ---- 5. recovery: drain PENDING_PROVIDER ---------------------------------------------
        time.sleep(args.settle)
        deletes_pre = sim.control.get("/sim/stats").json()["deletes_received"]
        m0, (cpu0, _) = metrics(client), proc_stat(pid)
        for n in sorted(down):
            sim.set_fault(n, health="healthy")
        t_fix = time.monotonic()
        wait_until(lambda: all(s == "Ready" for s in health_by_name(client).values()),
                   timeout=60, interval=0.05, what="all Ready again")
        t_ready = time.monotonic()

        def deleted_since_fix():
            return sim.control.get("/sim/stats").json()["deletes_received"] - deletes_pre

        deleted_at_ready = deleted_since_fix()
        while deleted_since_fix() < len(old_down):
            if time.monotonic() - t_ready > 300:
                raise AssertionError("drain stalled")
            time.sleep(0.02)
        wait_until(lambda: client.get(f"{API}/cleanup-queue?max_page_size=1").json()["records"]
                   == [], timeout=120, interval=0.02, what="cleanup queue empty")
        t_empty = time.monotonic()
        m1, (cpu1, _) = metrics(client), proc_stat(pid)
        sp = sim_providers(sim)
        bad = [n for n in down if sp[n]["deletes_received"] != len(old_on[n])
               or sorted(sp[n]["deleted_ids"]) != sorted(old_on[n])
               or sp[n]["instance_ids"]]
        remaining = set().union(*(sp[n]["instance_ids"] for n in names))
        result["recovery_drain"] = {
            "records": len(old_down),
            "ready_after_fix_s": round(t_ready - t_fix, 2),
            # deleted by a cycle that ran while only some of them were Ready again
            "deleted_before_all_ready": deleted_at_ready,
            "ready_to_empty_s": round(t_empty - t_ready, 2),
            "records_per_s_ready_to_empty": round(
                (len(old_down) - deleted_at_ready) / (t_empty - t_ready), 1),
            "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / (t_empty - t_fix), 1),
            "each_old_id_deleted_once": not bad,
            "only_new_ids_remain": remaining == new_ids,
            "cleanup_attempts": {k.split("\"")[1]: v - m0.get(k, 0) for k, v in m1.items()
                                 if k.startswith("dcm_cleanup_attempts_total{")},
        }
        log(f"recovery: {result['recovery_drain']}")
        if args.breakdown:
            facts = harness.kafka_events(bootstrap, "dcm.instances", timeout=120)
            requests = harness.kafka_events(bootstrap, "dcm.instance-requests", timeout=120)
            result["breakdown_create"] = breakdown(requests, facts, created,
                                                   "create_catalog_item_instance")
            result["breakdown_rehydrate"] = breakdown(requests, facts, rehydrated,
                                                      "rehydrate_catalog_item_instance")
            # start_ms: after the first rehydration was sent
            cycles = cleanup_cycles(facts, int(min(r[4] for r in rehydrated) * 1000))
            result["cleanup_cycles"] = cycles
            # the cycles' own pace: records handled per second of cycle time
            only_deletes = [c for c in cycles if c["parked"] == 0 and c["attempted"] >= 50]
            with_parking = [c for c in cycles if c["parked"] >= 50]
            for key, group in (("deletes_only", only_deletes), ("with_parking", with_parking)):
                n = sum(c["parked"] + c["attempted"] for c in group)
                ms_total = sum(max(c["duration_ms"], 1) for c in group)
                result[f"cycle_records_per_s_{key}"] = \
                    round(1000 * n / ms_total, 1) if group else None
        print(json.dumps(result), flush=True)
        return result
    finally:
        if sim:
            sim.stop()
        client.close()
        rc = serve.kill()
        if rc not in (0, None):
            log(f"serve exited {rc}; log {serve.log.name}:\n{serve.tail()}")
        shutil.rmtree(data_dir, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dcm", default="build-bench/src/dcm")
    p.add_argument("--instances", type=int, default=1000)
    p.add_argument("--providers", type=int, default=10)
    p.add_argument("--clients", type=int, default=64, help="client threads, one connection each")
    p.add_argument("--worker-threads", type=int, default=32, help="--instance-worker-threads")
    p.add_argument("--http-threads", type=int, default=0, help="0 = one per core")
    p.add_argument("--health-interval", default="1s")
    p.add_argument("--backoff-base", default="1s")
    p.add_argument("--backoff-max", default="2s")
    p.add_argument("--cleanup-interval", default="2s")
    p.add_argument("--settle", type=float, default=1.0,
                   help="pause before recovery so no cleanup cycle is mid-flight")
    p.add_argument("--perf-out", help="perf record `dcm serve` over the rehydrate phase into this")
    p.add_argument("--perf-arg", action="append", default=[], help="extra perf record argument")
    p.add_argument("--breakdown", action="store_true",
                   help="read the topics back with kcat and report where an operation's time goes")
    p.add_argument("--serve-arg", action="append", default=[],
                   help="extra `dcm serve` argument (repeatable)")
    run(p.parse_args())


if __name__ == "__main__":
    main()
