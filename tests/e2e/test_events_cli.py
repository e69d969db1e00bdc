"""`dcm events` from outside (SPEC §3.4, issue #5): a seeded scenario on `dcm dev-kafka` (or
$KAFKA_BROKERS) and `dcm serve` without probing or instance work, so every event is caused by
one of the test's HTTP calls; then the command's table and JSON-lines output, filtered by
subject, type and time, must equal the golden files in tests/e2e/golden/ once ids and times are
masked. UPDATE_GOLDEN=1 rewrites the golden files from this run instead of comparing."""

import json
import os
import re
import signal
import subprocess
import time
import unittest
from datetime import datetime, timedelta, timezone

from harness import API, DCM_BIN, Cluster, Process, main, provider_body, wait_until

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SHORT_ID = re.compile(r"\b[0-9a-f]{8}…")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
SOURCE = re.compile(r'"source":"dcm/(http|registrar)/[^"]*"')


def mask(text, keep_width=False):
    """Ids, times and instance names vary between runs; everything else must not. With
    `keep_width` (tables) a masked cell keeps its width, so golden tables stay aligned."""
    def same_width(placeholder):
        return lambda m: placeholder.ljust(len(m.group(0)), "_") if keep_width else placeholder

    text = UUID.sub(same_width("<uuid>"), text)
    text = SHORT_ID.sub("<id>…", text)
    text = TIME.sub(same_width("<time>"), text)
    return SOURCE.sub(lambda m: f'"source":"dcm/{m.group(1)}/<instance>"', text)


def now_rfc3339():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventsCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        try:
            cls.server = cls.cluster.serve(extra=["--no-health-check", "--no-instance-worker"])
            cls.c = cls.server.client
            cls.seed()
        except BaseException:
            cls.cluster.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    @classmethod
    def call(cls, method, path, body=None, status=None):
        r = cls.c.request(method, path, body)
        assert status is None or r.status == status, (method, path, r)
        # Event times have millisecond resolution: keep the next request's events strictly
        # later than this one's outcome, so the sorted output is the same on every run.
        time.sleep(0.005)
        return r

    @classmethod
    def seed(cls):
        cls.call("POST", f"{API}/providers?id=sp-a", provider_body("sp-a"), 201)
        cls.call("POST", f"{API}/providers?id=sp-b", provider_body("sp-b", "container"), 201)
        cls.since = now_rfc3339()
        time.sleep(0.005)
        cls.call("PUT", f"{API}/providers/sp-a",
                 provider_body("sp-a", display_name="SP A, rack 2"), 200)
        cls.call("DELETE", f"{API}/providers/sp-b", status=204)
        cls.call("POST", f"{API}/providers?id=sp-c", provider_body("sp-a"), 409)  # name taken
        cls.call("POST", f"{API}/providers?id=sp-d", provider_body("sp-d", "gpu"), 400)
        # The edge records its 400 decision fire-and-forget: wait until it is on Kafka.
        wait_until(lambda: len(cls.events("--type", "dcm.provider.rejected").stdout
                               .splitlines()) == 2, timeout=15, what="both rejections on Kafka")

    @classmethod
    def events(cls, *args, server=False, timeout=30):
        where = (["--server", cls.server.url] if server else
                 ["--kafka-brokers", cls.cluster.bootstrap, "--topic-prefix", cls.cluster.prefix])
        return subprocess.run([DCM_BIN, "events", *where, *args], capture_output=True, text=True,
                              timeout=timeout)

    def assertGolden(self, name, result):
        self.assertEqual(result.returncode, 0, result.stderr)
        actual = mask(result.stdout, keep_width="_table" in name)
        path = os.path.join(GOLDEN_DIR, name)
        if UPDATE:
            os.makedirs(GOLDEN_DIR, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(actual)
            return
        self.assertTrue(os.path.exists(path), f"{path} is missing: run with UPDATE_GOLDEN=1")
        with open(path, encoding="utf-8") as f:
            self.assertEqual(actual, f.read(), f"differs from {name} (UPDATE_GOLDEN=1 rewrites)")

    def test_table_of_every_event_equals_golden(self):
        r = self.events("--output", "table")
        self.assertGolden("events_all_table.txt", r)
        self.assertRegex(r.stderr, r"(?m)^11 events from \d+ partitions$")
        for line in r.stdout.splitlines():
            self.assertEqual(line, line.rstrip(), "no trailing spaces")

    def test_json_lines_equal_golden_and_are_cloudevents(self):
        r = self.events("--output", "json")
        self.assertGolden("events_all_json.txt", r)
        for line in r.stdout.splitlines():
            self.assertEqual(json.loads(line)["specversion"], "1.0")

    def test_server_flag_finds_kafka_and_topics_through_admin_info(self):
        r = self.events("--output", "json", server=True)
        self.assertGolden("events_all_json.txt", r)

    def test_subject_filter_equals_golden(self):
        self.assertGolden("events_subject_sp-a_table.txt",
                          self.events("--subject", "sp-a", "--output", "table"))

    def test_type_filter_equals_golden_and_prefix_matches(self):
        self.assertGolden("events_type_rejected_json.txt",
                          self.events("--type", "dcm.provider.rejected", "--output", "json"))
        r = self.events("--type", "dcm.provider.de*", "--output", "table")
        types = [line.split()[1] for line in r.stdout.splitlines()[1:]]
        self.assertEqual(types, ["dcm.provider.deletion_requested", "dcm.provider.deleted"])

    def test_since_skips_earlier_events_and_says_how_many(self):
        r = self.events("--since", self.since, "--output", "table")
        self.assertGolden("events_since_table.txt", r)
        self.assertRegex(r.stderr, r"(?m)^7 events from \d+ partitions \(4 skipped before --since\)$")
        if not self.cluster.external:
            self.assertIn("cannot seek by time", r.stderr)

    def test_relative_since_and_until_bound_the_window(self):
        self.assertEqual(self.events("--since", "1h", "--output", "json").stdout.count("\n"), 11)
        future = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
        self.assertEqual(self.events("--since", future).stdout, "")
        self.assertEqual(self.events("--until", self.since).stdout.count("\n"), 4)

    def test_follow_prints_existing_and_stops_cleanly_on_sigterm(self):
        p = Process([DCM_BIN, "events", "--server", self.server.url, "--follow",
                     "--type", "dcm.provider.deleted"], "events-follow")
        try:
            line = p.read_line(timeout=20)
            self.assertIn('"type":"dcm.provider.deleted"', line)
            self.assertEqual(p.kill(signal.SIGTERM, timeout=10), 0, p.tail())
        finally:
            p.kill(signal.SIGKILL)

    def test_bad_flags_exit_2_and_unreachable_kafka_exits_1(self):
        for args in (["--output", "xml"], ["--since", "yesterday"], ["--until", "nope"],
                     ["--follow", "--until", "5m"], ["--kafka-property", "novalue"]):
            r = self.events(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("dcm events: ", r.stderr)
        start = time.monotonic()
        r = subprocess.run([DCM_BIN, "events", "--kafka-brokers", "127.0.0.1:1", "--timeout", "2s"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("cannot read from Kafka", r.stderr)
        self.assertLess(time.monotonic() - start, 15)
        r = subprocess.run([DCM_BIN, "events", "--server", "http://127.0.0.1:1", "--timeout", "2s"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)


if __name__ == "__main__":
    main()
