"""The consent page of a native or desktop sign-in, answered in headless Chromium.

A desktop app's loopback return (`http://127.0.0.1/callback`, any port, which `gatehouse demo`
allows as "Example Desktop App") is a small HTTP server of the test's own. The user signs in at
the emulator, answers the gateway's consent page with a click, and the browser brings the
result id to the app's listener in the request's query (a browser never sends a fragment),
where the app redeems it with its verifier.
"""

import base64
import hashlib
import http.server
import json
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

from test_demo_page import page, start_demo  # noqa: F401  (pytest fixtures)


class DesktopApp:
    """A loopback listener standing for the desktop app: it answers every request with a small
    page, on a port the kernel chose."""

    def __init__(self):
        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                received.append(self.path)
                body = b"<!doctype html><title>Example Desktop App</title><p id=app>back in the app</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *arguments):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def challenge_pair():
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def result_at_the_app(app, page, return_to):
    """The result id as the app's listener received it: from the query of its request."""
    page.wait.until(lambda driver: driver.current_url.startswith(return_to) or "origin-not-allowed" in driver.page_source)
    assert page.driver.current_url.startswith(return_to), page.driver.page_source[:500]
    callbacks = [path for path in app.received if urllib.parse.urlsplit(path).path == "/callback"]  # not the favicon
    assert len(callbacks) == 1, app.received
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(callbacks[0]).query)
    assert list(query) == ["gatehouse_result"], app.received
    return query["gatehouse_result"][0]


def redeem(demo, result, verifier):
    request = urllib.request.Request(
        demo.url + "/v1/auth/result", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"result": result, "result_verifier": verifier}).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


def answer_consent(demo, page, app, decision):
    """Signs octocat in for the desktop app listening as `app`, answers the consent page with
    `decision` (continue or cancel) by a click, and returns the app's verifier and the result
    id its listener received."""
    verifier, challenge = challenge_pair()
    return_to = f"http://127.0.0.1:{app.port}/callback"
    query = urllib.parse.urlencode({"return_to": return_to, "result_challenge": challenge, "login": "octocat"})
    page.open(f"{demo.url}/v1/auth/github.com/start?{query}")
    # The emulator approves octocat at once; the gateway asks the user before the app gets anything.
    button = (By.CSS_SELECTOR, f"button[value={decision}]")
    page.wait.until(EC.visibility_of_element_located(button))
    assert "Example Desktop App" in page.driver.page_source
    page.shot("consent")
    page.driver.find_element(*button).click()
    result = result_at_the_app(app, page, return_to)
    page.shot(f"after-{decision}")
    return verifier, result


def test_continue_on_the_consent_page_returns_to_the_desktop_app(start_demo, page):
    demo = start_demo()
    app = DesktopApp()
    try:
        verifier, result = answer_consent(demo, page, app, "continue")
        status, body = redeem(demo, result, verifier)
        assert status == 200 and body["user"]["uid"] and body["idToken"]
    finally:
        app.stop()


def test_cancel_on_the_consent_page_returns_a_cancelled_result(start_demo, page):
    demo = start_demo()
    app = DesktopApp()
    try:
        verifier, result = answer_consent(demo, page, app, "cancel")
        try:
            redeem(demo, result, verifier)
            raise AssertionError("a cancelled sign-in redeemed")
        except urllib.error.HTTPError as error:
            assert error.code == 403 and json.loads(error.read())["code"] == "sign-in-cancelled"
    finally:
        app.stop()
