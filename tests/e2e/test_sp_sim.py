"""`dcm sp-sim` against a real `dcm serve`: simulated SPs register themselves with DCM's client
behaviour (retrying while DCM is down), serve the SP API, and take fault knobs at run time."""

import socket
import unittest

from harness import API, DCM_BIN, Client, DevServer, Process, main, wait_until


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class SpSimTest(unittest.TestCase):
    def start_sim(self, dcm_url, count):
        sim = Process([DCM_BIN, "sp-sim", "--dcm-url", dcm_url, "--count", str(count),
                       "--service-types", "vm,container", "--name-prefix", "e2e"], "sp-sim")
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
            sims = control.get("/sim/providers").json()
            by_name = {p["name"]: p for p in sims}
            registry = {p["name"]: p for p in server.client.get(f"{API}/providers").json()["providers"]}
            for name, p in by_name.items():
                self.assertEqual(registry[name]["id"], p["id"])
                self.assertEqual(registry[name]["endpoint"], p["endpoint"])
                # The SP API the simulator serves (SPEC §3.3).
                sp = Client(p["endpoint"])
                path = p["endpoint"].split("/", 3)[3]
                self.assertEqual(sp.get(f"/{path}/health").json(), {"status": "healthy"})
                created = sp.post(f"/{path}?id=inst-1", {"spec": {"cpu": 2}})
                self.assertEqual(created.status, 201, created)
                self.assertEqual(sp.request("DELETE", f"/{path}/inst-1").status, 204)
                self.assertEqual(sp.request("DELETE", f"/{path}/inst-1").status, 404)
            # Fault knobs at run time.
            name = sorted(by_name)[0]
            r = control.request("PUT", f"/sim/providers/{name}/fault", {"health": "unhealthy"})
            self.assertEqual(r.status, 200, r)
            path = by_name[name]["endpoint"].split("/", 3)[3]
            self.assertEqual(Client(by_name[name]["endpoint"]).get(f"/{path}/health").json(),
                             {"status": "unhealthy"})
        finally:
            sim.kill()
            server.stop()

    def test_registration_retries_until_dcm_comes_up(self):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        sim, control = self.start_sim(url, 2)  # DCM is not there yet: connection refused
        server = None
        try:
            wait_until(lambda: all(p["registration_attempts"] >= 1 for p in
                                   control.get("/sim/providers").json()), timeout=10,
                       what="a failed first attempt")
            server = DevServer(listen=f"127.0.0.1:{port}")
            # Backoff doubles from 1 s, so the next attempts land within a few seconds.
            wait_until(lambda: len(server.client.get(f"{API}/providers").json()["providers"]) == 2,
                       timeout=40, what="registration after DCM started")
            self.assertTrue(all(p["registration"] == "registered"
                                for p in control.get("/sim/providers").json()))
        finally:
            sim.kill()
            if server:
                server.stop()


if __name__ == "__main__":
    main()
