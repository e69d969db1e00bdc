"""Local faults from outside (SPEC §7, issue #13): a full disk under `--data-dir` and a corrupt
table file. Neither dead-letters a valid event; /readyz names the store; the process keeps
serving reads; a full disk recovers by itself once space is freed, a corrupt store after
`dcm projections rebuild`.

The disk-full test mounts a small tmpfs, so it needs root (CI runs as root); without it the test
is skipped and says why."""

import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

from harness import API, DCM_BIN, Client, Cluster, kafka_events, main, provider_body, wait_until

RESERVE_MB = 24


def readyz(client):
    r = client.get("/readyz")
    return r.status, (r.json() or {}).get("checks", {})


def register(client, name):
    return client.post(f"{API}/providers", provider_body(name))


class DiskFullTest(unittest.TestCase):

    def setUp(self):
        self.mount = tempfile.mkdtemp(prefix="dcm-e2e-tmpfs-")
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", self.mount],
                             capture_output=True, text=True)
        if out.returncode != 0:
            os.rmdir(self.mount)
            self.skipTest(f"cannot mount a tmpfs (needs root): {out.stderr.strip()}")
        self.cluster = Cluster(partitions=2)

    def tearDown(self):
        self.cluster.close()
        subprocess.run(["umount", "-l", self.mount], capture_output=True)
        os.rmdir(self.mount)

    def test_a_full_disk_pauses_writes_dead_letters_nothing_and_recovers_when_space_is_freed(self):
        server = self.cluster.serve(data_dir=os.path.join(self.mount, "data"),
                                    extra=["--min-free-disk-mb", str(RESERVE_MB)])
        c = server.client
        before = [f"df-before-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
        ids = {}
        for name in before:
            r = register(c, name)
            self.assertEqual(r.status, 201, r)
            ids[name] = r.json()["id"]

        # Leave less than the reserve free: the next write is refused before RocksDB sees it.
        filler = os.path.join(self.mount, "filler")
        free = shutil.disk_usage(self.mount).free
        subprocess.run(["fallocate", "-l", str(free - (RESERVE_MB - 8) * 2**20), filler],
                       check=True)
        time.sleep(0.5)  # past the store's free-space reading interval (100 ms)
        during = f"df-during-{uuid.uuid4().hex[:6]}"
        answer = {}
        writer = threading.Thread(
            target=lambda: answer.update(r=register(Client(server.url, timeout=60), during)))
        writer.start()
        # The registrar may go unready first (its own write fails): wait for the store's check.
        status, checks = wait_until(
            lambda: (lambda s: s if s[1].get("store") == "not ready" else None)(readyz(c)),
            timeout=15, what="/readyz: store not ready")
        self.assertEqual(status, 503, checks)
        # Reads keep working.
        self.assertEqual(c.get(f"{API}/providers/{ids[before[0]]}").status, 200)
        self.assertTrue(writer.is_alive(), f"answered while the disk was full: {answer}")

        os.remove(filler)
        writer.join(60)
        self.assertIn(answer["r"].status, (201, 503), answer["r"])
        wait_until(lambda: readyz(c)[0] == 200, timeout=20, what="/readyz 200 after space freed")
        after = f"df-after-{uuid.uuid4().hex[:6]}"
        self.assertEqual(register(c, after).status, 201)
        # A 503 answered during the outage may still land: the request was in Kafka.
        names = [p["name"] for p in server.providers()]
        for name in before + [during, after]:
            self.assertEqual(names.count(name), 1, name)
        self.assertEqual(
            kafka_events(self.cluster.bootstrap, self.cluster.prefix + "dead-letter"), [])


class CorruptStoreTest(unittest.TestCase):

    def setUp(self):
        self.cluster = Cluster(partitions=2)
        self.dir = tempfile.mkdtemp(prefix="dcm-e2e-corrupt-")

    def tearDown(self):
        self.cluster.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_corrupt_table_file_is_named_by_readyz_and_a_rebuild_repairs_it(self):
        data = os.path.join(self.dir, "data")
        server = self.cluster.serve(data_dir=data)
        names = [f"cs-{i}-{uuid.uuid4().hex[:6]}" for i in range(150)]
        for name in names:
            self.assertEqual(register(server.client, name).status, 201)
        server.stop()
        # A restart replays the WAL into a table file; stop again before corrupting it.
        server = self.cluster.serve(data_dir=data, name="serve-2")
        server.stop()
        state = os.path.join(data, "state")
        tables = sorted(f for f in os.listdir(state) if f.endswith(".sst"))
        self.assertTrue(tables, os.listdir(state))
        table = os.path.join(state, tables[-1])
        with open(table, "r+b") as f:
            at = os.path.getsize(table) * 2 // 5  # a data block, past the offsets' first block
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 0x5A]))

        server = self.cluster.serve(data_dir=data, name="serve-3")
        c = server.client
        # Reading every key meets the corrupt block: a storage error, never a crash.
        digests = [p["digest"] for p in c.get("/admin/projections").json()["projections"]]
        self.assertTrue(any(d.startswith("error: rocksdb: Corruption") for d in digests), digests)
        status, checks = readyz(c)
        self.assertEqual(status, 503)
        self.assertEqual(checks.get("store"), "not ready", checks)
        self.assertEqual(c.get("/healthz").status, 200)  # the process keeps serving
        server.stop()

        out = os.path.join(self.dir, "rebuilt")
        rebuilt = subprocess.run(
            [DCM_BIN, "projections", "rebuild", "--data-dir", data, "--out", out,
             "--kafka-brokers", self.cluster.bootstrap, "--topic-prefix", self.cluster.prefix],
            capture_output=True, text=True, timeout=120)
        # Exit 1: the corrupt projection differs from its rebuild (it cannot even be read).
        self.assertEqual(rebuilt.returncode, 1, rebuilt.stdout[-1500:] + rebuilt.stderr[-1500:])
        self.assertIn("live=unreadable (rocksdb: Corruption", rebuilt.stdout)
        self.assertIn("rebuilt store kept at", rebuilt.stdout)
        shutil.move(state, os.path.join(self.dir, "corrupt-state"))
        shutil.move(out, state)
        server = self.cluster.serve(data_dir=data, name="serve-4")
        self.assertEqual(readyz(server.client)[0], 200)
        self.assertEqual(server.client.get("/admin/projections").status, 200)
        listed = [p["name"] for p in server.providers()]
        for name in names:
            self.assertEqual(listed.count(name), 1, name)


if __name__ == "__main__":
    main()
