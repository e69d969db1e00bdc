"""Federation, the consumer side through failures (SPEC §10, issue #17). Enclave A is a
`dcm serve` on a `dcm dev-kafka` (so it can be killed and restarted on its data dir), with
FEDERATION_PEERS=enclave-b, no providers of its own, and REHYDRATE_ON_PROVIDER_LOSS; enclave B
is a `dcm serve --dev` exporting `container` (one SP, max_instances 2) with a 12 s contract lease
(longer than a restart of A, which rejoins its consumer group first).

- Crash points: A is killed (SIGKILL, its --test-crash-after-fact hook) right after
  dcm.reservation.requested, after .held, after dcm.contract.signed, and restarted: each time
  the instance ends on peer:enclave-b with exactly one contract and one SP instance on B.
- A stalled past the hold's TTL (SIGSTOP right after .held, SIGCONT once B expired the hold):
  its confirm gets 410, A answers as with no provider, and B has no instance.
- Leases: A's renewals keep a contract alive well past its lease; with A stopped, B expires
  it and deletes its SP instance; A, resumed, records the loss (dcm.contract.expired, the
  resource LOST) and rehydrates it: a new contract, a new instance on B."""

import http.client
import os
import signal
import threading
import time
import unittest
import uuid

from harness import (API, Client, Cluster, DevServer, SpSim, events_pages, main,
                     wait_until)

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-max-consecutive-failures", "3"]
FED = "/federation/v1alpha1"


class FederationFailuresTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.b = DevServer(extra=[*FAST, "--enclave-id", "enclave-b"],
                          env={"FEDERATION_EXPORT_SERVICE_TYPES": "container",
                               "FEDERATION_CONTRACT_TTL": "12s"})
        cls.sim = SpSim(cls.b.url, 1, extra=["--max-instances", "2"], name_prefix="fedf",
                        service_types="container")
        cls.sp = next(iter(cls.sim.wait_registered().values()))["name"]
        cls.cluster = Cluster()
        cls.a_env = {"FEDERATION_PEERS": f"enclave-b={cls.b.url}",
                     "REHYDRATE_ON_PROVIDER_LOSS": "true"}
        cls.a = cls.cluster.serve(name="a0", extra=cls.a_args(), env=cls.a_env)
        cls.data_dir = cls.a.data_dir
        cls.runs = 0
        wait_until(lambda: cls.available() == 2, what="B's container flavour")

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        cls.sim.stop()
        cls.b.stop()

    @classmethod
    def a_args(cls, extra=()):
        return [*FAST, "--enclave-id", "enclave-a", *extra]

    @classmethod
    def available(cls):
        flavors = cls.b.client.get(f"{FED}/flavors?service_type=container").json()["flavors"]
        return flavors[0]["instances_available"] if flavors else None

    def restart(self, extra=(), env=None):
        cls = type(self)
        cls.a.stop(signal.SIGKILL)
        cls.runs += 1
        cls.a = cls.cluster.serve(data_dir=cls.data_dir, name=f"a{cls.runs}",
                                  extra=self.a_args(extra), env={**self.a_env, **(env or {})})
        return cls.a

    def setUp(self):
        wait_until(lambda: self.peer_ready(), timeout=20, what="A sees B Ready")
        wait_until(lambda: self.available() == 2, timeout=30, what="both of B's slots free")

    def peer_ready(self):
        peers = self.a.client.get(f"{API}/peers").json()["peers"]
        return any(p["id"] == "enclave-b" and p["health_status"] == "Ready" for p in peers)

    def contracts(self):
        r = self.b.client.request("GET", f"{FED}/contracts?consumer=enclave-a", None,
                                  headers={"Fed-Via": "enclave-a"})
        self.assertEqual(r.status, 200, r)
        return r.json()["contracts"]

    def b_instances(self):
        return self.sim.instance_ids()[self.sp]

    def cii(self, cid):
        r = self.a.client.get(f"{API}/catalog-item-instances/{cid}")
        return r.json() if r.status == 200 else None

    def create_async(self, cid, url):
        """POSTs the create on its own connection and thread (the process may die or stop)."""
        def go():
            client = Client(url, timeout=60)
            try:
                client.post(f"{API}/catalog-item-instances?id={cid}",
                            {"spec": {"service_type": "container", "image": "nginx"}})
            except (OSError, http.client.HTTPException):
                pass  # the connection died with the process
            finally:
                client.close()
        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        return thread

    def delete(self, cid):
        r = self.a.client.request("DELETE", f"{API}/catalog-item-instances/{cid}")
        self.assertIn(r.status, (200, 204), r)
        wait_until(lambda: self.b_instances() == set(), timeout=20, what="B's instance deleted")

    def test_1_crash_points_leave_one_contract_and_one_instance(self):
        for point in ("dcm.reservation.requested", "dcm.reservation.held", "dcm.contract.signed"):
            with self.subTest(point=point):
                crashing = self.restart(["--test-crash-after-fact", point])
                wait_until(lambda: self.peer_ready(), timeout=20, what="A sees B Ready")
                cid = str(uuid.uuid4())
                self.create_async(cid, crashing.url)
                rc = crashing.proc.proc.wait(30)
                self.assertEqual(rc, -signal.SIGKILL, f"{point}: exit status {rc}")
                self.restart()  # no hook, same data dir: the saga resumes
                placed = wait_until(
                    lambda: (c := self.cii(cid)) and c["status"] != "PENDING" and c,
                    timeout=30, what=f"the instance placed after a crash at {point}")
                self.assertEqual(placed["provider_name"], "peer:enclave-b", placed)
                wait_until(lambda: len(self.b_instances()) == 1, timeout=20,
                           what="B's SP instance")
                time.sleep(1)  # anything doubled would show by now
                [contract] = self.contracts()
                self.assertEqual(self.b_instances(), {contract["remote_instance_id"]})
                self.delete(cid)

    def test_2_a_consumer_stalled_past_the_hold_gets_410_and_b_creates_nothing(self):
        stalling = self.restart(["--test-crash-after-fact", "SIGSTOP:dcm.reservation.held"],
                                env={"FEDERATION_HOLD_TTL": "2s"})
        wait_until(lambda: self.peer_ready(), timeout=20, what="A sees B Ready")
        cid = str(uuid.uuid4())
        try:
            self.create_async(cid, stalling.url)
            wait_until(lambda: self.available() == 1, timeout=20, what="B holds a slot for A")
            wait_until(lambda: self.available() == 2, timeout=30, what="B expired the hold")
        finally:
            os.kill(stalling.proc.proc.pid, signal.SIGCONT)
        try:
            steps = wait_until(
                lambda: (s := [e for e in events_pages(stalling.client, f"{API}/events?subject={cid}")
                               if e["type"] == "dcm.instance.operation_failed"]) and s,
                timeout=30, what="the create failed")
            self.assertEqual(steps[0]["data"]["reason"], "no_provider", steps[0])
            refused = [e for e in events_pages(stalling.client,
                                               f"{API}/events?type=dcm.reservation.refused")
                       if e["data"]["root"] == cid]
            self.assertEqual(len(refused), 1, refused)
            self.assertEqual(refused[0]["data"]["reason"], "expired", refused[0])
            self.assertEqual(refused[0]["data"]["http_status"], 410)
            self.assertEqual(self.contracts(), [])
            self.assertEqual(self.b_instances(), set())
        finally:
            self.restart()  # without the hook

    def test_3_renewals_keep_a_contract_and_a_lost_one_is_rehydrated(self):
        r = self.a.client.post(f"{API}/catalog-item-instances",
                               {"spec": {"service_type": "container", "image": "nginx"}})
        self.assertEqual(r.status, 201, r)
        cii = r.json()
        old = cii["resource_id"]
        [contract] = self.contracts()
        time.sleep(18)  # one and a half 12 s leases
        self.assertEqual([c["contract_id"] for c in self.contracts()], [contract["contract_id"]])
        self.assertEqual(len(self.b_instances()), 1)
        renewed = events_pages(self.a.client, f"{API}/events?type=dcm.contract.renewed")
        self.assertGreaterEqual(len(renewed), 2, renewed)

        os.kill(self.a.proc.proc.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: self.b_instances() == set(), timeout=30,
                       what="B expired the contract and deleted its instance")
        finally:
            os.kill(self.a.proc.proc.pid, signal.SIGCONT)
        # A finds the contract gone: LOST, then rehydrated on B under a new contract.
        new = wait_until(lambda: (rid := self.cii(cii["id"])["resource_id"]) != old and rid,
                         timeout=60, what="the CII rehydrated onto a new resource")
        # The renewer's facts reach A's audit index a moment after its instance view.
        wanted = {"dcm.contract.expired", "dcm.resource.lost"}
        wait_until(lambda: wanted <= {e["type"] for e in
                                      events_pages(self.a.client, f"{API}/events?subject={old}")},
                   timeout=10, what="the expiry and the loss in A's log")
        wait_until(lambda: len(self.b_instances()) == 1, timeout=20, what="the new instance")
        [now] = self.contracts()
        self.assertNotEqual(now["contract_id"], contract["contract_id"])
        resource = self.a.client.get(f"{API}/resources/{new}").json()
        self.assertEqual(resource["placement"]["contract_id"], now["contract_id"])
        self.delete(cii["id"])


if __name__ == "__main__":
    main()
