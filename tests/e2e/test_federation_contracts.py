"""Federation, the provider side's peer API (SPEC §10, issue #17): holds, contracts and their
instances on a real `dcm serve --dev` enclave B with one container SP (`max_instances` 2), called
as enclave `a` would (Fed-Via: a; authentication is off in dev mode).

- Holds take capacity at once: two holds leave 0 available, a third is refused 409, and a
  released or expired hold gives its slot back (expiry is decided by the sweeper).
- A confirmed hold is a contract; B creates its instance on its SP (root `contract:<id>`, the
  contract's remote_instance_id): the SP gets exactly one instance, and the flavour counts it once.
- Renewals keep a contract alive past its TTL; without them B expires it and deletes the SP
  instance; a terminated contract's instance is deleted too.
- Another enclave gets 403 on a's reservation, and `dcm projections verify` matches."""

import shutil
import subprocess
import tempfile
import time
import unittest

from harness import API, DCM_BIN, DevServer, SpSim, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-max-consecutive-failures", "3"]
FED = "/federation/v1alpha1"


class FederationContractsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data_dir = tempfile.mkdtemp(prefix="dcm-e2e-fedc-")
        cls.b = DevServer(extra=[*FAST, "--enclave-id", "enclave-b", "--data-dir", cls.data_dir],
                          env={"FEDERATION_EXPORT_SERVICE_TYPES": "container",
                               "FEDERATION_CONTRACT_TTL": "3s"})
        cls.sim = SpSim(cls.b.url, 1, extra=["--max-instances", "2"], name_prefix="fedc",
                        service_types="container")
        cls.provider = next(iter(cls.sim.wait_registered().values()))
        cls.flavor = wait_until(lambda: cls.flavors(), what="B's container flavour")[0]["flavor_id"]

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.b.stop()
        shutil.rmtree(cls.data_dir, ignore_errors=True)

    @classmethod
    def flavors(cls):
        return cls.b.client.get(f"{FED}/flavors?service_type=container").json()["flavors"]

    def available(self):
        return self.flavors()[0]["instances_available"]

    def call(self, method, path, body=None, enclave="a"):
        return self.b.client.request(method, FED + path, body, headers={"Fed-Via": enclave})

    def reserve(self, rid, ttl="30s"):
        return self.call("POST", "/reservations", {"reservation_id": rid, "flavor_id": self.flavor,
                                                   "spec": {"image": "nginx"}, "ttl": ttl})

    def sp_instances(self):
        return self.sim.instance_ids()[self.provider["name"]]

    def test_1_holds_take_capacity_and_the_third_is_refused(self):
        self.assertEqual(self.available(), 2)
        r = self.reserve("hold-1")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["state"], "held")
        self.assertEqual(self.available(), 1)
        self.assertEqual(self.reserve("hold-1").json()["repeat"], True)
        self.assertEqual(self.reserve("hold-2").status, 201)
        r = self.reserve("hold-3")
        self.assertEqual(r.status, 409, r)
        self.assertEqual(r.json()["reason"], "no_capacity")
        self.assertEqual(self.call("DELETE", "/reservations/hold-1", enclave="c").status, 403)
        self.assertEqual(self.call("DELETE", "/reservations/hold-1").status, 200)
        self.assertEqual(self.call("DELETE", "/reservations/hold-2").status, 200)
        self.assertEqual(self.available(), 2)
        # Every step is in B's audit log, under the reservation id.
        held = self.b.client.get(f"{API}/events?type=dcm.reservation.held&max_page_size=100")
        self.assertEqual(held.status, 200, held)
        self.assertEqual(sorted({e["subject"] for e in held.json()["events"]}),
                         ["hold-1", "hold-2"])
        history = self.b.client.get(f"{API}/events?subject=hold-1&max_page_size=100")
        self.assertEqual(history.status, 200, history)
        types = [e["type"] for e in history.json()["events"]]
        for step in ("dcm.reservation.received", "dcm.reservation.held",
                     "dcm.reservation.release_requested", "dcm.reservation.released"):
            self.assertIn(step, types)

    def test_2_an_unconfirmed_hold_expires_by_a_decided_request(self):
        self.assertEqual(self.reserve("short", ttl="1s").status, 201)
        self.assertEqual(self.available(), 1)
        wait_until(lambda: self.available() == 2, timeout=10, what="the hold expired")
        r = self.call("POST", "/reservations/short:confirm")
        self.assertEqual(r.status, 410, r)

    def test_3_a_contract_places_one_instance_and_expires_without_renewals(self):
        self.assertEqual(self.reserve("lease-1").status, 201)
        r = self.call("POST", "/reservations/lease-1:confirm")
        self.assertEqual(r.status, 201, r)
        contract = r.json()
        instance = contract["remote_instance_id"]
        wait_until(lambda: self.sp_instances() == {instance}, timeout=15,
                   what="B's SP runs the contract's instance")
        # B's resource view folds the saga's facts a moment after the SP answered its create
        # (CI once read it in between: 404), so wait for it there too.
        def resource():
            r = self.b.client.get(f"{API}/resources/{instance}")
            return r if r.status == 200 else None
        r = wait_until(resource, timeout=10, what="B lists the contract's resource")
        self.assertEqual(r.json()["spec"]["image"], "nginx", r)
        self.assertEqual(self.available(), 1, "the contract's instance counts once")
        # Renewals keep it past its 3 s lease.
        for _ in range(5):
            time.sleep(1)
            self.assertEqual(self.call("POST", f"/contracts/{contract['contract_id']}:renew").status,
                             200)
        self.assertEqual(self.sp_instances(), {instance})
        listed = self.call("GET", "/contracts").json()["contracts"]
        self.assertEqual([c["contract_id"] for c in listed], [contract["contract_id"]])
        # No renewal: B expires it and deletes the SP instance.
        wait_until(lambda: self.sp_instances() == set(), timeout=20,
                   what="the expired contract's instance deleted")
        wait_until(lambda: self.available() == 2, timeout=10, what="capacity back")
        r = self.call("POST", f"/contracts/{contract['contract_id']}:renew")
        self.assertEqual(r.status, 410, r)

    def test_4_a_terminated_contract_deletes_its_instance(self):
        self.assertEqual(self.reserve("lease-2").status, 201)
        contract = self.call("POST", "/reservations/lease-2:confirm").json()
        wait_until(lambda: self.sp_instances() == {contract["remote_instance_id"]}, timeout=15,
                   what="the instance placed")
        self.assertEqual(self.call("DELETE", f"/contracts/{contract['contract_id']}",
                                   enclave="c").status, 403)
        r = self.call("DELETE", f"/contracts/{contract['contract_id']}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["state"], "terminated")
        wait_until(lambda: self.sp_instances() == set(), timeout=20, what="the instance deleted")

    def test_5_projections_verify_match(self):
        out = subprocess.run([DCM_BIN, "projections", "verify", "--data-dir", self.data_dir,
                              "--kafka-brokers", self.b.bootstrap, "--no-progress",
                              "--fetch-wait-max-ms", "10"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        lines = [l for l in out.stdout.splitlines() if l.startswith("federation ")]
        self.assertEqual(len(lines), 1, out.stdout)
        self.assertTrue(lines[0].endswith(" match"), lines[0])
        self.assertNotIn("events=0 ", lines[0])


if __name__ == "__main__":
    main()
