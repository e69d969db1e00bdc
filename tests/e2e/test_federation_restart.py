"""Federation, the provider side across a crash (SPEC §10, issue #17): enclave B (`dcm dev-kafka`
+ `dcm serve`, exporting `container`, one SP with max_instances 2) holds one instance for peer
`a`, then is killed with SIGKILL mid-hold and restarted on the same data dir and Kafka.

- The hold survives the restart (it is decided state in RocksDB and in the log, not in memory):
  B still shows 1 instance available.
- Nobody confirms: the restarted B's sweeper asks for the expiry and its decider decides it, so
  availability returns to 2, the log carries exactly one dcm.reservation.expired for the
  reservation, and a late confirm gets 410 with no contract and no SP instance."""

import signal
import unittest

from harness import Cluster, SpSim, kafka_events, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-max-consecutive-failures", "3", "--enclave-id", "enclave-b"]
ENV = {"FEDERATION_EXPORT_SERVICE_TYPES": "container"}
FED = "/federation/v1alpha1"


class FederationRestartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.b = cls.cluster.serve(name="b", extra=FAST, env=ENV)
        cls.sim = SpSim(cls.b.url, 1, extra=["--max-instances", "2"], name_prefix="fedr",
                        service_types="container")
        cls.sim.wait_registered()

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.cluster.close()

    def flavors(self):
        r = self.b.client.get(f"{FED}/flavors?service_type=container")
        self.assertEqual(r.status, 200, r)
        return r.json()["flavors"]

    def available(self):
        return self.flavors()[0]["instances_available"]

    def test_a_hold_survives_a_crash_and_expires_by_a_decided_request(self):
        flavor = wait_until(lambda: self.flavors(), what="B's flavour")[0]
        self.assertEqual(flavor["instances_available"], 2)
        r = self.b.client.request("POST", f"{FED}/reservations",
                                  {"reservation_id": "crash-1", "flavor_id": flavor["flavor_id"],
                                   "ttl": "25s"}, headers={"Fed-Via": "a"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.available(), 1)
        self.b.stop(signal.SIGKILL)
        self.b = self.cluster.serve(data_dir=self.b.data_dir, name="b", extra=FAST, env=ENV)
        wait_until(lambda: self.flavors(), what="the flavour after the restart")
        self.assertEqual(self.available(), 1, "the hold survived the crash")
        wait_until(lambda: self.available() == 2, timeout=45, what="the hold expired")
        expired = [e for e in kafka_events(self.cluster.bootstrap, self.cluster.prefix + "federation")
                   if e["type"] == "dcm.reservation.expired"]
        self.assertEqual([e["data"]["reservation_id"] for e in expired], ["crash-1"], expired)
        r = self.b.client.request("POST", f"{FED}/reservations/crash-1:confirm",
                                  headers={"Fed-Via": "a"})
        self.assertEqual(r.status, 410, r)
        self.assertEqual(self.sim.instance_ids(), {n: set() for n in self.sim.providers()})


if __name__ == "__main__":
    main()
