"""Retention gaps from outside (SPEC §7, issue #13): `dcm dev-kafka` keeps 5 MiB per partition,
so registering enough drops the head of the logs.

- The request log lost its head, the outcome log is whole: a fresh instance rebuilds the
  registrar's state from the outcomes and still refuses a duplicate name; /readyz names the gap
  in its audit index (not ready until the operator accepts it with --accept-retention-gaps).
- Both logs lost their heads: a fresh instance decides nothing (its registrar stands by), its
  registry reports the gap, and /readyz says so, also after a restart; the instance that has
  the whole state restarts ready and decides as before."""

import os
import subprocess
import time
import unittest
import uuid

from harness import API, Client, Cluster, main, provider_body, wait_until

BLOB = {"notes": "x" * 60000}  # 60 KiB of metadata: 90 requests overflow a mock partition


def first_offset(bootstrap, topic):
    """The offset of `topic`'s first record still in the log (partition 0)."""
    out = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                          "-c", "1", "-e", "-q", "-f", "%o\n"],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[0]) if out.stdout.strip() else 0


def readyz(client):
    r = client.get("/readyz")
    body = r.json() or {}
    return r.status, body.get("checks", {}), body.get("details", {})


class RetentionGapTest(unittest.TestCase):

    def setUp(self):
        if os.environ.get("KAFKA_BROKERS"):
            self.skipTest("a real cluster keeps its logs: the gap comes from the mock's 5 MiB cap")
        self.cluster = Cluster()
        self.requests = self.cluster.prefix + "provider-requests"
        self.providers = self.cluster.prefix + "providers"

    def tearDown(self):
        self.cluster.close()

    def overflow(self, client, topic, post):
        """Calls post(client, i) until the mock dropped the first record of `topic`."""
        for i in range(0, 400):
            post(client, i)
            if i % 10 == 9 and first_offset(self.cluster.bootstrap, topic) > 0:
                return
        self.fail(f"{topic} kept its head")

    def test_a_fresh_instance_after_the_request_log_lost_its_head_still_refuses_a_duplicate(self):
        a = self.cluster.serve(name="a")
        c = Client(a.url)
        r = c.post(f"{API}/providers", provider_body("early"))
        self.assertEqual(r.status, 201, r)
        early = r.json()["id"]

        def refused(client, i):  # large requests, small outcomes: only the request log fills
            r = client.post(f"{API}/providers?id={uuid.uuid4()}",
                            provider_body("early", metadata=BLOB))
            self.assertEqual(r.status, 409, r)

        self.overflow(c, self.requests, refused)
        self.assertEqual(first_offset(self.cluster.bootstrap, self.providers), 0)
        c.close()
        a.stop()

        b = self.cluster.serve(name="b", wait_ready=False)
        cb = Client(b.url)
        r = cb.post(f"{API}/providers?id={uuid.uuid4()}", provider_body("early"))
        self.assertEqual(r.status, 409, r)
        self.assertIn(early, r.json()["detail"])
        r = cb.post(f"{API}/providers", provider_body("early"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["id"], early)
        r = cb.post(f"{API}/providers", provider_body("later"))
        self.assertEqual(r.status, 201, r)

        # The registrar decides (ready) and names the requests it never read; the audit index
        # lost the dropped requests, so the instance is not ready until that is accepted.
        status, checks, details = wait_until(
            lambda: (s := readyz(cb)) and "projection:audit" in s[2] and
            s[1].get("projection:registry") == "ready" and s,
            what="the audit gap reported, the registry caught up")
        self.assertEqual(status, 503)
        self.assertEqual(checks["registrar"], "ready")
        self.assertEqual(checks["projection:registry"], "ready")
        self.assertEqual(checks["projection:audit"], "not ready")
        self.assertIn(self.requests + "[0]: offsets 0..", details["projection:audit"])
        self.assertIn("dropped by retention", details["projection:audit"])
        self.assertNotIn("projection:registry", details)
        metrics = cb.get("/metrics").body.decode()
        self.assertIn(f'dcm_retention_gap_records_total{{consumer="audit",topic="{self.requests}"}}',
                      metrics)
        cb.close()
        b.stop()

        # A restart still reports it; accepting it makes the instance ready.
        b2 = self.cluster.serve(data_dir=b.data_dir, name="b2", extra=("--accept-retention-gaps",))
        status, checks, details = readyz(b2.client)
        self.assertEqual(status, 200)
        self.assertIn(self.requests + "[0]: offsets 0..", details["projection:audit"])

    def test_a_fresh_instance_after_the_outcome_log_lost_its_head_decides_nothing(self):
        a = self.cluster.serve(name="a")
        c = Client(a.url)
        names = []

        def registered(client, i):  # large registrations: both provider logs fill
            names.append(f"big-{i:03d}")
            r = client.post(f"{API}/providers", provider_body(names[-1], metadata=BLOB))
            self.assertEqual(r.status, 201, r)

        self.overflow(c, self.providers, registered)
        c.close()
        a.stop()

        b = self.cluster.serve(name="b", wait_ready=False,
                               extra=("--decision-timeout", "3s"))
        cb = Client(b.url)
        wait_until(lambda: "registrar" in readyz(cb)[2], what="the registrar's gap reported")
        status, checks, details = readyz(cb)
        self.assertEqual(status, 503)
        self.assertEqual(checks["registrar"], "not ready")
        self.assertEqual(checks["projection:registry"], "not ready")
        self.assertIn(self.providers + "[0]: offsets 0..", details["registrar"])
        self.assertIn(self.providers + "[0]: offsets 0..", details["projection:registry"])
        # It never decides from a log it knows is truncated: the duplicate is not registered.
        t0 = time.monotonic()
        r = cb.post(f"{API}/providers", provider_body(names[0]))
        self.assertEqual(r.status, 503, r)
        self.assertLess(time.monotonic() - t0, 10)
        cb.close()
        b.stop()

        b2 = self.cluster.serve(data_dir=b.data_dir, name="b2", wait_ready=False)
        time.sleep(1)
        status, checks, details = readyz(b2.client)
        self.assertEqual(status, 503)
        self.assertIn("projection:registry", details)
        b2.stop()

        # The instance with the whole state restarts ready and decides as before.
        a2 = self.cluster.serve(data_dir=a.data_dir, name="a2")
        r = a2.client.post(f"{API}/providers?id={uuid.uuid4()}", provider_body(names[0]))
        self.assertEqual(r.status, 409, r)
        r = a2.client.post(f"{API}/providers", provider_body("after-the-gap"))
        self.assertEqual(r.status, 201, r)


if __name__ == "__main__":
    main()
