"""Throwaway PKI and bearer tokens for the trust-boundary e2e tests (SPEC §6), with Debian's
python3-cryptography and python3-jwt (scripts/install-deps.sh installs both).

    ca = Ca("test CA", tmpdir)
    server = ca.issue("dcm.test", ips=["127.0.0.1"])               # Cert(cert, key) paths
    client = ca.issue("ops", uris=["spiffe://dcm.test/ops"], client=True)
    keys = SigningKeys(); keys.write_jwks(path); keys.token("sp-a", ["dcm-provider"])
"""

import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import ssl
import time
from collections import namedtuple

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Cert = namedtuple("Cert", "cert key")


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class Ca:
    """A self-signed CA that issues server and client certificates as PEM files in `directory`."""

    def __init__(self, name, directory):
        self.directory, self.serial = directory, 1
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(hours=1))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                  False, False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        slug = name.replace(" ", "-")
        self.path = _write(os.path.join(directory, f"{slug}.pem"),
                           self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn, dns=(), ips=(), uris=(), client=False, name=None):
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        sans = ([x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
                + [x509.UniformResourceIdentifier(u) for u in uris])
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        self.serial += 1
        slug = self.path.rsplit("/", 1)[1][:-4]
        base = os.path.join(self.directory, name or f"{slug}-{cn.replace('/', '_')}-{self.serial}")
        return Cert(_write(base + ".crt", cert.public_bytes(serialization.Encoding.PEM)),
                    _write(base + ".key", key.private_bytes(serialization.Encoding.PEM,
                                                            serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption())))

    def client_context(self, cert=None):
        """An ssl.SSLContext trusting this CA, presenting `cert` (a Cert) if given."""
        ctx = ssl.create_default_context(cafile=self.path)
        if cert:
            ctx.load_cert_chain(cert.cert, cert.key)
        return ctx


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class SigningKeys:
    """An issuer's signing keys (RSA kid rsa-1, EC P-256 kid ec-1) and the tokens it mints."""

    def __init__(self, issuer="https://idp.test/realms/dcm", audience="dcm"):
        self.issuer, self.audience = issuer, audience
        self.keys = {"rsa-1": ("RS256", rsa.generate_private_key(65537, 2048)),
                     "ec-1": ("ES256", ec.generate_private_key(ec.SECP256R1()))}

    def add(self, kid, alg="ES256"):
        key = (rsa.generate_private_key(65537, 2048) if alg == "RS256"
               else ec.generate_private_key(ec.SECP256R1()))
        self.keys[kid] = (alg, key)

    def jwks(self, kids=None):
        out = []
        for kid, (alg, key) in self.keys.items():
            if kids is not None and kid not in kids:
                continue
            algorithm = jwt.algorithms.RSAAlgorithm if alg == "RS256" else jwt.algorithms.ECAlgorithm
            jwk = json.loads(algorithm.to_jwk(key.public_key()))
            jwk.update({"kid": kid, "alg": alg, "use": "sig"})
            out.append(jwk)
        return {"keys": out}

    def write_jwks(self, path, kids=None):
        with open(path, "w") as f:
            json.dump(self.jwks(kids), f)
        return path

    def claims(self, sub, roles, **overrides):
        now = int(time.time())
        c = {"sub": sub, "iss": self.issuer, "aud": self.audience, "iat": now, "exp": now + 600,
             "roles": list(roles)}
        c.update(overrides)
        return {k: v for k, v in c.items() if v is not None}

    def token(self, sub, roles, kid="rsa-1", headers=None, **overrides):
        alg, key = self.keys[kid]
        return jwt.encode(self.claims(sub, roles, **overrides), key, algorithm=alg,
                          headers={"kid": kid, **(headers or {})})

    def public_pem(self, kid="rsa-1"):
        return self.keys[kid][1].public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def unsigned(self, sub, roles):
        """alg none."""
        header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "rsa-1"}).encode())
        return f"{header}.{_b64(json.dumps(self.claims(sub, roles)).encode())}."

    def hmac_with_public_key(self, sub, roles):
        """HS256 keyed with the RSA public key's PEM: the algorithm-confusion attack."""
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
        payload = _b64(json.dumps(self.claims(sub, roles)).encode())
        mac = hmac.new(self.public_pem(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(mac)}"
