"""Probe retention end to end (SPEC §7, issue #13), the short version of
scripts/soak-retention.sh: a real `dcm dev-kafka`, `dcm serve` with HEALTH_EVENTS_RETENTION=8s
and probes every 300 ms, and `dcm sp-sim` with 4 providers, one of which goes Unavailable and
recovers (transitions). Once the transitions are older than the window:

- the audit index stops growing: the probes it lists stay about one window's worth;
- no probe older than the window (plus one sweep interval) is listed, by /events or by history;
- the transitions older than the window are still in /providers/{id}/history and /events;
- `dcm projections verify` (same retention) says `match` for every projection while serve keeps
  probing, and the probes were written to the probes topic, the transitions to dcm.health.
"""

import os
import subprocess
import time
import unittest

from harness import API, DCM_BIN, Cluster, SpSim, kafka_events, main, rfc3339_ms, wait_until

WINDOW_S = 8
FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms"]
ENV = {"HEALTH_EVENTS_RETENTION": f"{WINDOW_S}s"}
PROJECTIONS = ["registry", "health", "peer-health", "instances", "sp-status", "audit"]
# A sweep runs every window / 10 (here 1 s, the minimum) after a commit: entries may outlive the
# window by that much, plus the ms between the probe's time and its commit.
SLACK_MS = 2500


class RetentionTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(partitions=4)
        cls.server = cls.cluster.serve(extra=FAST, env=ENV)
        cls.c = cls.server.client
        cls.sim = SpSim(cls.server.url, 4, name_prefix="ret")
        cls.pids = {n: p["id"] for n, p in cls.sim.wait_registered().items()}

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.cluster.close()

    def get(self, path):
        r = self.c.get(path)
        self.assertEqual(r.status, 200, r)
        return r.json()

    def pages(self, path):
        events, token = [], ""
        sep = "&" if "?" in path else "?"
        while True:
            page = self.get(f"{path}{sep}max_page_size=100" +
                            (f"&page_token={token}" if token else ""))
            events += page["events"]
            token = page.get("next_page_token")
            if not token:
                return events

    def health(self, pid):
        return self.get(f"{API}/providers/{pid}")["health_status"]

    def probes_listed(self):
        return self.pages(f"{API}/events?type=dcm.provider.health_probed")

    def test_probes_expire_transitions_stay_and_verify_matches(self):
        name = sorted(self.pids)[0]
        pid = self.pids[name]
        wait_until(lambda: all(self.health(p) == "Ready" for p in self.pids.values()),
                   timeout=15, what="every provider Ready")
        self.sim.set_fault(name, health="503")
        wait_until(lambda: self.health(pid) == "Unavailable", timeout=15, what="Unavailable")
        self.sim.set_fault(name, health="healthy")
        wait_until(lambda: self.health(pid) == "Ready", timeout=15, what="Ready again")
        transitions_done_ms = int(time.time() * 1000)

        # Past the window (and a sweep) after the transitions: their probes are gone.
        time.sleep(WINDOW_S + 3)
        sizes = []
        for _ in range(3):
            now_ms = int(time.time() * 1000)
            probes = self.probes_listed()
            sizes.append(len(probes))
            oldest = min(rfc3339_ms(e["time"]) for e in probes)
            self.assertGreaterEqual(oldest, now_ms - WINDOW_S * 1000 - SLACK_MS,
                                    "a probe older than the window is still listed")
            self.assertTrue(all(e["type"] == "dcm.provider.health_probed" for e in probes))
            time.sleep(2)
        # One window of probes: 4 providers every 300 ms (±10%) for 8 s is ~107, plus the slack.
        self.assertLess(max(sizes), 4 * (WINDOW_S * 1000 + SLACK_MS) / 270, sizes)
        self.assertLess(max(sizes) - min(sizes), 40, f"the index keeps growing: {sizes}")

        history = self.pages(f"{API}/providers/{pid}/history")
        changes = [e for e in history if e["type"] == "dcm.provider.health_changed"]
        self.assertEqual([e["event"]["data"]["to"] for e in changes],
                         ["Ready", "Unavailable", "Ready"])
        self.assertTrue(all(rfc3339_ms(e["time"]) < transitions_done_ms for e in changes))
        self.assertLess(rfc3339_ms(changes[-1]["time"]),
                        int(time.time() * 1000) - WINDOW_S * 1000, "transitions are old")
        self.assertTrue(all(e["topic"] == f"{self.cluster.prefix}health" for e in changes))
        self.assertEqual(history[0]["type"], "dcm.provider.registered")
        probes_in_history = [e for e in history if e["type"] == "dcm.provider.health_probed"]
        self.assertTrue(probes_in_history, "recent probes are listed")
        self.assertTrue(all(e["topic"] == f"{self.cluster.prefix}health-probes"
                            for e in probes_in_history))
        self.assertGreater(min(rfc3339_ms(e["time"]) for e in probes_in_history),
                           rfc3339_ms(changes[-1]["time"]), "older probes are swept")
        events = self.pages(f"{API}/events?type=dcm.provider.health_changed&subject={pid}")
        self.assertEqual(len(events), 3)

        # Kafka: the probes topic holds every probe (the mock keeps 5 MiB per partition, and
        # has no time retention), dcm.health only transitions.
        on_health = kafka_events(self.cluster.bootstrap, f"{self.cluster.prefix}health")
        self.assertTrue(on_health)
        self.assertEqual({e["type"] for e in on_health}, {"dcm.provider.health_changed"})
        probes = kafka_events(self.cluster.bootstrap, f"{self.cluster.prefix}health-probes")
        self.assertEqual(probes[-1]["schemaversion"], 3)
        self.assertIn("state", probes[-1]["data"])

        # Rebuild = live for everything younger than the cutoff, while serve goes on probing.
        args = [DCM_BIN, "projections", "verify", "--data-dir", self.server.data_dir,
                "--kafka-brokers", self.cluster.bootstrap, "--topic-prefix", self.cluster.prefix,
                "--no-progress", "--fetch-wait-max-ms", "10"]
        out = subprocess.run(args, capture_output=True, text=True, timeout=60,
                             env={**os.environ, **ENV})
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn(f"probe retention {WINDOW_S}s", out.stdout)
        self.assertNotIn("warning:", out.stdout)
        for projection in PROJECTIONS:
            line = [l for l in out.stdout.splitlines() if l.startswith(projection + " ")]
            self.assertEqual(len(line), 1, out.stdout)
            self.assertTrue(line[0].endswith(" match"), line[0])

    def test_an_invalid_retention_stops_serve_at_start(self):
        for bad in ["7d", "0", "500ms", "soon"]:
            out = subprocess.run(
                [DCM_BIN, "serve", "--dev", "--listen", "127.0.0.1:0"],
                capture_output=True, text=True, timeout=30,
                env={**os.environ, "AUTH_DISABLED": "true", "HEALTH_EVENTS_RETENTION": bad})
            self.assertNotEqual(out.returncode, 0, bad)
            self.assertIn("HEALTH_EVENTS_RETENTION", out.stderr, bad)


if __name__ == "__main__":
    main()
