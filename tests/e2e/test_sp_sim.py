"""`dcm sp-sim` against a real `dcm serve`: simulated SPs register themselves with DCM's client
behaviour (retrying while DCM is down), serve the SP API, and take fault knobs at run time."""

import http.client
import socket
import unittest

from harness import API, DCM_BIN, Client, DevServer, Process, main, wait_until


def reserved_port():
    """A port bound but not listening: connections to it are refused, and no other process (e2e
    tests run concurrently) can take it until the socket is closed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


def health(endpoint):
    """GET {endpoint}/health on a fresh connection."""
    client = Client(endpoint)
    try:
        return client.get(f"/{endpoint.split('/', 3)[3]}/health")
    finally:
        client.close()


class SpSimTest(unittest.TestCase):
    def start_sim(self, dcm_url, count, extra=()):
        sim = Process([DCM_BIN, "sp-sim", "--dcm-url", dcm_url, "--count", str(count),
                       "--service-types", "vm,container", "--name-prefix", "e2e", *extra],
                      "sp-sim")
        line = sim.read_line()
        self.assertTrue(line.startswith("sp-sim control http://"), line)
        return sim, Client(line.split(" ")[2])

    def test_providers_register_and_appear_in_the_registry(self):
        server = DevServer()
        sim, control = self.start_sim(server.url, 5)
        try:
            def registered():
                providers = server.client.get(f"{API}/providers").json()["providers"]
                return sorted(p["name"] for p in providers) if len(providers) == 5 else None

            names = wait_until(registered, timeout=30, what="5 registered providers")
            expected = sorted(f"e2e-{'vm' if i % 2 == 0 else 'container'}-{i}" for i in range(5))
            self.assertEqual(names, expected)
            # DCM lists a provider before sp-sim has read its 201 (and its id): wait for sp-sim.
            sims = wait_until(lambda: (ps := control.get("/sim/providers").json()) and
                              all(p.get("id") for p in ps) and ps, what="sp-sim saw every 201")
            by_name = {p["name"]: p for p in sims}
            registry = {p["name"]: p for p in server.client.get(f"{API}/providers").json()["providers"]}
            for name, p in by_name.items():
                self.assertEqual(registry[name]["id"], p["id"])
                self.assertEqual(registry[name]["endpoint"], p["endpoint"])
                # The SP API the simulator serves (SPEC §3.3).
                sp = Client(p["endpoint"])
                path = p["endpoint"].split("/", 3)[3]
                body = sp.get(f"/{path}/health").json()
                self.assertEqual(body["status"], "healthy")  # the seed's body
                self.assertIsInstance(body["version"], str)
                self.assertIsInstance(body["uptime"], int)
                created = sp.post(f"/{path}?id=inst-1", {"spec": {"cpu": 2}})
                self.assertEqual(created.status, 201, created)
                self.assertEqual(sp.request("DELETE", f"/{path}/inst-1").status, 204)
                self.assertEqual(sp.request("DELETE", f"/{path}/inst-1").status, 404)
                sp.close()
            # Fault knobs at run time.
            name = sorted(by_name)[0]
            r = control.request("PUT", f"/sim/providers/{name}/fault", {"health": "unhealthy"})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(health(by_name[name]["endpoint"]).json()["status"], "unhealthy")
        finally:
            control.close()
            sim.kill()
            server.stop()

    def test_shared_ports_route_by_prefix_and_register_concurrently(self):
        server = DevServer()
        sim, control = self.start_sim(server.url, 6, ["--ports", "2",
                                                      "--register-concurrency", "3"])
        try:
            wait_until(lambda: control.get("/sim/stats").json()["registered"] == 6, timeout=30,
                       what="6 registered providers")
            registry = {p["name"]: p for p in
                        server.client.get(f"{API}/providers").json()["providers"]}
            sims = control.get("/sim/providers").json()
            self.assertEqual(sorted(registry), sorted(p["name"] for p in sims))
            self.assertEqual(len({p["port"] for p in sims}), 2)
            for i, p in enumerate(sims):
                self.assertIn(f"/p/{i}/api/", p["endpoint"])
                self.assertEqual(registry[p["name"]]["endpoint"], p["endpoint"])
                self.assertEqual(health(p["endpoint"]).json()["status"], "healthy")
                # Every GET /health is counted, DCM's probes included.
                self.assertGreaterEqual(control.get(f"/sim/providers/{p['name']}").json()
                                        ["health_probes"], 1)
            stats = control.get("/sim/stats").json()
            self.assertEqual(stats["providers"], 6)
            self.assertGreaterEqual(stats["health_probes"], 6)
            # refuse on a shared port: that provider's connections close without a response,
            # its neighbours on the same port still answer.
            refused, neighbour = sims[0], sims[2]
            self.assertEqual(refused["port"], neighbour["port"])
            r = control.request("PUT", f"/sim/providers/{refused['name']}/fault",
                                {"health": "refuse"})
            self.assertEqual(r.status, 200, r)
            with self.assertRaises((ConnectionError, http.client.HTTPException)):
                health(refused["endpoint"])
            self.assertEqual(health(neighbour["endpoint"]).json()["status"], "healthy")
            for fault in ("bad_body", "not_json"):
                control.request("PUT", f"/sim/providers/{refused['name']}/fault",
                                {"health": fault})
                r = health(refused["endpoint"])
                self.assertEqual((r.status, r.body),
                                 (200, b'{"status":"ok"}' if fault == "bad_body" else b"OK"))
        finally:
            control.close()
            sim.kill()
            server.stop()

    def test_registration_retries_until_dcm_comes_up(self):
        reservation, port = reserved_port()
        url = f"http://127.0.0.1:{port}"
        sim, control = self.start_sim(url, 2)  # DCM is not there yet: connection refused
        server = None
        try:
            wait_until(lambda: all(p["registration_attempts"] >= 1 for p in
                                   control.get("/sim/providers").json()), timeout=10,
                       what="a failed first attempt")
            reservation.close()  # only now: the port is free for a few milliseconds at most
            server = DevServer(listen=f"127.0.0.1:{port}")
            # Backoff doubles from 1 s, so the next attempts land within a few seconds.
            wait_until(lambda: len(server.client.get(f"{API}/providers").json()["providers"]) == 2,
                       timeout=40, what="registration after DCM started")
            wait_until(lambda: all(p["registration"] == "registered"
                                   for p in control.get("/sim/providers").json()),
                       timeout=10, what="sp-sim saw both 201s")
        finally:
            reservation.close()
            control.close()
            sim.kill()
            if server:
                server.stop()


if __name__ == "__main__":
    main()
