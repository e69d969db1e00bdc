"""An instance failure neither expires heartbeat providers nor double-expires them (SPEC §8, issue
#14 acceptance): one Kafka, two `dcm serve` (a, b), 200 heartbeat providers from
`dcm sp-sim --liveness heartbeat` given both URLs (a first; beats every 9 s). kill -9 a:
sp-sim's beats move to b within the timeout, b takes a's partitions over after the group session
timeout, and for the next 30 s no provider is Unavailable, no `heartbeat_expired` is recorded, and every provider has
exactly one expiry decision maker (GET /admin/heartbeat-providers: b lists all 200 once the group
settled; before the kill a's and b's lists split them, none listed twice).

a coalesced the beats of its providers (HEARTBEAT_RECORD_EVERY, default 1 m), so the log's last
beat of some of them is older than the 12 s timeout when b takes over: b must not expire them
(consumers/heartbeat_tracker.h, "Expiry from the log")."""

import json
import signal
import sys
import time
import unittest
from urllib.parse import quote

from harness import API, Cluster, SpSim, kafka_events, main, wait_until

COUNT = 200
WATCH_S = 30.0
TIMEOUT_S = 12.0  # the default HEARTBEAT_TIMEOUT (the servers run without the flag)
# Beats 9 s apart (below the timeout): b takes a's partitions over (~7 s after the kill) before
# some of a's providers have beaten b, so b knows their last beat only from the log.
INTERVAL_S = 9


def owned(inst):
    r = inst.client.get("/admin/heartbeat-providers")
    assert r.status == 200, r
    body = r.json()
    assert body["count"] == len(body["providers"]), body
    return body["providers"]


def statuses(inst):
    return {p["id"]: p["health_status"] for p in inst.providers()}


def expiries(inst):
    """health_changed events to Unavailable, and heartbeat_expired records, from /events."""
    found = []
    for kind in ("dcm.provider.health_changed", "dcm.provider.heartbeat_recorded"):
        token = ""
        while True:
            r = inst.client.get(f"{API}/events?type={quote(kind)}&max_page_size=100" +
                                (f"&page_token={quote(token)}" if token else ""))
            assert r.status == 200, r
            page = r.json()
            for e in page["events"]:
                data = e.get("data") or {}
                if data.get("to") == "Unavailable" or data.get("result") == "heartbeat_expired":
                    found.append(e)
            token = page.get("next_page_token")
            if not token:
                break
    return found


class HeartbeatFailoverTest(unittest.TestCase):
    def test_kill_9_of_one_instance_expires_no_provider_and_leaves_one_decider_each(self):
        cluster = Cluster(partitions=4)
        sim = None
        try:
            a = cluster.serve(name="a")
            b = cluster.serve(name="b")

            def partitions(inst):
                return inst.client.get("/admin/info").json().get("prober_partitions") or []
            wait_until(lambda: partitions(a) and partitions(b), timeout=30,
                       what="the prober partitions split between a and b")

            sim = SpSim(f"{a.url},{b.url}", COUNT,
                        ["--liveness", "heartbeat", "--heartbeat-interval", f"{INTERVAL_S}s"],
                        name_prefix="hb")
            ids = {p["id"] for p in sim.wait_registered(timeout=60).values()}
            self.assertEqual(len(ids), COUNT)
            wait_until(lambda: statuses(b) == {pid: "Ready" for pid in ids}, timeout=30,
                       interval=0.5, what="all 200 Ready")
            ready = time.monotonic()

            # Before the kill: a and b split the providers, none tracked twice.
            on_a, on_b = owned(a), owned(b)
            self.assertFalse(set(on_a) & set(on_b), "a provider with two expiry deciders")
            self.assertEqual(set(on_a) | set(on_b), ids)
            self.assertEqual(len(on_a) + len(on_b), COUNT)
            self.assertTrue(on_a and on_b, (len(on_a), len(on_b)))
            # The log's last beat of a's providers is their first (a coalesces the rest for
            # HEARTBEAT_RECORD_EVERY, 1 m): once it is older than the timeout when b takes over,
            # timing expiry from it alone would expire them all.
            # b takes over at least a session timeout (4 s) after the kill.
            time.sleep(max(0.0, TIMEOUT_S - 4.0 + 1.0 - (time.monotonic() - ready)))
            beats_before = {n: p["heartbeats"] for n, p in sim.providers().items()}

            a.proc.kill(signal.SIGKILL)
            killed = time.monotonic()
            moved_s = rebalanced_s = None
            seen_unavailable = {}
            while time.monotonic() - killed < WATCH_S or moved_s is None or rebalanced_s is None:
                elapsed = time.monotonic() - killed
                self.assertLess(elapsed, WATCH_S + 30, "beats never moved or b never took over")
                if moved_s is None:
                    now = sim.providers()
                    if all(now[n]["heartbeats"] > beats_before[n] for n in beats_before):
                        moved_s = elapsed  # every provider had a beat accepted since the kill
                if rebalanced_s is None and len(partitions(b)) == 4:
                    rebalanced_s = elapsed
                for pid, status in statuses(b).items():
                    if status not in ("Ready",):
                        seen_unavailable.setdefault(pid, (round(elapsed, 1), status))
                if rebalanced_s is not None:
                    # Once b owns every partition it decides every expiry, alone (a is dead).
                    self.assertEqual(set(wait_until(lambda: (o := owned(b)) and len(o) == COUNT
                                                    and o, timeout=10, interval=0.2,
                                                    what="b tracks all 200")), ids)
                time.sleep(0.5)
            print(f"\n  beats moved to b {moved_s:.1f} s after the kill; b owned every partition "
                  f"{rebalanced_s:.1f} s after it", file=sys.stderr)

            self.assertEqual(seen_unavailable, {}, "providers not Ready after the kill")
            self.assertLess(moved_s, TIMEOUT_S, "beats must move within the timeout")
            self.assertEqual(owned(b), sorted(ids))
            self.assertEqual(expiries(b), [])
            records = [e for e in kafka_events(cluster.bootstrap, cluster.prefix + "health-probes")
                       if e["type"] == "dcm.provider.heartbeat_recorded"
                       and e["data"]["result"] == "heartbeat_expired"]
            self.assertEqual(records, [], json.dumps(records[:3]))
        finally:
            if sim:
                sim.proc.kill(signal.SIGKILL)  # no deregistration storm against a dead URL
            cluster.close()


if __name__ == "__main__":
    main()
