"""Instances, placement, rehydration and cleanup end to end (SPEC §3.3, issue #4): real
`dcm serve --dev` and `dcm sp-sim` processes. SPs are failed and recovered through sp-sim's
control API; what reached each SP is read back from sp-sim (creates, deletes, the ids it holds
and the ids it deleted), and every step is checked on `dcm.instances` with kcat.

Two servers: `InstancesTest` (the built-in policy; 3 vm providers and 1 container provider)
and `PolicyManagerTest` (a fake DCM Policy Manager in this process, 2 vm providers)."""

import json
import threading
import time
import unittest
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import (API, Client, DevServer, InstanceReads, SpSim, kafka_events, kafka_produce,
                     main, rfc3339_ms, wait_until)

CLEANUP_S = 1.0
MAX_RETRIES = 3
# Fast health: Unavailable after 2 failed probes 300 ms apart, back to Ready at the next
# probe (backoff 300 ms doubling to 600 ms while Unavailable).
FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms",
        "--health-check-max-consecutive-failures", "2",
        "--cleanup-interval", "1s", "--cleanup-max-retries", str(MAX_RETRIES),
        "--sp-timeout", "3s"]
NO_FAULT = {"health": "healthy", "fail_creates": False, "fail_deletes": False}

T = "dcm."  # dev mode topic prefix


def sub_sequence(wanted, types):
    """True when `wanted` appears in `types` in order (not necessarily adjacent)."""
    it = iter(types)
    return all(any(t == w for t in it) for w in wanted)


class Base(InstanceReads, unittest.TestCase):
    """Helpers shared by both server setups (cls.server, cls.sim)."""

    @classmethod
    def start(cls, extra, sim_count, sim_types, prefix):
        cls.server = DevServer(extra=extra)
        cls.c = cls.server.client
        cls.sim = SpSim(cls.server.url, sim_count, name_prefix=prefix, service_types=sim_types)
        cls.pids = {n: p["id"] for n, p in cls.sim.wait_registered().items()}
        cls.names = sorted(cls.pids)
        cls.vms = [n for n in cls.names if "-vm-" in n]

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.server.stop()

    def setUp(self):
        self.sim.set_fault(**NO_FAULT)
        wait_until(lambda: all(self.health(n) == "Ready" for n in self.names), timeout=10,
                   what="every provider Ready")
        # What an earlier test queued is cleaned first, so SP counters change only by this one.
        wait_until(lambda: self.records() == [], timeout=CLEANUP_S + 3, what="empty queue")

    # --- reads ---

    def records(self, status=None):
        q = f"?status={status}" if status else ""
        r = self.c.get(f"{API}/cleanup-queue{q}")
        self.assertEqual(r.status, 200, r)
        return r.json()["records"]

    def record(self, instance_id, status=None):
        return next((r for r in self.records(status) if r["instance_id"] == instance_id), None)

    def sim_totals(self):
        ps = self.sim.providers()
        return {n: (p["creates_received"], p["deletes_received"]) for n, p in ps.items()}

    def holders(self, instance_id):
        return [n for n, ids in self.sim.instance_ids().items() if instance_id in ids]

    def all_ids(self):
        return set().union(*self.sim.instance_ids().values())

    def facts(self, root):
        """The facts on dcm.instances for `root`, in log order (one partition per root)."""
        return [e for e in kafka_events(self.server.bootstrap, T + "instances")
                if e["data"].get("root") == root]

    # --- writes ---

    def create(self, spec, display_name=None, id=None):
        body = {"spec": spec}
        if display_name:
            body["display_name"] = display_name
        q = f"?id={id}" if id else ""
        return self.c.post(f"{API}/catalog-item-instances{q}", body)

    def create_ok(self, spec=None, **kw):
        r = self.create(spec or {"service_type": "vm", "cpu": 2}, **kw)
        self.assertEqual(r.status, 201, r)
        return r.json()

    def rehydrate(self, id, client=None):
        return (client or self.c).post(f"{API}/catalog-item-instances/{id}:rehydrate")

    def concurrent_rehydrations(self, cid, n=8, stagger=0.0):
        """`n` rehydrations of `cid` from `n` threads released at once (the i-th after
        i * `stagger` s): [(response, sent, answered)]."""
        barrier, results = threading.Barrier(n), [None] * n

        def go(i):
            c = Client(self.server.url)
            barrier.wait()
            time.sleep(i * stagger)
            sent = time.monotonic()
            results[i] = (self.rehydrate(cid, client=c), sent, time.monotonic())
            c.close()

        threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def assertProblem(self, r, status):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.headers["content-type"], "application/problem+json", r)
        self.assertEqual(r.json()["status"], status, r)
        return r.json()


class InstancesTest(Base):
    @classmethod
    def setUpClass(cls):
        cls.start(FAST, 4, "vm,vm,vm,container", "e2e")
        cls.container = "e2e-container-3"

    def test_01_acceptance_rehydrate_away_from_an_unavailable_provider(self):
        before = self.sim_totals()
        created = self.create_ok({"service_type": "vm", "cpu": 2, "memory": "4G"},
                                 display_name="acceptance")
        cid, old_id, a = created["id"], created["resource_id"], created["provider_name"]
        self.assertIn(a, self.vms)
        self.assertEqual(created["spec"], {"service_type": "vm", "cpu": 2, "memory": "4G"})
        self.assertEqual(created["display_name"], "acceptance")
        self.assertEqual(self.holders(old_id), [a], "the resource lives on SP-A only")
        self.assertEqual(self.sim.providers()[a]["creates_received"], before[a][0] + 1)

        # SP-A goes Unavailable.
        self.sim.set_fault(a, health="503")
        self.wait_health(a, "Unavailable")
        a_deletes = self.sim.providers()[a]["deletes_received"]

        r = self.rehydrate(cid)
        self.assertEqual(r.status, 202, r)
        body = r.json()
        new_id, b = body["resource_id"], body["provider_name"]
        self.assertNotEqual(new_id, old_id)
        self.assertEqual(body["status"], "PROVISIONING")
        self.assertEqual(body["old_resource_id"], old_id)
        self.assertNotEqual(b, a)
        self.assertEqual(self.holders(new_id), [b], "the new resource lives on SP-B only")
        self.assertIn(old_id, self.sim.instance_ids()[a], "create before delete: old still live")
        self.assertEqual(self.sim.providers()[a]["deletes_received"], a_deletes,
                         "no DELETE may reach an Unavailable SP")
        now = self.cii(cid)
        self.assertEqual((now["resource_id"], now["provider_name"]), (new_id, b))
        self.assertEqual(now["spec"], created["spec"], "the original intent is kept")

        # The old record is queued, then parked as PENDING_PROVIDER by the next cleanup cycle.
        rec = self.record(old_id)
        self.assertIsNotNone(rec, self.records())
        self.assertEqual(rec["provider_name"], a)
        self.assertEqual(rec["service_type"], "vm")
        self.assertEqual(rec["retry_count"], 0)
        parked = wait_until(lambda: self.record(old_id, "PENDING_PROVIDER"),
                            timeout=CLEANUP_S + 2, what="record PENDING_PROVIDER")
        self.assertEqual(parked["retry_count"], 0, "parking burns no retry")
        self.assertIsNone(self.record(old_id, "PENDING"))
        time.sleep(CLEANUP_S)  # another cycle: still parked, still no DELETE
        self.assertEqual(self.record(old_id)["status"], "PENDING_PROVIDER")
        self.assertEqual(self.record(old_id)["retry_count"], 0)
        self.assertEqual(self.sim.providers()[a]["deletes_received"], a_deletes)

        # SP-A recovers: within one cleanup interval of being Ready the old instance is deleted.
        self.sim.set_fault(a, health="healthy")
        self.wait_health(a, "Ready")
        ready_at = time.monotonic()
        wait_until(lambda: old_id in self.sim.providers()[a]["deleted_ids"],
                   timeout=CLEANUP_S + 1.0, interval=0.02, what="SP-A deleted the old instance")
        took = time.monotonic() - ready_at
        wait_until(lambda: self.record(old_id) is None, timeout=2, what="record removed")
        self.assertEqual(self.sim.providers()[a]["deletes_received"], a_deletes + 1)
        self.assertNotIn(old_id, self.sim.instance_ids()[a])
        self.assertEqual(self.holders(new_id), [b])
        wait_until(lambda: self.records() == [], timeout=CLEANUP_S + 2, what="queue empty")
        print(f"\n  old instance deleted {took:.2f} s after SP-A was Ready again", end=" ")

        # Every step is an event on dcm.instances, in order.
        facts = self.facts(cid)
        types = [e["type"].removeprefix("dcm.") for e in facts]
        start = next(e for e in facts if e["type"] == "dcm.instance.operation_started"
                     and e["data"]["operation"] == "rehydrate_catalog_item_instance")
        rid = start["data"]["request_id"]
        saga = [e["type"].removeprefix("dcm.") for e in facts
                if e["data"].get("request_id") == rid]
        self.assertEqual(saga, ["instance.operation_started", "resource.placed",
                                "service_type_instance.created", "cleanup.enqueued",
                                "resource.deleted", "catalog_item_instance.rehydrated",
                                "instance.operation_completed"], types)
        self.assertTrue(sub_sequence(
            ["instance.operation_started", "resource.placed", "service_type_instance.created",
             "catalog_item_instance.created", "instance.operation_completed",
             "instance.operation_started"], types), types)  # the create came first
        cleanup = [(e["type"].removeprefix("dcm."), e["data"]) for e in facts
                   if e["type"].startswith("dcm.cleanup.")]
        self.assertEqual([t for t, _ in cleanup][0], "cleanup.enqueued", cleanup)
        self.assertEqual([t for t, _ in cleanup][-1], "cleanup.attempted", cleanup)
        self.assertEqual({d["instance_id"] for _, d in cleanup}, {old_id})
        self.assertEqual([t for t, _ in cleanup].count("cleanup.parked"), 1,
                         "parked once, not once per cycle")
        self.assertTrue(sub_sequence(["cleanup.enqueued", "cleanup.parked", "cleanup.attempted"],
                                     [t for t, _ in cleanup]), cleanup)
        self.assertEqual(cleanup[-1][1]["outcome"], "deleted")
        self.assertEqual(cleanup[-1][1]["retry_count"], 0)
        placed = next(e["data"] for e in facts if e["type"] == "dcm.resource.placed"
                      and e["data"]["resource_id"] == new_id)
        self.assertEqual(placed["provider_name"], b)
        self.assertEqual(placed["policy"], "builtin")
        self.assertEqual(placed["intent"], created["spec"])
        rehydrated = next(e["data"] for e in facts
                          if e["type"] == "dcm.catalog_item_instance.rehydrated")
        self.assertEqual((rehydrated["old_resource_id"], rehydrated["new_resource_id"]),
                         (old_id, new_id))

    def test_02_unknown_instance_is_404(self):
        self.assertProblem(self.rehydrate(f"nope-{uuid.uuid4().hex[:8]}"), 404)
        self.assertProblem(self.c.get(f"{API}/catalog-item-instances/nope"), 404)

    def test_03_no_ready_provider_is_503_and_no_provider_of_the_type_is_422(self):
        before = self.sim_totals()
        ids_before = self.all_ids()
        self.sim.set_fault(self.container, health="503")
        self.wait_health(self.container, "Unavailable")
        cid = f"c-{uuid.uuid4().hex[:8]}"
        p = self.assertProblem(self.create({"service_type": "container"}, id=cid), 503)
        self.assertEqual(p.get("reason"), "no_ready_provider", p)
        self.assertProblem(self.c.get(f"{API}/catalog-item-instances/{cid}"), 404)
        # database is a known service type that no provider offers.
        did = f"d-{uuid.uuid4().hex[:8]}"
        p = self.assertProblem(self.create({"service_type": "database"}, id=did), 422)
        self.assertEqual(p.get("reason"), "no_provider", p)
        self.assertProblem(self.c.get(f"{API}/catalog-item-instances/{did}"), 404)
        # The id is free again: nothing was created under it.
        self.assertEqual(self.create_ok({"service_type": "vm"}, id=did)["id"], did)
        after = self.sim_totals()
        self.assertEqual({n: v for n, v in after.items() if n == self.container},
                         {self.container: before[self.container]})
        self.assertEqual(len(self.all_ids() - ids_before), 1)  # only the vm just created
        for r in self.records():
            self.assertNotIn(r["instance_id"], (cid, did))

    def test_04_failed_create_on_the_new_provider_is_502_and_keeps_the_old_instance(self):
        created = self.create_ok()
        cid, old_id, a = created["id"], created["resource_id"], created["provider_name"]
        ids_before = self.all_ids()
        self.sim.set_fault(fail_creates=True)  # every provider refuses creates
        before = self.sim_totals()
        p = self.assertProblem(self.rehydrate(cid), 502)
        self.assertEqual(p.get("reason"), "create_failed", p)
        after = self.sim_totals()
        self.assertEqual(sum(v[0] for v in after.values()) - sum(v[0] for v in before.values()),
                         1, "one create was tried")
        self.assertEqual(sum(v[1] for v in after.values()), sum(v[1] for v in before.values()),
                         "no delete")
        self.assertEqual(self.all_ids(), ids_before, "no new instance anywhere")
        now = self.cii(cid)
        self.assertEqual((now["resource_id"], now["provider_name"]), (old_id, a))
        self.assertEqual(self.holders(old_id), [a])
        self.assertIsNone(self.record(old_id), "nothing queued")
        types = [e["type"] for e in self.facts(cid)]
        self.assertEqual(types[-3:], ["dcm.resource.placed",
                                      "dcm.service_type_instance.create_failed",
                                      "dcm.instance.operation_failed"], types)
        self.assertNotIn("dcm.cleanup.enqueued", types)
        # Once creates work again the instance can be rehydrated.
        self.sim.set_fault(fail_creates=False)
        r = self.rehydrate(cid)
        self.assertEqual(r.status, 202, r)
        self.assertEqual(self.holders(r.json()["resource_id"]), [r.json()["provider_name"]])

    def deferred_record(self, provider):
        """A service-type instance on `provider`, deleted with ?deferred=true: its id."""
        sid = f"s-{uuid.uuid4().hex[:10]}"
        r = self.c.post(f"{API}/service-type-instances?id={sid}",
                        {"provider_name": provider, "spec": {"service_type": "vm", "cpu": 1}})
        self.assertEqual(r.status, 201, r)
        r = self.c.request("DELETE", f"{API}/service-type-instances/{sid}?deferred=true")
        self.assertEqual(r.status, 204, r)
        return sid

    def test_05_failed_deletes_reach_FAILED_after_max_retries_and_can_be_retried(self):
        p = self.vms[1]
        self.sim.set_fault(p, fail_deletes=True)
        d0 = self.sim.providers()[p]["deletes_received"]
        sid = self.deferred_record(p)
        rec = self.record(sid)
        # The cleanup worker's tick (every CLEANUP_S) may have tried it once already.
        self.assertEqual(rec["status"], "PENDING", rec)
        self.assertLessEqual(rec["retry_count"], 1, rec)
        # A record that is not FAILED cannot be retried.
        self.assertProblem(self.c.post(f"{API}/cleanup-queue/{sid}:retry"), 409)
        failed = wait_until(lambda: self.record(sid, "FAILED"),
                            timeout=MAX_RETRIES * CLEANUP_S + 3, what="record FAILED")
        self.assertEqual(failed["retry_count"], MAX_RETRIES, failed)
        self.assertTrue(failed["last_error"], failed)
        self.assertIn("500", failed["last_error"])
        self.assertTrue(failed["last_attempt"], failed)
        time.sleep(CLEANUP_S + 0.2)  # a FAILED record is not attempted again
        self.assertEqual(self.sim.providers()[p]["deletes_received"], d0 + MAX_RETRIES)
        self.assertIn(sid, self.sim.instance_ids()[p])
        facts = [e for e in self.facts(sid) if e["data"].get("instance_id") == sid]
        attempts = [e["data"] for e in facts if e["type"] == "dcm.cleanup.attempted"]
        self.assertEqual([(a["outcome"], a["retry_count"]) for a in attempts],
                         [("failed", i) for i in range(1, MAX_RETRIES + 1)])
        alerts = [e["data"] for e in facts if e["type"] == "dcm.cleanup.failed"]
        self.assertEqual(len(alerts), 1, facts)
        self.assertEqual((alerts[0]["retry_count"], alerts[0]["max_retries"]),
                         (MAX_RETRIES, MAX_RETRIES))
        self.assertTrue(alerts[0]["error"])

        self.sim.set_fault(p, fail_deletes=False)
        r = self.c.post(f"{API}/cleanup-queue/{sid}:retry")
        self.assertEqual(r.status, 200, r)
        self.assertEqual((r.json()["status"], r.json()["retry_count"]), ("PENDING", 0), r)
        self.assertEqual(r.json()["instance_id"], sid)
        wait_until(lambda: sid in self.sim.providers()[p]["deleted_ids"],
                   timeout=CLEANUP_S + 1.5, what="deleted after the retry")
        wait_until(lambda: self.record(sid) is None, timeout=2, what="record removed")
        self.assertEqual(self.sim.providers()[p]["deletes_received"], d0 + MAX_RETRIES + 1)
        self.assertIn("dcm.cleanup.retried", [e["type"] for e in self.facts(sid)])
        self.assertProblem(self.c.post(f"{API}/cleanup-queue/{sid}:retry"), 404)

    def rehydration_overlaps(self, cid):
        """Pairs of started rehydrations of `cid` where the later one did not build on the
        earlier one's result: its request named (old_resource_id, the generation the handler
        saw) a resource other than the one the earlier rehydration created, i.e. both were made
        against the same generation and both proceeded: (earlier, later)."""
        requests = {e["id"]: e["data"]
                    for e in kafka_events(self.server.bootstrap, T + "instance-requests")
                    if e["data"].get("root") == cid and "rehydrate" in e["data"]["operation"]}
        started = [e["data"]["request_id"] for e in self.facts(cid)
                   if e["type"] == "dcm.instance.operation_started"
                   and "rehydrate" in e["data"]["operation"]]
        return [(a[:8], b[:8]) for a, b in zip(started, started[1:])
                if requests[b].get("old_resource_id") != requests[a]["new_resource_id"]]

    # Concurrent rehydrations of one instance (SPEC §3.3): each request names the generation
    # (resource) the handler saw; the worker starts at most one per generation and answers 409
    # to the others, also when it reads them just after the first one ended. Shown with the
    # built-in policy (a saga takes ~15 ms): 16 requests spread over 30 ms per round.
    def test_06_concurrent_rehydrations_with_a_fast_saga_only_one_proceeds(self):
        for round in range(25):
            cid = self.create_ok()["id"]
            results = self.concurrent_rehydrations(cid, n=16, stagger=0.002)
            statuses = sorted(r.status for r, _, _ in results)
            odd = [(r.status, r.json().get("reason"), r.json().get("detail"))
                   for r, _, _ in results if r.status not in (202, 409)]
            self.assertEqual(odd, [], f"round {round}: answers other than 202/409")
            self.assertGreaterEqual(statuses.count(202), 1, f"round {round}: {statuses}")
            overlaps = self.rehydration_overlaps(cid)
            self.assertEqual(overlaps, [], f"round {round}, statuses {statuses}: two "
                             "rehydrations of the same generation both proceeded")

    def test_07_provider_hosting_a_live_instance_is_deleted_only_with_force(self):
        # A provider of its own (type storage) on an sp-sim endpoint, so the shared ones stay.
        name = f"doomed-{uuid.uuid4().hex[:6]}"
        endpoint = self.sim.providers()[self.vms[2]]["endpoint"]
        r = self.c.post(f"{API}/providers", {"name": name, "endpoint": endpoint,
                                             "service_type": "storage"})
        self.assertEqual(r.status, 201, r)
        pid = r.json()["id"]
        wait_until(lambda: self.c.get(f"{API}/providers/{pid}").json()["health_status"]
                   == "Ready", timeout=5, what=f"{name} Ready")
        sid = f"s-{uuid.uuid4().hex[:10]}"
        r = self.c.post(f"{API}/service-type-instances?id={sid}",
                        {"provider_name": name, "spec": {"service_type": "storage"}})
        self.assertEqual(r.status, 201, r)
        # A resource placed on it (the only storage provider) goes with it: LOST (SPEC §8; this
        # server does not rehydrate on provider loss, so it is only marked).
        r = self.c.post(f"{API}/resources", {"spec": {"service_type": "storage"}})
        self.assertEqual(r.status, 201, r)
        rid = r.json()["id"]
        self.assertEqual(r.json()["provider_name"], name)
        p = self.assertProblem(self.c.request("DELETE", f"{API}/providers/{pid}"), 409)
        self.assertIn("live", p["detail"])
        self.assertEqual(self.c.get(f"{API}/providers/{pid}").status, 200)
        r = self.c.request("DELETE", f"{API}/providers/{pid}?force=true")
        self.assertEqual(r.status, 204, r)
        self.assertProblem(self.c.get(f"{API}/providers/{pid}"), 404)
        wait_until(lambda: self.c.get(f"{API}/resources/{rid}").json()["status"] == "LOST",
                   timeout=10, interval=0.1, what="the force-deleted provider's resource LOST")
        reasons = [e["data"].get("reason") for e in self.facts(rid)
                   if e["type"] == "dcm.resource.lost"]
        self.assertEqual(reasons, ["provider_deleted"])

    def test_08_sp_status_events_set_the_instance_status(self):
        created = self.create_ok()
        cid, rid = created["id"], created["resource_id"]
        self.assertNotEqual(created["status"], "RUNNING")
        kafka_produce(self.server.bootstrap, T + "status", key=rid, value={
            "specversion": "1.0", "id": str(uuid.uuid4()), "source": "sp/e2e",
            "type": "dcm.status.vm", "subject": rid,
            "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "datacontenttype": "application/json", "schemaversion": 1,
            "data": {"id": rid, "status": "running", "message": "ok"}})
        wait_until(lambda: self.cii(cid)["status"] == "RUNNING", timeout=10,
                   what="catalog item instance RUNNING")
        r = self.c.get(f"{API}/service-type-instances/{rid}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["status"], "RUNNING")
        r = self.c.get(f"{API}/resources/{rid}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["status"], "RUNNING")

    def test_09_deferred_delete_of_a_service_type_instance_goes_through_the_queue(self):
        p = self.vms[0]
        before = self.sim.providers()[p]
        sid = f"s-{uuid.uuid4().hex[:10]}"
        r = self.c.post(f"{API}/service-type-instances?id={sid}",
                        {"provider_name": p, "spec": {"service_type": "vm", "cpu": 1}})
        self.assertEqual(r.status, 201, r)
        body = r.json()
        self.assertEqual((body["id"], body["provider_name"]), (sid, p))
        self.assertEqual(body["status"], "PROVISIONING")
        self.assertEqual(r.headers["location"], f"{API}/service-type-instances/{sid}")
        self.assertEqual(self.holders(sid), [p])
        self.assertEqual(self.sim.providers()[p]["creates_received"],
                         before["creates_received"] + 1)
        r = self.c.request("DELETE", f"{API}/service-type-instances/{sid}?deferred=true")
        self.assertEqual(r.status, 204, r)
        rec = self.record(sid)
        if rec is not None and rec["last_attempt"] is None:  # else the cleanup's tick came first
            self.assertEqual((rec["status"], rec["retry_count"], rec["provider_name"]),
                             ("PENDING", 0, p), rec)
        wait_until(lambda: sid in self.sim.providers()[p]["deleted_ids"],
                   timeout=CLEANUP_S + 1.5, what="cleanup deleted it")
        wait_until(lambda: self.record(sid) is None, timeout=2, what="record removed")
        # Exactly one DELETE reached the SP and it found the instance (outcome deleted, not
        # gone): the deferred delete itself never called the SP.
        self.assertEqual(self.sim.providers()[p]["deletes_received"],
                         before["deletes_received"] + 1)
        facts = self.facts(sid)
        types = [e["type"] for e in facts]
        self.assertNotIn("dcm.service_type_instance.deleted", types)
        attempts = [e["data"] for e in facts if e["type"] == "dcm.cleanup.attempted"]
        self.assertEqual([a["outcome"] for a in attempts], ["deleted"])
        self.assertLess(types.index("dcm.instance.operation_completed",
                                    types.index("dcm.cleanup.enqueued")),
                        types.index("dcm.cleanup.attempted"))
        self.assertProblem(self.c.get(f"{API}/service-type-instances/{sid}"), 404)
        r = self.c.get(f"{API}/service-type-instances/{sid}?show_deleted=true")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["status"], "DELETED")

    def test_10_service_type_instance_on_an_unknown_or_unready_provider_creates_nothing(self):
        ids_before = self.all_ids()
        r = self.c.post(f"{API}/service-type-instances",
                        {"provider_name": "no-such-provider", "spec": {"service_type": "vm"}})
        self.assertProblem(r, 422)
        self.sim.set_fault(self.container, health="503")
        self.wait_health(self.container, "Unavailable")
        r = self.c.post(f"{API}/service-type-instances",
                        {"provider_name": self.container, "spec": {"service_type": "container"}})
        self.assertProblem(r, 503)
        self.assertEqual(self.all_ids(), ids_before)

    def test_11_deleting_a_catalog_item_instance_deletes_its_resource_or_queues_it(self):
        created = self.create_ok()
        cid, rid, a = created["id"], created["resource_id"], created["provider_name"]
        d0 = self.sim.providers()[a]["deletes_received"]
        r = self.c.request("DELETE", f"{API}/catalog-item-instances/{cid}")
        self.assertEqual(r.status, 204, r)
        self.assertIn(rid, self.sim.providers()[a]["deleted_ids"], "deleted on the SP at once")
        self.assertEqual(self.sim.providers()[a]["deletes_received"], d0 + 1)
        self.assertProblem(self.c.get(f"{API}/catalog-item-instances/{cid}"), 404)
        self.assertProblem(self.c.get(f"{API}/resources/{rid}"), 404)
        self.assertIsNone(self.record(rid))
        self.assertProblem(self.c.request("DELETE", f"{API}/catalog-item-instances/{cid}"), 404)
        # Its provider Unavailable: the delete answers 204 and the resource waits in the queue.
        created = self.create_ok()
        cid, rid, a = created["id"], created["resource_id"], created["provider_name"]
        self.sim.set_fault(a, health="503")
        self.wait_health(a, "Unavailable")
        d0 = self.sim.providers()[a]["deletes_received"]
        r = self.c.request("DELETE", f"{API}/catalog-item-instances/{cid}")
        self.assertEqual(r.status, 204, r)
        self.assertProblem(self.c.get(f"{API}/catalog-item-instances/{cid}"), 404)
        self.assertEqual(self.record(rid)["provider_name"], a)
        self.assertEqual(self.sim.providers()[a]["deletes_received"], d0)
        self.sim.set_fault(a, health="healthy")
        wait_until(lambda: rid in self.sim.providers()[a]["deleted_ids"], timeout=CLEANUP_S + 3,
                   what="queued resource deleted after recovery")
        wait_until(lambda: self.record(rid) is None, timeout=2, what="record removed")
        self.assertEqual(self.sim.providers()[a]["deletes_received"], d0 + 1)


# --- a fake DCM Policy Manager ------------------------------------------------------------


class FakePolicyManager:
    """POST /api/v1alpha1/policies:evaluateRequest {service_instance:{spec}}:
    406 when spec.reject is true or spec.tag is in `rejected_tags`; else 200 with the spec plus
    `"evaluated": true` and selected_provider = spec.want (null when absent). Every call
    sleeps `delay` seconds first."""

    PATH = "/api/v1alpha1/policies:evaluateRequest"

    def __init__(self):
        self.rejected_tags, self.delay, self.calls = set(), 0.0, []
        pm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"] or 0)))
                pm.calls.append((self.path, body))
                time.sleep(pm.delay)
                spec = body["service_instance"]["spec"]
                if self.path != pm.PATH:
                    self.answer(404, {"title": "Not Found", "status": 404})
                elif spec.get("reject") or spec.get("tag") in pm.rejected_tags:
                    self.answer(406, {"type": "about:blank", "title": "Not Acceptable",
                                      "status": 406, "detail": "rejected by e2e policy"})
                else:
                    self.answer(200, {"evaluated_service_instance": {
                        "spec": {**spec, "evaluated": True}},
                        "selected_provider": spec.get("want"), "status": "OK"})

            def answer(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/problem+json" if status >= 400
                                 else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}{self.PATH}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class PolicyManagerTest(Base):
    @classmethod
    def setUpClass(cls):
        cls.pm = FakePolicyManager()
        cls.start(FAST + ["--policy-manager-evaluation-url", cls.pm.url, "--policy-timeout", "5s"],
                  2, "vm", "pm")

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.pm.stop()

    def setUp(self):
        super().setUp()
        self.pm.rejected_tags.clear()
        self.pm.delay = 0.0

    def test_rejected_create_is_406_and_creates_nothing(self):
        before, ids_before = self.sim_totals(), self.all_ids()
        calls = len(self.pm.calls)
        cid = f"r-{uuid.uuid4().hex[:8]}"
        p = self.assertProblem(self.create({"service_type": "vm", "reject": True}, id=cid), 406)
        self.assertEqual(p.get("reason"), "policy_rejected", p)
        self.assertIn("rejected by e2e policy", p["detail"])
        self.assertEqual(self.sim_totals(), before, "no create or delete reached any SP")
        self.assertEqual(self.all_ids(), ids_before)
        self.assertProblem(self.c.get(f"{API}/catalog-item-instances/{cid}"), 404)
        self.assertEqual(self.records(), [], "nothing queued")
        # The Policy Manager got the DCM request shape.
        path, body = self.pm.calls[calls]
        self.assertEqual(path, FakePolicyManager.PATH)
        self.assertEqual(body, {"service_instance": {"spec": {"service_type": "vm",
                                                              "reject": True}}})

    def test_rejected_rehydrate_is_406_and_deletes_nothing(self):
        tag = uuid.uuid4().hex[:8]
        created = self.create_ok({"service_type": "vm", "tag": tag})
        cid, old_id, a = created["id"], created["resource_id"], created["provider_name"]
        self.pm.rejected_tags.add(tag)  # today's policy rejects the original intent
        before, ids_before = self.sim_totals(), self.all_ids()
        p = self.assertProblem(self.rehydrate(cid), 406)
        self.assertEqual(p.get("reason"), "policy_rejected", p)
        self.assertEqual(self.sim_totals(), before, "no create or delete reached any SP")
        self.assertEqual(self.all_ids(), ids_before)
        now = self.cii(cid)
        self.assertEqual((now["resource_id"], now["provider_name"]), (old_id, a))
        self.assertEqual(self.holders(old_id), [a])
        self.assertEqual(self.records(), [])
        types = [e["type"] for e in self.facts(cid)]
        self.assertEqual(types[-2:], ["dcm.instance.operation_started",
                                      "dcm.instance.operation_failed"], types)
        # The policy re-evaluated the stored original intent.
        self.assertEqual(self.pm.calls[-1][1]["service_instance"]["spec"],
                         {"service_type": "vm", "tag": tag})

    def test_selected_provider_is_honoured(self):
        for want in self.vms + list(reversed(self.vms)):
            created = self.create_ok({"service_type": "vm", "want": want})
            self.assertEqual(created["provider_name"], want)
            self.assertEqual(self.holders(created["resource_id"]), [want])
            # The SP got the evaluated spec; the resource keeps the original intent too.
            res = self.c.get(f"{API}/resources/{created['resource_id']}").json()
            self.assertEqual(res["intent"], {"service_type": "vm", "want": want})
            self.assertEqual(res["spec"], {"service_type": "vm", "want": want, "evaluated": True})
            self.assertEqual(res["policy"], "policy_manager")
        # A selected provider that is not Ready is not used: 503, nothing created.
        self.sim.set_fault(self.vms[0], health="503")
        self.wait_health(self.vms[0], "Unavailable")
        ids_before = self.all_ids()
        self.assertProblem(self.create({"service_type": "vm", "want": self.vms[0]}), 503)
        self.assertEqual(self.all_ids(), ids_before)

    def test_concurrent_rehydrations_exactly_one_proceeds(self):
        created = self.create_ok()
        cid, old_id = created["id"], created["resource_id"]
        ids_before = self.all_ids()
        # A slow policy call keeps the first rehydration in progress while the others arrive.
        self.pm.delay = 1.5
        n = 8
        results = [r for r, _, _ in self.concurrent_rehydrations(cid, n)]
        statuses = sorted(r.status for r in results)
        self.assertEqual(statuses, [202] + [409] * (n - 1), results)
        winner = next(r.json() for r in results if r.status == 202)
        new_ids = self.all_ids() - ids_before
        self.assertEqual(new_ids, {winner["resource_id"]}, "exactly one new instance")
        self.assertEqual(self.cii(cid)["resource_id"], winner["resource_id"])
        for r in results:
            if r.status == 409:
                self.assertEqual(r.json().get("reason"), "conflict", r)
        wait_until(lambda: old_id in self.sim.providers()[created["provider_name"]]["deleted_ids"],
                   timeout=CLEANUP_S + 2, what="old instance cleaned up")
        wait_until(lambda: self.record(old_id) is None, timeout=2, what="record removed")
        started = [e for e in self.facts(cid) if e["type"] == "dcm.instance.operation_started"
                   and e["data"]["operation"] == "rehydrate_catalog_item_instance"]
        self.assertEqual(len(started), 1)


if __name__ == "__main__":
    main()
