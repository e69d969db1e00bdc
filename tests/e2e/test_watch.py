"""Watch streams end to end (SPEC §9, issue #15): real `dcm serve` processes and SSE clients.

`EventWatchTest` (`dcm serve --dev` and `dcm sp-sim`): `/events?watch=true&subject=<id>` shows a
provider's registration, update and health change within 1 s of each event's time; a watcher that
never reads is cut off while the others get every event; the stream cap answers 503; a bad
Last-Event-ID is 400.

`ListWatchTest`: `/providers?watch=true` sends the current list (ADDED each, then SYNCED), a
MODIFIED when a provider's health changes and a DELETED when one is deleted.

`ResumeTest` (two `dcm serve` on one `dcm dev-kafka`): a watcher disconnects after N events and
resumes with Last-Event-ID on the same instance and on the other one: the union of what it got is
exactly the `/events` list, in order, with no duplicate."""

import json
import socket
import time
import unittest
import urllib.parse

from harness import (API, Cluster, DevServer, SpSim, SseStream, events_pages, main, provider_body,
                     rfc3339_ms, wait_until)

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms",
        "--health-check-max-consecutive-failures", "1"]


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def event_list(client, query):
    """Every event of GET /events?<query>, all pages, in list order."""
    return events_pages(client, f"{API}/events?{query}")


def metric(client, name):
    for line in client.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


class EventWatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dev = DevServer(extra=[*FAST, "--watch-max-streams", "12",
                                   "--watch-buffer-bytes", "16384"])
        cls.c = cls.dev.client
        cls.sim = SpSim(cls.dev.url, 1, name_prefix="watch")
        cls.sim.wait_registered()

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.dev.stop()

    def test_01_subject_watch_shows_registration_update_and_health_change_within_1s(self):
        sim_provider = next(iter(self.sim.providers().values()))
        endpoint = sim_provider["endpoint"]
        watch = SseStream(self.dev.url, f"{API}/events?watch=true&subject=watched-1")
        self.assertEqual(watch.status, 200)
        self.assertTrue(watch.headers["content-type"].startswith("text/event-stream"))
        body = provider_body("watched-1", endpoint=endpoint)
        r = self.c.post(f"{API}/providers?id=watched-1", body)
        self.assertEqual(r.status, 201, r)
        body["metadata"] = {"region_code": "eu-2"}
        r = self.c.request("PUT", f"{API}/providers/watched-1", body)
        self.assertEqual(r.status, 200, r)
        wait_until(lambda: self.c.get(f"{API}/providers/watched-1").json()["health_status"] ==
                   "Ready", what="watched-1 Ready")
        self.sim.set_fault(sim_provider["name"], health="refuse")
        try:
            msgs = watch.wait(lambda m: any(x["event"] == "dcm.provider.health_changed" and
                                            '"Unavailable"' in x["data"] for x in m),
                              what="health change to Unavailable")
        finally:
            self.sim.set_fault(sim_provider["name"], health="healthy")
        watch.close()
        seen = {}
        for m in msgs:
            event = json.loads(m["data"])
            self.assertEqual(event["subject"], "watched-1")
            self.assertEqual(event["type"], m["event"])
            self.assertTrue(m["id"])
            seen.setdefault(m["event"], []).append(m["at"] - rfc3339_ms(event["time"]) / 1000)
        for kind in ("dcm.provider.registered", "dcm.provider.updated",
                     "dcm.provider.health_changed"):
            self.assertIn(kind, seen)
            for delay in seen[kind]:
                self.assertLess(delay, 1.0, f"{kind} arrived {delay:.3f} s after its time")
        # The stream is exactly what GET /events lists for the subject, in order.
        listed = event_list(self.c, "subject=watched-1")
        self.assertEqual([json.loads(m["data"])["id"] for m in msgs],
                         [e["id"] for e in listed[:len(msgs)]])

    def test_02_a_reader_that_never_reads_is_cut_off_and_the_others_lose_nothing(self):
        since = int(time.time() * 1000)
        query = f"since={urllib.parse.quote(iso(since))}&type=dcm.provider.registered"
        # A client that sends the request and never reads, with a tiny receive buffer.
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        host, port = self.dev.url.split("//")[1].split(":")
        stalled.connect((host, int(port)))
        stalled.sendall(f"GET {API}/events?watch=true HTTP/1.1\r\nHost: x\r\n"
                        "Accept: text/event-stream\r\n\r\n".encode())
        readers = [SseStream(self.dev.url, f"{API}/events?watch=true&{query}") for _ in range(5)]
        cut_before = metric(self.c, "dcm_watch_cut_off_total")
        pad = "x" * 2000  # big events fill the stalled reader's buffers fast
        for i in range(150):
            r = self.c.post(f"{API}/providers?id=storm-{i}",
                            provider_body(f"storm-{i}", metadata={"pad": pad}))
            self.assertEqual(r.status, 201, r)
        listed = [e["id"] for e in event_list(self.c, query)]
        self.assertEqual(len(listed), 150)
        for reader in readers:
            msgs = reader.wait(lambda m: len(m) >= 150, what="150 registrations")
            self.assertEqual([json.loads(m["data"])["id"] for m in msgs], listed)
            reader.close()
        wait_until(lambda: metric(self.c, "dcm_watch_cut_off_total") > cut_before,
                   what="the stalled reader cut off")
        stalled.close()
        for i in range(150):
            self.c.request("DELETE", f"{API}/providers/storm-{i}")

    def test_03_the_stream_cap_answers_503_with_retry_after(self):
        open_now = [SseStream(self.dev.url, f"{API}/events?watch=true") for _ in range(12)]
        try:
            refused = wait_until(
                lambda: (s := SseStream(self.dev.url, f"{API}/events?watch=true")).status == 503
                and s, what="a refused watch")
            self.assertIn("retry-after", refused.headers)
            self.assertIn("watch streams", json.loads(refused.body)["detail"])
        finally:
            for s in open_now:
                s.close()
        wait_until(lambda: SseStream(self.dev.url, f"{API}/events?watch=true").status == 200,
                   what="a slot again once the others left")

    def test_04_a_last_event_id_this_server_never_sent_is_400(self):
        s = SseStream(self.dev.url, f"{API}/events?watch=true", headers={"Last-Event-ID": "zz"})
        self.assertEqual(s.status, 400)
        self.assertIn("Last-Event-ID", json.loads(s.body)["detail"])


class ListWatchTest(unittest.TestCase):
    def test_providers_watch_snapshot_synced_then_modified_and_deleted(self):
        dev = DevServer(extra=FAST)
        sim = SpSim(dev.url, 3, name_prefix="lw")
        try:
            sim.wait_registered()
            names = sorted(sim.providers())
            wait_until(lambda: all(p["health_status"] == "Ready" for p in
                                   dev.client.get(f"{API}/providers").json()["providers"]),
                       what="all Ready")
            watch = SseStream(dev.url, f"{API}/providers?watch=true")
            msgs = watch.wait(lambda m: any(x["event"] == "SYNCED" for x in m), what="SYNCED")
            added = [json.loads(m["data"]) for m in msgs if m["event"] == "ADDED"]
            self.assertEqual(sorted(p["name"] for p in added), names)
            self.assertEqual(msgs[-1]["event"], "SYNCED")
            victim = names[0]
            victim_id = next(p["id"] for p in added if p["name"] == victim)
            sim.set_fault(victim, health="refuse")
            watch.wait(lambda m: any(x["event"] == "MODIFIED" and
                                     json.loads(x["data"])["name"] == victim and
                                     json.loads(x["data"])["health_status"] == "Unavailable"
                                     for x in m), what="MODIFIED to Unavailable")
            r = dev.client.request("DELETE", f"{API}/providers/{victim_id}")
            self.assertEqual(r.status, 204, r)
            msgs = watch.wait(lambda m: any(x["event"] == "DELETED" for x in m), what="DELETED")
            deleted = [json.loads(m["data"]) for m in msgs if m["event"] == "DELETED"]
            self.assertEqual([p["id"] for p in deleted], [victim_id])
            watch.close()
        finally:
            sim.stop()
            dev.stop()


class ResumeTest(unittest.TestCase):
    def test_resume_with_last_event_id_on_the_same_and_another_instance(self):
        cluster = Cluster()
        try:
            a = cluster.serve(name="a", extra=["--health-check-interval", "1h"])
            b = cluster.serve(name="b", extra=["--health-check-interval", "1h"])
            since = urllib.parse.quote(iso(int(time.time() * 1000) - 1))
            # Only registrations: a provider's first probe may come at any time in the interval.
            query = f"since={since}&type=dcm.provider.regist*"
            path = f"{API}/events?watch=true&{query}"
            for i in range(20):
                self.assertEqual(a.client.post(f"{API}/providers?id=r-{i}",
                                               provider_body(f"r-{i}")).status, 201)
            got = []
            # A: the first 15, then gone.
            w = SseStream(a.url, path)
            got += w.wait(lambda m: len(m) >= 15, what="15 events on a")[:15]
            w.close()
            for i in range(20, 40):  # written while nobody watches
                self.assertEqual(b.client.post(f"{API}/providers?id=r-{i}",
                                               provider_body(f"r-{i}")).status, 201)
            # B, resuming: 30 more, then gone.
            w = SseStream(b.url, path, headers={"Last-Event-ID": got[-1]["id"]})
            got += w.wait(lambda m: len(m) >= 30, what="30 events on b")[:30]
            w.close()
            for i in range(40, 50):
                self.assertEqual(a.client.post(f"{API}/providers?id=r-{i}",
                                               provider_body(f"r-{i}")).status, 201)
            def whole_list():
                events = event_list(a.client, query)
                done = sum(e["type"] == "dcm.provider.registered" for e in events) == 50
                return done and events

            listed = wait_until(whole_list, what="every registration listed on a")
            # A again, resuming after what B sent: the rest.
            w = SseStream(a.url, path, headers={"Last-Event-ID": got[-1]["id"]})
            rest = len(listed) - len(got)
            w.wait(lambda m: len(m) >= rest, what="the rest on a")
            time.sleep(1)  # anything more would be a duplicate
            got += w.snapshot()
            w.close()
            self.assertEqual([json.loads(m["data"])["id"] for m in got],
                             [e["id"] for e in listed])
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
