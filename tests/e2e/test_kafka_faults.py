"""Kafka faults end to end (SPEC §7, issue #13 slice B): a stalled broker (`dcm dev-kafka`
stopped with SIGSTOP) during a registration storm, and 1.2 MB poison records on the request and
status topics. Real `dcm dev-kafka` and `dcm serve` processes; kcat produces and reads."""

import json
import os
import signal
import subprocess
import threading
import time
import unittest
import uuid
from datetime import datetime, timezone

from harness import API, Client, Cluster, main, provider_body, wait_until

WRITE_TIMEOUT_S = 5.0
POST_BOUND_S = 6.0     # every POST answers within this (write timeout + slack)
READYZ_BOUND_S = 15.0  # /readyz names Kafka within this after the stall
RECOVERY_S = 30.0      # registrations succeed again within this after SIGCONT


def readyz(client):
    r = client.get("/readyz")
    return r.status, (r.json() or {}).get("checks", {})


class StalledKafkaTest(unittest.TestCase):
    def test_stalled_broker_503s_writes_in_time_keeps_reads_and_recovers_without_loss(self):
        if os.environ.get("KAFKA_BROKERS"):
            self.skipTest("stops the dev-kafka process")
        cluster = Cluster()
        try:
            a = cluster.serve(name="a", extra=("--write-timeout", f"{WRITE_TIMEOUT_S:g}s"))
            c = Client(a.url, timeout=20)
            r = c.post(f"{API}/providers", provider_body("anchor"))
            self.assertEqual(r.status, 201, r)
            anchor = r.json()["id"]

            acked, replies, lock, stop = {}, [], threading.Lock(), threading.Event()
            stalled_at, resumed_at = [None], [None]

            def client(n):
                cl, i = Client(a.url, timeout=20), 0
                name = f"stall-{n}-{i:04d}"
                while not stop.is_set():
                    t0 = time.monotonic()
                    try:
                        r = cl.post(f"{API}/providers", provider_body(name))
                        status, body, retry = r.status, r.json(), r.headers.get("retry-after")
                    except OSError as e:
                        cl.close()
                        status, body, retry = None, repr(e), None
                    elapsed = time.monotonic() - t0
                    with lock:
                        replies.append((name, status, elapsed, retry, t0, body))
                        if status in (200, 201):
                            acked.setdefault(name, body["id"])
                            if acked[name] != body["id"]:
                                acked[name] = ("two ids", acked[name], body["id"])
                    if status in (200, 201):
                        i += 1
                        name = f"stall-{n}-{i:04d}"  # else retry the same name (idempotent)
                    else:
                        time.sleep(float(retry or 1))
                cl.close()

            threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
            for t in threads:
                t.start()
            wait_until(lambda: len(acked) >= 40, timeout=30, what="40 registrations before")

            os.kill(cluster.kafka.proc.pid, signal.SIGSTOP)
            stalled_at[0] = time.monotonic()
            kafka_named_after = None
            try:
                # Reads keep answering from the projections; /readyz turns 503 naming Kafka.
                while time.monotonic() - stalled_at[0] < READYZ_BOUND_S + 2:
                    r = c.get(f"{API}/providers/{anchor}")
                    self.assertEqual(r.status, 200, r)
                    status, checks = readyz(c)
                    if status == 503 and checks.get("kafka") == "not ready":
                        kafka_named_after = time.monotonic() - stalled_at[0]
                        break
                    time.sleep(0.2)
                self.assertIsNotNone(kafka_named_after, "/readyz never named Kafka")
                self.assertLessEqual(kafka_named_after, READYZ_BOUND_S)
                # Stalled long enough for writes started during the stall to time out too.
                time.sleep(max(0.0, WRITE_TIMEOUT_S + 4 - (time.monotonic() - stalled_at[0])))
                r = c.get(f"{API}/providers/{anchor}")
                self.assertEqual(r.status, 200, r)
            finally:
                os.kill(cluster.kafka.proc.pid, signal.SIGCONT)
                resumed_at[0] = time.monotonic()

            # After SIGCONT, registrations succeed again (retries of names that got 503 too).
            def recovered():
                with lock:
                    return [x for x in replies if x[1] in (200, 201) and x[4] > resumed_at[0]]
            wait_until(lambda: len(recovered()) >= 8, timeout=RECOVERY_S, interval=0.2,
                       what="registrations after the broker resumed")
            recovery_s = min(x[4] + x[2] for x in recovered()) - resumed_at[0]
            time.sleep(1)
            stop.set()
            for t in threads:
                t.join()
            wait_until(lambda: readyz(c)[0] == 200, timeout=30, what="/readyz 200 again")

            # Answers that overlap the stall.
            during = [x for x in replies if x[4] < resumed_at[0] and x[4] + x[2] > stalled_at[0]]
            slow = [x[:4] for x in replies if x[2] > POST_BOUND_S]
            self.assertEqual(slow, [], "POSTs slower than the bound")
            for name, status, elapsed, retry, _, body in replies:
                self.assertIn(status, (200, 201, 503), (name, body))
                if status == 503:
                    self.assertIsNotNone(retry, "503 without Retry-After")
            self.assertTrue(any(x[1] == 503 for x in during), "no 503 while stalled")

            # Every name that got a 2xx is in the registry exactly once, with its id.
            wait_until(lambda: c.get("/admin/info").json()["registry_lag"] == 0, timeout=30,
                       what="registry caught up")
            by_name = {}
            for p in a.providers():
                self.assertNotIn(p["name"], by_name, f"{p['name']} twice")
                by_name[p["name"]] = p["id"]
            for name, pid in acked.items():
                self.assertIsInstance(pid, str, (name, pid))
                self.assertEqual(by_name.get(name), pid, name)
            codes = {}
            for x in replies:
                codes[x[1]] = codes.get(x[1], 0) + 1
            print(f"\nstall: {len(replies)} POSTs {codes}, {len(during)} during the stall, "
                  f"max {max(x[2] for x in replies):.2f}s; /readyz named kafka after "
                  f"{kafka_named_after:.1f}s; first 2xx {recovery_s:.1f}s after SIGCONT; "
                  f"{len(acked)} acknowledged names, all in the registry once")
        finally:
            cluster.close()


def produce_raw(bootstrap, topic, value, key):
    """Produces `value` (bytes) as one record, whatever its size (kcat with a raised limit)."""
    out = subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", topic, "-k", key,
                          "-X", "message.max.bytes=4000000", "-D", "\x01"],
                         input=value, capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr


def dead_letters(bootstrap, topic):
    out = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-q", "-J"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    letters = []
    for line in out.stdout.splitlines():
        record = json.loads(line)
        h = record.get("headers") or []
        record["h"] = dict(zip(h[0::2], h[1::2]))
        letters.append(record)
    return letters


class HugePoisonTest(unittest.TestCase):
    def test_a_1_2_mb_poison_record_on_status_and_requests_is_dead_lettered_and_work_goes_on(self):
        cluster = Cluster()
        try:
            a = cluster.serve(name="a")
            c = a.client
            prefix, boot = cluster.prefix, cluster.bootstrap
            garbage = os.urandom(600 * 1000).hex().encode()  # 1.2 MB of non-JSON
            produce_raw(boot, prefix + "status", garbage, "poisoned")
            produce_raw(boot, prefix + "provider-requests", garbage, "poisoned")
            # A small poison after the big one, in the same partition: the consumers went on.
            produce_raw(boot, prefix + "status", b"{small poison", "poisoned")

            def letters_by(origin):
                return [d for d in dead_letters(boot, prefix + "dead-letter")
                        if d["h"].get("dcm-dlq-topic") == prefix + origin]
            wait_until(lambda: any(d["h"].get("dcm-dlq-consumer") == "sp-status" and
                                   d["h"].get("dcm-dlq-size") == "13"
                                   for d in letters_by("status")),
                       timeout=30, what="the small status poison dead-lettered")
            wait_until(lambda: any(d["h"].get("dcm-dlq-consumer") == "registrar"
                                   for d in letters_by("provider-requests")),
                       timeout=30, what="the request poison dead-lettered by the registrar")
            for origin in ("status", "provider-requests"):
                big = [d for d in letters_by(origin) if d["h"].get("dcm-dlq-size") == "1200000"]
                self.assertTrue(big, origin)
                for d in big:
                    self.assertEqual(d["h"]["dcm-dlq-truncated"], "true")
                    envelope = json.loads(d["payload"])
                    self.assertEqual(envelope["topic"], prefix + origin)
                    self.assertEqual(envelope["size"], 1200000)
                    self.assertEqual(envelope["offset"], int(d["h"]["dcm-dlq-offset"]))
                    self.assertLess(len(d["payload"]), 64 * 1024)

            # Registrations and status updates keep working; every projection stays ready.
            r = c.post(f"{API}/providers", provider_body("after-poison"))
            self.assertEqual(r.status, 201, r)
            before = {p["name"]: p["applied"] for p in
                      c.get("/admin/projections").json()["projections"]}
            rid = str(uuid.uuid4())
            status_event = {
                "specversion": "1.0", "id": str(uuid.uuid4()), "source": "sp/e2e",
                "type": "dcm.status.vm", "subject": rid,
                "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                "datacontenttype": "application/json",
                "data": {"id": rid, "status": "running"}}
            produce_raw(boot, prefix + "status", json.dumps(status_event).encode(), rid)
            wait_until(lambda: {p["name"]: p["applied"] for p in
                                c.get("/admin/projections").json()["projections"]}["sp-status"]
                       > before["sp-status"], timeout=15, what="the status event applied")
            status, checks = readyz(c)
            self.assertEqual(status, 200, checks)
            metrics = c.get("/metrics").body.decode()
            self.assertIn('dcm_dead_letters_total{consumer="registrar"}', metrics)
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
