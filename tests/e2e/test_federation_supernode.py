"""Federation through a supernode (SPEC §10 "Supernodes", issue #17): an enclave with no providers
and FEDERATION_FORWARD re-advertises its peers' flavours, forwards holds under the same
reservation id and relays confirm, renew and terminate. Real `dcm serve --dev` enclaves on
loopback:

  a  ──▶ s (FEDERATION_FORWARD, no providers) ──▶ b (exports `container`, one SP, max 2)
  a2 ──▶ b directly, and ──▶ s ──▶ b              (two routes to b)
  la ──▶ ls ──▶ lb ──▶ la                          (a loop, every one forwarding, no container SP)

- Through s: a's container instance lands on b's SP (exactly one create); a's, s's and b's
  records carry the same reservation id; b's contract is s's; s logs each forward; renewals
  reach b through s (a short lease outlives itself); deleting on a terminates on b.
- Two routes: the direct one wins (fewer hops) and b sees one hold.
- The loop: the discovery ends within a's deadline, ls and lb each handle it once, la is never
  asked, and la answers 422 as with no provider.
- `dcm projections verify` says match on a, a2, s and b."""

import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

from harness import API, DCM_BIN, DevServer, SpSim, events_pages, main, wait_until

FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-max-consecutive-failures", "3"]
FED = "/federation/v1alpha1"
CONTRACT_TTL_S = 6


def log_text(server):
    with open(server.proc.log.name) as f:
        return f.read()


def peer_ready(server, peer):
    peers = server.client.get(f"{API}/peers").json()["peers"]
    return any(p["id"] == peer and p["health_status"] == "Ready" for p in peers)


def container(**extra):
    return {"spec": {"service_type": "container", "image": "nginx", **extra}}


class Enclaves:
    """Dev servers by enclave id, each with its own data dir."""

    def __init__(self, prefix):
        self.prefix, self.servers, self.dirs = prefix, {}, {}

    def start(self, enclave, env):
        self.dirs[enclave] = tempfile.mkdtemp(prefix=f"dcm-e2e-{self.prefix}-{enclave}-")
        self.servers[enclave] = DevServer(
            extra=[*FAST, "--enclave-id", enclave, "--data-dir", self.dirs[enclave]], env=env)
        return self.servers[enclave]

    def stop(self):
        for server in self.servers.values():
            server.stop()
        for d in self.dirs.values():
            shutil.rmtree(d, ignore_errors=True)


class SupernodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.enclaves = Enclaves("fedsn")
        cls.b = cls.enclaves.start("b", {"FEDERATION_EXPORT_SERVICE_TYPES": "container",
                                         "FEDERATION_CONTRACT_TTL": f"{CONTRACT_TTL_S}s"})
        cls.sim_b = SpSim(cls.b.url, 1, extra=["--max-instances", "2"], name_prefix="fedsnb",
                          service_types="container")
        cls.sp_b = next(iter(cls.sim_b.wait_registered().values()))["name"]
        cls.sim_b.wait_ready(cls.b.client)  # B offers a flavour only for a Ready SP
        cls.s = cls.enclaves.start("s", {"FEDERATION_FORWARD": "true",
                                         "FEDERATION_PEERS": f"b={cls.b.url}"})
        cls.a = cls.enclaves.start("a", {"FEDERATION_PEERS": f"s={cls.s.url}"})
        cls.a2 = cls.enclaves.start("a2", {"FEDERATION_PEERS": f"b={cls.b.url},s={cls.s.url}"})
        for server, peer in ((cls.s, "b"), (cls.a, "s"), (cls.a2, "b"), (cls.a2, "s")):
            wait_until(lambda: peer_ready(server, peer), what=f"peer {peer} Ready")

    @classmethod
    def tearDownClass(cls):
        cls.sim_b.stop()
        cls.enclaves.stop()

    def b_instances(self):
        return self.sim_b.instance_ids()[self.sp_b]

    def b_contracts(self, consumer):
        r = self.b.client.request("GET", f"{FED}/contracts?consumer={consumer}", None,
                                  headers={"Fed-Via": consumer})
        self.assertEqual(r.status, 200, r)
        return r.json()["contracts"]

    def test_1_s_re_advertises_bs_flavour_with_its_path(self):
        r = self.s.client.request("GET", f"{FED}/flavors?service_type=container", None,
                                  headers={"Fed-Via": "a"})
        self.assertEqual(r.status, 200, r)
        [flavor] = r.json()["flavors"]
        self.assertEqual((flavor["owner"], flavor["hops"], flavor["path"]), ("b", 2, ["s", "b"]))
        self.assertEqual(flavor["instances_available"], 2)

    def test_2_through_s_a_container_lands_on_b_and_renews_and_terminates_through_s(self):
        r = self.a.client.post(f"{API}/catalog-item-instances", container())
        self.assertEqual(r.status, 201, r)
        cii = r.json()
        self.assertEqual(cii["provider_name"], "peer:s")
        placement = self.a.client.get(f"{API}/resources/{cii['resource_id']}").json()["placement"]
        self.assertEqual(placement["peer"], "s")
        wait_until(lambda: len(self.b_instances()) == 1, timeout=20, what="b's SP instance")
        [contract] = self.b_contracts("s")
        self.assertEqual(contract["contract_id"], placement["contract_id"])
        self.assertEqual(self.b_instances(), {contract["remote_instance_id"]})
        reservation = contract["reservation_id"]
        # The same reservation id on a (its history), s (the relay decision) and b.
        a_steps = events_pages(self.a.client, f"{API}/events?subject={cii['resource_id']}")
        held = [e["data"]["reservation_id"] for e in a_steps
                if e["type"] == "dcm.reservation.held"]
        self.assertEqual(held, [reservation])
        relayed = events_pages(self.s.client, f"{API}/events?type=dcm.reservation.relayed")
        self.assertEqual([(e["data"]["reservation_id"], e["data"]["next_hop"],
                           e["data"]["consumer"]) for e in relayed], [(reservation, "b", "a")])
        s_log = log_text(self.s)
        self.assertRegex(s_log, r'msg="forwarded" method=POST target=/reservations peer=b via=a '
                                r'status=201')
        self.assertIn(f"target=/reservations/{reservation}:confirm peer=b via=a status=201", s_log)
        self.assertEqual(self.b_contracts("a"), [], "b's consumer is s, not a")

        # Renewals go through s: the lease outlives its first term.
        signed_at = time.monotonic()
        wait_until(lambda: f"/contracts/{contract['contract_id']}:renew" in log_text(self.s),
                   timeout=CONTRACT_TTL_S + 5, what="a renewal relayed by s")
        time.sleep(max(0.0, signed_at + CONTRACT_TTL_S + 1 - time.monotonic()))
        self.assertEqual([c["contract_id"] for c in self.b_contracts("s")],
                         [contract["contract_id"]])
        self.assertEqual(len(self.b_instances()), 1)

        r = self.a.client.request("DELETE", f"{API}/catalog-item-instances/{cii['id']}")
        self.assertIn(r.status, (200, 204), r)
        wait_until(lambda: self.b_instances() == set(), timeout=20, what="b's instance deleted")
        self.assertEqual(self.b_contracts("s"), [])
        self.assertIn(f'target=/contracts/{contract["contract_id"]} peer=b via=a status=200',
                      log_text(self.s))

    def test_3_with_two_routes_the_direct_one_wins_and_b_sees_one_hold(self):
        before = len(events_pages(self.s.client, f"{API}/events?type=dcm.reservation.relayed"))
        r = self.a2.client.post(f"{API}/catalog-item-instances", container())
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["provider_name"], "peer:b")
        held = [e for e in events_pages(self.b.client, f"{API}/events?type=dcm.reservation.held")
                if e["data"]["consumer"] in ("a2", "s") and not e["data"].get("repeat")]
        self.assertEqual([e["data"]["consumer"] for e in held].count("a2"), 1)
        after = len(events_pages(self.s.client, f"{API}/events?type=dcm.reservation.relayed"))
        self.assertEqual(after, before, "s relayed nothing for a2")
        self.assertEqual(len(self.b_contracts("a2")), 1)

    def test_4_projections_verify_match_on_every_enclave(self):
        for name, server in self.enclaves.servers.items():
            out = subprocess.run([DCM_BIN, "projections", "verify", "--data-dir",
                                  self.enclaves.dirs[name], "--kafka-brokers", server.bootstrap,
                                  "--no-progress", "--fetch-wait-max-ms", "10"],
                                 capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, name + ": " + out.stdout + out.stderr)
            self.assertNotIn("mismatch", out.stdout)


def held_port():
    """A loopback port bound (SO_REUSEADDR, not listening) and kept until the server that is told
    to listen on it does: concurrent tests cannot take it meanwhile."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock, sock.getsockname()[1]


class LoopTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Each enclave forwards and knows the next one (la -> ls -> lb -> la): the ports are
        # chosen first, so each can be told its peer's URL before that peer listens.
        cls.enclaves = Enclaves("fedloop")
        names, held = ("la", "ls", "lb"), {}
        for name in names:
            held[name] = held_port()
        url = {n: f"http://127.0.0.1:{held[n][1]}" for n in names}
        nxt = {"la": "ls", "ls": "lb", "lb": "la"}
        for name in names:
            cls.enclaves.dirs[name] = tempfile.mkdtemp(prefix=f"dcm-e2e-fedloop-{name}-")
            cls.enclaves.servers[name] = DevServer(
                extra=[*FAST, "--enclave-id", name, "--data-dir", cls.enclaves.dirs[name]],
                listen=f"127.0.0.1:{held[name][1]}",
                env={"FEDERATION_FORWARD": "true",
                     "FEDERATION_PEERS": f"{nxt[name]}={url[nxt[name]]}"})
            held[name][0].close()
        cls.la, cls.ls_, cls.lb = (cls.enclaves.servers[n] for n in names)
        for server, peer in ((cls.la, "ls"), (cls.ls_, "lb"), (cls.lb, "la")):
            wait_until(lambda: peer_ready(server, peer), what=f"peer {peer} Ready")

    @classmethod
    def tearDownClass(cls):
        cls.enclaves.stop()

    def test_a_loop_ends_within_the_deadline_each_enclave_handling_the_request_once(self):
        started = time.monotonic()
        r = self.la.client.post(f"{API}/catalog-item-instances", container())
        elapsed = time.monotonic() - started
        self.assertEqual(r.status, 422, r)
        self.assertEqual(r.json().get("reason", "no_provider"), "no_provider", r.json())
        self.assertLess(elapsed, 2.0 + 2.0, "FEDERATION_DISCOVERY_TIMEOUT is 2s")
        handled = {n: re.findall(r'msg="discovery handled" request_id=(\S+) via=(\S+)',
                                 log_text(self.enclaves.servers[n])) for n in ("la", "ls", "lb")}
        self.assertEqual(len(handled["ls"]), 1, handled)
        [(request_id, via_ls)] = handled["ls"]
        self.assertEqual(via_ls, "la")
        self.assertEqual(handled["lb"], [(request_id, "ls")], "lb handled it once, from ls")
        self.assertEqual(handled["la"], [], "la, already on the path, was never asked")


if __name__ == "__main__":
    main()
