"""Several `dcm serve` processes on one Kafka (a `dcm dev-kafka` process, or $KAFKA_BROKERS):
uniqueness under contention across instances (SPEC §5.1), kill -9 during a registration storm
(§5.2, §5.3) and rebuilding a fresh instance from offset 0 (§5.4)."""

import os
import random
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

from harness import API, DCM_BIN, SERVE_ENV, Client, Cluster, main, provider_body, wait_until


def converge(instances, timeout=60):
    """Waits until every instance serves the same registry; returns it."""
    def same():
        digests = {i.digest() for i in instances}
        return len(digests) == 1 and digests.pop()
    wait_until(same, timeout=timeout, interval=0.2, what="instances to converge")
    return instances[0].providers()


class UniquenessTest(unittest.TestCase):
    def test_contended_names_across_two_instances_stay_unique(self):
        cluster = Cluster()
        try:
            a, b = cluster.serve(name="a"), cluster.serve(name="b")
            names = [f"contended-{i:02d}" for i in range(16)]
            replies, lock = [], threading.Lock()

            def client(n):
                rng = random.Random(n)
                c = Client((a if n % 2 else b).url)
                for _ in range(12):
                    name = rng.choice(names)
                    use_id = rng.random() < 0.8
                    q = f"?id=id-{rng.randrange(48):02d}" if use_id else ""
                    r = c.post(f"{API}/providers{q}", provider_body(name))
                    with lock:
                        replies.append((name, r.status, r.json()))
                c.close()

            threads = [threading.Thread(target=client, args=(n,)) for n in range(64)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

            final = converge([a, b])
            by_name, by_id = {}, {}
            for p in final:
                self.assertNotIn(p["name"], by_name, f"two providers named {p['name']}")
                self.assertNotIn(p["id"], by_id, f"two providers with id {p['id']}")
                by_name[p["name"]], by_id[p["id"]] = p["id"], p["name"]
            self.assertEqual(set(by_name), set(names))
            statuses = {}
            for name, status, body in replies:
                statuses[status] = statuses.get(status, 0) + 1
                self.assertIn(status, (200, 201, 409), body)
                if status in (200, 201):  # every 2xx reply agrees with the final state
                    self.assertEqual(by_name[name], body["id"], (name, body))
                else:
                    self.assertIn(body["conflict"]["id"], by_id, body)
            self.assertEqual(len(replies), 64 * 12)
            self.assertEqual(statuses.get(201, 0), 16, statuses)  # each name created once
            print(f"statuses: {statuses}")
        finally:
            cluster.close()


class CrashAndRebuildTest(unittest.TestCase):
    def test_kill_9_during_a_storm_loses_no_acknowledged_registration(self):
        cluster = Cluster()
        try:
            data_dir = None
            a = cluster.serve(name="a")
            data_dir = a.data_dir
            acked, lock, stop = {}, threading.Lock(), threading.Event()

            def storm(n):
                c = Client(a.url, timeout=5)
                i = 0
                while not stop.is_set():
                    name = f"storm-{n:02d}-{i:05d}"
                    i += 1
                    try:
                        r = c.post(f"{API}/providers", provider_body(name))
                    except OSError:
                        c.close()
                        time.sleep(0.05)
                        continue
                    if r.status in (200, 201):
                        with lock:
                            acked[name] = r.json()["id"]
                c.close()

            threads = [threading.Thread(target=storm, args=(n,)) for n in range(16)]
            for t in threads:
                t.start()
            wait_until(lambda: len(acked) >= 300, timeout=60, what="300 acknowledged")
            a.stop(signal.SIGKILL)  # in the middle of the storm
            time.sleep(0.3)
            stop.set()
            for t in threads:
                t.join()
            self.assertGreaterEqual(len(acked), 300)

            restarted = cluster.serve(data_dir=data_dir, name="a2")
            # Registrations in flight at the kill are decided after the restart; wait for quiet.
            wait_until(lambda: restarted.client.get("/admin/info").json()["registry_lag"] == 0,
                       what="restarted instance caught up")
            fresh = cluster.serve(name="rebuild")  # empty data dir: folds from offset 0
            final = converge([restarted, fresh])
            by_name = {}
            for p in final:
                self.assertNotIn(p["name"], by_name, "duplicate after crash")
                by_name[p["name"]] = p["id"]
            missing = [n for n in acked if n not in by_name]
            self.assertEqual(missing, [], "acknowledged registrations lost")
            for name, id in acked.items():
                self.assertEqual(by_name[name], id)
            # The rebuilt instance is byte-identical to the restarted one (converge compared
            # digests); and a third, later rebuild agrees too.
            self.assertEqual(cluster.serve(name="rebuild2").digest(), restarted.digest())
            print(f"acked={len(acked)} final={len(final)}")
        finally:
            cluster.close()


class TopicRulesTest(unittest.TestCase):
    def test_serve_refuses_a_request_topic_with_more_than_one_partition(self):
        if os.environ.get("KAFKA_BROKERS"):
            self.skipTest("needs the mock's auto-creation of topics")
        cluster = Cluster()
        try:
            prefix = f"auto-{uuid.uuid4().hex[:6]}."
            # The mock auto-creates an unknown topic with 4 partitions on first produce, like a
            # broker with auto.create.topics.enable would.
            subprocess.run(["kcat", "-b", cluster.bootstrap, "-P", "-t",
                            f"{prefix}provider-requests"], input=b"x\n", check=True,
                           timeout=30)
            proc = subprocess.run(
                [DCM_BIN, "serve", "--kafka-brokers", cluster.bootstrap, "--topic-prefix", prefix,
                 "--listen", "127.0.0.1:0", "--data-dir", tempfile.mkdtemp(prefix="dcm-e2e-")],
                capture_output=True, text=True, timeout=60, env={**os.environ, **SERVE_ENV})
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn(f"{prefix}provider-requests has 4 partitions", proc.stderr)
            self.assertIn("exactly 1", proc.stderr)
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
