"""Federation, the offer side (SPEC §10, issue #17): real `dcm serve --dev` enclaves and `dcm
sp-sim`, on loopback.

Enclave B exports `container` and has one container SP whose metadata.resources.max_instances is
2: B lists one container flavour with 2 instances available, owned by B and naming no provider;
once the SP refuses connections and goes Unavailable, B lists no flavour. Enclave A peers with B
(FEDERATION_PEERS): A's /api/v1alpha1/peers shows B Ready, and Unavailable once B is killed; each
transition is a dcm.peer.health_changed event in A's log."""

import signal
import unittest

from harness import API, DevServer, SpSim, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms",
        "--health-check-max-consecutive-failures", "3"]
FLAVORS = "/federation/v1alpha1/flavors"


class FederationOfferTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.b = DevServer(extra=[*FAST, "--enclave-id", "enclave-b"],
                          env={"FEDERATION_EXPORT_SERVICE_TYPES": "container",
                               "FEDERATION_PRICE": "0.05 EUR/hour"})
        cls.sim = SpSim(cls.b.url, 1, extra=["--max-instances", "2"], name_prefix="fed",
                        service_types="container")
        cls.provider = next(iter(cls.sim.wait_registered().values()))
        cls.a = DevServer(extra=[*FAST, "--enclave-id", "enclave-a"],
                          env={"FEDERATION_PEERS": f"enclave-b={cls.b.url}"})

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.a.stop()
        cls.b.stop()

    def flavors(self, query=""):
        r = self.b.client.get(FLAVORS + query)
        self.assertEqual(r.status, 200, r)
        return r.json()["flavors"]

    def provider_health(self):
        return self.b.client.get(f"{API}/providers/{self.provider['id']}").json()["health_status"]

    def peer(self, client, peer_id):
        r = client.get(f"{API}/peers")
        self.assertEqual(r.status, 200, r)
        return next(p for p in r.json()["peers"] if p["id"] == peer_id)

    def test_1_a_ready_container_sp_is_offered_with_its_max_instances(self):
        wait_until(lambda: self.provider_health() == "Ready", what="the SP Ready")
        flavors = wait_until(lambda: self.flavors("?service_type=container"), what="a flavour")
        self.assertEqual(len(flavors), 1, flavors)
        f = flavors[0]
        self.assertEqual(f["owner"], "enclave-b")
        self.assertEqual(f["service_type"], "container")
        self.assertEqual(f["instances_available"], 2)
        self.assertEqual(f["price"], {"amount": 0.05, "currency": "EUR", "period": "hour"})
        self.assertIn("expires_at", f)
        body = self.b.client.get(FLAVORS).body.decode()
        for secret in (self.provider["id"], self.provider["name"], self.provider["endpoint"]):
            self.assertNotIn(secret, body, "provider details never leave the enclave")
        # The selector: ranges and matches; an unknown field is refused, not ignored.
        same = self.flavors("?instances_available_min=1&region=" + f["region"])
        self.assertEqual([g["flavor_id"] for g in same], [f["flavor_id"]])
        self.assertEqual(self.flavors("?instances_available_min=3"), [])
        self.assertEqual(self.flavors("?service_type=vm"), [])
        self.assertEqual(self.b.client.get(FLAVORS + "?instances_avail=1").status, 400)
        # The same offer from the same state: the id is deterministic.
        self.assertEqual(self.flavors()[0]["flavor_id"], f["flavor_id"])

    def test_2_the_peer_shows_ready_on_the_other_enclave(self):
        peer = wait_until(lambda: (p := self.peer(self.a.client, "enclave-b"))
                          ["health_status"] == "Ready" and p, what="peer enclave-b Ready on A")
        self.assertEqual(peer["url"], self.b.url)
        self.assertIn("last_probe_time", peer)
        self.assertEqual(peer["health"]["status"], "Ready")

    def test_3_an_unavailable_sp_leaves_no_flavour(self):
        self.sim.set_fault(self.provider["name"], health="refuse")
        wait_until(lambda: self.provider_health() == "Unavailable", timeout=20,
                   what="the SP Unavailable")
        self.assertEqual(self.flavors(), [])

    def test_4_a_killed_peer_goes_unavailable(self):
        wait_until(lambda: self.peer(self.a.client, "enclave-b")["health_status"] == "Ready",
                   what="peer Ready first")
        self.b.proc.kill(signal.SIGKILL)
        wait_until(lambda: self.peer(self.a.client, "enclave-b")["health_status"] == "Unavailable",
                   timeout=20, what="peer enclave-b Unavailable on A")
        wait_until(lambda: ("Ready", "Unavailable") in self.peer_changes(),
                   what="the Ready -> Unavailable event in A's log")
        self.assertEqual(self.peer_changes()[0], ("Pending", "Ready"))

    def peer_changes(self):
        """(from, to) of every dcm.peer.health_changed in A's log, oldest first."""
        r = self.a.client.get(f"{API}/events?type=dcm.peer.health_changed&max_page_size=100")
        self.assertEqual(r.status, 200, r)
        events = r.json()["events"]
        self.assertTrue(all(e["subject"] == "enclave-b" for e in events), events)
        return [(e["data"]["from"], e["data"]["to"]) for e in events]

if __name__ == "__main__":
    main()
