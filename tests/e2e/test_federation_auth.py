"""Federation with the trust boundary on (SPEC §6, §10; issue #17): enclave B serves HTTPS, asks
for client certificates and maps `dcm-enclave://enclave-a` and `dcm-enclave://enclave-c` to the
role `dcm-peer` (AUTH_CERT_ROLES); its container SP registers with a bearer token. Enclave A
(authentication off on its own API) verifies B with the test CA and presents its certificate
`dcm-enclave://enclave-a` to B (SP_CLIENT_CERT_FILE: the same client certificate as for SPs).

- No certificate: B refuses the peer API (401) and writes nothing.
- enclave-c's certificate on enclave-a's reservation (Fed-Via: enclave-a) is a 403, and no event.
- A peer certificate cannot call /api/v1alpha1/providers (403).
- A `container` instance created on A lands on B over mTLS, with B's events naming the caller
  `dcm-enclave://enclave-a`."""

import os
import shutil
import tempfile
import unittest

from harness import API, Client, Cluster, DevServer, SpSim, kafka_events, main, wait_until
from pki import Ca, SigningKeys

ISSUER = "https://idp.test/realms/dcm"
FED = "/federation/v1alpha1"
FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "2s"]


class FederationAuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dcm-e2e-fedauth-")
        ca = Ca("federation CA", cls.dir)
        cls.ca = ca
        server = ca.issue("b.test", ips=["127.0.0.1"], name="b")
        cls.a_cert = ca.issue("enclave-a", uris=["dcm-enclave://enclave-a"], client=True, name="a")
        cls.c_cert = ca.issue("enclave-c", uris=["dcm-enclave://enclave-c"], client=True, name="c")
        keys = SigningKeys(ISSUER)
        jwks = keys.write_jwks(os.path.join(cls.dir, "jwks.json"))
        cls.cluster = Cluster()
        cls.b = cls.cluster.serve(
            name="b",
            env={"AUTH_DISABLED": None, "AUTH_JWKS_FILE": jwks, "AUTH_ISSUER_URL": ISSUER,
                 "AUTH_JWT_AUDIENCE": "dcm",
                 "AUTH_CERT_ROLES": "dcm-enclave://enclave-a=dcm-peer;"
                                    "dcm-enclave://enclave-c=dcm-peer",
                 "FEDERATION_EXPORT_SERVICE_TYPES": "container"},
            extra=[*FAST, "--enclave-id", "enclave-b", "--tls-cert-file", server.cert,
                   "--tls-key-file", server.key, "--tls-client-ca-file", ca.path],
            ssl_context=ca.client_context())
        token = keys.token("sp-b", ["dcm-provider"])
        cls.sim = SpSim(cls.b.url, 1, extra=["--token", token, "--dcm-ca-file", ca.path,
                                             "--max-instances", "2"],
                        name_prefix="fedauth", service_types="container")
        cls.sp = next(iter(cls.sim.wait_registered().values()))["name"]
        cls.as_a = Client(cls.b.url, ssl_context=ca.client_context(cls.a_cert))
        cls.as_c = Client(cls.b.url, ssl_context=ca.client_context(cls.c_cert))
        wait_until(lambda: cls.as_a.get(f"{FED}/flavors").json()["flavors"], timeout=30,
                   what="B's flavour, over mTLS")
        cls.a = DevServer(extra=[*FAST, "--enclave-id", "enclave-a"],
                          env={"FEDERATION_PEERS": f"enclave-b={cls.b.url}",
                               "HEALTH_CHECK_CA_FILE": ca.path,
                               "SP_CLIENT_CERT_FILE": cls.a_cert.cert,
                               "SP_CLIENT_KEY_FILE": cls.a_cert.key})

    @classmethod
    def tearDownClass(cls):
        for c in (cls.as_a, cls.as_c):
            c.close()
        cls.a.stop()
        cls.sim.stop()
        cls.cluster.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def requests_on_b(self):
        """Every request on B's dcm.federation-requests."""
        return kafka_events(self.cluster.bootstrap, self.cluster.prefix + "federation-requests")

    def test_1_no_certificate_is_refused(self):
        anonymous = Client(self.b.url, ssl_context=self.ca.client_context())
        try:
            r = anonymous.get(f"{FED}/flavors")
            self.assertEqual(r.status, 401, r)
            r = anonymous.request("POST", f"{FED}/reservations",
                                  {"reservation_id": "r-anon", "flavor_id": "x"})
            self.assertEqual(r.status, 401, r)
        finally:
            anonymous.close()

    def test_2_another_enclaves_certificate_gets_403_and_no_event(self):
        flavor = self.as_a.get(f"{FED}/flavors").json()["flavors"][0]["flavor_id"]
        r = self.as_c.request("POST", f"{FED}/reservations",
                              {"reservation_id": "r-c", "flavor_id": flavor, "ttl": "30s"},
                              headers={"Fed-Via": "enclave-a"})
        self.assertEqual(r.status, 403, r)
        self.assertIn("the caller is 'enclave-c'", r.json()["detail"])
        r = self.as_c.request("GET", f"{FED}/contracts?consumer=enclave-a", None)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(self.as_a.get(f"{FED}/flavors").json()["flavors"][0]
                         ["instances_available"], 2, "nothing was held")
        self.assertEqual([e for e in self.requests_on_b()
                          if e["data"].get("reservation_id") == "r-c"], [], "no event")

    def test_3_a_peer_certificate_cannot_call_the_providers_api(self):
        self.assertEqual(self.as_a.get(f"{API}/providers").status, 403)
        r = self.as_a.post(f"{API}/providers", {"name": "x", "endpoint": "http://127.0.0.1:9/x",
                                                "service_type": "container"})
        self.assertEqual(r.status, 403, r)

    def test_4_a_container_created_on_a_lands_on_b_over_mtls(self):
        wait_until(lambda: any(p["health_status"] == "Ready"
                               for p in self.a.client.get(f"{API}/peers").json()["peers"]),
                   timeout=30, what="A sees B Ready over HTTPS")
        r = self.a.client.post(f"{API}/catalog-item-instances",
                               {"spec": {"service_type": "container", "image": "nginx"}})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["provider_name"], "peer:enclave-b")
        wait_until(lambda: len(self.sim.instance_ids()[self.sp]) == 1, timeout=20,
                   what="B's SP instance")
        [contract] = self.as_a.get(f"{FED}/contracts").json()["contracts"]
        self.assertEqual(contract["consumer"], "enclave-a")
        received = [e for e in self.requests_on_b() if e["type"] == "dcm.reservation.received"]
        self.assertEqual([e["actor"] for e in received], ["dcm-enclave://enclave-a"])


if __name__ == "__main__":
    main()
