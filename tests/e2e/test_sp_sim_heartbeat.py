"""`dcm sp-sim --liveness heartbeat` (SPEC §8, issue #14, the SP side): a provider whose
registration DCM forgot (its beat answers 404) registers again on its own, under the same name
and id, and is Ready within one interval; the first URL of --dcm-url refusing connections, it
fails over to the next; SIGTERM deletes its registration. With every URL answering 503, its
attempts come in rounds over the URLs spaced 1, 2, 4 s (± 20% jitter)."""

import http.server
import socket
import sys
import threading
import time
import unittest

from harness import API, DCM_BIN, DevServer, Process, SpSim, main, wait_until

INTERVAL_S = 1.0
SLACK_S = 1.0  # for process scheduling on a loaded 2-core machine (CI runs other work too)


def closed_port():
    """A port bound but not listening: connections to it are refused."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


class Unavailable(http.server.ThreadingHTTPServer):
    """Answers every request 503 and records (monotonic time, method, path)."""

    def __init__(self):
        attempts = self.attempts = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                attempts.append((time.monotonic(), self.command, self.path))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b'{"title":"Service Unavailable"}'
                self.send_response(503)
                self.send_header("Content-Type", "application/problem+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


class SpSimHeartbeatTest(unittest.TestCase):
    def test_a_forgotten_provider_registers_again_and_is_ready_within_one_interval(self):
        sock, port = closed_port()
        server = DevServer()
        c = server.client
        # The first URL refuses connections: registration and beats fail over to the second.
        sim = SpSim(f"http://127.0.0.1:{port},{server.url}", 1,
                    ["--liveness", "heartbeat", "--heartbeat-interval", f"{int(INTERVAL_S)}s"])
        try:
            name = "e2e-vm-0"
            pid = sim.wait_registered()[name]["id"]

            def provider():
                r = c.get(f"{API}/providers/{pid}")
                return r.json() if r.status == 200 else None

            p = wait_until(lambda: (p := provider()) and p["health_status"] == "Ready" and p,
                           timeout=10, what="heartbeat provider Ready")
            self.assertEqual(p["name"], name)
            self.assertEqual(p["liveness"], "heartbeat")
            self.assertEqual(sim.providers()[name]["health_probes"], 0)  # never probed
            wait_until(lambda: sim.providers()[name]["heartbeats"] >= 2, timeout=5,
                       what="two beats")

            # DCM forgets it: a beat for the id is a 404 ...
            self.assertEqual(c.request("DELETE", f"{API}/providers/{pid}").status, 204)
            self.assertEqual(c.request("PUT", f"{API}/providers/{pid}/heartbeat",
                                       {"status": "healthy"}).status, 404)
            deleted = time.monotonic()
            # ... and sp-sim's next beat gets one too, registers again with the same name and id
            # and beats: Ready within one interval (plus the test's polling and some slack).
            back = wait_until(lambda: (p := provider()) and p["health_status"] == "Ready" and p,
                              timeout=10, interval=0.02, what="provider Ready again")
            elapsed = time.monotonic() - deleted
            print(f"\n  Ready again {elapsed:.2f} s after the delete", file=sys.stderr)
            self.assertEqual(back["name"], name)
            self.assertEqual(back["liveness"], "heartbeat")
            self.assertLess(elapsed, INTERVAL_S + SLACK_S)
            self.assertEqual(sim.providers()[name]["id"], pid)

            # SIGTERM deletes the registration.
            self.assertEqual(sim.stop(), 0)
            self.assertEqual(c.get(f"{API}/providers/{pid}").status, 404)
        finally:
            sim.stop()
            server.stop()
            sock.close()

    def test_with_every_url_answering_503_rounds_are_spaced_1_2_4_seconds(self):
        a, b = Unavailable(), Unavailable()
        sim = Process([DCM_BIN, "sp-sim", "--dcm-url", a.url, "--dcm-url", b.url, "--count",
                       "1", "--service-types", "vm", "--liveness", "heartbeat"], "sp-sim")
        try:
            # Both servers: a round's attempt on b follows its attempt on a.
            wait_until(lambda: len(a.attempts) >= 4 and len(b.attempts) >= 4, timeout=12,
                       interval=0.02, what="four rounds of attempts")
            attempts = sorted([(t, "a") for t, _, _ in a.attempts] +
                              [(t, "b") for t, _, _ in b.attempts])[:8]
            for _, method, path in a.attempts + b.attempts:
                self.assertEqual((method, path), ("POST", "/api/v1alpha1/providers"))
            # Rounds in URL order: a then b at once.
            self.assertEqual([u for _, u in attempts], ["a", "b"] * 4)
            for i in range(0, 8, 2):
                self.assertLess(attempts[i + 1][0] - attempts[i][0], SLACK_S)
            gaps = [attempts[i + 2][0] - attempts[i + 1][0] for i in range(0, 6, 2)]
            print(f"\n  gaps between rounds: {[round(g, 3) for g in gaps]} s", file=sys.stderr)
            # The lower bound is the backoff's (−20 % jitter); the upper one allows a loaded
            # machine's scheduling on top of +20 %.
            for gap, nominal in zip(gaps, [1.0, 2.0, 4.0]):
                self.assertGreaterEqual(gap, nominal * 0.8 - 0.05, gaps)
                self.assertLessEqual(gap, nominal * 1.2 + SLACK_S, gaps)
        finally:
            sim.kill()
            a.shutdown()
            b.shutdown()


if __name__ == "__main__":
    main()
