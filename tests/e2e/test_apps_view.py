"""The MCP Apps view of agent runs in a real browser, under the official host side of the extension.

Debian's chromium (headless, through selenium) opens a test host page (tests/e2e/apps_host: the `AppBridge` of
`@modelcontextprotocol/ext-apps` and the official MCP client, pinned in its package-lock.json and bundled by esbuild
here). The host talks to the real server over HTTP (through a same-origin proxy on loopback) against the sandbox,
reads the view from `resources/read`, renders it in a sandboxed iframe, delivers the tool's result and proxies the
view's own calls. One browser serves every case. With VIEW_SCREENSHOTS_DIR set, the screenshots are copied there
(docs/view-*.png are made this way).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2
import pytest
from chromium import start_chromium
from harness import HttpServer, sandbox_env

from agent_automation_mcp.api.statuses import ending_reason
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer, ids
from catalogue import ENDS_WITH_REASON, REPO_ID

HOST_DIR = Path(__file__).parent / "apps_host"
ESBUILD = HOST_DIR / "node_modules" / ".bin" / "esbuild"
RUN_SECONDS = 4.0  # a created run ends after this; the view's first refresh comes 5 s after it is drawn
XSS = "<img src=x onerror=name=1><script>name=2</script>"  # sets window.name if it ever runs
PROXIED_HEADERS = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id")

if not ESBUILD.exists():
    pytest.skip("the test host's npm packages are not installed (npm ci --prefix tests/e2e/apps_host; .ci/run does it)",
                allow_module_level=True)


class HostSite:
    """The test host's origin on loopback: its page, its bundle, and /mcp proxied to the server (same origin: no
    CORS). A GET of /mcp (the optional stream of server messages) is refused, as many servers do."""

    def __init__(self, root: Path, upstream: str) -> None:
        http = httpx2.Client(timeout=httpx2.Timeout(30, read=90))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                name = self.path.split("?", 1)[0].lstrip("/")
                if name in ("host.html", "host.bundle.js"):
                    kind = "text/html" if name.endswith(".html") else "text/javascript"
                    self._answer(200, {"content-type": kind}, (root / name).read_bytes())
                else:
                    self._answer(405 if name == "mcp" else 404, {}, b"")

            def do_POST(self) -> None:
                self._proxy("POST")

            def do_DELETE(self) -> None:
                self._proxy("DELETE")

            def _proxy(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {name: value for name in PROXIED_HEADERS if (value := self.headers.get(name))}
                reply = http.request(method, upstream, content=body, headers=headers)
                kept = {name: value for name in ("content-type", "mcp-session-id")
                        if (value := reply.headers.get(name))}
                self._answer(reply.status_code, kept, reply.content)

            def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.http = http
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, tool: str, arguments: dict[str, Any], *, theme: str = "light", width: int = 640) -> str:
        query = urlencode({"tool": tool, "args": json.dumps(arguments), "theme": theme, "width": width})
        return f"{self.origin}/host.html?{query}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.http.close()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(run_seconds=RUN_SECONDS)) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def host(sandbox: SandboxServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostSite]:
    root = tmp_path_factory.mktemp("apps-host")
    shutil.copy(HOST_DIR / "host.html", root / "host.html")
    bundle = [str(ESBUILD), str(HOST_DIR / "host.js"), "--bundle", "--format=esm", "--platform=browser",
              "--log-level=warning", f"--outfile={root / 'host.bundle.js'}"]
    subprocess.run(bundle, check=True, cwd=HOST_DIR, timeout=60)
    server = HttpServer(sandbox_env(sandbox))
    site = HostSite(root, server.url)
    yield site
    site.stop()
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_chromium(720, 1400)  # tall enough for a whole trace page in one screenshot
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("view-screenshots")
    yield folder
    if copy := os.environ.get("VIEW_SCREENSHOTS_DIR"):
        for shot in folder.glob("*.png"):
            shutil.copy(shot, Path(copy) / shot.name)


class View:
    """The host page in the browser and the view inside its iframe."""

    def __init__(self, browser: Any, url: str) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        self.browser = browser
        browser.switch_to.default_content()
        browser.get(url)
        WebDriverWait(browser, 30).until(lambda driver: driver.execute_script(
            "return window.hostRecord && (window.hostRecord.ready || window.hostRecord.failed)"))
        assert self.record()["failed"] is None, self.record()["failed"]

    def record(self) -> dict[str, Any]:
        self.browser.switch_to.default_content()
        return self.browser.execute_script("return window.hostRecord")

    def inside(self) -> Any:
        """The browser, switched into the view's frame."""
        from selenium.webdriver.common.by import By

        self.browser.switch_to.default_content()
        self.browser.switch_to.frame(self.browser.find_element(By.TAG_NAME, "iframe"))
        return self.browser

    def text(self) -> str:
        return self.inside().execute_script("return document.getElementById('view').innerText")

    def wait_for(self, words: str, seconds: float) -> str:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.browser, seconds, poll_frequency=0.25).until(lambda _: words in self.text())
        return self.text()

    def shot(self, path: Path) -> None:
        from selenium.webdriver.common.by import By

        self.browser.switch_to.default_content()
        self.browser.find_element(By.ID, "frame").screenshot(str(path))


def test_a_created_run_is_shown_running_then_finished_with_its_pull_request(
        host: HostSite, sandbox: SandboxServer, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    prompt = "Make the login test stop flaking: retry the OAuth callback once and log why it failed"
    view = View(browser, host.page("create_agent_run", {"prompt": prompt, "repo_id": REPO_ID}))
    running = view.text()
    assert "Running" in running and "Running for" in running, running
    assert f"repository #{REPO_ID}" in running and prompt[:60] in running
    frame = view.inside()
    status = frame.find_element(By.ID, "run-status")
    assert "status-running" in status.get_attribute("class")  # colour as well as the word
    assert frame.find_element(By.ID, "elapsed").text.endswith(" s")
    assert frame.execute_script("return state.poll !== null && state.ticker !== null")  # refreshing, counting
    view.shot(shots / "view-running.png")

    # The service throttles the view's first refresh: the view keeps what it showed, says so, and tries again after
    # the server's retry_after_seconds (1 s here), but not sooner than its own pace (5 s with the test's limits).
    httpx2.put(f"{sandbox.url}/_sandbox/faults", json={  # both ways a run's status is read
        "throttle_rate": 1.0, "throttle_retry_after": 1,
        "operations": ["get_agent_run", "list_agent_runs"]}).raise_for_status()
    try:
        throttled = view.wait_for("Could not refresh", 30)
    finally:
        httpx2.put(f"{sandbox.url}/_sandbox/faults", json={}).raise_for_status()
    assert "Rate limit exceeded" in throttled and "trying again in 5 s" in throttled and "Running" in throttled

    finished = view.wait_for("Complete", 40)  # the view refreshes itself through the host
    assert "Running for" not in finished and "Result" in finished and "Pull request #" in finished
    frame = view.inside()
    link = frame.find_element(By.CSS_SELECTOR, ".prs a")
    url = link.get_attribute("href")
    assert url.startswith("https://github.com/") and "/pull/" in url
    assert url.split("/pull/")[0].removeprefix("https://github.com/") in finished  # its repository, from its URL
    link.send_keys(Keys.ENTER)  # keyboard: the link opens through the host, not in the frame
    ask = frame.find_element(By.XPATH, "//button[contains(., 'follow-up')]")
    ask.send_keys(Keys.ENTER)
    frame.find_element(By.ID, "followup-text").send_keys("Also add a test for the retry")
    frame.find_element(By.XPATH, "//button[contains(., 'Put it in the chat')]").send_keys(Keys.ENTER)
    view.wait_for("Put in the chat.", 10)
    assert view.inside().execute_script("return state.poll === null && state.ticker === null")  # stopped at the end
    view.shot(shots / "view-finished.png")

    record = view.record()
    assert url in record["opened"]
    (message,) = record["messages"]
    assert message["role"] == "user" and "Also add a test for the retry" in message["content"][0]["text"]
    run_id = int(running.split("Agent run ")[1].split()[0])
    assert str(run_id) in message["content"][0]["text"]
    # The view's own calls: reads of this run only, never a write (the follow-up is left for the person to send).
    assert record["calls"] and all(call == {"name": "get_agent_run", "arguments": {"agent_run_id": run_id}}
                                   for call in record["calls"])


@pytest.mark.parametrize("ending", ENDS_WITH_REASON)
def test_a_run_that_ends_out_of_a_limit_is_shown_failed_with_why_and_no_longer_read(
        host: HostSite, sandbox: SandboxServer, browser: Any, ending: str) -> None:
    from selenium.webdriver.common.by import By

    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={"status": "ACTIVE", "log_entries": 3,
                                                            "goes_on": False}).json()
    view = View(browser, host.page("get_agent_run", {"agent_run_id": run["id"]}))
    running = view.text()
    assert "Running" in running and "Last step" in running, running
    httpx2.post(f"{sandbox.url}/_sandbox/runs/{run['id']}/end", json={"status": ending}).raise_for_status()
    ended = view.wait_for("Why it ended", 40)  # its own refresh, through the host
    frame = view.inside()
    assert "status-failed" in frame.find_element(By.ID, "run-status").get_attribute("class")
    assert "Failed" in ended and str(ending_reason(ending)).split(" (")[0] in ended
    assert frame.execute_script("return state.poll === null && state.ticker === null")  # reads no more


def test_a_paused_run_says_what_it_waits_for_and_is_not_read_again(host: HostSite, sandbox: SandboxServer,
                                                                  browser: Any) -> None:
    from selenium.webdriver.common.by import By

    view = View(browser, host.page("get_agent_run", {"agent_run_id": ids.PAUSED_RUN_ID}))
    shown = view.wait_for("Paused", 20)
    frame = view.inside()
    assert "status-paused" in frame.find_element(By.ID, "run-status").get_attribute("class")
    assert "Waiting" in shown and "only when resumed" in shown and "press Refresh once it is resumed" in shown
    assert frame.execute_script("return state.poll === null")


def test_a_trace_is_a_timeline_and_markup_in_it_stays_text(host: HostSite, sandbox: SandboxServer, browser: Any,
                                                          shots: Path) -> None:
    from selenium.webdriver.common.by import By

    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={
        "prompt": XSS, "status": "COMPLETE", "log_entries": 8, "repo_id": REPO_ID, "with_pull_request": True}).json()
    view = View(browser, host.page("get_agent_run_logs", {"agent_run_id": run["id"], "limit": 8}))
    text = view.text()
    assert f"Trace of run {run['id']}" in text and "Complete" in text
    frame = view.inside()
    steps = frame.find_elements(By.CSS_SELECTOR, "ol.timeline > li")
    assert len(steps) == 8
    assert all(step.find_element(By.TAG_NAME, "time").text.count(":") == 2 for step in steps)
    assert all(step.find_element(By.CSS_SELECTOR, ".kind").text for step in steps)
    assert frame.find_elements(By.CSS_SELECTOR, "ol.timeline .tool")  # tool steps name their tool
    marked = frame.find_elements(By.CSS_SELECTOR, "ol.timeline > li.is-error")  # the seeded trace has an ERROR step
    assert marked and all("ERROR" in step.text and "⚠ error" in step.text for step in marked)
    assert XSS in text  # shown as its characters...
    assert frame.execute_script("return window.name") == ""  # ...and nothing of it ran
    assert frame.find_elements(By.CSS_SELECTOR, "#view img, #view script") == []
    assert len(frame.find_elements(By.TAG_NAME, "script")) == 1  # the page's own
    folded = frame.find_elements(By.CSS_SELECTOR, "ol.timeline details")
    assert folded and all(not item.get_attribute("open") for item in folded)  # long values start folded
    view.shot(shots / "view-trace.png")


def test_a_digest_is_drawn_as_facts_and_markup_in_it_stays_text(host: HostSite, sandbox: SandboxServer, browser: Any,
                                                                shots: Path) -> None:
    from selenium.webdriver.common.by import By

    run = httpx2.post(f"{sandbox.url}/_sandbox/runs", json={
        "prompt": XSS, "status": "COMPLETE", "log_entries": 40, "repo_id": REPO_ID}).json()
    view = View(browser, host.page("get_agent_run_logs", {"agent_run_id": run["id"], "digest": True}))
    text = view.text()
    assert f"What happened in run {run['id']}" in text and "Complete" in text and "steps 1–40 read of 40" in text
    for fact in ("Time", "Longest waits", "Steps", "Tools", "Errors", "Files", "Final answer"):
        assert f"{fact}\n" in text, fact
    assert "ACTION " in text and "× from step " in text and "src/app/" in text
    frame = view.inside()
    assert frame.find_elements(By.CSS_SELECTOR, ".facts .error-text")  # errors in the error colour
    assert XSS in text  # the final answer quotes the prompt: shown as its characters...
    assert frame.execute_script("return window.name") == ""  # ...and nothing of it ran
    assert frame.find_elements(By.CSS_SELECTOR, "#view img, #view script") == []
    assert not frame.find_elements(By.XPATH, "//button[contains(., 'Digest the rest')]")  # it read the whole trace
    view.shot(shots / "view-digest.png")


def test_runs_are_a_table_newest_first_and_follow_a_change_of_theme(host: HostSite, browser: Any,
                                                                    shots: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    view = View(browser, host.page("list_agent_runs", {"limit": 6}))
    frame = view.inside()
    headers = [cell.text for cell in frame.find_elements(By.CSS_SELECTOR, "thead th")]
    assert headers == ["Status", "Age", "Repository", "PR", "Run"]
    rows = frame.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 6
    ids = [int(row.find_elements(By.TAG_NAME, "td")[4].text.split()[-1]) for row in rows]
    assert ids[0] == max(ids)  # the newest (the run made by the trace case) first
    assert any(row.find_elements(By.CSS_SELECTOR, "td:nth-child(4) a") for row in rows)  # a PR as a link
    view.shot(shots / "view-list.png")
    background = "return getComputedStyle(document.body).backgroundColor"
    assert view.inside().execute_script(background) == "rgb(255, 255, 255)"
    view.record()  # the host switches to its dark theme while the view is open
    browser.execute_script("""window.hostBridge.sendHostContextChange({theme: "dark", styles: {variables: {
        "--color-background-primary": "#262624", "--color-text-primary": "#f5f4ef"}}})""")
    frame = view.inside()
    WebDriverWait(browser, 10).until(lambda _: frame.execute_script(background) == "rgb(38, 38, 36)")
    assert frame.execute_script("return document.documentElement.dataset.theme") == "dark"


def test_runs_counted_are_drawn_as_facts(host: HostSite, browser: Any) -> None:
    view = View(browser, host.page("list_agent_runs", {"counts": True, "since": "2025-01-01"}))
    text = view.text()
    assert "Agent runs counted" in text and "No agent runs match" not in text
    for fact in ("Runs", "Status", "Source", "Repository", "Failed"):
        assert f"{fact}\n" in text, fact
    assert "done " in text and "failed " in text and "sandbox-org/web-app: " in text
    assert "not reported (no pull request names one): " in text and "404 ERROR" in text and "created since " in text


def test_the_view_takes_the_hosts_dark_theme_and_fits_a_phone(host: HostSite, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    view = View(browser, host.page("list_agent_runs", {"limit": 4}, theme="dark", width=360))
    frame = view.inside()
    assert frame.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    assert all(cell.is_displayed() for cell in frame.find_elements(By.CSS_SELECTOR, "thead th"))  # every column
    newest = int(frame.find_element(By.CSS_SELECTOR, "tbody td:nth-child(5)").text.split()[-1])
    view.shot(shots / "view-list-phone.png")
    view = View(browser, host.page("get_agent_run", {"agent_run_id": newest}, theme="dark", width=360))
    frame = view.inside()
    colours = frame.execute_script(
        "const s = getComputedStyle(document.body); return [s.backgroundColor, s.color, s.fontFamily]")
    assert colours[:2] == ["rgb(38, 38, 36)", "rgb(245, 244, 239)"] and "DejaVu Sans" in colours[2]
    assert frame.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")  # no sideways
    assert frame.execute_script("return innerWidth") <= 360
    view.shot(shots / "view-dark-phone.png")
