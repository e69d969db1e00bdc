"""Crash points of the rehydration saga (SPEC §5.3, §5.6; docs/architecture.md §8): a `dcm serve`
on a `dcm dev-kafka` with a persistent data dir is killed (SIGKILL, by its own
--test-crash-after-fact hook) right after each saga fact is acknowledged, and restarted on the
same data dir without the hook. The restarted process resumes the saga: exactly one new
resource on exactly one SP, the CII points at it, the old one is cleaned once its provider is
Ready again, and `dcm.instances` holds one operation_completed for the request. A kill -9 in
the middle of a cleanup cycle loses no record and deletes nothing twice."""

import http.client
import signal
import unittest
import uuid

from harness import API, Client, Cluster, InstanceReads, SpSim, kafka_events, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms",
        "--health-check-max-consecutive-failures", "2",
        "--cleanup-interval", "1s", "--sp-timeout", "3s"]
NO_FAULT = {"health": "healthy", "fail_creates": False, "fail_deletes": False}
REHYDRATE = "rehydrate_catalog_item_instance"


class CrashTest(InstanceReads, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.srv = cls.cluster.serve(name="s0", extra=FAST)
        cls.data_dir = cls.srv.data_dir
        cls.sim = SpSim(cls.srv.url, 2)
        cls.pids = {n: p["id"] for n, p in cls.sim.wait_registered().items()}
        cls.names = sorted(cls.pids)
        cls.runs = 0

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.cluster.close()

    def setUp(self):
        self.sim.set_fault(**NO_FAULT)
        wait_until(lambda: all(self.health(n) == "Ready" for n in self.names), timeout=10,
                   what="every provider Ready")

    # --- helpers ---

    @property
    def c(self):
        return type(self).srv.client

    def restart(self, extra=(), sig=signal.SIGTERM):
        """Stops the current serve (if running) and starts a new one on the same data dir."""
        cls = type(self)
        cls.srv.stop(sig)
        cls.runs += 1
        cls.srv = cls.cluster.serve(data_dir=cls.data_dir, name=f"s{cls.runs}",
                                    extra=[*FAST, *extra])
        return cls.srv

    def records(self):
        r = self.c.get(f"{API}/cleanup-queue")
        self.assertEqual(r.status, 200, r)
        return {rec["instance_id"]: rec for rec in r.json()["records"]}

    def facts(self, root):
        return [e for e in kafka_events(self.cluster.bootstrap, self.cluster.prefix + "instances")
                if e["data"].get("root") == root]

    def sim_ids(self):
        """{provider name: list of ids held} (a list, so a duplicate would show)."""
        return {n: p["instance_ids"] for n, p in self.sim.providers().items()}

    def creates(self):
        return sum(p["creates_received"] for p in self.sim.providers().values())

    # --- the crash points ---

    def crash_and_resume(self, point):
        created = self.c.post(f"{API}/catalog-item-instances",
                              {"spec": {"service_type": "vm", "crash_point": point}})
        self.assertEqual(created.status, 201, created)
        cid, old_id, a = (created.json()[k] for k in ("id", "resource_id", "provider_name"))
        self.sim.set_fault(a, health="503")
        self.wait_health(a, "Unavailable")
        ids_before = self.sim_ids()
        creates_before = self.creates()

        crashing = self.restart(["--test-crash-after-fact", point])
        client = Client(crashing.url, timeout=30)
        try:
            r = client.post(f"{API}/catalog-item-instances/{cid}:rehydrate")
            self.assertEqual(r.status, 503, f"a reply from a process killed mid-saga: {r}")
        except (OSError, http.client.HTTPException):
            pass  # the connection died with the process: expected
        finally:
            client.close()
        try:
            rc = crashing.proc.proc.wait(30)
        except Exception:
            self.fail(f"serve did not crash after {point}; log {crashing.proc.log.name}")
        self.assertEqual(rc, -signal.SIGKILL, f"exit status {rc}")
        self.assertIn(f"crash injection: SIGKILL after {point}", crashing.proc.tail(50))

        resumed = self.restart()  # no hook, same data dir: resumes the saga
        new_id = wait_until(lambda: (rid := self.cii(cid)["resource_id"]) != old_id and rid,
                            timeout=30, what="the CII to point at its new resource")
        now = self.cii(cid)
        b = now["provider_name"]
        self.assertNotEqual(b, a)
        ids = self.sim_ids()
        for name, held in ids.items():
            self.assertEqual(len(held), len(set(held)), name)
        added = {(n, i) for n, held in ids.items() for i in held} - \
                {(n, i) for n, held in ids_before.items() for i in held}
        removed = {(n, i) for n, held in ids_before.items() for i in held} - \
                  {(n, i) for n, held in ids.items() for i in held}
        self.assertEqual(added, {(b, new_id)}, "exactly one new instance, on one SP")
        self.assertEqual(removed, set(), "nothing deleted before the old provider recovered")
        self.assertIn(old_id, ids[a])
        self.assertEqual(self.creates() - creates_before, 1, "the SP create was not repeated")
        rec = self.records().get(old_id)
        self.assertIsNotNone(rec, "the old resource is queued")
        self.assertIn(rec["status"], ("PENDING", "PENDING_PROVIDER"))

        # The old provider recovers: the old resource is deleted and the queue empties.
        self.sim.set_fault(a, health="healthy")
        self.wait_health(a, "Ready")
        wait_until(lambda: old_id in self.sim.providers()[a]["deleted_ids"], timeout=3,
                   what="old resource deleted on its SP")
        wait_until(lambda: self.records() == {}, timeout=3, what="cleanup queue empty")
        self.assertEqual(self.sim_ids()[b].count(new_id), 1)
        self.assertNotIn(old_id, self.sim_ids()[a])

        facts = self.facts(cid)
        self.assertEqual(len({e["id"] for e in facts}), len(facts), "no event id twice")
        started = [e["data"] for e in facts if e["type"] == "dcm.instance.operation_started"
                   and e["data"]["operation"] == REHYDRATE]
        self.assertEqual(len(started), 1, facts)
        rid = started[0]["request_id"]
        saga = [e["type"].removeprefix("dcm.") for e in facts
                if e["data"].get("request_id") == rid]
        self.assertEqual(saga, ["instance.operation_started", "resource.placed",
                                "service_type_instance.created", "cleanup.enqueued",
                                "resource.deleted", "catalog_item_instance.rehydrated",
                                "instance.operation_completed"],
                         "each step once, in order, ending in one operation_completed")
        completed = [e["data"] for e in facts if e["type"] == "dcm.instance.operation_completed"
                     and e["data"]["request_id"] == rid]
        self.assertEqual(completed[0]["resource_id"], new_id)
        attempts = [e["data"] for e in facts if e["type"] == "dcm.cleanup.attempted"]
        self.assertEqual([(d["instance_id"], d["outcome"]) for d in attempts],
                         [(old_id, "deleted")])
        # The restarted process resumed the saga it found in its projection.
        self.assertIn(f"operation={REHYDRATE} root={cid} request_id={rid}",
                      open(resumed.proc.log.name).read())

    def test_1_crash_after_resource_placed(self):
        self.crash_and_resume("dcm.resource.placed")

    def test_2_crash_after_service_type_instance_created(self):
        self.crash_and_resume("dcm.service_type_instance.created")

    def test_3_crash_after_cleanup_enqueued(self):
        self.crash_and_resume("dcm.cleanup.enqueued")

    def test_4_kill_9_in_the_middle_of_a_cleanup_cycle(self):
        p = self.names[0]
        n = 60
        sids = [f"k-{uuid.uuid4().hex[:10]}" for _ in range(n)]
        for sid in sids:
            r = self.c.post(f"{API}/service-type-instances?id={sid}",
                            {"provider_name": p, "spec": {"service_type": "vm"}})
            self.assertEqual(r.status, 201, r)
        self.sim.set_fault(p, health="503")
        self.wait_health(p, "Unavailable")
        for sid in sids:
            r = self.c.request("DELETE", f"{API}/service-type-instances/{sid}?deferred=true")
            self.assertEqual(r.status, 204, r)
        self.assertTrue(set(sids) <= set(self.records()))
        # One cleanup attempt at a time, so the cycle over 60 records takes a while.
        srv = self.restart(["--instance-worker-threads", "1"])
        d0 = self.sim.providers()[p]["deletes_received"]
        self.sim.set_fault(p, health="healthy")
        seen = wait_until(lambda: (d := self.sim.providers()[p]["deletes_received"] - d0) > 0
                          and d, timeout=10, interval=0.002, what="the cleanup cycle to start")
        srv.stop(signal.SIGKILL)
        at_kill = self.sim.providers()[p]["deletes_received"] - d0
        print(f"\n  kill -9 after {seen}..{at_kill} of {n} DELETEs", end=" ")
        self.assertLess(seen, n, "killed before the cycle was over")

        self.restart()
        wait_until(lambda: not (set(sids) & set(self.records())), timeout=15,
                   what="every record cleaned")
        prov = self.sim.providers()[p]
        self.assertFalse(set(sids) & set(prov["instance_ids"]))
        deleted = [i for i in prov["deleted_ids"] if i in set(sids)]
        self.assertEqual(sorted(deleted), sorted(sids), "each deleted exactly once (204)")
        # At most the DELETEs in flight at the kill were repeated (answered 404 → gone).
        extra = prov["deletes_received"] - d0 - n
        self.assertGreaterEqual(extra, 0)
        self.assertLessEqual(extra, 1, "one attempt at a time: at most one repeated")
        events = kafka_events(self.cluster.bootstrap, self.cluster.prefix + "instances")
        for sid in sids:
            outcomes = [e["data"]["outcome"] for e in events
                        if e["type"] == "dcm.cleanup.attempted" and e["data"]["instance_id"] == sid]
            self.assertIn(outcomes, (["deleted"], ["gone"]), sid)
        for sid in sids:
            r = self.c.get(f"{API}/service-type-instances/{sid}?show_deleted=true")
            self.assertEqual(r.json()["status"], "DELETED", r)


if __name__ == "__main__":
    main()
