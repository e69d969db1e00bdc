"""Garbage collection of silent heartbeat providers and self-healing instances (SPEC §8, issue
#14): a real `dcm serve --dev` with PROVIDER_GC_AFTER=20s and REHYDRATE_ON_PROVIDER_LOSS, and
two `dcm sp-sim` processes: P (liveness heartbeat) hosting three catalog item instances, and Q
(probed). P's simulator is killed (-9: no deregistration, no more beats). P expires, then is
removed by a `dcm.provider.expired` event 20 s after its last beat; its three resources are
marked LOST and rehydrated onto Q exactly once each, and wait in the cleanup queue as
PENDING_PROVIDER. A later registration of P's name is a new record (201); when P's simulator
comes back under that name, each lost resource gets exactly one DELETE there and the queue
empties."""

import sys
import time
import unittest

from harness import (API, DevServer, SpSim, history, kafka_events, main, rfc3339_ms,
                     wait_until)

GC_AFTER_S = 20.0
TIMEOUT_S = 4.0  # HEARTBEAT_TIMEOUT, short: this test is about what follows the expiry
SERVER = ["--provider-gc-after", f"{int(GC_AFTER_S)}s", "--heartbeat-timeout", f"{int(TIMEOUT_S)}s",
          "--rehydrate-on-provider-loss", "--cleanup-interval", "1s",
          "--health-check-interval", "1s"]
HEARTBEAT_SIM = ["--liveness", "heartbeat", "--heartbeat-interval", "1s"]


class ProviderGcTest(unittest.TestCase):

    def setUp(self):
        self.server = DevServer(extra=SERVER)
        self.c = self.server.client
        self.sims = []

    def tearDown(self):
        for sim in self.sims:
            sim.stop()
        self.server.stop()

    def sim(self, prefix, extra=()):
        sim = SpSim(self.server.url, 1, extra=extra, name_prefix=prefix)
        self.sims.append(sim)
        (name, provider), = sim.wait_registered().items()
        wait_until(lambda: self.provider(provider["id"])["health_status"] == "Ready", timeout=10,
                   what=f"{name} Ready")
        return sim, name, provider["id"]

    def provider(self, pid):
        r = self.c.get(f"{API}/providers/{pid}")
        self.assertEqual(r.status, 200, r)
        return r.json()

    def resource(self, rid):
        r = self.c.get(f"{API}/resources/{rid}")
        return r.json() if r.status == 200 else None

    def queue(self):
        r = self.c.get(f"{API}/cleanup-queue")
        self.assertEqual(r.status, 200, r)
        return r.json()["records"]

    def history(self, path):
        return history(self.c, path)

    def test_a_silent_provider_is_collected_and_its_instances_heal_onto_another(self):
        sim_p, p_name, p_id = self.sim("gcp", HEARTBEAT_SIM)
        ciis = []
        for i in range(3):  # P is the only provider: every instance lands on it
            r = self.c.post(f"{API}/catalog-item-instances?id=heal-{i}",
                            {"spec": {"service_type": "vm", "cpu": 1}})
            self.assertEqual(r.status, 201, r)
            ciis.append(r.json())
        old = {c["id"]: c["resource_id"] for c in ciis}
        self.assertEqual({self.resource(rid)["provider_name"] for rid in old.values()}, {p_name})
        sim_q, q_name, q_id = self.sim("gcq")

        # P goes silent for good (kill -9: it neither deregisters nor beats again).
        sim_p.proc.kill(9)
        self.sims.remove(sim_p)
        killed = time.monotonic()

        # Removed by dcm.provider.expired about GC_AFTER after its last beat, with the reason.
        wait_until(lambda: self.c.get(f"{API}/providers/{p_id}").status == 404,
                   timeout=GC_AFTER_S + 10, interval=0.2, what="P garbage-collected")
        gone_s = time.monotonic() - killed
        self.assertGreaterEqual(gone_s, GC_AFTER_S - 1.5)
        listed = self.c.get(f"{API}/providers").json()["providers"]
        self.assertNotIn(p_id, [p["id"] for p in listed])
        expired = [e for e in kafka_events(self.server.bootstrap, "dcm.providers")
                   if e["type"] == "dcm.provider.expired"]
        self.assertEqual(len(expired), 1, expired)
        self.assertEqual(expired[0]["subject"], p_id)
        last_beat_ms = rfc3339_ms(expired[0]["data"]["last_heartbeat_time"])
        decided_s = (rfc3339_ms(expired[0]["time"]) - last_beat_ms) / 1000
        self.assertGreaterEqual(decided_s, GC_AFTER_S)
        self.assertLess(decided_s, GC_AFTER_S + 3, expired[0])
        # The registry shows the expiry first; the audit index has it a moment later.
        history = wait_until(lambda: (h := self.history(f"providers/{p_id}")) and
                             h[-1]["type"] == "dcm.provider.expired" and h, timeout=10,
                             what="the expiry in P's history")
        self.assertIn("heartbeat_expired", str(history))
        self.assertIn("no heartbeat since", history[-1]["summary"], history[-1])
        print(f"\n  P removed {gone_s:.1f} s after the kill ({decided_s:.3f} s after its last "
              f"beat)", file=sys.stderr)

        # Self-healing: each instance moves to Q exactly once; the lost resources wait.
        def healed():
            now = {c: self.c.get(f"{API}/catalog-item-instances/{c}").json() for c in old}
            return now if all(n["resource_id"] != old[c] for c, n in now.items()) else None
        now = wait_until(healed, timeout=30, interval=0.2, what="instances rehydrated onto Q")
        for cid, cii in now.items():
            self.assertEqual(self.resource(cii["resource_id"])["provider_name"], q_name, cii)
            self.assertIsNone(self.resource(old[cid]), "the lost resource is replaced")
        self.assertEqual(sim_q.providers()[q_name]["creates_received"], 3)
        waiting = wait_until(lambda: (q := self.queue()) and len(q) == 3 and
                             all(r["status"] == "PENDING_PROVIDER" for r in q) and q,
                             timeout=10, interval=0.2, what="3 PENDING_PROVIDER records")
        self.assertEqual({r["instance_id"] for r in waiting}, set(old.values()))
        steps_of = {"dcm.resource.lost": 1, "dcm.resource.placed": 2, "dcm.cleanup.enqueued": 1,
                    "dcm.catalog_item_instance.rehydrated": 1}
        for cid, rid in old.items():
            # History reads the audit index, which may lag the instance view read above.
            steps = wait_until(
                lambda: (s := [e["type"] for e in self.history(f"catalog-item-instances/{cid}")])
                and all(s.count(t) >= n for t, n in steps_of.items()) and s,
                timeout=10, interval=0.2, what="the rehydration's steps in the history")
            for t, n in steps_of.items():
                self.assertEqual(steps.count(t), n, (t, steps))
            self.assertLess(steps.index("dcm.resource.lost"),
                            steps.index("dcm.catalog_item_instance.rehydrated"))
        time.sleep(2)  # nothing more happens: exactly once
        self.assertEqual(sim_q.providers()[q_name]["creates_received"], 3)

        # A later registration of the same name is a new record.
        r = self.c.post(f"{API}/providers", {"name": p_name, "service_type": "vm",
                                             "endpoint": "http://127.0.0.1:9/gone",
                                             "liveness": "heartbeat"})
        self.assertEqual(r.status, 201, r)
        self.assertNotEqual(r.json()["id"], p_id)

        # P comes back (its simulator, registering its name again): one DELETE per lost
        # resource there, and the queue empties.
        sim_back = SpSim(self.server.url, 1, extra=HEARTBEAT_SIM, name_prefix="gcp")
        self.sims.append(sim_back)
        wait_until(lambda: self.queue() == [], timeout=20, interval=0.2,
                   what="cleanup queue empty once P is back")
        self.assertEqual(sim_back.providers()[p_name]["deletes_received"], 3)
        time.sleep(2)
        self.assertEqual(sim_back.providers()[p_name]["deletes_received"], 3, "once each")


if __name__ == "__main__":
    main()
