"""Bounded per-request cost end to end (SPEC §7, issue #13 slice A): a flood of idle sockets
against `dcm serve --max-connections N` is refused beyond the cap while connections already
admitted keep being answered and the prober keeps probing (no EMFILE in the log); the per-client
cap refuses one address and serves another; an instance spec over 256 KiB answers 413 and
writes nothing; GET /api/v1alpha1/health answers DCM's shape.

The flood size is a parameter: DCM_E2E_IDLE_SOCKETS (default 1,500) against
DCM_E2E_MAX_CONNECTIONS (default 600). The full check is 10,000 against 5,000:
  DCM_E2E_IDLE_SOCKETS=10000 DCM_E2E_MAX_CONNECTIONS=5000 DCM_BIN=build/src/dcm \\
      python3 tests/e2e/test_limits.py
"""

import json
import os
import resource
import select
import socket
import time
import unittest

from harness import API, Client, DevServer, SpSim, main, wait_until

IDLE_SOCKETS = int(os.environ.get("DCM_E2E_IDLE_SOCKETS", "1500"))
MAX_CONNECTIONS = int(os.environ.get("DCM_E2E_MAX_CONNECTIONS", "600"))
PER_CLIENT = 50
FAST = ["--health-check-interval", "1s", "--health-check-timeout", "500ms"]


def raise_open_files(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_idle(port, count, source="127.0.0.1"):
    """`count` connections that send nothing, from `source` (any 127.x address works)."""
    out = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        out.append(s)
    return out


def classify(sockets, wait_s=1.5):
    """Splits `sockets` into (answered 503, closed without an answer, still open and silent)."""
    refused, closed, silent = [], [], list(sockets)
    deadline = time.monotonic() + wait_s
    while silent and time.monotonic() < deadline:
        still = []
        for i in range(0, len(silent), 1000):  # select() takes at most FD_SETSIZE: use poll
            chunk = silent[i:i + 1000]
            poller = select.poll()
            for s in chunk:
                poller.register(s, select.POLLIN)
            ready = {fd for fd, _ in poller.poll(50)}
            for s in chunk:
                if s.fileno() not in ready:
                    still.append(s)
                    continue
                try:
                    data = s.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                (refused if data.startswith(b"HTTP/1.1 503") else closed).append((s, data))
        silent = still
    return refused, closed, silent


def metric(text, name):
    """The value of `name` (labels included, as rendered) in Prometheus text, or 0."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


class ConnectionCapTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise_open_files(IDLE_SOCKETS + 2000)
        cls.server = DevServer(extra=[*FAST, "--max-connections", str(MAX_CONNECTIONS),
                                      "--max-connections-per-client", "0"])
        cls.port = int(cls.server.url.rsplit(":", 1)[1])
        cls.sim = SpSim(cls.server.url, 3, extra=["--register-concurrency", "1"])
        cls.sim.wait_registered()

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        cls.server.stop()

    def probes(self):
        return self.sim.control.get("/sim/stats").json()["health_probes"]

    def test_idle_flood_is_refused_beyond_the_cap_while_admitted_clients_and_probes_go_on(self):
        admitted = Client(self.server.url)  # a keep-alive connection admitted before the flood
        self.assertEqual(admitted.get("/healthz").status, 200)
        probes_before = self.probes()
        started = time.monotonic()
        flood = open_idle(self.port, IDLE_SOCKETS)
        opened_s = time.monotonic() - started
        try:
            refused, closed, silent = classify(flood)
            # Everything beyond the cap is refused: a 503 while a refusal slot is free, else a
            # close; the admitted ones stay open (the server's first-request deadline is 10 s).
            self.assertGreaterEqual(len(refused) + len(closed), IDLE_SOCKETS - MAX_CONNECTIONS)
            self.assertLessEqual(len(silent), MAX_CONNECTIONS)
            self.assertGreater(len(refused), 0)
            body = refused[0][1].decode()
            self.assertIn("Retry-After: 1\r\n", body)
            self.assertIn(f"at most {MAX_CONNECTIONS} open connections", body)
            # Admitted connections keep being answered, and the prober keeps probing.
            for _ in range(5):
                r = admitted.get(f"{API}/providers")
                self.assertEqual(r.status, 200, r)
            wait_until(lambda: self.probes() >= probes_before + 3, timeout=10,
                       what="probes during the flood")
            m = admitted.get("/metrics").body.decode()
            self.assertGreaterEqual(
                metric(m, 'dcm_http_connections_refused_total{reason="total"}'),
                IDLE_SOCKETS - MAX_CONNECTIONS)
            self.assertEqual(metric(m, "dcm_http_accept_errors_total"), 0)
            print(f"\n  {IDLE_SOCKETS} idle sockets opened in {opened_s:.2f} s against "
                  f"--max-connections {MAX_CONNECTIONS}: {len(refused)} answered 503, "
                  f"{len(closed)} closed, {len(silent)} admitted; open gauge "
                  f"{metric(m, 'dcm_http_connections_open'):.0f}; probes "
                  f"{probes_before} -> {self.probes()}")
        finally:
            for s in flood:
                s.close()
        # Once the flood is gone, new connections are served again.
        wait_until(lambda: Client(self.server.url).get("/healthz").status == 200, timeout=10,
                   what="a fresh connection served after the flood")
        log = open(self.server.proc.log.name).read()
        self.assertNotIn("Too many open files", log)
        self.assertNotIn("EMFILE", log)
        self.assertIn("connection refused: at the cap", log)


class PerClientCapTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer(extra=["--max-connections-per-client", str(PER_CLIENT)])
        cls.port = int(cls.server.url.rsplit(":", 1)[1])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_one_address_is_refused_beyond_its_cap_and_another_is_served(self):
        flood = open_idle(self.port, PER_CLIENT + 30, source="127.0.0.2")
        try:
            refused, closed, silent = classify(flood, wait_s=1.0)
            self.assertEqual(len(refused) + len(closed), 30)
            self.assertEqual(len(silent), PER_CLIENT)
            self.assertIn(f"at most {PER_CLIENT} per client address", refused[0][1].decode())
            fresh = Client(self.server.url)  # from 127.0.0.1: its own allowance
            self.assertEqual(fresh.get("/healthz").status, 200)
            fresh.close()
        finally:
            for s in flood:
                s.close()


class SpecLimitAndHealthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_a_300_kib_spec_answers_413_and_writes_nothing(self):
        c = self.server.client
        spec = {"service_type": "vm", "blob": "x" * (300 * 1024)}
        r = c.post(f"{API}/catalog-item-instances?id=too-big", {"spec": spec})
        self.assertEqual(r.status, 413, r)
        self.assertEqual(r.headers.get("content-type"), "application/problem+json")
        self.assertEqual([e["field"] for e in r.json()["errors"]], ["spec"])
        self.assertEqual(c.get(f"{API}/catalog-item-instances/too-big").status, 404)
        # A write acknowledged after it is visible in /events; the 413 left nothing before it.
        small = c.post(f"{API}/catalog-item-instances?id=small", {"spec": {"service_type": "vm"}})
        self.assertIn(small.status, (201, 503, 422), small)  # no provider: the saga fails
        wait_until(lambda: c.get(f"{API}/events?subject=small").json()["events"], timeout=10,
                   what="the next request's event indexed")
        self.assertEqual(c.get(f"{API}/events?subject=too-big").json()["events"], [])

    def test_api_health_answers_ok_with_its_checks(self):
        r = self.server.client.get(f"{API}/health")
        self.assertEqual(r.status, 200, r)
        body = r.json()
        self.assertEqual(body["status"], "ok")
        self.assertEqual(body["path"], "/api/v1alpha1/health")
        self.assertEqual(body["checks"]["store"], "ok")
        self.assertEqual(body["checks"]["projection:registry"], "ok")
        self.assertTrue(all(v == "ok" for v in body["checks"].values()), body)


if __name__ == "__main__":
    main()
