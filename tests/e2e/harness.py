"""Process harness for the e2e tests: starts real `dcm dev-kafka`, `dcm serve` and `dcm sp-sim`
processes on loopback ports, talks to them over HTTP, and kills them (SIGTERM or SIGKILL).

Only the Python standard library is used, so a fresh Debian machine needs nothing but python3.
The `dcm` binary comes from $DCM_BIN (ctest sets it). With $KAFKA_BROKERS set, the tests use
that cluster instead of `dcm dev-kafka`, with a unique topic prefix per test.
"""

import functools
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import uuid
from urllib.parse import urlparse

DCM_BIN = os.environ.get("DCM_BIN", "build/src/dcm")
API = "/api/v1alpha1"


def wait_until(predicate, timeout=30.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (OSError, http.client.HTTPException) as e:  # not up yet
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Client:
    """A keep-alive HTTP(S) client for one base URL (not thread-safe: one per thread). `token`
    is sent as a bearer token unless a request gives its own Authorization header; https URLs
    use `ssl_context` (e.g. one trusting a test CA, with a client certificate)."""

    def __init__(self, base_url, timeout=30.0, token=None, ssl_context=None):
        u = urlparse(base_url)
        self.host, self.port, self.timeout = u.hostname, u.port, timeout
        self.https, self.ssl_context, self.token = u.scheme == "https", ssl_context, token
        self.conn = None

    def with_token(self, token):
        """A new client for the same server, acting with `token`."""
        c = Client(f"{'https' if self.https else 'http'}://{self.host}:{self.port}", self.timeout,
                   token, self.ssl_context)
        return c

    def request(self, method, path, body=None, headers=None, raw=False):
        headers = dict(headers or {})
        if self.token and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None and not raw:
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        for attempt in range(2):
            if self.conn is None:
                if self.https:
                    self.conn = http.client.HTTPSConnection(self.host, self.port,
                                                            timeout=self.timeout,
                                                            context=self.ssl_context)
                else:
                    self.conn = http.client.HTTPConnection(self.host, self.port,
                                                           timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.close()
                return Response(resp.status, dict(resp.getheaders()), data)
            except (ConnectionError, http.client.RemoteDisconnected, BrokenPipeError):
                self.close()
                if attempt == 1:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)


class SseStream:
    """A Server-Sent Events watch (SPEC §9) read on its own thread: `messages` is a list of
    dicts {id, event, data, at} (at = time.time() on receipt), in arrival order. `status` and
    `headers` once the response started; `ended` once the server closed it."""

    def __init__(self, base_url, path, headers=None, token=None):
        u = urlparse(base_url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        h = {"Accept": "text/event-stream", **(headers or {})}
        if token:
            h["Authorization"] = f"Bearer {token}"
        self.conn.request("GET", path, headers=h)
        self.sock = self.conn.sock
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        self.messages, self.ended, self.lock = [], False, threading.Lock()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()
        else:
            self.body = self.resp.read()

    def _read(self):
        msg = {}
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                line = line.decode().rstrip("\r\n")
                if not line:
                    if "event" in msg or "data" in msg:
                        msg["at"] = time.time()
                        with self.lock:
                            self.messages.append(msg)
                    msg = {}
                elif line.startswith(":"):
                    continue
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "data" and "data" in msg:
                        msg["data"] += "\n" + value
                    elif field in ("id", "event", "data"):
                        msg[field] = value
        except (OSError, ValueError, http.client.HTTPException):
            pass
        self.ended = True

    def snapshot(self):
        with self.lock:
            return list(self.messages)

    def wait(self, predicate, timeout=30, what="watch messages"):
        """Waits until predicate(messages) is truthy; returns the messages."""
        return wait_until(lambda: predicate(m := self.snapshot()) and m, timeout=timeout,
                          what=what)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.conn.close()


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, {k.lower(): v for k, v in headers.items()}, body

    def json(self):
        return json.loads(self.body) if self.body else None

    def __repr__(self):
        return f"<{self.status} {self.body[:300]!r}>"


class Process:
    """A child process; `env` adds to this one's environment (None values remove a variable)."""

    def __init__(self, args, name, env=None):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix=f"dcm-{name}-", suffix=".log", delete=False)
        environment = {**os.environ, **(env or {})}
        environment = {k: v for k, v in environment.items() if v is not None}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=environment, start_new_session=True)
        self.lines = []

    def read_line(self, timeout=30.0):
        result = []

        def reader():
            result.append(self.proc.stdout.readline())

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(timeout)
        if not result or not result[0]:
            raise AssertionError(f"{self.name} printed nothing (exit {self.proc.poll()}); "
                                 f"log {self.log.name}:\n{self.tail()}")
        self.lines.append(result[0].rstrip("\n"))
        return self.lines[-1]

    def tail(self, n=30):
        try:
            with open(self.log.name) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def kill(self, sig=signal.SIGTERM, timeout=15.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Cluster:
    """A Kafka for one test: `dcm dev-kafka`, or $KAFKA_BROKERS with a fresh topic prefix."""

    def __init__(self, partitions=4):
        self.prefix = f"e2e-{uuid.uuid4().hex[:8]}."
        self.external = os.environ.get("KAFKA_BROKERS")
        self.kafka = None
        if self.external:
            self.bootstrap = self.external
        else:
            self.kafka = Process([DCM_BIN, "dev-kafka", "--partitions", str(partitions),
                                  "--topic-prefix", self.prefix], "dev-kafka")
            self.bootstrap = self.kafka.read_line()
        self.instances = []
        self.dirs = []

    def serve(self, data_dir=None, name="serve", extra=(), env=None, ssl_context=None,
              wait_ready=True):
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="dcm-e2e-")
            self.dirs.append(data_dir)
        inst = Instance(self, data_dir, name, extra, env, ssl_context, wait_ready)
        self.instances.append(inst)
        return inst

    def close(self):
        for inst in self.instances:
            inst.stop()
        if self.kafka:
            self.kafka.kill()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


# How the checks from outside start `dcm serve` unless they test these settings (SPEC §6): no
# authentication, and loopback SPs allowed by the outbound policy.
SERVE_ENV = {"AUTH_DISABLED": "true", "OUTBOUND_ALLOW_CIDRS": "127.0.0.0/8"}


@functools.lru_cache(maxsize=None)
def serve_has_flag(binary, flag):
    out = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=20)
    return flag in out.stdout


class Instance:
    """`env` adds to SERVE_ENV; a value of None removes that variable. `wait_ready`: return only
    once /readyz answers 200 (else once it listens)."""

    def __init__(self, cluster, data_dir, name, extra=(), env=None, ssl_context=None,
                 wait_ready=True):
        self.cluster, self.data_dir, self.name = cluster, data_dir, name
        args = [DCM_BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                "--kafka-brokers", cluster.bootstrap, "--topic-prefix", cluster.prefix,
                "--session-timeout-ms", "4000", "--http-threads", "1", "--instance-id", name,
                *extra]
        if "--decision-timeout" not in extra:
            args += ["--decision-timeout", "20s"]
        # As patient as the decision timeout (an older build, in the upgrade check, has no flag).
        if "--write-timeout" not in extra and serve_has_flag(DCM_BIN, "--write-timeout"):
            args += ["--write-timeout", "20s"]
        if not cluster.external:
            args += ["--fetch-wait-max-ms", "10"]
        self.proc = Process(args, name, {**SERVE_ENV, **(env or {})})
        line = self.proc.read_line()
        assert "listening on " in line, line
        self.url = line.split("listening on ")[1].strip()
        self.client = Client(self.url, ssl_context=ssl_context)
        if wait_ready:
            wait_until(lambda: self.client.get("/readyz").status == 200, what=f"{name} ready")

    def stop(self, sig=signal.SIGTERM):
        self.client.close()
        return self.proc.kill(sig)

    def digest(self):
        return self.client.get("/admin/projections").json()["projections"][0]["digest"]

    def providers(self):
        out, token = [], None
        while True:
            path = f"{API}/providers?max_page_size=100" + (f"&page_token={token}" if token else "")
            page = self.client.get(path).json()
            out += page["providers"]
            token = page.get("next_page_token")
            if not token:
                return out


class DevServer:
    """`dcm serve --dev`: everything in one process. `env` adds to its environment (e.g. an
    auth configuration, which dev mode then applies; None values remove a variable)."""

    def __init__(self, extra=(), listen="127.0.0.1:0", env=None):
        self.proc = Process([DCM_BIN, "serve", "--dev", "--listen", listen, *extra],
                            "serve-dev", env)
        line = self.proc.read_line()
        assert "listening on " in line, line
        self.url = line.split("listening on ")[1].strip()
        self.bootstrap = self.proc.read_line().split(": ", 1)[1]
        self.client = Client(self.url)
        wait_until(lambda: self.client.get("/readyz").status == 200, what="dev server ready")

    def stop(self):
        self.client.close()
        return self.proc.kill()


def provider_body(name, service_type="vm", **extra):
    body = {"name": name, "endpoint": f"http://127.0.0.1:9/{name}", "service_type": service_type}
    body.update(extra)
    return body


def main():
    unittest.main(verbosity=2)


def events_pages(client, path):
    """Every `events` item of `path` (a URL with a query), all pages, in order."""
    events, token = [], ""
    while True:
        r = client.get(f"{path}&max_page_size=100" + (f"&page_token={token}" if token else ""))
        assert r.status == 200, r
        events += r.json()["events"]
        token = r.json().get("next_page_token")
        if not token:
            return events


def history(client, path):
    """Every event of `{API}/{path}/history` (e.g. "providers/<id>"), all pages, oldest first."""
    return events_pages(client, f"{API}/{path}/history?")


class SpSim:
    """`dcm sp-sim`: simulated providers registering with `dcm_url`, plus their control API."""

    def __init__(self, dcm_url, count, extra=(), name_prefix="e2e", service_types="vm"):
        self.proc = Process([DCM_BIN, "sp-sim", "--dcm-url", dcm_url, "--count", str(count),
                             "--service-types", service_types, "--name-prefix", name_prefix,
                             *extra], "sp-sim")
        line = self.proc.read_line()
        assert line.startswith("sp-sim control http://"), line
        self.control = Client(line.split(" ")[2])
        # sp-sim prints a line per registration and blocks once the pipe is full: drain it.
        threading.Thread(target=lambda: [None for _ in self.proc.proc.stdout], daemon=True).start()

    def providers(self):
        return {p["name"]: p for p in self.control.get("/sim/providers").json()}

    def set_fault(self, name=None, **fault):
        path = f"/sim/providers/{name}/fault" if name else "/sim/fault"
        r = self.control.request("PUT", path, fault)
        assert r.status == 200, r

    def stop(self):
        self.control.close()
        return self.proc.kill()

    def wait_registered(self, timeout=30):
        """Waits until every provider is registered; returns {name: provider}."""
        return wait_until(lambda: (ps := self.providers()) and all(p.get("id") for p in ps.values())
                          and ps, timeout=timeout, what="sp-sim providers registered")

    def wait_ready(self, client, timeout=30):
        """Waits until `client`'s control plane shows every provider Ready (registered is not
        enough: placement only picks Ready providers, and the first probe comes after the
        registration)."""
        ids = [p["id"] for p in self.wait_registered(timeout).values()]
        wait_until(lambda: all(client.get(f"{API}/providers/{i}").json().get("health_status") ==
                               "Ready" for i in ids), timeout=timeout, what="sp-sim providers Ready")

    def instance_ids(self):
        """{name: set of instance ids held now}."""
        return {n: set(p["instance_ids"]) for n, p in self.providers().items()}


def kafka_produce(bootstrap, topic, value, key=None,
                  headers=(("content-type", "application/cloudevents+json"),), timeout=20):
    """Produces one record (`value`: a dict, encoded as JSON on one line) with kcat."""
    args = ["kcat", "-b", bootstrap, "-P", "-t", topic]
    if key is not None:
        args += ["-k", key]
    for name, val in headers:
        args += ["-H", f"{name}={val}"]
    out = subprocess.run(args, input=json.dumps(value) + "\n", capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr


def kafka_events(bootstrap, topic, timeout=20):
    """Every event on `topic`, from the beginning, read with kcat (CloudEvents as dicts)."""
    out = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-q", "-f", "%s\n"], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def rfc3339_ms(text):
    """'2026-01-01T00:00:00.123Z' -> unix milliseconds."""
    from datetime import datetime, timezone
    t = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(t.timestamp() * 1000)


class InstanceReads:
    """Read helpers shared by the instance e2e tests (a unittest.TestCase mixin). The test
    provides `self.c` (a Client) and `self.pids` (provider name -> id)."""

    def health(self, name):
        r = self.c.get(f"{API}/providers/{self.pids[name]}")
        self.assertEqual(r.status, 200, r)
        return r.json()["health_status"]

    def wait_health(self, name, status, timeout=10):
        wait_until(lambda: self.health(name) == status, timeout=timeout, interval=0.02,
                   what=f"{name} {status}")

    def cii(self, id):
        r = self.c.get(f"{API}/catalog-item-instances/{id}")
        self.assertEqual(r.status, 200, r)
        return r.json()
