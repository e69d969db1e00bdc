"""`dcm projections verify|rebuild` end to end (SPEC §3.4, §5.4; issue #5): a real `dcm dev-kafka`,
`dcm serve` and `dcm sp-sim` with a mixed workload (registrations through sp-sim, probes every
300 ms, a catalog item instance created and rehydrated, the old resource's deferred cleanup, an
explicit deferred delete), then `dcm projections verify` against serve's data dir WHILE serve
keeps applying probes: every projection must `match`. `rebuild --out` keeps a store; bad input
and an unreachable Kafka end with exit 2 within a bounded time."""

import os
import shutil
import subprocess
import tempfile
import time
import unittest
import uuid

from harness import API, DCM_BIN, Cluster, SpSim, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s",
        "--cleanup-interval", "1s", "--sp-timeout", "3s"]
PROJECTIONS = ["registry", "health", "peer-health", "instances", "sp-status", "federation",
               "audit"]


class ProjectionsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(partitions=4)
        cls.server = cls.cluster.serve(extra=FAST)
        cls.c = cls.server.client
        cls.sim = SpSim(cls.server.url, 3, name_prefix="proj")
        cls.sim.wait_registered()
        cls.out = tempfile.mkdtemp(prefix="dcm-e2e-rebuild-")
        shutil.rmtree(cls.out)  # `rebuild --out` wants a new or empty directory

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.cluster.close()
        shutil.rmtree(cls.out, ignore_errors=True)

    def projections(self, verb, *extra, data_dir=None, brokers=None, timeout=60):
        args = [DCM_BIN, "projections", verb, "--data-dir", data_dir or self.server.data_dir,
                "--kafka-brokers", brokers or self.cluster.bootstrap,
                "--topic-prefix", self.cluster.prefix, "--no-progress", *extra]
        if not self.cluster.external:
            args += ["--fetch-wait-max-ms", "10"]
        started = time.monotonic()
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return out, time.monotonic() - started

    def lines_of(self, stdout):
        """{projection: its result line}."""
        found = {}
        for line in stdout.splitlines():
            name = line.split(" ", 1)[0]
            if name in PROJECTIONS:
                found[name] = line
        return found

    def mixed_workload(self):
        def all_ready():
            providers = self.c.get(f"{API}/providers").json()["providers"]
            return providers and all(p["health_status"] == "Ready" for p in providers)

        wait_until(all_ready, timeout=15, what="every provider probed and Ready")
        cid = f"web-{uuid.uuid4().hex[:6]}"
        r = self.c.post(f"{API}/catalog-item-instances?id={cid}",
                        {"display_name": "web", "spec": {"service_type": "vm", "cpu": 2}})
        self.assertEqual(r.status, 201, r)
        r = self.c.post(f"{API}/catalog-item-instances/{cid}:rehydrate")
        self.assertEqual(r.status, 202, r)
        provider = sorted(self.sim.providers())[0]
        sid = f"s-{uuid.uuid4().hex[:8]}"
        r = self.c.post(f"{API}/service-type-instances?id={sid}",
                        {"provider_name": provider, "spec": {"service_type": "vm", "cpu": 1}})
        self.assertEqual(r.status, 201, r)
        r = self.c.request("DELETE", f"{API}/service-type-instances/{sid}?deferred=true")
        self.assertEqual(r.status, 204, r)
        # The cleanup worker deletes both queued resources (the rehydrated one's old resource
        # and `sid`): the queue empties.
        wait_until(lambda: self.c.get(f"{API}/cleanup-queue").json()["records"] == [],
                   timeout=15, what="cleanup queue drained")

    def test_1_verify_while_serve_runs_matches_every_projection(self):
        self.mixed_workload()
        out, _ = self.projections("verify")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        lines = self.lines_of(out.stdout)
        self.assertEqual(sorted(lines), sorted(PROJECTIONS), out.stdout)
        for name, line in lines.items():
            self.assertTrue(line.endswith(" match"), line)
        for name in ("registry", "health", "instances"):
            self.assertNotIn("events=0 ", lines[name], lines[name])
        self.assertIn("not rebuilt or compared (worker state", out.stdout)
        # verify leaves nothing behind in the data dir.
        self.assertEqual([d for d in os.listdir(self.server.data_dir) if d.startswith("verify-")],
                         [])

    def test_2_rebuild_keeps_the_rebuilt_store(self):
        out, _ = self.projections("rebuild", "--out", self.out, "--projection", "registry",
                                  "--projection", "health")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(sorted(self.lines_of(out.stdout)), ["health", "registry"], out.stdout)
        self.assertIn(f"rebuilt store kept at {self.out}", out.stdout)
        self.assertTrue(os.path.exists(os.path.join(self.out, "CURRENT")), os.listdir(self.out))

    def test_3_bad_input_exits_2(self):
        out, _ = self.projections("verify", data_dir="/nonexistent/dcm-data")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("no data dir", out.stderr)
        out, _ = self.projections("verify", "--projection", "nope")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("unknown projection", out.stderr)

    def test_4_unreachable_kafka_exits_2_in_bounded_time(self):
        out, seconds = self.projections("verify", "--timeout", "3", brokers="127.0.0.1:1")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertLess(seconds, 20)


if __name__ == "__main__":
    main()
