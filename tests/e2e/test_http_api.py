"""The provider API from outside, as an SP and an admin use it (SPEC §3.1): the registration
conflict matrix with exact statuses and bodies, the bad-input table, lists, aliases and the
operations endpoints. One `dcm serve --dev` process for the whole file."""

import json
import socket
import unittest
import uuid

from harness import API, Client, DevServer, main, provider_body


class HttpApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer()
        cls.c = cls.server.client

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def name(self, base="sp"):
        return f"{base}-{uuid.uuid4().hex[:8]}"

    def register(self, body, id=None, path=API):
        q = f"?id={id}" if id else ""
        return self.c.post(f"{path}/providers{q}", body)

    def assertProblem(self, r, status, field=None):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.headers["content-type"], "application/problem+json", r)
        p = r.json()
        self.assertEqual(p["status"], status)
        for key in ("type", "title", "detail"):
            self.assertTrue(p[key], f"problem+json lacks {key}: {p}")
        if field is not None:
            fields = [e["field"] for e in p.get("errors", [])]
            self.assertIn(field, fields, p)
        return p

    # --- the registration conflict matrix -------------------------------------------------

    def test_new_name_is_created_with_201_location_and_generated_uuid(self):
        name = self.name()
        r = self.register(provider_body(name))
        self.assertEqual(r.status, 201, r)
        p = r.json()
        self.assertEqual(p["status"], "registered")
        self.assertEqual(p["name"], name)
        self.assertEqual(len(p["id"]), 36)
        self.assertEqual(r.headers["location"], f"{API}/providers/{p['id']}")
        self.assertEqual(p["path"], f"providers/{p['id']}")
        self.assertEqual(p["health_status"], "Pending")
        # read-your-writes: the reply came after the projection applied it
        self.assertEqual(self.c.get(f"{API}/providers/{p['id']}").status, 200)

    def test_same_name_without_id_or_with_same_id_is_200_updated_same_id(self):
        name = self.name()
        first = self.register(provider_body(name), id=name).json()
        again = self.register(provider_body(name, display_name="new"))
        self.assertEqual(again.status, 200, again)
        self.assertEqual(again.json()["status"], "updated")
        self.assertEqual(again.json()["id"], first["id"])
        self.assertEqual(again.json()["display_name"], "new")
        same = self.register(provider_body(name), id=name)
        self.assertEqual(same.status, 200, same)
        self.assertEqual(same.json()["id"], name)

    def test_same_name_with_different_id_is_409_naming_the_holder(self):
        name = self.name()
        holder = self.register(provider_body(name), id=name).json()
        r = self.register(provider_body(name), id=self.name("other"))
        p = self.assertProblem(r, 409)
        self.assertEqual(p["conflict"], {"id": holder["id"], "name": name})
        self.assertIn(holder["id"], p["detail"])

    def test_new_name_with_taken_id_is_409_naming_the_holder(self):
        holder_name = self.name()
        self.register(provider_body(holder_name), id=holder_name)
        r = self.register(provider_body(self.name()), id=holder_name)
        p = self.assertProblem(r, 409)
        self.assertEqual(p["conflict"], {"id": holder_name, "name": holder_name})

    def test_put_renames_to_a_free_name_and_409s_on_a_taken_one(self):
        a, b, free = self.name(), self.name(), self.name()
        pa = self.register(provider_body(a)).json()
        self.register(provider_body(b))
        taken = self.c.request("PUT", f"{API}/providers/{pa['id']}", provider_body(b))
        self.assertEqual(self.assertProblem(taken, 409)["conflict"]["name"], b)
        ok = self.c.request("PUT", f"{API}/providers/{pa['id']}", provider_body(free))
        self.assertEqual(ok.status, 200, ok)
        self.assertEqual(ok.json()["name"], free)
        self.assertEqual(ok.json()["id"], pa["id"])
        # the old name is free again
        self.assertEqual(self.register(provider_body(a)).status, 201)
        self.assertProblem(self.c.request("PUT", f"{API}/providers/no-such-id", provider_body(a)), 404)

    def test_change_id_to_a_free_id_and_409_on_a_taken_one(self):
        a, b = self.name(), self.name()
        self.register(provider_body(a), id=a)
        self.register(provider_body(b), id=b)
        taken = self.c.post(f"{API}/providers/{a}:changeId", {"new_id": b})
        self.assertEqual(self.assertProblem(taken, 409)["conflict"], {"id": b, "name": b})
        new_id = self.name("moved")
        ok = self.c.post(f"{API}/providers/{a}:changeId", {"new_id": new_id})
        self.assertEqual(ok.status, 200, ok)
        self.assertEqual(ok.json()["id"], new_id)
        self.assertEqual(ok.json()["name"], a)
        self.assertEqual(self.c.get(f"{API}/providers/{a}").status, 404)
        self.assertEqual(self.c.get(f"{API}/providers/{new_id}").status, 200)

    def test_delete_then_reregister(self):
        name = self.name()
        p = self.register(provider_body(name), id=name).json()
        r = self.c.request("DELETE", f"{API}/providers/{p['id']}")
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.c.get(f"{API}/providers/{p['id']}").status, 404)
        self.assertProblem(self.c.request("DELETE", f"{API}/providers/{p['id']}"), 404)
        again = self.register(provider_body(name))
        self.assertEqual(again.status, 201, again)
        self.assertNotEqual(again.json()["id"], p["id"])

    # --- bad input -----------------------------------------------------------------------------

    def test_bad_input_table_gets_4xx_problem_naming_the_field(self):
        ok = provider_body(self.name())
        without = lambda k: {x: v for x, v in ok.items() if x != k}
        cases = [
            ("missing name", without("name"), 400, "name"),
            ("missing endpoint", without("endpoint"), 400, "endpoint"),
            ("missing service_type", without("service_type"), 400, "service_type"),
            ("name not a string", {**ok, "name": 7}, 400, "name"),
            ("endpoint not a string", {**ok, "endpoint": ["x"]}, 400, "endpoint"),
            ("metadata not an object", {**ok, "metadata": "x"}, 400, "metadata"),
            ("operations not an array", {**ok, "operations": "create"}, 400, "operations"),
            ("relative endpoint", {**ok, "endpoint": "/api/vm"}, 400, "endpoint"),
            ("ftp endpoint", {**ok, "endpoint": "ftp://host/x"}, 400, "endpoint"),
            ("endpoint without host", {**ok, "endpoint": "http:///x"}, 400, "endpoint"),
            ("endpoint over 2048", {**ok, "endpoint": "http://h/" + "a" * 2050}, 400, "endpoint"),
            ("unknown service type", {**ok, "service_type": "teapot"}, 400, "service_type"),
            ("bad name", {**ok, "name": "-bad-"}, 400, "name"),
            ("bad schema_version", {**ok, "schema_version": "1.0"}, 400, "schema_version"),
            ("body not an object", [1, 2], 400, "body"),
        ]
        for label, body, status, field in cases:
            with self.subTest(label):
                self.assertProblem(self.register(body), status, field)
        raw_cases = [
            ("malformed JSON", b'{"name": ', {}, 400, "body"),
            ("invalid UTF-8", b'{"name":"\xff\xfe","endpoint":"http://h/","service_type":"vm"}', {}, 400, "body"),
            ("nesting 100k deep", b"[" * 100000 + b"]" * 100000, {}, 400, "body"),
            ("wrong content type", b"name=x", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "content-type"),
            ("body over 1 MiB", b'{"metadata":"' + b"a" * (1 << 20) + b'"}', {}, 413, None),
        ]
        for label, body, headers, status, field in raw_cases:
            with self.subTest(label):
                headers = {"Content-Type": "application/json", **headers}
                r = self.c.request("POST", f"{API}/providers", body, headers=headers, raw=True)
                self.assertProblem(r, status, field)
        self.assertProblem(self.register(ok, id="UPPER_case"), 400, "id")
        # The server is still healthy and serving after all of that.
        fresh = Client(self.server.url)
        self.assertEqual(fresh.get("/healthz").status, 200)
        r = self.register(provider_body(self.name()))
        self.assertEqual(r.status, 201, r)

    def test_unknown_fields_are_ignored_and_not_stored(self):
        r = self.register({**provider_body(self.name()), "colour": "blue", "id": "ignored-id"})
        self.assertEqual(r.status, 201, r)
        self.assertNotIn("colour", r.json())
        self.assertNotEqual(r.json()["id"], "ignored-id")

    def test_camel_case_input_and_v1_alias(self):
        name = self.name()
        r = self.c.post("/api/v1/providers", {"name": name, "endpoint": "http://h:1/x",
                                              "serviceType": "container", "displayName": "Nice"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.json()["service_type"], "container")
        self.assertEqual(r.json()["display_name"], "Nice")
        self.assertEqual(self.c.get(f"/api/v1/providers/{r.json()['id']}").status, 200)

    # --- reads --------------------------------------------------------------------------------

    def test_list_filters_by_type_and_paginates(self):
        kind = "storage"
        names = sorted(self.name("pg") for _ in range(5))
        for n in names:
            self.assertEqual(self.register(provider_body(n, service_type=kind)).status, 201)
        seen, token, pages = [], None, 0
        while True:
            q = f"?type={kind}&max_page_size=2" + (f"&page_token={token}" if token else "")
            page = self.c.get(f"{API}/providers{q}").json()
            pages += 1
            self.assertLessEqual(len(page["providers"]), 2)
            seen += [p["name"] for p in page["providers"]]
            token = page.get("next_page_token")
            if not token:
                break
        self.assertEqual(sorted(seen), names)
        self.assertGreaterEqual(pages, 3)
        self.assertProblem(self.c.get(f"{API}/providers?max_page_size=0"), 400, "max_page_size")
        self.assertProblem(self.c.get(f"{API}/providers?max_page_size=101"), 400, "max_page_size")
        self.assertProblem(self.c.get(f"{API}/providers?page_token=zz"), 400, "page_token")
        self.assertProblem(self.c.get(f"{API}/providers?health_status=sleepy"), 400, "health_status")
        pending = self.c.get(f"{API}/providers?health_status=pending&type={kind}").json()
        self.assertEqual(len(pending["providers"]), 5)
        self.assertEqual(self.c.get(f"{API}/providers?health_status=Ready&type={kind}").json()["providers"], [])

    def test_service_types_and_unknown_routes(self):
        r = self.c.get(f"{API}/service-types")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json()["service_types"],
                         ["vm", "container", "database", "cluster", "storage", "network"])
        self.assertProblem(self.c.get(f"{API}/nope"), 404)
        self.assertProblem(self.c.get(f"{API}/providers/{uuid.uuid4()}"), 404)
        r = self.c.request("PATCH", f"{API}/providers")
        self.assertProblem(r, 405)
        self.assertIn("POST", r.headers["allow"])

    def test_operations_endpoints(self):
        self.assertEqual(self.c.get("/healthz").status, 200)
        ready = self.c.get("/readyz")
        self.assertEqual(ready.status, 200)
        self.assertEqual(ready.json()["status"], "ready")
        info = self.c.get("/admin/info").json()
        self.assertEqual(info["kafka_bootstrap_servers"], self.server.bootstrap)
        self.assertTrue(info["dev_mode"])
        self.assertIn("in memory", info["events_storage"])
        self.assertIn("dcm.provider-requests", info["topics"])
        self.assertIn("registrar", info["components"])
        self.register(provider_body(self.name()))
        metrics = self.c.get("/metrics")
        self.assertTrue(metrics.headers["content-type"].startswith("text/plain"))
        text = metrics.body.decode()
        for family in ("dcm_http_requests_total", "dcm_consumer_lag",
                       "dcm_events_applied_total", "dcm_http_request_duration_seconds_bucket"):
            self.assertIn(family, text)

    def test_slow_and_idle_clients_do_not_block_others(self):
        socks = []
        for _ in range(20):  # idle and half-sent requests
            s = socket.create_connection((self.c.host, self.c.port))
            s.sendall(b"POST /api/v1alpha1/providers HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            socks.append(s)
        try:
            fresh = Client(self.server.url, timeout=5)
            self.assertEqual(fresh.get("/healthz").status, 200)
        finally:
            for s in socks:
                s.close()


if __name__ == "__main__":
    main()
