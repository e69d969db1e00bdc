"""Consistent reads end to end (SPEC §7, issue #13): real `dcm serve` processes.

`SameInstanceTest` (`dcm serve --dev` and `dcm sp-sim`): a write answered 2xx, then
`GET /events?subject=` and the entity's history on the same instance at once, 1,000 times in a
row with no pause, for provider registrations and for catalog item instance creations: the
write's event is there every time. Every 2xx write and every read carries `DCM-Position`.

`TwoInstancesTest` (two `dcm serve` on one `dcm dev-kafka`): a write on A, then a read on B with
`?min_position=` set to the write's token shows the write; a read asking for a position B has not
reached waits until it has (a write made on A meanwhile releases it), or answers 503 with
Retry-After after `--read-wait`; a malformed token is 400."""

import base64
import threading
import time
import unittest
import uuid

from harness import API, Client, Cluster, DevServer, SpSim, main, provider_body, wait_until

ROUNDS = 1000
FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms"]


def decode_token(token):
    """A DCM-Position token as [(topic, partition, next)] (projections/read_position.h)."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert raw[0] == 1, raw
    entries, i = [], 1

    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            b = raw[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(raw):
        topic = raw[i]
        i += 1
        entries.append((topic, varint(), varint()))
    return entries


def encode_token(entries):
    out = bytearray([1])
    for topic, partition, nxt in sorted(entries):
        out.append(topic)
        for value in (partition, nxt):
            while value >= 0x80:
                out.append((value & 0x7F) | 0x80)
                value >>= 7
            out.append(value)
    return base64.urlsafe_b64encode(bytes(out)).decode().rstrip("=")


def covers(token, other):
    """Whether position `token` covers every offset of `other`."""
    have = {(t, p): n for t, p, n in decode_token(token)}
    return all(have.get((t, p), -1) >= n for t, p, n in decode_token(other))


def ahead(token, by):
    """`token` with every offset `by` further: a position not reached yet."""
    return encode_token([(t, p, n + by) for t, p, n in decode_token(token)])


class SameInstanceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer(extra=FAST)
        cls.c = cls.server.client
        cls.sim = SpSim(cls.server.url, 1, name_prefix="cr")
        cls.sim.wait_registered()
        wait_until(lambda: all(p["health_status"] == "Ready"
                               for p in cls.c.get(f"{API}/providers").json()["providers"]),
                   timeout=15, what="the provider Ready")

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.server.stop()

    def read(self, path):
        r = self.c.get(path)
        self.assertEqual(r.status, 200, r)
        self.assertIn("dcm-position", r.headers, path)
        return r.json()

    def assert_written_and_read(self, write, subject_of, history_of, event_type):
        misses = []
        for i in range(ROUNDS):
            r = write(i)
            self.assertIn(r.status, (200, 201), r)
            self.assertTrue(r.headers.get("dcm-position"), r.headers)
            subject = subject_of(r.json())
            events = self.read(f"{API}/events?subject={subject}")["events"]
            if not any(e["type"] == event_type for e in events):
                misses.append(("events", i, subject))
            history = self.read(history_of(subject))["events"]
            if not any(e["type"] == event_type for e in history):
                misses.append(("history", i, subject))
        self.assertEqual(misses, [], f"{len(misses)} reads missed the write just answered")

    def test_provider_registration_is_in_events_and_history_at_once_every_time(self):
        run = uuid.uuid4().hex[:6]
        self.assert_written_and_read(
            lambda i: self.c.post(f"{API}/providers", provider_body(f"cr-{run}-{i}")),
            lambda body: body["id"],
            lambda id: f"{API}/providers/{id}/history",
            "dcm.provider.registered")

    def test_instance_creation_is_in_events_and_history_at_once_every_time(self):
        self.assert_written_and_read(
            lambda i: self.c.post(f"{API}/catalog-item-instances",
                                  {"spec": {"service_type": "vm", "cpu": 1}}),
            lambda body: body["id"],
            lambda id: f"{API}/catalog-item-instances/{id}/history",
            "dcm.instance.operation_completed")

    def test_a_failed_write_carries_no_position_and_a_bad_token_is_400(self):
        r = self.c.post(f"{API}/providers", {"name": ""})
        self.assertEqual(r.status, 400, r)
        self.assertNotIn("dcm-position", r.headers)
        for bad in ("!!", "AQ==", "Ag", "AR8AAQ"):  # alphabet, padding, version, topic
            r = self.c.get(f"{API}/providers?min_position={bad}")
            self.assertEqual(r.status, 400, (bad, r))
            self.assertEqual(r.json()["errors"][0]["field"], "min_position")
        r = self.c.get(f"{API}/service-types")
        self.assertEqual(r.status, 200, r)
        self.assertIn("dcm-position", r.headers)


class TwoInstancesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.a = cls.cluster.serve(name="a", extra=["--no-health-check"])
        cls.b = cls.cluster.serve(name="b", extra=["--no-health-check", "--read-wait", "2s"])

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def register(self, name, id=None):
        q = f"?id={id}" if id else ""
        r = self.a.client.post(f"{API}/providers{q}", provider_body(name))
        self.assertEqual(r.status, 201, r)
        return r.json()["id"], r.headers["dcm-position"]

    def test_a_read_on_another_instance_with_the_writes_position_shows_the_write(self):
        run = uuid.uuid4().hex[:6]
        for i in range(200):
            pid, token = self.register(f"two-{run}-{i}")
            r = self.b.client.get(f"{API}/providers/{pid}?min_position={token}")
            self.assertEqual(r.status, 200, (i, r))
            self.assertEqual(r.json()["id"], pid)
            self.assertTrue(covers(r.headers["dcm-position"], token), (token, r.headers))
            r = self.b.client.get(f"{API}/events?subject={pid}&min_position={token}")
            self.assertEqual(r.status, 200, (i, r))
            self.assertIn("dcm.provider.registered", [e["type"] for e in r.json()["events"]])

    def test_a_read_waits_for_a_position_b_reaches_later(self):
        run = uuid.uuid4().hex[:6]
        _, token = self.register(f"wait-{run}-0")
        pid = f"wait-{run}"  # registered below, while B waits for it
        # The next registration's request and outcome are exactly one record further.
        after_next = ahead(token, 1)
        result = {}

        def read_on_b():
            c = Client(self.b.url)
            started = time.monotonic()
            result["r"] = c.get(f"{API}/providers/{pid}?min_position={after_next}")
            result["took"] = time.monotonic() - started
            c.close()

        t = threading.Thread(target=read_on_b)
        t.start()
        time.sleep(0.3)  # the read is waiting on B now
        self.assertTrue(t.is_alive(), result)
        self.register(f"wait-{run}-1", id=pid)
        t.join(10)
        r = result["r"]
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["id"], pid)
        self.assertGreater(result["took"], 0.25)

    def test_a_position_b_does_not_reach_is_503_with_retry_after_after_the_read_wait(self):
        _, token = self.register(f"far-{uuid.uuid4().hex[:6]}")
        started = time.monotonic()
        r = self.b.client.get(f"{API}/events?min_position={ahead(token, 1000)}")
        took = time.monotonic() - started
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.headers.get("retry-after"), "1", r.headers)
        self.assertNotIn("dcm-position", r.headers)
        self.assertGreaterEqual(took, 1.9)
        self.assertLess(took, 4.0)
        # B keeps serving meanwhile, and a position it has reached answers at once.
        self.assertEqual(self.b.client.get(f"{API}/providers?min_position={token}").status, 200)


if __name__ == "__main__":
    main()
