"""The demo page, driven in headless Chromium through the provider emulator's HTML pickers.

Each test starts its own `gatehouse demo` (SQLite in a temporary folder, built-in emulator),
clicks through the page as a person would, asserts what the page shows and saves a screenshot
of every step under $GATEHOUSE_SCREENSHOTS (default: ci-artifacts/screenshots).
"""

import base64
import hashlib
import http.cookiejar
import json
import os
import pathlib
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

ROOT = pathlib.Path(__file__).resolve().parents[2]
GATEHOUSE = os.environ.get("GATEHOUSE_BIN", str(ROOT / ".build" / "debug" / "gatehouse"))
SCREENSHOTS = pathlib.Path(os.environ.get("GATEHOUSE_SCREENSHOTS", str(ROOT / "ci-artifacts" / "screenshots")))
WAIT_SECONDS = 20


def navigation_race(error):
    """Whether `error` is Chromium's answer to a command that met a navigation in flight
    (a redirect chain is still running): the page is not there yet, so the wait goes on."""
    return isinstance(error, StaleElementReferenceException) or (
        isinstance(error, WebDriverException)
        and ("aborted by navigation" in str(error) or "target navigated or closed" in str(error)))


class NavigationTolerantWait(WebDriverWait):
    """A `WebDriverWait` that polls again, instead of failing, when a condition meets a
    navigation: after a click that starts a redirect chain, the next page's element is looked
    for while Chromium is still between pages. Any other error still fails at once."""

    def until(self, method, message=""):
        def tolerant(driver):
            try:
                return method(driver)
            except WebDriverException as error:
                if navigation_race(error):
                    return False
                raise

        return super().until(tolerant, message)


class Demo:
    """A `gatehouse demo` process on free loopback ports, stopped when the test ends."""

    def __init__(self, environment):
        self.folder = tempfile.TemporaryDirectory(prefix="gatehouse-browser-")
        self.output = open(os.path.join(self.folder.name, "demo.out"), "w+")
        self.errors = open(os.path.join(self.folder.name, "demo.err"), "w+")
        self.process = subprocess.Popen(
            [GATEHOUSE, "demo", "--port", "0", "--emulator-port", "0", "--data-dir", self.folder.name],
            stdout=self.output, stderr=self.errors, env={**os.environ, **environment})
        self.url = None
        for _ in range(600):  # at most 60 s
            self.output.seek(0)
            for line in self.output.read().splitlines():
                if line.startswith("Gatehouse ready at "):
                    self.url = line.removeprefix("Gatehouse ready at ").strip()
            if self.url or self.process.poll() is not None:
                break
            time.sleep(0.1)
        if not self.url:
            self.stop()
            self.errors.seek(0)
            raise RuntimeError("gatehouse demo did not start: " + self.errors.read()[-2000:])

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.output.close()
        self.errors.close()
        self.folder.cleanup()


@pytest.fixture
def start_demo():
    demos = []

    def start(**environment):
        demo = Demo(environment)
        demos.append(demo)
        return demo

    yield start
    for demo in demos:
        demo.stop()


@pytest.fixture
def page(request):
    options = Options()
    options.binary_location = os.environ.get("GATEHOUSE_CHROMIUM", "/usr/bin/chromium")
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,1100"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        options=options, service=Service(os.environ.get("GATEHOUSE_CHROMEDRIVER", "/usr/bin/chromedriver")))
    driver.set_page_load_timeout(WAIT_SECONDS)
    yield Page(driver, request.node.name)
    try:
        # The page's own script must never throw, whatever the test did.
        exceptions = [entry["message"] for entry in driver.get_log("browser") if "Uncaught" in entry["message"]]
        assert exceptions == [], exceptions
    finally:
        driver.quit()


class Page:
    """The demo page in one browser, with the steps a person takes."""

    def __init__(self, driver, test_name):
        self.driver = driver
        self.wait = NavigationTolerantWait(driver, WAIT_SECONDS)
        self.folder = SCREENSHOTS / test_name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.shots = 0

    def open(self, url):
        self.driver.get(url)

    def shot(self, name):
        self.shots += 1
        path = self.folder / f"{self.shots:02d}-{name}.png"
        assert self.driver.save_screenshot(str(path)), f"no screenshot at {path}"

    def click(self, element_id):
        """Clicks the element once it is clickable. An element that went stale before the click
        (its page was replaced) is looked for again; a click answered "aborted by navigation"
        started the navigation it was meant to, so it is not repeated."""
        clickable = EC.element_to_be_clickable((By.ID, element_id))

        def clicked(driver):
            element = clickable(driver)
            if not element:
                return False
            try:
                element.click()
            except StaleElementReferenceException:
                return False
            except WebDriverException as error:
                if not navigation_race(error):
                    raise
            return True

        self.wait.until(clicked)

    def pick(self, hint):
        """On the emulator's account picker, chooses the seeded user `hint`."""
        self.click("user-" + hint)

    def text(self, element_id):
        return self.wait.until(EC.visibility_of_element_located((By.ID, element_id))).text

    def wait_text(self, element_id, expected):
        """Waits until the visible element holds `expected`, then returns its text."""
        self.wait.until(EC.text_to_be_present_in_element((By.ID, element_id), expected))
        return self.text(element_id)

    def present(self, element_id):
        return len(self.driver.find_elements(By.ID, element_id)) > 0

    def linked(self):
        return sorted(item.get_attribute("id").removeprefix("linked-")
                      for item in self.driver.find_elements(By.CSS_SELECTOR, "#linked li"))

    def signed_in(self):
        self.wait.until(EC.visibility_of_element_located((By.ID, "signed-in")))

    def signed_out(self):
        self.wait.until(EC.visibility_of_element_located((By.ID, "signed-out")))

    def photo_loaded(self):
        self.wait.until(lambda driver: driver.execute_script(
            "const img = document.getElementById('photo'); return img.complete && img.naturalWidth > 0;"))

    def sign_in(self, provider, hint):
        self.click("signin-" + provider)
        self.pick(hint)


def test_sign_in_link_through_account_exists_unlink_sign_out_and_delete(start_demo, page):
    demo = start_demo()
    page.open(demo.url)
    page.signed_out()
    for provider in ["github.com", "microsoft.com", "oidc.emulator", "yahoo.com"]:
        assert page.present("signin-" + provider)
    page.shot("signed-out")

    # First sign-in creates the account; the profile card shows the unified profile and photo.
    page.sign_in("github.com", "sam-shared")
    page.signed_in()
    assert "Your account was created" in page.text("notice")
    assert page.text("name") == "Sam Shared"
    assert page.text("email") == "sam.shared@example.com (verified)"
    uid = page.text("uid")
    assert page.linked() == ["github.com"]
    page.photo_loaded()
    page.shot("signed-in-github")

    page.click("signout")
    page.signed_out()
    assert page.text("notice") == "Signed out."

    # The same verified email at another provider: no second account, the page explains.
    page.sign_in("oidc.emulator", "sam@oidc.example")
    notice = page.wait_text("notice", "An account already uses")
    assert "Sam.Shared@Example.com" in notice and "OpenID Connect will be linked" in notice
    page.signed_out()
    page.shot("account-exists-with-different-credential")

    # Signing in with the existing method links the parked credential.
    page.sign_in("github.com", "sam-shared")
    page.wait_text("notice", "OpenID Connect is now linked to your account")
    page.signed_in()
    assert page.text("uid") == uid
    assert page.linked() == ["github.com", "oidc.emulator"]
    page.shot("pending-credential-linked")

    # Link a third provider from the signed-in page.
    page.click("link-microsoft.com")
    page.pick("AdeleV@contoso.example")
    page.wait_text("notice", "Microsoft is now linked to your account")
    assert page.linked() == ["github.com", "microsoft.com", "oidc.emulator"]
    page.shot("microsoft-linked")

    page.click("unlink-microsoft.com")
    page.wait_text("notice", "Microsoft was unlinked")
    assert page.linked() == ["github.com", "oidc.emulator"]
    assert not page.present("unlink-microsoft.com") and page.present("link-microsoft.com")
    page.shot("microsoft-unlinked")

    # The linked OpenID Connect identity now signs in to the same account.
    page.click("signout")
    page.signed_out()
    page.sign_in("oidc.emulator", "sam@oidc.example")
    page.wait_text("notice", "Welcome back")
    assert page.text("uid") == uid
    page.shot("signed-in-with-linked-provider")

    page.click("delete")
    page.driver.switch_to.alert.accept()
    page.wait_text("notice", "Your account was deleted")
    page.signed_out()
    page.shot("account-deleted")

    # The deleted account is gone: the same person starts a new one.
    page.sign_in("github.com", "sam-shared")
    page.wait_text("notice", "Your account was created")
    assert page.text("uid") != uid


def test_link_and_unlink_after_the_recent_login_window_ask_to_reauthenticate_then_resume(start_demo, page):
    # The demo runs in its own process: the window passes in real time (20 s, slept past; long
    # enough for the page loads between a re-authentication and the step it resumes on a loaded
    # machine).
    demo = start_demo(GATEHOUSE_RECENT_LOGIN_SECONDS="20")
    page.open(demo.url)
    page.sign_in("github.com", "octocat")
    page.signed_in()
    time.sleep(21)  # past the 20 s window

    # Adding a sign-in method is sensitive too: the page asks to confirm, then links.
    page.click("link-oidc.emulator")
    page.wait_text("notice", "confirm it is you before adding OpenID Connect")
    assert page.linked() == ["github.com"]
    page.shot("link-requires-recent-login")
    page.click("reauth-github.com")
    page.pick("octocat")
    page.pick("olive@oidc.example")
    page.wait_text("notice", "OpenID Connect is now linked")
    assert page.linked() == ["github.com", "oidc.emulator"]
    page.shot("linked-after-reauthentication")
    time.sleep(21)  # past the window again

    page.click("unlink-oidc.emulator")
    page.wait_text("notice", "confirm it is you")
    assert page.linked() == ["github.com", "oidc.emulator"]
    page.shot("requires-recent-login")

    # Re-authenticating with a linked method finishes the unlink it interrupted.
    page.click("reauth-github.com")
    page.pick("octocat")
    page.wait_text("notice", "OpenID Connect was unlinked")
    assert page.linked() == ["github.com"]
    page.shot("unlinked-after-reauthentication")


def test_a_result_id_without_its_verifier_signs_nothing_in(start_demo, page):
    demo = start_demo()
    # A flow started elsewhere (a script standing for the client that holds the verifier):
    # its result id reaches this browser, which never had the verifier.
    verifier = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(NoRedirects, urllib.request.HTTPCookieProcessor(jar))

    def location(url):
        try:
            opener.open(url)
        except urllib.error.HTTPError as answer:
            return answer.headers["Location"]
        raise AssertionError("no redirect from " + url)

    return_to = urllib.parse.quote(demo.url + "/", safe="")
    authorize = location(f"{demo.url}/v1/auth/github.com/start?return_to={return_to}&login=octocat&result_challenge={challenge}")
    result_url = location(location(authorize))
    assert "#gatehouse_result=" in result_url
    page.open(result_url)
    page.wait_text("error", "invalid-result")
    page.signed_out()
    page.shot("stolen-result-refused")

    # The client that started the flow still redeems it.
    result_id = result_url.split("#gatehouse_result=")[1]
    body = json.dumps({"result": result_id, "result_verifier": verifier}).encode()
    request = urllib.request.Request(demo.url + "/v1/auth/result", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200
        assert json.load(answer)["user"]["providers"][0]["providerId"] == "github.com"


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """Lets each redirect surface as an HTTPError whose Location the test follows itself."""

    def redirect_request(self, *arguments, **keywords):
        return None


def test_a_provider_error_is_shown_and_nothing_is_signed_in(start_demo, page):
    demo = start_demo()
    page.open(demo.url)
    page.click("signin-github.com")
    page.click("deny")
    assert "access_denied" in page.wait_text("error", "Sign-in failed")
    page.signed_out()
    page.shot("access-denied")


def test_linking_an_identity_that_belongs_to_another_account_is_refused(start_demo, page):
    demo = start_demo()
    page.open(demo.url)
    page.sign_in("oidc.emulator", "olive@oidc.example")
    page.signed_in()
    olive = page.text("uid")
    page.click("signout")
    page.signed_out()

    page.sign_in("github.com", "octocat")
    page.signed_in()
    page.click("link-oidc.emulator")
    page.pick("olive@oidc.example")
    page.wait_text("error", "already belongs to another Gatehouse account")
    assert page.linked() == ["github.com"]
    assert page.text("uid") != olive
    page.shot("credential-already-in-use")


def test_the_apps_hook_turns_a_new_account_away_with_its_message(start_demo, page):
    """The demo's sample hook denies new accounts at blocked.example; the page shows its message."""
    demo = start_demo()
    page.open(demo.url)
    page.sign_in("github.com", "blocked-bo")
    assert page.wait_text("error", "not accepted by this app") == "Accounts at blocked.example are not accepted by this app."
    page.signed_out()
    page.shot("sign-in-denied")



def test_a_wait_polls_again_through_a_navigation_and_fails_on_any_other_error():
    # Chromium answers a lookup that meets a redirect chain in flight with "aborted by
    # navigation"; the wait must look again, and must still stop on a real error.
    answers = iter([WebDriverException("aborted by navigation: Inspected target navigated or closed"),
                    StaleElementReferenceException("stale element reference"), False, "element"])

    def condition(driver):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert NavigationTolerantWait(object(), 5, poll_frequency=0.01).until(condition) == "element"
    with pytest.raises(WebDriverException, match="chrome not reachable"):
        NavigationTolerantWait(object(), 5, poll_frequency=0.01).until(
            lambda driver: (_ for _ in ()).throw(WebDriverException("chrome not reachable")))
