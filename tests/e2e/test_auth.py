"""The trust boundary from outside (SPEC §6): bearer tokens from a JWKS file and from an OIDC
issuer served by the test, roles and provider ownership, the actor on every event, the secure
default, and HTTPS with client certificates on the API. Tokens are minted with PyJWT and
certificates made with python3-cryptography (tests/e2e/pki.py)."""

import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

from harness import (API, DCM_BIN, SERVE_ENV, Client, Cluster, SpSim, kafka_events, main,
                     provider_body, wait_until)
from pki import Ca, SigningKeys

ISSUER = "https://idp.test/realms/dcm"
READER, PROVIDER, USER, ADMIN = "dcm-reader", "dcm-provider", "dcm-user", "dcm-admin"


def auth_env(**extra):
    """serve's environment with authentication on (AUTH_DISABLED removed)."""
    return {"AUTH_DISABLED": None, **extra}


class JwksFileTest(unittest.TestCase):
    """One control plane verifying tokens against a JWKS file; iss and aud are checked."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dcm-e2e-auth-")
        cls.keys = SigningKeys(ISSUER)
        jwks = cls.keys.write_jwks(os.path.join(cls.dir, "jwks.json"))
        cls.cluster = Cluster()
        cls.inst = cls.cluster.serve(env=auth_env(
            AUTH_JWKS_FILE=jwks, AUTH_ISSUER_URL=ISSUER, AUTH_JWT_AUDIENCE="dcm",
            CLEANUP_INTERVAL="200ms"), extra=["--health-check-interval", "300ms"])
        base = cls.inst.client
        cls.anon = base
        cls.reader = base.with_token(cls.keys.token("auditor", [READER]))
        cls.sp_a = base.with_token(cls.keys.token("sp-a", [PROVIDER]))
        cls.sp_b = base.with_token(cls.keys.token("sp-b", [PROVIDER], kid="ec-1"))
        cls.user = base.with_token(cls.keys.token("alice", [USER]))
        cls.admin = base.with_token(cls.keys.token("root", [ADMIN]))

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def provider_events(self):
        return (kafka_events(self.cluster.bootstrap, f"{self.cluster.prefix}provider-requests")
                + kafka_events(self.cluster.bootstrap, f"{self.cluster.prefix}providers"))

    def test_no_token_is_401_with_a_bearer_challenge(self):
        r = self.anon.get(f"{API}/providers")
        self.assertEqual(r.status, 401, r)
        self.assertEqual(r.headers["www-authenticate"], "Bearer")
        self.assertEqual(r.headers["content-type"], "application/problem+json")
        self.assertEqual(self.anon.get("/readyz").status, 200)
        self.assertEqual(self.anon.get("/healthz").status, 200)

    def test_every_bad_token_is_401_and_changes_nothing(self):
        other = SigningKeys(ISSUER)  # same kids, other key material
        now = int(time.time())
        bad = {
            "expired": self.keys.token("sp-x", [ADMIN], exp=now - 3600),
            "wrong audience": self.keys.token("sp-x", [ADMIN], aud="someone-else"),
            "wrong issuer": self.keys.token("sp-x", [ADMIN], iss="https://evil.test"),
            "unknown kid": self.keys.token("sp-x", [ADMIN], headers={"kid": "nope"}),
            "alg none": self.keys.unsigned("sp-x", [ADMIN]),
            "HS256 keyed with the public key": self.keys.hmac_with_public_key("sp-x", [ADMIN]),
            "another key": other.token("sp-x", [ADMIN]),
            "garbage": "not.a.token",
        }
        before = len(self.provider_events())
        for why, token in bad.items():
            c = self.anon.with_token(token)
            r = c.post(f"{API}/providers?id=bad-{uuid.uuid4().hex[:6]}", provider_body("sp-x"))
            self.assertEqual(r.status, 401, f"{why}: {r}")
            self.assertIn('error="invalid_token"', r.headers["www-authenticate"], why)
            self.assertTrue(r.json()["detail"], why)
            r = c.request("DELETE", f"{API}/providers/anything?force=true")
            self.assertEqual(r.status, 401, f"{why}: {r}")
            c.close()
        names = [p["name"] for p in self.admin.get(f"{API}/providers").json()["providers"]]
        self.assertNotIn("sp-x", names)
        self.assertEqual(len(self.provider_events()), before, "a 401 produced an event")

    def test_a_reader_reads_everything_and_writes_nothing(self):
        for path in ["/providers", "/providers?as_of=2026-01-01T00:00:00Z", "/events",
                     "/service-types", "/catalog-item-instances", "/resources",
                     "/service-type-instances", "/cleanup-queue"]:
            self.assertEqual(self.reader.get(API + path).status, 200, path)
        self.assertEqual(self.reader.get("/metrics").status, 200)
        for method, path in [("POST", "/providers"), ("PUT", "/providers/x"),
                             ("DELETE", "/providers/x"), ("POST", "/providers/x:changeId"),
                             ("POST", "/catalog-item-instances"),
                             ("POST", "/catalog-item-instances/x:rehydrate"),
                             ("DELETE", "/catalog-item-instances/x"), ("POST", "/resources"),
                             ("POST", "/service-type-instances"),
                             ("POST", "/cleanup-queue/x:retry")]:
            r = self.reader.request(method, API + path, {"name": "x"})
            self.assertEqual(r.status, 403, f"{method} {path}: {r}")
        self.assertEqual(self.reader.get("/admin/info").status, 403)

    def test_providers_change_only_what_they_own_and_admins_anything(self):
        r = self.sp_a.post(f"{API}/providers", provider_body("owned-a"))
        self.assertEqual(r.status, 201, r)
        pid = r.json()["id"]
        self.assertEqual(r.json()["owner"], "sp-a")
        item = f"{API}/providers/{pid}"
        self.assertEqual(self.sp_b.request("PUT", item, provider_body("owned-a")).status, 403)
        self.assertEqual(self.sp_b.post(f"{item}:changeId", {"new_id": "stolen"}).status, 403)
        self.assertEqual(self.sp_b.request("DELETE", item).status, 403)
        self.assertEqual(self.sp_b.post(f"{API}/providers", provider_body("owned-a")).status, 403)
        self.assertEqual(self.sp_a.request("PUT", item, provider_body("owned-a")).status, 200)
        self.assertEqual(self.sp_a.request("DELETE", f"{item}?force=true").status, 403,
                         "force needs dcm-admin")
        self.assertEqual(self.user.request("DELETE", item).status, 403)
        self.assertEqual(self.admin.request("DELETE", f"{item}?force=true").status, 204)

    def test_every_event_of_a_registration_update_and_rehydration_carries_the_actor(self):
        sim = SpSim(self.inst.url, 2, name_prefix="actor", extra=["--token",
                                                                  self.keys.token("sp-a", [PROVIDER])])
        try:
            pids = {n: p["id"] for n, p in sim.wait_registered().items()}
            for pid in pids.values():
                wait_until(lambda: self.reader.get(f"{API}/providers/{pid}").json()
                           ["health_status"] == "Ready", what="provider Ready")
            first = next(iter(pids.values()))
            p = self.reader.get(f"{API}/providers/{first}").json()
            body = {k: p[k] for k in ("name", "endpoint", "service_type")}
            self.assertEqual(self.sp_a.request("PUT", f"{API}/providers/{first}", body).status, 200)
            r = self.user.post(f"{API}/catalog-item-instances",
                               {"spec": {"service_type": "vm"}})
            self.assertEqual(r.status, 201, r)
            cii = r.json()["id"]
            r = self.user.post(f"{API}/catalog-item-instances/{cii}:rehydrate")
            self.assertEqual(r.status, 202, r)
            self.assertEqual(self.user.request("DELETE", f"{API}/providers/{first}").status, 403)

            ids_and_names = set(pids.values()) | set(pids)
            events = [e for e in self.provider_events() if e.get("subject") in ids_and_names]
            self.assertGreaterEqual(len(events), 6, events)  # 2 x (request, outcome) + update
            for e in events:
                self.assertEqual(e.get("actor"), "sp-a", e)
            instances = kafka_events(self.cluster.bootstrap,
                                     f"{self.cluster.prefix}instance-requests") + \
                kafka_events(self.cluster.bootstrap, f"{self.cluster.prefix}instances")
            saga = [e for e in instances if e["data"].get("root") == cii and
                    not e["type"].startswith("dcm.cleanup.attempted")]
            types = {e["type"] for e in saga}
            self.assertIn("dcm.catalog_item_instance.rehydrated", types)
            self.assertIn("dcm.service_type_instance.created", types)
            for e in saga:
                if e["type"] in ("dcm.cleanup.parked", "dcm.cleanup.attempted",
                                 "dcm.cleanup.failed", "dcm.service_type_instance.deleted",
                                 "dcm.resource.deleted"):
                    continue  # the cleanup worker's own decisions (actor dcm/cleanup)
                self.assertEqual(e.get("actor"), "alice", e)
            history = self.reader.get(f"{API}/catalog-item-instances/{cii}/history").json()
            self.assertIn("alice", {entry.get("actor") for entry in history["events"]})
            table = subprocess.run(
                [DCM_BIN, "events", "--kafka-brokers", self.cluster.bootstrap, "--topic-prefix",
                 self.cluster.prefix, "--subject", first, "-o", "table"],
                capture_output=True, text=True, timeout=60)
            self.assertEqual(table.returncode, 0, table.stderr)
            self.assertIn("ACTOR", table.stdout.splitlines()[0])
            self.assertIn("sp-a", table.stdout)
        finally:
            sim.stop()

    def test_admin_info_says_how_callers_authenticate(self):
        info = self.admin.get("/admin/info").json()
        self.assertEqual(info["auth"], "jwt (jwks file)")
        self.assertEqual(info["api_tls"], "off")


class OidcIssuerTest(unittest.TestCase):
    """AUTH_ISSUER_URL pointing at a discovery document served here; keys rotate live."""

    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), cls.Handler)
        port = cls.server.server_address[1]
        cls.issuer = f"http://127.0.0.1:{port}/realms/dcm"
        cls.keys = SigningKeys(cls.issuer)
        cls.Handler.test = cls
        cls.published = ["rsa-1", "ec-1"]
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.cluster = Cluster()
        cls.inst = cls.cluster.serve(env=auth_env(AUTH_ISSUER_URL=cls.issuer,
                                                  AUTH_JWKS_REFRESH_INTERVAL="1s",
                                                  AUTH_JWKS_MIN_REFRESH_INTERVAL="200ms"))

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        cls.server.shutdown()

    class Handler(http.server.BaseHTTPRequestHandler):
        test = None

        def do_GET(self):
            t = type(self).test
            if self.path == "/realms/dcm/.well-known/openid-configuration":
                doc = {"issuer": t.issuer, "jwks_uri": t.issuer + "/protocol/openid-connect/certs"}
            elif self.path == "/realms/dcm/protocol/openid-connect/certs":
                doc = t.keys.jwks(t.published)
            else:
                self.send_error(404)
                return
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    def test_tokens_of_the_issuer_work(self):
        c = self.inst.client.with_token(self.keys.token("root", [ADMIN], kid="ec-1"))
        # (after the rotation test the key is published again: one refresh brings it back)
        wait_until(lambda: c.get(f"{API}/providers").status == 200, timeout=10,
                   what="an issuer token accepted")
        self.assertEqual(c.get("/admin/info").json()["auth"], "jwt (oidc issuer)")

    def test_a_rotated_key_is_picked_up_without_a_restart(self):
        self.keys.add("rotated-2")
        token = self.keys.token("root", [ADMIN], kid="rotated-2")
        c = self.inst.client.with_token(token)
        self.assertEqual(c.get(f"{API}/providers").status, 401, "not published yet")
        type(self).published = ["rsa-1", "ec-1", "rotated-2"]
        wait_until(lambda: c.get(f"{API}/providers").status == 200, timeout=10,
                   what="the new kid accepted after a refresh")
        type(self).published = ["rotated-2"]  # rsa-1 and ec-1 withdrawn
        old = self.inst.client.with_token(self.keys.token("root", [ADMIN], headers={"kid": "no"}))
        self.assertEqual(old.get(f"{API}/providers").status, 401)  # unknown kid: one refresh
        gone = self.inst.client.with_token(self.keys.token("other", [ADMIN], kid="ec-1"))
        wait_until(lambda: gone.get(f"{API}/providers").status == 401, timeout=10,
                   what="a withdrawn key refused after the periodic refresh")
        type(self).published = ["rsa-1", "ec-1", "rotated-2"]


class SecureDefaultTest(unittest.TestCase):
    def test_serve_without_auth_config_exits_saying_what_to_set(self):
        cluster = Cluster()
        try:
            proc = subprocess.run(
                [DCM_BIN, "serve", "--kafka-brokers", cluster.bootstrap, "--topic-prefix",
                 cluster.prefix, "--listen", "127.0.0.1:0", "--data-dir",
                 tempfile.mkdtemp(prefix="dcm-e2e-")],
                capture_output=True, text=True, timeout=60,
                env={k: v for k, v in os.environ.items() if not k.startswith("AUTH_")})
            self.assertNotEqual(proc.returncode, 0)
            for hint in ("AUTH_JWKS_FILE", "AUTH_ISSUER_URL", "AUTH_DISABLED=true"):
                self.assertIn(hint, proc.stderr)
            inst = cluster.serve()  # SERVE_ENV: AUTH_DISABLED=true
            info = inst.client.get("/admin/info").json()
            self.assertEqual(info["auth"], "disabled")
            self.assertIn("authentication is off", inst.proc.tail(200))
            r = inst.client.post(f"{API}/providers", provider_body("anon-sp"))
            self.assertEqual(r.status, 201, r)
            self.assertNotIn("owner", r.json())
        finally:
            cluster.close()


class ApiTlsTest(unittest.TestCase):
    """HTTPS on the API with a test CA; client certificates map to roles (mTLS); SIGHUP
    reloads the certificate."""

    def test_https_and_client_certificates(self):
        d = tempfile.mkdtemp(prefix="dcm-e2e-tls-")
        ca = Ca("api CA", d)
        clients_ca = Ca("clients CA", d)
        server = ca.issue("dcm.test", ips=["127.0.0.1"], name="server")
        ops = clients_ca.issue("ops", uris=["spiffe://dcm.test/ops"], client=True, name="ops")
        stranger = Ca("other CA", d).issue("ops", uris=["spiffe://dcm.test/ops"], client=True,
                                           name="stranger")
        keys = SigningKeys(ISSUER)
        cluster = Cluster()
        try:
            inst = cluster.serve(
                env=auth_env(AUTH_JWKS_FILE=keys.write_jwks(os.path.join(d, "jwks.json")),
                             AUTH_CERT_ROLES="spiffe://dcm.test/ops=dcm-admin"),
                extra=["--tls-cert-file", server.cert, "--tls-key-file", server.key,
                       "--tls-client-ca-file", clients_ca.path],
                ssl_context=ca.client_context())
            self.assertTrue(inst.url.startswith("https://"), inst.url)
            anonymous = inst.client
            self.assertEqual(anonymous.get(f"{API}/providers").status, 401)
            token = anonymous.with_token(keys.token("sp-a", [PROVIDER]))
            r = token.post(f"{API}/providers", provider_body("tls-sp"))
            self.assertEqual(r.status, 201, r)
            pid = r.json()["id"]
            admin = Client(inst.url, ssl_context=ca.client_context(ops))
            self.assertEqual(admin.request("DELETE", f"{API}/providers/{pid}?force=true").status,
                             204)
            requests = kafka_events(cluster.bootstrap, f"{cluster.prefix}provider-requests")
            self.assertEqual(requests[-1]["actor"], "spiffe://dcm.test/ops")
            with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                Client(inst.url, ssl_context=ca.client_context(stranger)).get(f"{API}/providers")
            with self.assertRaises((ssl.SSLError, OSError)):  # plain HTTP client, wrong CA
                Client(inst.url, ssl_context=ssl.create_default_context()).get("/healthz")
            self.assertEqual(admin.get("/admin/info").json()["api_tls"],
                             "on, client certificates")

            # SIGHUP: a new certificate for new connections.
            renewed = ca.issue("dcm-renewed.test", ips=["127.0.0.1"], name="renewed")
            shutil.copy(renewed.cert, server.cert)
            shutil.copy(renewed.key, server.key)
            inst.proc.proc.send_signal(signal.SIGHUP)

            def served_cn():
                with socket.create_connection(("127.0.0.1", int(inst.url.rsplit(":", 1)[1]))) as s:
                    with ca.client_context().wrap_socket(s, server_hostname="127.0.0.1") as t:
                        return dict(x[0] for x in t.getpeercert()["subject"])["commonName"]
            wait_until(lambda: served_cn() == "dcm-renewed.test", timeout=10,
                       what="the reloaded certificate")
        finally:
            cluster.close()
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
