"""Auditors end to end (SPEC §3.4, issue #5): real `dcm serve --dev` and `dcm sp-sim`.

A provider is registered, updated, goes Unavailable and Ready again, and is deregistered; the
time after each step is recorded with the state read then. `as_of` at each recorded time returns
that state (folded from the events), and the history lists every step in order with a summary.
The same for a catalog item instance created, rehydrated and deleted."""

import time
import unittest
from datetime import datetime, timezone

from harness import API, DevServer, InstanceReads, SpSim, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms",
        "--health-check-max-consecutive-failures", "3", "--cleanup-interval", "1s"]
# Fields of a provider that change with every probe: the recorded state is compared without
# them (and the probe time is checked against the recorded time instead).
PER_PROBE = {"last_probe_time", "last_probe_result", "latency_ms", "consecutive_successes",
             "consecutive_failures", "last_error", "last_error_time"}


def now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def stable(provider):
    p = dict(provider)
    p["health"] = {k: v for k, v in provider["health"].items() if k not in PER_PROBE}
    return p


class AuditTest(unittest.TestCase, InstanceReads):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer(extra=FAST)
        cls.c = cls.server.client
        cls.sim = SpSim(cls.server.url, 2, name_prefix="audit")
        cls.pids = {n: p["id"] for n, p in cls.sim.wait_registered().items()}
        cls.names = sorted(cls.pids)
        cls.sim.wait_ready(cls.c)  # test_02 places on names[1]

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.server.stop()

    def get(self, path, status=200):
        r = self.c.get(path)
        self.assertEqual(r.status, status, r)
        return r.json()

    def history(self, path):
        events, token = [], ""
        while True:
            page = self.get(f"{path}?max_page_size=50" + (f"&page_token={token}" if token else ""))
            events += page["events"]
            token = page.get("next_page_token")
            if not token:
                return events

    def record(self, what):
        """Records the time after a step has settled, and the state read right then."""
        time.sleep(0.05)  # the step's own events are older than the recorded time
        at = now_rfc3339()
        return at, what()

    def test_01_provider_as_of_each_recorded_time_and_its_history(self):
        name = self.names[0]
        pid = self.pids[name]
        path = f"{API}/providers/{pid}"
        self.wait_health(name, "Ready")
        steps = [self.record(lambda: self.get(path))]  # registered, Ready

        body = {k: v for k, v in self.get(path).items()
                if k in ("name", "endpoint", "service_type", "operations", "metadata")}
        body["display_name"] = "audited"
        r = self.c.request("PUT", path, body)
        self.assertEqual(r.status, 200, r)
        # A re-registration is Pending until its immediate probe's event is folded (SPEC §3.2).
        self.wait_health(name, "Ready")
        steps.append(self.record(lambda: self.get(path)))  # updated

        self.sim.set_fault(name, health="503")
        self.wait_health(name, "Unavailable")
        steps.append(self.record(lambda: self.get(path)))

        self.sim.set_fault(name, health="healthy")
        self.wait_health(name, "Ready")
        steps.append(self.record(lambda: self.get(path)))

        r = self.c.request("DELETE", path)
        self.assertEqual(r.status, 204, r)
        deleted_at = self.record(lambda: None)[0]
        self.assertEqual([s[1]["health_status"] for s in steps],
                         ["Ready", "Ready", "Unavailable", "Ready"])
        self.assertEqual(steps[1][1]["display_name"], "audited")

        # as_of reads the audit index, which may still lack the last health change (the DELETE's
        # read barrier covers the providers topic, not the health topic).
        last_at, last = steps[-1]
        wait_until(lambda: stable(self.get(f"{path}?as_of={last_at}")) == stable(last),
                   timeout=10, what="the audit index holding the last step")
        for at, recorded in steps:
            past = self.get(f"{path}?as_of={at}")
            self.assertEqual(stable(past), stable(recorded), at)
            if "last_probe_time" in past["health"]:
                self.assertLessEqual(past["health"]["last_probe_time"], at)
            listed = {p["id"]: p for p in self.get(f"{API}/providers?as_of={at}")["providers"]}
            self.assertEqual(stable(listed[pid]), stable(recorded), at)
        self.get(path, 404)  # live: gone
        self.get(f"{path}?as_of={deleted_at}", 404)
        self.get(f"{path}?as_of=2000-01-01T00:00:00Z", 404)
        self.assertNotIn(pid, [p["id"] for p in
                               self.get(f"{API}/providers?as_of={deleted_at}")["providers"]])
        self.get(f"{path}?as_of=yesterday", 400)

        events = self.history(f"{path}/history")
        times = [e["time"] for e in events]
        self.assertEqual(times, sorted(times))
        self.assertTrue(all(e["summary"] for e in events))
        steps_seen = [e for e in events if e["type"] != "dcm.provider.health_probed"]
        types = [e["type"] for e in steps_seen]
        self.assertEqual(types[0], "dcm.provider.registered")
        self.assertEqual(types[-1], "dcm.provider.deleted")
        self.assertIn("dcm.provider.updated", types)
        changes = [e["event"]["data"]["to"] for e in steps_seen
                   if e["type"] == "dcm.provider.health_changed"]
        # Pending → Ready, then down to Unavailable (possibly through Unhealthy), then Ready.
        self.assertEqual(changes[0], "Ready")
        self.assertEqual(changes[-1], "Ready")
        self.assertIn("Unavailable", changes)
        down = [e for e in steps_seen if e["type"] == "dcm.provider.health_changed"
                and e["event"]["data"]["to"] == "Unavailable"][0]
        self.assertLess(types.index("dcm.provider.updated"), steps_seen.index(down))
        self.assertRegex(down["summary"], r"^health \w+ → Unavailable after 3 failures")
        self.assertTrue(any(e["type"] == "dcm.provider.health_probed" for e in events))

        # GET /events: the same log by subject and type, and by time.
        updated = self.get(f"{API}/events?subject={pid}&type=dcm.provider.updated")["events"]
        self.assertEqual(len(updated), 1)
        self.assertEqual(updated[0]["data"]["provider"]["display_name"], "audited")
        window = self.get(f"{API}/events?subject={pid}&since={steps[0][0]}&until={steps[1][0]}"
                          "&type=dcm.provider.*")["events"]
        self.assertIn("dcm.provider.updated", [e["type"] for e in window])
        self.assertNotIn("dcm.provider.registered", [e["type"] for e in window])
        self.get(f"{API}/events?since=soon", 400)
        self.get(f"{API}/providers/no-such-provider/history", 404)

    def test_02_catalog_item_instance_as_of_and_history(self):
        c = self.c
        r = c.post(f"{API}/catalog-item-instances", {"spec": {"service_type": "vm", "cpu": 1}})
        self.assertEqual(r.status, 201, r)
        cid = r.json()["id"]
        path = f"{API}/catalog-item-instances/{cid}"
        created = self.record(lambda: self.cii(cid))
        r = c.post(f"{path}:rehydrate")
        self.assertEqual(r.status, 202, r)
        rehydrated = self.record(lambda: self.cii(cid))
        self.assertNotEqual(created[1]["resource_id"], rehydrated[1]["resource_id"])
        r = c.request("DELETE", path)
        self.assertEqual(r.status, 204, r)
        deleted_at = self.record(lambda: None)[0]

        for at, recorded in (created, rehydrated):
            self.assertEqual(self.get(f"{path}?as_of={at}"), recorded, at)
        self.get(f"{path}?as_of={deleted_at}", 404)

        events = self.history(f"{path}/history")
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "dcm.instance.operation_requested")
        for expected in ("dcm.resource.placed", "dcm.catalog_item_instance.created",
                         "dcm.catalog_item_instance.rehydrated", "dcm.resource.deleted",
                         "dcm.catalog_item_instance.deleted"):
            self.assertIn(expected, types)
        self.assertLess(types.index("dcm.catalog_item_instance.created"),
                        types.index("dcm.catalog_item_instance.rehydrated"))
        self.assertLess(types.index("dcm.catalog_item_instance.rehydrated"),
                        types.index("dcm.catalog_item_instance.deleted"))
        self.assertEqual([e["time"] for e in events], sorted(e["time"] for e in events))
        self.assertEqual(types.count("dcm.instance.operation_completed"), 3)


if __name__ == "__main__":
    main()
