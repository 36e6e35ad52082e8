"""The operators' console (`/admin/`) in headless Chromium against `gatehouse demo`, whose
operator is octocat: the pages an operator uses, what a non-operator and a stale sign-in get,
and the console at a phone's width. Screenshots of every page land beside the demo page's."""

import base64
import json
import sys
import time
import urllib.error
import urllib.request

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC

from test_demo_page import ROOT, page, start_demo  # noqa: F401  (pytest fixtures)

sys.path.insert(0, str(ROOT / "Tests" / "Benchmarks"))
import bench  # noqa: E402  (the plain-HTTP sign-in helper)


def emulator_url(demo):
    demo.output.seek(0)
    return next(line.removeprefix("Emulator at ").strip() for line in demo.output.read().splitlines() if line.startswith("Emulator at "))


def get(url, headers=None):
    """(status, body) of a plain GET."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def claims(id_token):
    payload = id_token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def sign_in_on_demo_page(page, demo, hint):
    page.open(demo.url)
    page.signed_out()
    page.sign_in("github.com", hint)
    page.signed_in()


def open_console_with_the_keyboard(page, demo):
    """On the entry page, Tab to "Open the console" and press Enter."""
    page.open(demo.url + "/admin/")
    page.wait.until(EC.presence_of_element_located((By.ID, "open-console")))
    body = page.driver.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    for _ in range(15):
        if page.driver.switch_to.active_element.get_attribute("id") == "open-console":
            break
        page.driver.switch_to.active_element.send_keys(Keys.TAB)
    assert page.driver.switch_to.active_element.get_attribute("id") == "open-console"
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    page.wait.until(EC.title_contains("Users"))


def notice(page, expected):
    return page.wait_text("notice", expected)


def fits(page, width):
    """Whether nothing on the page is wider than the window (tables scroll in their own box)."""
    return page.driver.execute_script("return document.documentElement.scrollWidth") <= width


def test_an_operator_finds_a_user_revokes_disables_edits_claims_creates_a_key_and_redelivers(start_demo, page):
    demo = start_demo()
    port = int(demo.url.rsplit(":", 1)[1])
    # Sam signs in and walks away: the session stays live, the cookie is kept for later.
    sign_in_on_demo_page(page, demo, "sam-shared")
    sam_cookie = page.driver.get_cookie("gatehouse-session")["value"]
    assert get(demo.url + "/v1/me", {"Cookie": f"gatehouse-session={sam_cookie}"})[0] == 200
    page.driver.delete_all_cookies()

    sign_in_on_demo_page(page, demo, "octocat")
    open_console_with_the_keyboard(page, demo)
    assert not page.present("next"), "two accounts: one page"
    page.shot("users")

    # Find Sam by email.
    search = page.driver.find_element(By.ID, "query")
    search.send_keys("sam.shared@example.com")
    page.click("search")
    # The search's own page, loaded (links of the page before would go stale under our hands).
    page.wait.until(lambda driver: "query=" in driver.current_url and driver.execute_script("return document.readyState") == "complete")
    link = page.wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "a[id^='user-']")))
    assert len(page.driver.find_elements(By.CSS_SELECTOR, "a[id^='user-']")) == 1
    uid = link.get_attribute("id").removeprefix("user-")
    link.click()
    page.wait.until(EC.title_contains("Sam Shared"))
    providers = page.driver.find_element(By.ID, "providers").find_element(By.XPATH, "..").text
    assert "github.com" in providers and "user:email" in providers
    revoke = page.driver.find_elements(By.CSS_SELECTOR, "button[id^='revoke-']")
    assert len(revoke) == 1
    page.shot("user")

    # Revoke Sam's session: its cookie no longer opens /v1/me.
    revoke[0].click()
    notice(page, "The session has ended.")
    assert get(demo.url + "/v1/me", {"Cookie": f"gatehouse-session={sam_cookie}"})[0] == 401

    # The sample app's webhook receiver fails once: the next event waits for delivery.
    fault = json.dumps({"endpoint": "POST /sample-app/webhooks", "status": 500, "times": 1}).encode()
    urllib.request.urlopen(urllib.request.Request(emulator_url(demo) + "/_emulator/faults", data=fault, method="POST",
                                                  headers={"Content-Type": "application/json"}), timeout=10).read()

    page.click("disable")
    notice(page, "The account is disabled")
    assert "disabled" in page.text("state")
    page.click("enable")
    notice(page, "The account is enabled.")
    assert page.text("state") == "active"

    editor = page.driver.find_element(By.ID, "claims-json")
    editor.clear()
    editor.send_keys('{"plan": "pro"}')
    page.click("save-claims")
    notice(page, "The custom claims are saved")
    page.shot("claims-saved")
    # Sam's next ID token carries them.
    _, id_token, sam_uid = bench.sign_in(port, demo.url + "/", hint=("login", "sam-shared"))
    assert sam_uid == uid and claims(id_token)["plan"] == "pro"

    # The failed delivery: listed as waiting, redelivered from the console, then delivered.
    page.open(demo.url + "/admin/webhooks")
    redeliver = page.wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "button[id^='redeliver-']")))
    page.shot("webhooks")
    redeliver.click()
    notice(page, "The event is due again now.")
    for _ in range(100):
        page.open(demo.url + "/admin/webhooks")
        if page.present("none-pending"):
            break
        time.sleep(0.2)
    assert page.present("none-pending"), "the redelivered event was delivered"

    # A service key: its secret once.
    page.open(demo.url + "/admin/keys")
    page.driver.find_element(By.ID, "key-name").send_keys("billing")
    page.click("scope-profile:read")
    page.click("create-key")
    secret = page.text("secret-value")
    assert secret.startswith("ghsk_")
    page.shot("key-created")
    status, _ = get(demo.url + f"/v1/users/{uid}", {"Authorization": f"Bearer {secret}"})
    assert status == 200
    page.open(demo.url + "/admin/keys")
    assert "billing" in page.driver.page_source and secret not in page.driver.page_source

    page.open(demo.url + "/admin/activity")
    page.wait.until(lambda driver: "account.claims-updated" in driver.page_source or driver.refresh())
    page.shot("activity")

    # A phone's width (emulated: a desktop window does not shrink below 500 px): every page
    # fits, the tables scroll inside their own box.
    page.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 360, "height": 900, "deviceScaleFactor": 1, "mobile": True})
    for path, name in [("/admin/users", "users-360"), (f"/admin/users/{uid}", "user-360"), ("/admin/keys", "keys-360")]:
        page.open(demo.url + path)
        assert fits(page, 360), path
        page.shot(name)


def test_a_non_operator_is_refused_everywhere(start_demo, page):
    demo = start_demo()
    sign_in_on_demo_page(page, demo, "sam-shared")
    for path in ["/admin/", "/admin/users", "/admin/users?query=octocat%40github.com", "/admin/keys", "/admin/webhooks", "/admin/activity"]:
        page.open(demo.url + path)
        assert "Not an operator" in page.text("main")
        assert "The Octocat" not in page.driver.page_source
    page.shot("not-an-operator")


def test_a_stale_sign_in_is_asked_to_sign_in_again_before_a_destructive_change(start_demo, page):
    # A short window, so that it runs out without an injected clock; long enough for the
    # console to be opened within it (it opens only within the window of a sign-in) on a
    # loaded machine.
    window = 30
    demo = start_demo(GATEHOUSE_RECENT_LOGIN_SECONDS=str(window))
    sign_in_on_demo_page(page, demo, "octocat")
    signed_in = time.monotonic()  # after the sign-in: its window ends before this one's
    open_console_with_the_keyboard(page, demo)
    page.driver.find_element(By.CSS_SELECTOR, "a[id^='user-']").click()
    page.wait.until(EC.element_to_be_clickable((By.ID, "disable")))
    time.sleep(max(0, signed_in + window + 0.5 - time.monotonic()))
    page.click("disable")
    text = page.text("main")
    assert "requires-recent-login" in text and "Sign in again with github.com" in text
    page.shot("sign-in-again")
    page.driver.back()
    page.driver.refresh()
    assert page.text("state") == "active", "nothing changed"
