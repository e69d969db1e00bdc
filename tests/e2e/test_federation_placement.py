"""Federation, the consumer side (SPEC §10, issue #17): a request enclave A cannot serve is placed
on its peer B. Two real `dcm serve --dev` enclaves on loopback: A (enclave-a) with a `vm` SP and
FEDERATION_PEERS=enclave-b, B (enclave-b) exporting `container` with one container SP whose
`max_instances` is 2.

- A `vm` instance on A stays local: B sees no reservation.
- A `container` instance on A is placed on `peer:enclave-b`: B's SP gets exactly one instance;
  A's resource names the contract; A's history of it shows each step; A's and B's logs carry the
  same reservation id.
- Deleting it on A terminates the contract: B deletes its SP instance.
- `spec.federation: never` keeps a request home (A answers as with no provider).
- Capacity race: 3 concurrent creates on A against B's 2 slots: 2 placed, the third answers as
  with no provider (422), and no hold is left on B.
- `dcm projections verify` matches on A and B."""

import concurrent.futures
import shutil
import subprocess
import tempfile
import unittest

from harness import API, DCM_BIN, Client, DevServer, SpSim, events_pages, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-max-consecutive-failures", "3"]
FED = "/federation/v1alpha1"
PLACE_STEPS = ["dcm.reservation.requested", "dcm.reservation.held", "dcm.contract.signed",
               "dcm.resource.placed", "dcm.service_type_instance.created"]


class FederationPlacementTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dirs = {n: tempfile.mkdtemp(prefix=f"dcm-e2e-fedp-{n}-") for n in ("a", "b")}
        cls.b = DevServer(extra=[*FAST, "--enclave-id", "enclave-b", "--data-dir", cls.dirs["b"]],
                          env={"FEDERATION_EXPORT_SERVICE_TYPES": "container"})
        cls.sim_b = SpSim(cls.b.url, 1, extra=["--max-instances", "2"], name_prefix="fedpb",
                          service_types="container")
        cls.sp_b = next(iter(cls.sim_b.wait_registered().values()))["name"]
        cls.a = DevServer(extra=[*FAST, "--enclave-id", "enclave-a", "--data-dir", cls.dirs["a"]],
                          env={"FEDERATION_PEERS": f"enclave-b={cls.b.url}"})
        cls.sim_a = SpSim(cls.a.url, 1, name_prefix="fedpa", service_types="vm")
        cls.sim_a.wait_ready(cls.a.client)
        wait_until(lambda: cls.available() == 2, what="B's container flavour")
        wait_until(lambda: cls.peer_status() == "Ready", what="A sees B Ready")

    @classmethod
    def tearDownClass(cls):
        for proc in (cls.sim_a, cls.a, cls.sim_b, cls.b):
            proc.stop()
        for d in cls.dirs.values():
            shutil.rmtree(d, ignore_errors=True)

    @classmethod
    def available(cls):
        flavors = cls.b.client.get(f"{FED}/flavors?service_type=container").json()["flavors"]
        return flavors[0]["instances_available"] if flavors else None

    @classmethod
    def peer_status(cls):
        peers = cls.a.client.get(f"{API}/peers").json()["peers"]
        return next((p["health_status"] for p in peers if p["id"] == "enclave-b"), None)

    def b_instances(self):
        return self.sim_b.instance_ids()[self.sp_b]

    def b_contracts(self):
        r = self.b.client.request("GET", f"{FED}/contracts?consumer=enclave-a", None,
                                  headers={"Fed-Via": "enclave-a"})
        self.assertEqual(r.status, 200, r)
        return r.json()["contracts"]

    def create(self, spec, client=None):
        return (client or self.a.client).post(f"{API}/catalog-item-instances", {"spec": spec})

    def container(self, **extra):
        return {"service_type": "container", "image": "nginx", **extra}

    def test_1_a_vm_instance_stays_local_and_b_sees_no_reservation(self):
        r = self.create({"service_type": "vm", "cpu": 1})
        self.assertEqual(r.status, 201, r)
        self.assertFalse(r.json()["provider_name"].startswith("peer:"), r.json())
        self.assertEqual(self.b_contracts(), [])
        received = self.b.client.get(f"{API}/events?type=dcm.reservation.received").json()
        self.assertEqual(received["events"], [])

    def test_2_a_container_instance_is_placed_on_b_then_deleted_with_its_contract(self):
        r = self.create(self.container())
        self.assertEqual(r.status, 201, r)
        cii = r.json()
        self.assertEqual(cii["provider_name"], "peer:enclave-b")
        resource = self.a.client.get(f"{API}/resources/{cii['resource_id']}").json()
        self.assertEqual(resource["provider_name"], "peer:enclave-b")
        placement = resource["placement"]
        self.assertEqual(placement["kind"], "remote")
        self.assertEqual(placement["peer"], "enclave-b")
        # B's SP got exactly one create, for the contract's instance.
        wait_until(lambda: len(self.b_instances()) == 1, timeout=20, what="B's SP instance")
        [contract] = self.b_contracts()
        self.assertEqual(contract["contract_id"], placement["contract_id"])
        self.assertEqual(self.b_instances(), {contract["remote_instance_id"]})
        # A's history of the resource shows each step; both logs carry the reservation id.
        steps = [e for e in events_pages(self.a.client,
                                         f"{API}/events?subject={cii['resource_id']}")]
        types = [e["type"] for e in steps]
        for t in PLACE_STEPS:
            self.assertIn(t, types)
        self.assertEqual([t for t in types if t in PLACE_STEPS], PLACE_STEPS)
        held = next(e for e in steps if e["type"] == "dcm.reservation.held")
        self.assertEqual(held["data"]["reservation_id"], contract["reservation_id"])
        b_held = events_pages(self.b.client,
                              f"{API}/events?subject={contract['reservation_id']}")
        self.assertIn("dcm.reservation.held", [e["type"] for e in b_held])
        b_signed = events_pages(self.b.client, f"{API}/events?type=dcm.contract.signed")
        self.assertEqual([e["data"]["reservation_id"] for e in b_signed
                          if e["data"]["contract_id"] == placement["contract_id"]],
                         [held["data"]["reservation_id"]])

        r = self.a.client.request("DELETE", f"{API}/catalog-item-instances/{cii['id']}")
        self.assertIn(r.status, (200, 204), r)
        wait_until(lambda: self.b_instances() == set(), timeout=20, what="B's instance deleted")
        self.assertEqual(self.b_contracts(), [])
        types = [e["type"] for e in events_pages(self.a.client,
                                                 f"{API}/events?subject={cii['resource_id']}")]
        self.assertIn("dcm.contract.terminated", types)
        wait_until(lambda: self.available() == 2, what="B's slot back")

    def test_3_federation_never_keeps_a_request_home(self):
        r = self.create(self.container(federation="never"))
        self.assertEqual(r.status, 422, r)
        self.assertEqual(self.b_contracts(), [])

    def test_4_three_concurrent_creates_against_two_slots(self):
        clients = [Client(self.a.url) for _ in range(3)]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(
                lambda i: self.create(self.container(name=f"c{i}"), clients[i]), range(3)))
        for c in clients:
            c.close()
        statuses = sorted(r.status for r in answers)
        self.assertEqual(statuses, [201, 201, 422], [r.json() for r in answers])
        refused = next(r for r in answers if r.status == 422)
        self.assertEqual(refused.json().get("reason", "no_provider"), "no_provider")
        wait_until(lambda: len(self.b_instances()) == 2, timeout=20, what="B's two instances")
        self.assertEqual(len(self.b_contracts()), 2)
        self.assertEqual(self.available(), 0)
        # No hold leaks: every reservation on B is a contract.
        held = [c for c in self.b_contracts() if c["state"] != "signed"]
        self.assertEqual(held, [])

    def test_5_projections_verify_match_on_both_enclaves(self):
        for name, server in (("a", self.a), ("b", self.b)):
            out = subprocess.run([DCM_BIN, "projections", "verify", "--data-dir", self.dirs[name],
                                  "--kafka-brokers", server.bootstrap, "--no-progress",
                                  "--fetch-wait-max-ms", "10"],
                                 capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, name + ": " + out.stdout + out.stderr)
            self.assertNotIn("mismatch", out.stdout)


if __name__ == "__main__":
    main()
