"""The admin console (SPEC §9) in a real headless Chromium, driven with Debian's python3-selenium
and chromium-driver against real `dcm serve --dev` and `dcm sp-sim` processes.

`ConsoleTest` (authentication off): the providers page lists the simulated SPs and turns a
refused one Unavailable without a reload; Rehydrate on the instances page shows the new resource
and the old one, which the cleanup page lists (FAILED while its SP fails deletes, then Retry);
the time slider set before a rename shows the old name; a provider's page shows its health and
history; the event stream shows new events live. `ConsoleAuthTest` (a JWKS file): without a
token the console asks for one; a dcm-reader token sees the data and gets the clear 403 message
when it tries Rehydrate.

Every page is saved as a PNG in $DCM_ARTIFACTS_DIR (default <build>/artifacts/console/)."""

import http.client
import os
import shutil
import tempfile
import time
import unittest
from urllib.parse import urlparse

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from harness import API, DCM_BIN, DevServer, SpSim, main, provider_body, rfc3339_ms, wait_until
from pki import SigningKeys

ARTIFACTS = os.environ.get("DCM_ARTIFACTS_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(DCM_BIN))), "artifacts", "console")
# Unavailable after 2 refused probes 300 ms apart; cleanup every second, FAILED after 2 tries.
FAST = ["--health-check-interval", "300ms", "--health-check-timeout", "1s",
        "--health-check-base-backoff-interval", "300ms",
        "--health-check-max-backoff-interval", "600ms",
        "--health-check-max-consecutive-failures", "2",
        "--cleanup-interval", "1s", "--cleanup-max-retries", "2", "--sp-timeout", "3s"]


def start_browser():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="dcm-e2e-chromium-")
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1366,768", "--no-first-run", "--disable-extensions",
                "--password-store=basic", f"--user-data-dir={profile}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(20)
    return driver, profile


def streams(url, path):
    """Whether `path` answers a watch as server-sent events (else the console polls)."""
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", f"{API}{path}?watch=true", headers={"Accept": "text/event-stream"})
        return conn.getresponse().getheader("Content-Type", "").startswith("text/event-stream")
    finally:
        conn.close()


class ConsoleBase(unittest.TestCase):
    @classmethod
    def start_browser(cls):
        os.makedirs(ARTIFACTS, exist_ok=True)
        cls.driver, cls.profile = start_browser()

    @classmethod
    def stop_browser(cls):
        cls.driver.quit()
        shutil.rmtree(cls.profile, ignore_errors=True)

    def tearDown(self):
        # No script error and no Content-Security-Policy violation on any page.
        errors = [e["message"] for e in self.driver.get_log("browser")
                  if e["level"] == "SEVERE" and ("Uncaught" in e["message"] or
                                                 "Refused to" in e["message"])]
        self.assertEqual(errors, [])

    def open(self, hash_path):
        self.driver.get(f"{self.server.url}/ui/#{hash_path}")

    def until(self, predicate, timeout=15, what="condition"):
        def check(driver):
            try:
                return predicate(driver)
            except StaleElementReferenceException:
                return False
        return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(check, what)

    def click(self, find, what="element to click"):
        """Clicks what `find(driver)` returns, finding it again if a live update replaced it."""
        def attempt(driver):
            element = find(driver)
            if element is None:
                return False
            element.click()
            return True
        self.until(attempt, what=what)

    def css(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def text(self, selector):
        return " ".join(e.text for e in self.css(selector))

    def row(self, key):
        rows = self.css(f'tbody tr[data-key="{key}"]')
        return rows[0] if rows else None

    def row_text(self, key):
        row = self.row(key)
        return row.text if row else ""

    def screenshot(self, name):
        path = os.path.join(ARTIFACTS, f"{name}.png")
        self.assertTrue(self.driver.save_screenshot(path), path)

    def status(self):
        return self.driver.find_element(By.ID, "status").text


class ConsoleTest(ConsoleBase):
    @classmethod
    def setUpClass(cls):
        # One peer enclave that never answers (port 9: discard, closed): the peers page shows it.
        cls.server = DevServer(extra=[*FAST, "--enclave-id", "ui-enclave"],
                               env={"FEDERATION_PEERS": "far=http://127.0.0.1:9"})
        cls.c = cls.server.client
        cls.sim = SpSim(cls.server.url, 3, name_prefix="ui", service_types="vm")
        cls.pids = {n: p["id"] for n, p in cls.sim.wait_registered().items()}
        cls.live = "live" if streams(cls.server.url, "/providers") else "polling"
        cls.start_browser()

    @classmethod
    def tearDownClass(cls):
        cls.stop_browser()
        cls.sim.stop()
        cls.server.stop()

    def health(self, name):
        return self.c.get(f"{API}/providers/{self.pids[name]}").json()["health_status"]

    def all_ready(self):
        self.sim.set_fault(health="healthy", fail_creates=False, fail_deletes=False)
        wait_until(lambda: all(self.health(n) == "Ready" for n in self.pids), timeout=15,
                   what="every provider Ready")

    def test_providers_page_lists_the_sps_and_shows_a_refused_one_unavailable_live(self):
        self.all_ready()
        self.open("/providers")
        self.until(lambda d: all("Ready" in self.row_text(p) for p in self.pids.values()),
                   what="every simulated provider listed Ready")
        self.until(lambda d: all(n in self.row_text(p) for n, p in self.pids.items()),
                   what="each provider's name in its row")
        self.assertIn("Auth off", self.text("dcm-token-panel"))
        self.until(lambda d: self.css("dcm-live-indicator")[0].get_attribute("state") == self.live,
                   what=f"indicator {self.live}")
        self.screenshot("providers")

        self.driver.execute_script("window.__sameDocument = 42;")
        victim = sorted(self.pids)[0]
        self.sim.set_fault(victim, health="refuse")
        self.until(lambda d: "Unavailable" in self.row_text(self.pids[victim]), timeout=15,
                   what=f"{victim} Unavailable in the table")
        self.assertEqual(self.driver.execute_script("return window.__sameDocument;"), 42,
                         "the page was reloaded")
        self.until(lambda d: "tone-bad" in self.row(self.pids[victim]).find_element(
            By.CSS_SELECTOR, "dcm-badge").get_attribute("class"), what="a bad-tone badge")
        # The filter shows only that one.
        self.driver.find_element(By.CSS_SELECTOR, "#filter-health option[value=Unavailable]").click()
        self.until(lambda d: len(self.css("tbody tr")) == 1, what="one Unavailable row")
        self.screenshot("providers-unavailable-filtered")
        # Dark mode follows the system setting.
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        self.screenshot("providers-dark")
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        self.all_ready()

    def test_provider_page_shows_health_detail_and_a_history_that_grows_live(self):
        self.all_ready()
        name = sorted(self.pids)[-1]
        self.open("/providers")
        self.click(lambda d: d.find_element(By.LINK_TEXT, name), what="provider link")
        self.until(lambda d: d.current_url.endswith(f"#/providers/{self.pids[name]}"))
        self.until(lambda d: "Consecutive successes" in self.text(".provider-detail"),
                   what="health detail")
        self.until(lambda d: self.css('.timeline li[data-type="dcm.provider.registered"]'),
                   what="the registration in the timeline")
        self.assertIn(self.pids[name], self.text(".provider-detail"))
        # Its SP goes away: the page shows the transition, and the timeline gains it, unreloaded.
        self.sim.set_fault(name, health="refuse")
        self.until(lambda d: "Unavailable" in self.text("h1"), what="the heading's badge")
        self.until(lambda d: any("Unavailable" in e.text for e in self.css(
            '.timeline li[data-type="dcm.provider.health_changed"]')), what="the transition")
        self.assertIn("consecutive failures", self.text(".provider-detail"))
        self.screenshot("provider-detail")
        self.all_ready()

    def test_rehydrate_shows_the_new_and_old_resource_and_the_cleanup_queue_retries(self):
        self.all_ready()
        r = self.c.post(f"{API}/catalog-item-instances",
                        {"display_name": "console-demo", "spec": {"service_type": "vm", "cpu": 2}})
        self.assertEqual(r.status, 201, r)
        cid, old = r.json()["id"], r.json()["resource_id"]
        self.sim.set_fault(fail_deletes=True)  # the old resource's cleanup fails until Retry

        self.open("/instances")
        self.until(lambda d: old in self.row_text(cid), what="the instance row")
        self.click(lambda d: (r := self.row(cid)) and r.find_element(By.CSS_SELECTOR,
                                                                 "button.rehydrate"))
        result = self.until(lambda d: d.find_element(By.CSS_SELECTOR, "#rehydrate-result .new-resource"),
                            what="rehydration result")
        new = result.text
        current = self.c.get(f"{API}/catalog-item-instances/{cid}").json()
        self.assertEqual(new, current["resource_id"])
        self.assertNotEqual(new, old)
        self.assertEqual(self.text("#rehydrate-result .old-resource"), old)
        self.until(lambda d: new in self.row_text(cid), what="the row's new resource")
        self.screenshot("instances-rehydrated")

        self.driver.find_element(By.LINK_TEXT, "see the cleanup queue").click()
        self.until(lambda d: self.row(old) is not None, what="the old resource in the queue")
        self.until(lambda d: "FAILED" in self.row_text(old), timeout=15, what="FAILED record")
        self.screenshot("cleanup-failed")
        self.sim.set_fault(fail_deletes=False)
        self.click(lambda d: (r := self.row(old)) and r.find_element(By.CSS_SELECTOR,
                                                                 "button.retry"))
        self.until(lambda d: "PENDING again" in self.status(), what="retry confirmed")
        self.until(lambda d: self.row(old) is None, timeout=15, what="the record deleted")
        # Deleted on its SP; the new one is still held.
        self.assertTrue(any(old in p["deleted_ids"] for p in self.sim.providers().values()))
        self.assertTrue(any(new in ids for ids in self.sim.instance_ids().values()))

    def test_time_slider_before_a_rename_shows_the_old_name(self):
        r = self.c.post(f"{API}/providers", provider_body("console-old"))
        self.assertEqual(r.status, 201, r)
        pid, registered = r.json()["id"], r.json()["create_time"]
        time.sleep(2.2)
        r = self.c.request("PUT", f"{API}/providers/{pid}", provider_body("console-new"))
        self.assertEqual(r.status, 200, r)
        renamed = r.json()["update_time"]
        self.open("/providers")
        self.until(lambda d: "console-new" in self.row_text(pid), what="the renamed provider")
        slider = self.until(lambda d: (s := d.find_element(By.ID, "asof-range")).is_enabled() and s,
                            what="slider enabled")
        middle = (rfc3339_ms(registered) + rfc3339_ms(renamed)) // 2 // 1000 * 1000
        self.driver.execute_script(
            "arguments[0].value = arguments[1];"
            "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", slider, middle)
        self.until(lambda d: "console-old" in self.row_text(pid), what="the old name as of then")
        self.assertNotIn("console-new", self.text("tbody"))
        self.assertIn("Past state", self.text(".snapshot-banner"))
        self.assertNotEqual(self.text("#asof-output"), "Live")
        self.screenshot("providers-as-of")
        # The keyboard takes it back to live: End is the right end.
        slider.send_keys(Keys.END)
        self.until(lambda d: "console-new" in self.row_text(pid), what="live again")
        self.assertEqual(self.text("#asof-output"), "Live")
        self.assertFalse(self.css(".snapshot-banner")[0].is_displayed())
        self.c.request("DELETE", f"{API}/providers/{pid}")

    def test_event_stream_shows_new_events_with_the_type_filter(self):
        self.open("/events")
        self.driver.find_element(By.ID, "events-type").send_keys("dcm.provider.registered")
        self.driver.find_element(By.ID, "events-type").send_keys(Keys.ENTER)
        self.until(lambda d: "type=dcm.provider.registered" in d.current_url)
        time.sleep(0.5)  # the watch is open (or the first poll done)
        r = self.c.post(f"{API}/providers", provider_body("console-events"))
        self.assertEqual(r.status, 201, r)
        pid = r.json()["id"]
        self.until(lambda d: self.css(f'li.event[data-subject="{pid}"]'), timeout=10,
                   what="the registration in the stream")
        types = {e.get_attribute("data-type") for e in self.css("li.event")}
        self.assertEqual(types, {"dcm.provider.registered"})
        self.until(lambda d: self.css("dcm-live-indicator")[0].get_attribute("state") == self.live)
        self.screenshot("events")
        self.c.request("DELETE", f"{API}/providers/{pid}")

    def test_peers_page_lists_the_peer_enclaves_with_their_health(self):
        self.open("/peers")
        self.until(lambda d: "ui-enclave" in self.text(".enclave-id"), what="this enclave's id")
        self.until(lambda d: "Unavailable" in self.text("tr[data-peer=far]"),
                   what="the unreachable peer listed Unavailable")
        row = self.text("tr[data-peer=far]")
        self.assertIn("http://127.0.0.1:9", row)
        self.assertEqual(self.driver.find_element(By.CSS_SELECTOR, "nav a[aria-current=page]").text,
                         "Peers")


class ConsoleAuthTest(ConsoleBase):
    """Authentication on (a JWKS file): the console's files stay public, the data does not."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dcm-e2e-console-auth-")
        issuer = "https://idp.test/realms/dcm"
        cls.keys = SigningKeys(issuer)
        jwks = cls.keys.write_jwks(os.path.join(cls.dir, "jwks.json"))
        cls.server = DevServer(extra=FAST, env={"AUTH_JWKS_FILE": jwks, "AUTH_ISSUER_URL": issuer,
                                                "AUTH_JWT_AUDIENCE": "dcm"})
        cls.admin = cls.server.client.with_token(cls.keys.token("root", ["dcm-admin"]))
        cls.reader_token = cls.keys.token("auditor", ["dcm-reader"])
        cls.sim = SpSim(cls.server.url, 2, name_prefix="auth", service_types="vm",
                        extra=["--token", cls.keys.token("sim", ["dcm-provider"])])
        cls.pids = {n: p["id"] for n, p in cls.sim.wait_registered().items()}
        wait_until(lambda: all(cls.admin.get(f"{API}/providers/{p}").json()["health_status"] ==
                               "Ready" for p in cls.pids.values()), what="providers Ready")
        r = cls.admin.post(f"{API}/catalog-item-instances",
                           {"display_name": "guarded", "spec": {"service_type": "vm"}})
        assert r.status == 201, r
        cls.instance = r.json()
        cls.start_browser()

    @classmethod
    def tearDownClass(cls):
        cls.stop_browser()
        cls.admin.close()
        cls.sim.stop()
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_a_reader_sees_data_and_gets_a_clear_403_on_rehydrate(self):
        anon = self.server.client
        self.assertEqual(anon.get("/ui/").status, 200)  # the files are public…
        self.assertEqual(anon.get(f"{API}/providers").status, 401)  # …the data is not
        self.open("/providers")
        self.until(lambda d: "Not signed in / token rejected: paste a token" in self.status(),
                   what="the 401 message")
        self.until(lambda d: d.find_element(By.ID, "token-input").is_displayed())
        self.screenshot("auth-401")

        token_input = self.driver.find_element(By.ID, "token-input")
        token_input.send_keys("not-a-token", Keys.ENTER)
        self.until(lambda d: "token rejected" in self.status() and self.css("#token-input"),
                   what="a bad token rejected")
        self.driver.find_element(By.ID, "token-input").send_keys(self.reader_token, Keys.ENTER)
        self.until(lambda d: all(self.row(p) is not None for p in self.pids.values()),
                   what="providers listed with the reader token")
        self.assertIn("Signed in", self.text("dcm-token-panel"))

        self.driver.find_element(By.LINK_TEXT, "Instances").click()
        cid = self.instance["id"]
        self.until(lambda d: self.row(cid) is not None, what="the instance listed")
        # From the keyboard: the button is a real <button>, Enter presses it.
        self.until(lambda d: self.row(cid).find_element(
            By.CSS_SELECTOR, "button.rehydrate").send_keys(Keys.ENTER) or True,
            what="Enter on Rehydrate")
        message = "Your token's role cannot rehydrate (needs dcm-user or dcm-admin)"
        self.until(lambda d: message in self.text("#rehydrate-result"), what="the 403 message")
        self.screenshot("auth-403-rehydrate")
        after = self.admin.get(f"{API}/catalog-item-instances/{cid}").json()
        self.assertEqual(after["resource_id"], self.instance["resource_id"])


if __name__ == "__main__":
    main()
