"""Active health probing end to end (SPEC §3.2, issue #3): real `dcm serve` and `dcm sp-sim`
processes at a 1 s interval. Providers go Ready, Unhealthy and Unavailable as their simulated
health endpoints change; hanging providers do not delay the others; with two instances each
provider is probed by one of them, and a killed instance's providers move to the survivor."""

import signal
import time
import unittest

from harness import (API, Cluster, DevServer, SpSim, kafka_events, main, rfc3339_ms,
                     wait_until)

INTERVAL_S = 1.0
THRESHOLD = 3
FAST = ["--health-check-interval", "1s", "--health-check-timeout", "300ms",
        "--health-check-base-backoff-interval", "1s", "--health-check-max-backoff-interval", "1s"]


def health_of(server, provider_id):
    r = server.client.get(f"{API}/providers/{provider_id}")
    assert r.status == 200, r
    return r.json()["health"]


def probes_of(events):
    """health_probed events by provider id, in log order."""
    out = {}
    for e in events:
        if e["type"] == "dcm.provider.health_probed":
            out.setdefault(e["subject"], []).append(e)
    return out


class HealthStatesTest(unittest.TestCase):
    """One provider per fault, all on one dev server."""

    @classmethod
    def setUpClass(cls):
        cls.server = DevServer(extra=FAST)
        cls.sim = SpSim(cls.server.url, 7)
        cls.names = sorted(cls.sim.providers())
        wait_until(lambda: all(p.get("id") for p in cls.sim.providers().values()), timeout=30,
                   what="providers registered")
        cls.ids = {n: p["id"] for n, p in cls.sim.providers().items()}
        # How long each provider took from registration to Ready, before any test changes it.
        server, ids = cls.server, cls.ids

        def all_ready():
            providers = [server.client.get(f"{API}/providers/{ids[n]}").json() for n in cls.names]
            return all(p["health_status"] == "Ready" for p in providers) and providers

        cls.first_ready_s = {
            p["name"]: (rfc3339_ms(p["health"]["last_transition_time"]) -
                        rfc3339_ms(p["create_time"])) / 1000
            for p in wait_until(all_ready, timeout=10, what="all Ready")}

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.server.stop()

    def wait_status(self, name, status, timeout):
        return wait_until(lambda: (h := health_of(self.server, self.ids[name]))["status"] == status
                          and h, timeout=timeout, interval=0.02, what=f"{name} {status}")

    def test_a_healthy_provider_is_ready_within_two_seconds_of_registering(self):
        self.assertEqual(set(self.first_ready_s), set(self.names))
        for name, seconds in self.first_ready_s.items():
            self.assertLessEqual(seconds, 2.0, name)

    def test_reported_unhealthy_is_unhealthy_within_two_seconds(self):
        name = self.names[0]
        self.wait_status(name, "Ready", 5)
        start = time.time()
        self.sim.set_fault(name, health="unhealthy")
        self.wait_status(name, "Unhealthy", 3)
        self.assertLessEqual(time.time() - start, 2.0 + 0.2)
        # Back to healthy: Ready at the very next probe.
        self.sim.set_fault(name, health="healthy")
        self.assert_ready_at_the_next_probe(name, time.time())

    def assert_ready_at_the_next_probe(self, name, since):
        h = self.wait_status(name, "Ready", 4)
        times = self.sim.providers()[name]["recent_probe_times_ms"]
        first_after = min(t for t in times if t >= since * 1000)
        # The transition happened at the first probe after the fault was cleared (its response
        # arrives a few ms after the SP saw the request).
        self.assertLess(abs(rfc3339_ms(h["last_transition_time"]) - first_after), 150, h)

    def check_unavailable_after_threshold(self, name, fault, reason):
        self.wait_status(name, "Ready", 5)
        start_ms = time.time() * 1000
        self.sim.set_fault(name, health=fault)
        seen = []

        def unavailable():
            h = health_of(self.server, self.ids[name])
            seen.append((h["status"], h["consecutive_failures"]))
            return h["status"] == "Unavailable" and h

        h = wait_until(unavailable, timeout=THRESHOLD * INTERVAL_S * 1.1 + 3, interval=0.02,
                       what=f"{name} Unavailable")
        for status, failures in seen:
            if failures < THRESHOLD:
                self.assertNotEqual(status, "Unavailable", seen)
        self.assertEqual(h["consecutive_failures"], THRESHOLD)
        self.assertEqual(h["last_transition_reason"], f"{THRESHOLD} consecutive failures ({reason})")
        # Not before: three probes need at least two intervals (less jitter) after the fault.
        self.assertGreaterEqual(rfc3339_ms(h["last_transition_time"]) - start_ms,
                                (THRESHOLD - 1) * INTERVAL_S * 900 - 50)
        self.assertIn(h["last_probe_result"], (reason,))
        since = time.time()
        self.sim.set_fault(name, health="healthy")
        self.assert_ready_at_the_next_probe(name, since)

    def test_503_is_unavailable_after_the_threshold_and_not_before(self):
        self.check_unavailable_after_threshold(self.names[1], "503", "http_status")

    def test_refused_connections_are_unavailable_after_the_threshold(self):
        self.check_unavailable_after_threshold(self.names[2], "refuse", "connect")

    def test_a_hanging_provider_is_unavailable_after_the_threshold(self):
        self.check_unavailable_after_threshold(self.names[3], "hang", "timeout")

    def test_status_ok_body_is_a_failure(self):
        self.check_unavailable_after_threshold(self.names[4], "bad_body", "bad_body")

    def test_a_body_that_is_not_json_is_a_failure(self):
        self.check_unavailable_after_threshold(self.names[5], "not_json", "bad_body")

    def test_list_filters_by_health_status(self):
        name = self.names[6]
        self.wait_status(name, "Ready", 5)
        ready = self.server.client.get(f"{API}/providers?health_status=Ready").json()["providers"]
        self.assertIn(self.ids[name], [p["id"] for p in ready])
        for p in ready:
            self.assertEqual(p["health_status"], "Ready")


class NoHeadOfLineBlockingTest(unittest.TestCase):
    def test_a_healthy_provider_is_probed_every_interval_while_fifty_hang(self):
        # A 5 s probe timeout against a 1 s interval: a sequential prober would reach the
        # healthy provider once per 50 × 5 s.
        server = DevServer(extra=["--health-check-interval", "1s", "--health-check-timeout", "5s"])
        sim = SpSim(server.url, 51, extra=["--ports", "4"])
        try:
            wait_until(lambda: all(p.get("id") for p in sim.providers().values()), timeout=30,
                       what="51 providers registered")
            names = sorted(sim.providers())
            healthy = names[0]
            sim.set_fault(health="hang")
            sim.set_fault(healthy, health="healthy")
            time.sleep(3)  # let every hanging provider hold a probe
            start_ms = time.time() * 1000
            time.sleep(10)
            probes = sim.providers()
            times = [t for t in probes[healthy]["recent_probe_times_ms"] if t >= start_ms]
            self.assertGreaterEqual(len(times), 9, times)  # 10 s at 1 s ± 10%
            gaps = [b - a for a, b in zip(times, times[1:])]
            self.assertLessEqual(max(gaps), 1100 + 100, gaps)
            hanging_in_flight = sum(1 for n in names[1:] if probes[n]["health_probes"] > 0)
            self.assertEqual(hanging_in_flight, 50, "every hanging provider was probed too")
        finally:
            sim.stop()
            server.stop()


class FailoverTest(unittest.TestCase):
    def test_a_killed_instances_providers_move_to_the_survivor(self):
        cluster = Cluster(partitions=8)
        sim = None
        try:
            a = cluster.serve(name="a", extra=FAST)
            b = cluster.serve(name="b", extra=FAST)
            sim = SpSim(a.url, 24, extra=["--ports", "2"])
            wait_until(lambda: all(p.get("id") for p in sim.providers().values()), timeout=30,
                       what="24 providers registered")
            ids = {p["id"] for p in sim.providers().values()}
            topic = cluster.prefix + "health-probes"  # probes; transitions on dcm.health

            def both_probe():
                sources = {e["source"] for evs in probes_of(kafka_events(cluster.bootstrap, topic))
                           .values() for e in evs[-1:]}
                return {"dcm/prober/a", "dcm/prober/b"} <= sources

            wait_until(both_probe, timeout=40, interval=0.5, what="both instances probing")
            # Steady state: over 6 s, each provider is probed by one instance, once per interval.
            window_start = time.time() * 1000
            time.sleep(6)
            window_end = time.time() * 1000
            by_id = probes_of(kafka_events(cluster.bootstrap, topic))
            self.assertEqual(set(by_id), ids)
            for pid in ids:
                window = [e for e in by_id[pid] if window_start <= rfc3339_ms(e["time"]) < window_end]
                self.assertEqual(len({e["source"] for e in window}), 1, (pid, window))
                times = [rfc3339_ms(e["time"]) for e in window]
                gaps = [y - x for x, y in zip(times, times[1:])]
                self.assertGreaterEqual(len(times), 4, pid)
                self.assertGreaterEqual(min(gaps), 900 - 60, (pid, gaps))

            a_ids = {pid for pid in ids if by_id[pid][-1]["source"] == "dcm/prober/a"}
            self.assertTrue(a_ids and a_ids != ids, "the providers are split between a and b")
            killed_ms = time.time() * 1000
            a.stop(signal.SIGKILL)

            def taken_over_at_ms():
                # When b's first probe of each of a's providers happened, by the event's own time:
                # the time it takes this test to read the topic back is not the takeover's.
                events = probes_of(kafka_events(cluster.bootstrap, topic))
                firsts = [min((t for e in events[pid] if e["source"] == "dcm/prober/b"
                               and (t := rfc3339_ms(e["time"])) > killed_ms), default=None)
                          for pid in a_ids]
                return None if None in firsts else max(firsts)

            done_ms = wait_until(taken_over_at_ms, timeout=30, interval=0.25, what="takeover by b")
            takeover_s = (done_ms - killed_ms) / 1000
            print(f"\ntakeover of {len(a_ids)} providers: {takeover_s:.1f} s after kill -9 "
                  "(session timeout 4 s; the mock adds a rebalance of session - 1 s)")
            self.assertLessEqual(takeover_s, 4 + 3 + 3)
            # And b keeps every provider Ready.
            wait_until(lambda: all(p["health_status"] == "Ready" for p in b.providers()),
                       timeout=10, what="all Ready on b")
        finally:
            if sim:
                sim.stop()
            cluster.close()


if __name__ == "__main__":
    main()
