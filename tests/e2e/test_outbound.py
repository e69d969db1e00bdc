"""Where the control plane may connect (SPEC §6) from outside: refused literal endpoints, a name
resolving to loopback (blocked, no socket opened), redirects never followed, SPs over HTTPS with
a test CA (and one whose certificate changed to an untrusted CA), and a deletion produced
straight to Kafka for a provider that hosts live instances (refused by the registrar)."""

import http.server
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import unittest
import uuid

from harness import (API, Cluster, SpSim, kafka_events, kafka_produce, main, provider_body,
                     wait_until)
from pki import Ca


def health(client, pid):
    r = client.get(f"{API}/providers/{pid}")
    assert r.status == 200, r
    return r.json()


class DefaultPolicyTest(unittest.TestCase):
    """`dcm serve` without OUTBOUND_ALLOW_CIDRS: loopback, link-local, unspecified refused."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.inst = cls.cluster.serve(env={"OUTBOUND_ALLOW_CIDRS": None},
                                     extra=["--health-check-interval", "300ms"])
        cls.c = cls.inst.client

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_a_literal_refused_address_is_a_400_on_endpoint(self):
        for endpoint in ["http://169.254.169.254/latest/meta-data", "http://127.0.0.1:9/sp",
                         "http://[::1]/sp", "http://0.0.0.0/", "http://127.1/sp",
                         "http://2130706433/sp", "http://[::ffff:127.0.0.1]/sp",
                         "https://[fe80::1]/sp", "http://224.0.0.1/"]:
            r = self.c.post(f"{API}/providers", provider_body("lit-sp", endpoint=endpoint))
            self.assertEqual(r.status, 400, f"{endpoint}: {r}")
            fields = [e["field"] for e in r.json()["errors"]]
            self.assertEqual(fields, ["endpoint"], endpoint)
            self.assertIn("refused by the outbound policy", r.json()["detail"], endpoint)
        r = self.c.post(f"{API}/providers", provider_body("ok-sp", endpoint="http://10.1.2.3/sp"))
        self.assertEqual(r.status, 201, r)

    def test_a_name_resolving_to_loopback_is_blocked_without_a_connection(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        try:
            r = self.c.post(f"{API}/providers",
                            provider_body("named-sp", endpoint=f"http://localhost:{port}/api"))
            self.assertEqual(r.status, 201, r)
            pid = r.json()["id"]
            wait_until(lambda: health(self.c, pid)["health"].get("last_probe_result") == "blocked",
                       timeout=15, what="a blocked probe")
            detail = health(self.c, pid)["health"]
            self.assertIn("refused by the outbound policy", detail["last_error"])
            with self.assertRaises(BlockingIOError):
                listener.accept()  # nobody ever connected
            probes = [e for e in kafka_events(self.cluster.bootstrap,
                                              f"{self.cluster.prefix}health-probes")
                      if e["subject"] == pid and e["type"] == "dcm.provider.health_probed"]
            self.assertTrue(probes)
            self.assertEqual({p["data"]["failure_class"] for p in probes}, {"blocked"})
            self.assertEqual({p["actor"] for p in probes}, {"dcm/prober"})
        finally:
            listener.close()


class Redirecting(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", type(self).target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class LoopbackAllowedTest(unittest.TestCase):
    """OUTBOUND_ALLOW_CIDRS=127.0.0.0/8 (the harness default) with SPs on loopback."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dcm-e2e-outbound-")
        cls.ca = Ca("sp CA", cls.dir)
        cls.cluster = Cluster()
        cls.inst = cls.cluster.serve(env={"HEALTH_CHECK_CA_FILE": cls.ca.path,
                                          "CLEANUP_INTERVAL": "200ms"},
                                     extra=["--health-check-interval", "300ms"])
        cls.c = cls.inst.client

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_redirects_are_never_followed(self):
        target = socket.socket()
        target.bind(("127.0.0.1", 0))
        target.listen(16)
        target.setblocking(False)
        Redirecting.target = f"http://127.0.0.1:{target.getsockname()[1]}/health"
        sp = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
        threading.Thread(target=sp.serve_forever, daemon=True).start()
        try:
            endpoint = f"http://127.0.0.1:{sp.server_address[1]}/api"
            r = self.c.post(f"{API}/providers", provider_body("redirecting-sp", endpoint=endpoint))
            self.assertEqual(r.status, 201, r)
            pid = r.json()["id"]
            wait_until(lambda: health(self.c, pid)["health"].get("last_http_status") == 302,
                       timeout=15, what="a probe answered 302")
            self.assertEqual(health(self.c, pid)["health"]["last_probe_result"], "http_status")
            self.assertNotEqual(health(self.c, pid)["health_status"], "Ready")
            with self.assertRaises(BlockingIOError):
                target.accept()
        finally:
            sp.shutdown()
            target.close()

    def https_sim(self, prefix, cert):
        return SpSim(self.inst.url, 1, name_prefix=prefix,
                     extra=["--tls-cert-file", cert.cert, "--tls-key-file", cert.key])

    def ready(self, sim):
        (name, p), = sim.wait_registered().items()
        self.assertTrue(p["endpoint"].startswith("https://"), p)
        wait_until(lambda: health(self.c, p["id"])["health_status"] == "Ready", timeout=20,
                   what=f"{name} Ready over HTTPS")
        return name, p["id"]

    def test_an_https_sp_hosts_an_instance_and_a_changed_certificate_fails_cleanly(self):
        good = self.https_sim("tls-good", self.ca.issue("good", ips=["127.0.0.1"], name="good"))
        rot_cert = self.ca.issue("rot", ips=["127.0.0.1"], name="rot")
        rotating = self.https_sim("tls-rot", rot_cert)
        try:
            good_name, good_id = self.ready(good)
            rot_name, _ = self.ready(rotating)
            spec = {"service_type": "vm", "provider_hints": {"provider_name": good_name}}
            r = self.c.post(f"{API}/catalog-item-instances", {"spec": spec})
            self.assertEqual(r.status, 201, r)
            cii = r.json()["id"]
            first = set(good.instance_ids()[good_name])
            self.assertEqual(len(first), 1)
            r = self.c.post(f"{API}/catalog-item-instances/{cii}:rehydrate")
            self.assertEqual(r.status, 202, r)
            # The old resource is deleted later by the cleanup worker, over HTTPS too.
            wait_until(lambda: len(good.instance_ids()[good_name]) == 1 and
                       good.instance_ids()[good_name] != first, timeout=20,
                       what="the old instance cleaned up")

            # A provider deleted through Kafka while it hosts an instance: the registrar refuses.
            request_id = str(uuid.uuid4())
            kafka_produce(self.cluster.bootstrap, f"{self.cluster.prefix}provider-requests", {
                "specversion": "1.0", "id": request_id, "source": "e2e/kcat",
                "type": "dcm.provider.deletion_requested", "subject": good_id,
                "time": "2026-01-01T00:00:00.000Z", "datacontenttype": "application/json",
                "data": {"id": good_id}})
            outcome = wait_until(lambda: [e for e in kafka_events(
                self.cluster.bootstrap, f"{self.cluster.prefix}providers")
                if e["data"].get("request_id") == request_id], what="the registrar's outcome")
            self.assertEqual(outcome[0]["type"], "dcm.provider.rejected", outcome)
            self.assertEqual(outcome[0]["data"]["status"], 409)
            self.assertIn("live instances", outcome[0]["data"]["detail"])
            self.assertEqual(self.c.get(f"{API}/providers/{good_id}").status, 200)

            # The rotating SP now presents a certificate of a CA DCM does not trust. Its kept-alive
            # probe connection keeps it Ready; the create opens a new connection and fails.
            stranger = Ca("stranger CA", self.dir).issue("rot", ips=["127.0.0.1"], name="rot2")
            shutil.copy(stranger.cert, rot_cert.cert)
            shutil.copy(stranger.key, rot_cert.key)
            rotating.proc.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: "TLS certificate reloaded" in rotating.proc.tail(50), timeout=10,
                       what="sp-sim reloaded its certificate")
            spec = {"service_type": "vm", "provider_hints": {"provider_name": rot_name}}
            r = self.c.post(f"{API}/catalog-item-instances", {"spec": spec})
            self.assertIn(r.status, (502, 503), r)
            self.assertIn("certificate verify failed", r.json()["detail"], r)
            self.assertEqual(rotating.instance_ids()[rot_name], set())
            listed = self.c.get(f"{API}/catalog-item-instances").json()["results"]
            self.assertEqual([x["id"] for x in listed], [cii], "nothing left behind")
        finally:
            good.stop()
            rotating.stop()


if __name__ == "__main__":
    main()
