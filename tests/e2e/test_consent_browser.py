"""The consent page in a real browser: Debian's chromium, headless, driven by selenium through chromedriver.

It opens the page a client sends the person to, types the token, picks the organisation, approves, and lands
on the client's redirect URI with a code that the client exchanges. Screenshots of both steps are kept in the
test's temporary directory for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from chromium import start_chromium
from harness import RATE_LIMITS, HttpServer, clean_env, free_port, tenant_client
from oauth_flow import RawFlow, pkce, query_of

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer

CAROL = "tok-carol-both"


class Callback:
    """The client's redirect URI: a loopback listener that answers every request with a short page."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.end_headers()
                self.wfile.write(b"signed in")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    config = SandboxConfig(tokens=(CAROL,), visible_orgs=2, rate_limits=parse_rate_limits(RATE_LIMITS))
    with SandboxServer(config) as sandbox:
        port = free_port()
        server = HttpServer(clean_env(AGENT_AUTOMATION_BASE_URL=sandbox.url, AGENT_AUTOMATION_RATE_LIMITS=RATE_LIMITS),
                            "--auth", "oauth", "--public-url", f"http://127.0.0.1:{port}", port=port)
        server.sandbox = sandbox  # type: ignore[attr-defined]
        yield server
        server.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = start_chromium(900, 900)
    yield driver
    driver.quit()


@pytest.mark.anyio
async def test_a_person_signs_in_on_the_consent_page_in_chromium(server: HttpServer, browser: Any,
                                                                 tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    callback = Callback()
    try:
        flow = RawFlow(server.origin)
        client_id = flow.register(redirect_uris=[callback.url], client_name="Chromium Test Client")
        verifier, challenge = pkce()
        browser.get(f"{server.origin}/authorize?" + urlencode({
            "response_type": "code", "client_id": client_id, "redirect_uri": callback.url, "state": "st-browser",
            "code_challenge": challenge, "code_challenge_method": "S256", "resource": server.url}))
        assert "Chromium Test Client" in browser.page_source and "127.0.0.1" in browser.page_source
        field = browser.find_element(By.CSS_SELECTOR, 'input[type="password"][name="token"]')
        browser.save_screenshot(str(tmp_path / "consent-page.png"))
        field.send_keys(CAROL)
        browser.find_element(By.CSS_SELECTOR, 'button[value="approve"]').click()
        wait = WebDriverWait(browser, 20)  # a loaded machine may take a while to post the form and answer
        wait.until(lambda driver: driver.find_elements(By.NAME, "organization"))

        Select(browser.find_element(By.NAME, "organization")).select_by_value("2")  # Carol sees two
        browser.save_screenshot(str(tmp_path / "consent-organisation.png"))
        assert CAROL not in browser.page_source
        browser.find_element(By.CSS_SELECTOR, 'button[value="approve"]').click()
        wait.until(lambda driver: driver.current_url.startswith(callback.url))

        assert browser.current_url.startswith(callback.url) and "signed in" in browser.page_source
        back = query_of(browser.current_url)
        assert back["state"] == "st-browser" and back["iss"] == server.origin + "/"
    finally:
        callback.stop()
    if copy := os.environ.get("CONSENT_SCREENSHOT_COPY"):  # docs/consent-page.png is made this way
        shutil.copy(tmp_path / "consent-page.png", copy)
    tokens = flow.http.post(f"{server.origin}/token", data={
        "grant_type": "authorization_code", "code": back["code"], "code_verifier": verifier, "client_id": client_id,
        "redirect_uri": callback.url}).json()
    async with tenant_client(server.url, authorization=f"Bearer {tokens['access_token']}") as client:
        assert not (await client.call_tool("list_users", {})).is_error
    assert server.sandbox.state.request_log[-1].path == "/v1/organizations/2/users"  # type: ignore[attr-defined]
    assert (tmp_path / "consent-page.png").stat().st_size > 5000
