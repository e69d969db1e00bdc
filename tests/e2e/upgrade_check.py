"""A log and a store written by an older build, read by this one (issue #16's acceptance).

Usage: OLD_DCM_BIN=/path/to/old/dcm DCM_BIN=/path/to/new/dcm python3 tests/e2e/upgrade_check.py

The OLD build runs `dcm dev-kafka`, `dcm serve` and `dcm sp-sim` through a mixed workload (three
providers registered and probed, a catalog item instance created and rehydrated with its old
resource's deferred cleanup, a service-type instance deleted through the cleanup queue, a
provider deleted). The old serve stops. Then the NEW build:
  1. `dcm projections verify` on the old data dir against the old log: every projection `match`;
  2. `dcm serve` on the old data dir: the same providers and instances are served, and new
     writes (a registration, a catalog item instance and its rehydration) succeed on top;
  3. `verify` again, now over a log written by both builds: every projection `match`.
Not part of ctest (CI has no old build): scripts/check-upgrade.sh builds one and runs this.
"""

import os
import subprocess
import sys
import unittest
import uuid

import harness
from harness import API, Cluster, SpSim, main, provider_body, wait_until

OLD = os.environ.get("OLD_DCM_BIN")
NEW = os.environ.get("DCM_BIN", "build/src/dcm")
FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s",
        "--cleanup-interval", "1s", "--sp-timeout", "3s"]
PROJECTIONS = ["registry", "health", "instances", "sp-status", "audit"]


def use(binary):
    harness.DCM_BIN = binary


def all_ready(client):
    providers = client.get(f"{API}/providers").json()["providers"]
    return providers and all(p["health_status"] == "Ready" for p in providers)


def workload(test, client, sim):
    """Writes every kind of event through `client`; returns the catalog item instance id."""
    wait_until(lambda: all_ready(client), timeout=20, what="every provider Ready")
    cid = f"web-{uuid.uuid4().hex[:6]}"
    r = client.post(f"{API}/catalog-item-instances?id={cid}",
                    {"display_name": "web", "spec": {"service_type": "vm", "cpu": 2}})
    test.assertEqual(r.status, 201, r)
    r = client.post(f"{API}/catalog-item-instances/{cid}:rehydrate")
    test.assertEqual(r.status, 202, r)
    provider = sorted(sim.providers())[0]
    sid = f"s-{uuid.uuid4().hex[:8]}"
    r = client.post(f"{API}/service-type-instances?id={sid}",
                    {"provider_name": provider, "spec": {"service_type": "vm", "cpu": 1}})
    test.assertEqual(r.status, 201, r)
    r = client.request("DELETE", f"{API}/service-type-instances/{sid}?deferred=true")
    test.assertEqual(r.status, 204, r)
    wait_until(lambda: client.get(f"{API}/cleanup-queue").json()["records"] == [],
               timeout=20, what="cleanup queue drained")
    wait_until(lambda: client.get(f"{API}/catalog-item-instances/{cid}").json()
               .get("status") not in (None, "REHYDRATING"), timeout=20, what="rehydrated")
    gone = client.post(f"{API}/providers", provider_body(f"gone-{uuid.uuid4().hex[:6]}"))
    test.assertEqual(gone.status, 201, gone)
    r = client.request("DELETE", f"{API}/providers/{gone.json()['id']}")
    test.assertEqual(r.status, 204, r)
    return cid


class UpgradeTest(unittest.TestCase):

    def verify(self, data_dir):
        out = subprocess.run(
            [NEW, "projections", "verify", "--data-dir", data_dir, "--kafka-brokers",
             self.cluster.bootstrap, "--topic-prefix", self.cluster.prefix, "--no-progress",
             "--fetch-wait-max-ms", "10"], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        lines = {line.split(" ", 1)[0]: line for line in out.stdout.splitlines()
                 if line.split(" ", 1)[0] in PROJECTIONS}
        self.assertEqual(sorted(lines), sorted(PROJECTIONS), out.stdout)
        for line in lines.values():
            self.assertTrue(line.endswith(" match"), line)
        return out.stdout

    def test_a_log_and_store_written_by_the_old_build_verify_and_serve_on_the_new(self):
        # The broker (`dcm dev-kafka`) is the new build's: a deployment upgrades `dcm serve`,
        # not its Kafka, and the new topics (the probes topic of issue #13) exist from the start,
        # as `dcm serve` creates them on a real broker (the mock has no Admin API to).
        use(NEW)
        self.cluster = Cluster(partitions=4)
        use(OLD)
        try:
            old = self.cluster.serve(extra=FAST, name="old")
            sim = SpSim(old.url, 3, name_prefix="upg")
            sim.wait_registered()
            cid = workload(self, old.client, sim)
            before = {p["id"]: p["name"] for p in old.providers()}
            instance = old.client.get(f"{API}/catalog-item-instances/{cid}").json()
            sim.stop()
            self.assertEqual(old.stop(), 0)

            use(NEW)
            print(self.verify(old.data_dir), file=sys.stderr)
            new = self.cluster.serve(data_dir=old.data_dir, extra=FAST, name="new")
            self.assertEqual({p["id"]: p["name"] for p in new.providers()}, before)
            self.assertEqual(new.client.get(f"{API}/catalog-item-instances/{cid}").json(),
                             instance)
            sim = SpSim(new.url, 3, name_prefix="upg")  # the same names: re-registrations
            sim.wait_registered()
            workload(self, new.client, sim)
            sim.stop()
            print(self.verify(old.data_dir), file=sys.stderr)
        finally:
            self.cluster.close()


if __name__ == "__main__":
    if not OLD:
        sys.exit("set OLD_DCM_BIN to the older build's dcm binary")
    main()
