"""Requests a user types, answered only from what the server tells a model, run against the sandbox (issues 19, 33, 47).

    .venv/bin/python benchmarks/first_try.py [--before SRC] [--write docs/benchmarks.md]

With `--before SRC` the same runs on another source tree's code (e.g. `git archive main src | tar -x -C
/tmp/main`), in a process of its own.

Each plan reads the listed tools (descriptions, schemas, instructions) to choose its calls, as a model would, then
judges the answer it can give the user: fully right (true, complete, no effect claimed that the service did not
report), or not. Where the tools list says the service cannot tell (who started a run, a pull request's draft
state, where a sandbox id comes from), telling the user so is the right answer; where it says nothing, the model
guesses, which is wrong even when the guess happens to be true. The requests about what a connection is told (its
organisation, what a narrowed connection is offered, a task's cancel) run over HTTP too, against a server started
from the measured tree.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from report import before_and_after

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.api.statuses import FAILURES
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from agent_automation_mcp.sandbox.config import DEMO_TOKEN
from agent_automation_mcp.server import build_server

LIMITS = "standard=100000/30s,logs=100000/60s,agent_creation=1000/60s,pr_edit=1000/60s,webhook_test=1000/60s"
ALL = ("runs", "logs", "checks", "pulls", "settings", "org", "setup", "oauth", "webhooks")


def long_runs() -> SandboxConfig:
    """The sandbox most rows use: runs that take 600 s to end, and the LIMITS."""
    return SandboxConfig(run_seconds=600.0, seed=3, rate_limits=parse_rate_limits(LIMITS))


def settings_for(sandbox: SandboxServer) -> ApiSettings:
    """The server's settings for `sandbox`'s own token and organisation, under the LIMITS."""
    return ApiSettings(token=sandbox.token, org_id=sandbox.org_id, base_url=sandbox.url,
                       rate_limits=parse_rate_limits(LIMITS))


class Model:
    """What a model knows: the listed tools and the instructions; every call counted."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.calls = 0
        self.tools: dict[str, Any] = {}
        self.instructions = ""

    async def load(self) -> None:
        self.tools = {t.name: t for t in (await self.client.list_tools()).tools}
        self.instructions = " ".join((self.client.instructions or "").split())

    def cannot(self, verb: str, target: str) -> str | None:
        """The instructions' sentence saying the service cannot `verb` a `target`, if any: what a model reads first."""
        return next((part for part in self.instructions.split(". ") if "cannot" in part
                     and verb in part.split(":")[0] and target in part.split(":")[0]), None)

    def says(self, tool: str) -> str:
        return " ".join((self.tools[tool].description or "").split())

    def param(self, tool: str, name: str) -> dict[str, Any] | None:
        return self.tools[tool].input_schema.get("properties", {}).get(name)

    def told(self, phrase: str) -> str | None:
        """The tool whose description (or an argument's) says `phrase`, if any: where a model learns it."""
        for name, tool in self.tools.items():
            described = [self.says(name), *(" ".join(str(p.get("description", "")).split())
                                            for p in tool.input_schema.get("properties", {}).values())]
            if any(phrase in text for text in described):
                return name
        return None

    async def call(self, tool: str, **args: Any) -> tuple[dict[str, Any], str, bool]:
        self.calls += 1
        result = await self.client.call_tool(tool, args)
        return result.structured_content or {}, result.content[0].text, bool(result.is_error)


def status_word(model: Model, word: str, service_guess: str) -> str:
    """A model passes the user's word when the schema says words work, else its upper-case guess."""
    described = (model.param("list_agent_runs", "statuses") or {}).get("description", "")
    return word if "words" in described else service_guess


async def requests(model: Model, started: list[int]) -> list[tuple[str, bool, str]]:
    out: list[tuple[str, bool, str]] = []

    # 1
    runs, _, _ = await model.call("list_agent_runs", limit=100)
    pr_run = next(r for r in runs["runs"] if r["pull_requests"] and r["id"] == 401)
    number = pr_run["pull_requests"][0]["number"]
    repo_name = pr_run["pull_requests"][0]["url"].split("github.com/")[1].split("/pull")[0]
    data, text, err = await model.call("ban_checks", agent_run_id=401)
    stopped = data.get("stopped_agent_run_ids", data.get("response", {}).get("stopped_agent_run_ids"))
    right = not err and "were stopped" not in text and "301" in text and stopped == []
    out.append((f"Stop CI on every run of PR {repo_name}#{number}", right, text))
    await model.call("unban_checks", agent_run_id=401)

    # 2
    me, _, _ = await model.call("get_user")
    data, text, _ = await model.call("list_agent_runs", user_id=me["id"], statuses=[status_word(model, "running",
                                                                                                   "RUNNING")])
    found = {r["id"] for r in data["runs"]}
    right = set(started) <= found and all(r.get("elapsed_seconds") is not None for r in data["runs"])
    out.append(("Which of my runs are still running, and for how long?", right, text))

    # 3
    data, text, _ = await model.call("list_agent_runs", statuses=[status_word(model, "failed", "FAILED")], limit=100)
    out.append(("List the failed runs", 404 in {r["id"] for r in data["runs"]}, text))

    # 4
    _, _, e1 = await model.call("set_webhook", url="https://hooks.example.com/a", secret="rotated-1")
    data, text, e2 = await model.call("test_webhook", url="https://hooks.example.com/a")
    out.append(("Rotate my webhook secret and prove it works", not e1 and not e2 and data["delivered"] is True, text))

    # 5
    data, text, _ = await model.call("set_webhook", url="https://hooks.example.com/b")
    out.append(("Point my webhook at https://hooks.example.com/b", "unsigned" in text or "REMOVED" in text, text))

    # 6
    repos, _, _ = await model.call("list_repositories")
    api = 201
    now, _, _ = await model.call("get_check_suite_settings", repo_id=api)
    data, text, _ = await model.call("update_check_suite_settings", repo_id=api,
                                     check_retry_count=now["check_retry_count"])
    out.append((f"Set check retries to {now['check_retry_count']} on repo web-app (already so)",
                "already" in text and "changed check_retry_count" not in text and "updated" not in text, text))

    # 7
    fresh = started[0]
    data, text, _ = await model.call("ban_checks", agent_run_id=fresh)  # the closest a model finds to "cancel"
    right = "No tool cancels a run" in model.says("ban_checks") and "Nothing banned" in text and str(fresh) in text
    out.append((f"Cancel run {fresh}", right, text))

    # 8
    data, text, err = await model.call("edit_pull_request", pr_url=f"{repo_name}#{number}", state="closed")
    out.append((f"Close PR {repo_name}#{number}", not err and data.get("state") == "closed", text))

    # 9
    r407, _, _ = await model.call("get_agent_run", agent_run_id=407)
    n407 = r407["pull_requests"][0]["number"]
    if model.param("edit_pull_request", "number"):
        data, text, err = await model.call("edit_pull_request", repo_id=202, number=n407, state="ready_for_review")
    else:
        repos, _, _ = await model.call("list_repositories")
        name = next(r["full_name"] for r in repos["repositories"] if r["id"] == 202)
        data, text, err = await model.call("edit_pull_request", pr_url=f"{name}#{n407}", state="ready_for_review")
    out.append((f"Mark PR #{n407} of repository 202 ready for review", not err and data["pr_id"] == 306, text))

    # 10: the answer is true either way; what the tools list changes is whether the model knows to say first that
    # the service does not tell, before spending a call per user.
    told = model.told("who started") is not None
    before = model.calls
    users, _, _ = await model.call("list_users", limit=100)
    owner = None
    for user in users["users"]:
        data, _, _ = await model.call("list_agent_runs", user_id=user["id"], limit=100)
        if 405 in {r["id"] for r in data["runs"]}:
            owner = user["id"]
    text = (f"{'said the service does not tell, then ' if told else ''}scanned every user's runs "
            f"({model.calls - before} calls): user {owner}")
    out.append(("Who started run 405?", owner is not None, text))

    # 11: the service does not report a pull request's state; right is saying so, wrong is guessing from silence.
    data, text, _ = await model.call("get_agent_run", agent_run_id=407)
    says_unknown = "does not report a pull request's state" in model.says("get_agent_run")
    text = ("told the user the service does not report it" if says_unknown
            else "no state in the result and no word that the service cannot tell: the model guesses")
    out.append(("Is the pull request of run 407 still a draft?", says_unknown, text))

    # 12
    data, text, _ = await model.call("get_agent_run_logs", agent_run_id=409, message_types=["ACTION"])
    out.append(("Show me every tool call of run 409", data["next_skip"] is None and data["read"] == data["total_logs"],
                text))

    # 13 (asked of a server with the default toolsets: see main)
    # 14
    data, text, _ = await model.call("list_agent_runs", limit=5)
    out.append(("List my last 5 runs", len(data["runs"]) == 5, text))

    # 15
    data, text, err = await model.call("unban_checks", agent_run_id=402)
    out.append(("Restart CI processing on the pull request of run 402", not err and "402" in text, text))

    # 16
    data, text, _ = await model.call("unban_checks", agent_run_id=405)
    out.append(("Unban checks for run 405 (which has no pull request)", "Nothing unbanned" in text, text))

    # 17
    data, text, err = await model.call("create_agent_run", prompt="Add a health endpoint", repo_id=api)
    out.append(("Start a run on repo web-app to add a health endpoint", not err and data["id"] > 0, text))

    # 18
    data, text, err = await model.call("list_models")
    out.append(("What models can I use?", not err and data["default_model"], text))

    # 19
    data, text, err = await model.call("get_agent_run", agent_run_id=99999)
    hint = data.get("error", {}).get("hint", "")
    out.append(("Show run 99999 (a typo)", err and "list_agent_runs" in hint, hint))

    # 20
    described = (model.param("analyze_sandbox_logs", "sandbox_id") or {}).get("description", "")
    if "web app" in described:
        right, text = True, "asked the user for the sandbox id from the web app (no tool lists sandboxes)"
    else:  # the model guesses the repository's id
        data, text, err = await model.call("analyze_sandbox_logs", sandbox_id=api)
        right = False
    out.append(("Why did my web-app repo's setup fail? Analyze its sandbox logs", right, text))
    return out


async def faithful(model: Model, sandbox_url: str) -> list[tuple[str, bool, str]]:
    """Issue 33: what the service sends reaches the answer; what it never sends is said, not guessed."""
    out: list[tuple[str, bool, str]] = []

    # 21-22: a tag written at creation, found again later
    tag = {"ticket": "OPS-12"}
    created, _, _ = await model.call("create_agent_run", prompt="Fix OPS-12: the login test", repo_id=201,
                                     metadata=tag)
    await model.call("create_agent_run", prompt="Fix OPS-13", repo_id=201, metadata={"ticket": "OPS-13"})
    read, text, _ = await model.call("get_agent_run", agent_run_id=created["id"])
    out.append(("Start an agent on web-app for ticket OPS-12 and tag it; show me the tag", read.get("metadata") == tag,
                f"get_agent_run reads back metadata {read['metadata']}" if read.get("metadata") == tag
                else "the run's result has no metadata: the tag is write-only"))
    if model.param("list_agent_runs", "metadata"):
        data, text, _ = await model.call("list_agent_runs", metadata=tag)
    else:  # the best a model can do: read the runs and look for the tag
        data, text, _ = await model.call("list_agent_runs", limit=100)
        data = {"runs": [r for r in data["runs"] if r.get("metadata") == tag]}
        text = f"scanned 100 runs for the tag: {len(data['runs'])} found"
    out.append(("Which run was OPS-12?", [r["id"] for r in data["runs"]] == [created["id"]], text))

    # 23: a setup-commands run told apart from any other
    setup, _, _ = await model.call("generate_setup_commands", repo_id=202)
    data, text, _ = await model.call("get_agent_run", agent_run_id=setup["agent_run_id"])
    right = data.get("source_type") == "SETUP_COMMANDS"
    out.append((f"What started run {setup['agent_run_id']}: a person, or setup commands?", right,
                f"source_type {data['source_type']}" if right else "nothing in the result says: the model guesses"))

    # 24: a pull request's title and branch
    data, text, _ = await model.call("get_agent_run", agent_run_id=401)
    pr = data["pull_requests"][0]
    right = bool(pr.get("title")) and bool(pr.get("head_branch_name"))
    out.append(("What is the title and branch of run 401's pull request?", right,
                f"title and head_branch_name {pr.get('head_branch_name')}" if right else "neither is in the result"))

    # 25: which run opened a pull request, once a review run has joined it
    async with httpx2.AsyncClient(base_url=sandbox_url) as control:
        await control.post("/_sandbox/runs", json={"pull_request_id": 301, "source_type": "GITHUB_PR_REVIEW",
                                                   "log_entries": 3})
    data, text, _ = await model.call("list_agent_runs", pull_request="sandbox-org/web-app#1")
    note = data.get("note") or ""
    right = "only run 401 was created at or before it" in note
    out.append(("Which run opened PR sandbox-org/web-app#1?", right,
                note[note.find("the service"):] if right else
                f"{len(data['runs'])} runs attached and nothing says which opened it: the model guesses the oldest"))

    # 26: an organisation's settings
    data, text, _ = await model.call("list_organizations")
    right = all("enable_pr_creation" in (org.get("settings") or {}) for org in data["organizations"])
    out.append(("May agents open pull requests in my organisation?", right,
                "settings.enable_pr_creation in the result" if right else "the organisation's settings are dropped"))

    # 27: what an integration is connected to
    data, text, _ = await model.call("list_integrations")
    github = next(i for i in data["integrations"] if i["integration_type"] == "github")
    right = bool((github.get("metadata") or {}).get("account"))
    out.append(("Which GitHub account is our GitHub integration connected to?", right,
                "the integration's metadata names it" if right else "the integration's metadata is dropped"))

    # 28-35: what the service never reports; right is saying so, wrong is guessing from silence
    unreported = [
        ("What prompt was run 405 started with?", "its prompt"),
        ("Which model did run 401 use?", "model, agent type"),
        ("When did run 401 finish, and how long did it take?", "or end time"),
        ("Which repository was run 408 working on? (it opened no pull request)", "repository (see its pull"),
        ("What did run 409 cost?", "cost, resume"),
        ("Are CI checks banned on the pull request of run 402?", "whether its checks are banned"),
        ("List the open pull requests of web-app", "no repository's pull requests"),
        ("How many agent runs are left on our plan this month?", "the plan's run quota"),
    ]
    for request, phrase in unreported:
        where = model.told(phrase)
        out.append((request, where is not None, f"told the user the service does not report it ({where})" if where
                    else "no tool says the service does not report it: the model guesses"))

    # 36: a resumed run's time, in its summary and its elapsed_seconds; a model may read either
    data, text, _ = await model.call("resume_agent_run", agent_run_id=401, prompt="Add a test for the fix")
    went = re.search(r"resumed (\d+) s ago", text)
    elapsed = data.get("elapsed_seconds")
    right = went is not None and isinstance(elapsed, int) and abs(elapsed - int(went[1])) <= 2
    out.append(("Resume run 401 to add a test; how long has it been going?", right,
                f"{went[0] if went else 'no resume time said'}; elapsed_seconds {elapsed}"
                + ("" if right else f" ({elapsed // 86_400 if isinstance(elapsed, int) else '?'} d): the two disagree,"
                                    " and a model reading elapsed_seconds says the run has worked for days")))
    return out


async def statuses(model: Model, sandbox: SandboxServer) -> list[tuple[str, bool, str]]:
    """Issue 46: runs as the service runs them: a stuck run found, each ending explained, the paused run resumed."""
    out: list[tuple[str, bool, str]] = [await anything_stuck(model, sandbox)]
    for run_id, ending, words in ((410, "TIMEOUT", "out of time"), (411, "MAX_ITERATIONS_REACHED", "too many "
                                   "iterations"), (412, "OUT_OF_TOKENS", "out of tokens"), (404, "ERROR", None),
                                  (408, "STOPPED", None)):
        data, text, err = await model.call("get_agent_run", agent_run_id=run_id)
        if err or data.get("status") != ending:
            right, said = False, f"no run {run_id} ended {ending} here: {text}"
        elif not data.get("is_terminal"):
            right, said = False, f"is_terminal false: the model says run {run_id} is still going"
        elif words is not None:
            right, said = words in (data.get("reason") or ""), (data.get("reason") or f"{ending}, no reason in words")
        else:
            right, said = bool(data.get("result")), f"{ending}: {data.get('result')}"
        out.append((f"Why did run {run_id} stop?", right, said))
    word = status_word(model, "paused", "PAUSED")
    listed, text, _ = await model.call("list_agent_runs", statuses=[word], limit=100)
    paused = [run["id"] for run in listed["runs"]]
    if len(paused) != 1:
        out.append(("Resume the paused run", False, f"statuses [{word}] found {paused}: {text}"))
        return out
    data, text, err = await model.call("resume_agent_run", agent_run_id=paused[0], prompt="Go on where you stopped")
    out.append(("Resume the paused run", not err and data.get("status") == "ACTIVE", text))
    return out


async def anything_stuck(model: Model, sandbox: SandboxServer) -> tuple[str, bool, str]:
    """"Is anything stuck?": the prompt whose description offers it, followed step by step; right when exactly the
    run that has not moved for long is named, and said how long; the service reads it cost are counted."""
    prompts = {prompt.name: prompt for prompt in (await model.client.list_prompts()).prompts}
    offered = next((name for name, prompt in prompts.items() if "stuck" in (prompt.description or "")), None)
    before = len(sandbox.request_log)
    if offered is not None:
        await model.client.get_prompt(offered, {"who": "everyone", "status": "unfinished", "limit": "50"})
        listed, _, _ = await model.call("list_agent_runs", statuses=["unfinished"], limit=50)
    else:  # the best a model can do: the running runs, read one by one
        listed, _, _ = await model.call("list_agent_runs", statuses=[status_word(model, "running", "ACTIVE")],
                                        limit=50)
    idle: dict[int, int | None] = {}
    for run in listed["runs"]:
        if not run["is_terminal"]:
            data, _, _ = await model.call("get_agent_run", agent_run_id=run["id"])
            idle[run["id"]] = data.get("last_step_seconds") if data.get("status") != "PAUSED" else None
    reads = len(list(sandbox.request_log)[before:])
    stuck = sorted(run for run, seconds in idle.items() if seconds is not None and seconds > 15 * 60)
    if all(seconds is None for seconds in idle.values()):
        return ("Is anything stuck?", False, f"{len(idle)} runs going, nothing says when each last did anything: "
                                             f"the model guesses ({reads} service reads)")
    return ("Is anything stuck?", stuck == [414], f"stuck: {stuck} (last step {idle.get(414)} s ago) of "
                                                  f"{len(idle)} unfinished runs; {reads} service reads")


async def off_toolset(api: ApiSettings) -> tuple[str, bool, str]:
    async with Client(build_server(api, ServerSettings())) as client:
        text = client.instructions or ""
    said = next((part for part in text.split(". ") if "Toolsets off" in part), "the instructions name no toolset off")
    return ("Revoke my Linear tokens (default server: oauth off)", "oauth" in said and "--toolsets" in said, said)


# -- Issue 33: what a connection is told (its organisation, what a narrowed connection is offered, a task's cancel) --

SOLO = "tok-first-try-solo"  # belongs to organisation 1 only; DEMO_TOKEN to organisations 1 and 2
SERVED = "1,3"  # the organisations the HTTP server serves: DEMO_TOKEN's 2 is not among them
Row = tuple[str, bool, str]


@contextmanager
def http_server(sandbox: SandboxServer, auth: str = "request") -> Iterator[str]:
    """`agent-automation-mcp serve --transport http --auth request` (or `oauth`) of the measured tree (PYTHONPATH, as
    `--before` sets it), serving organisations 1 and 3; its `/mcp` URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    signing_in = ("--public-url", f"http://127.0.0.1:{port}") if auth == "oauth" else ()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))} | {
        "AGENT_AUTOMATION_BASE_URL": sandbox.url, "AGENT_AUTOMATION_RATE_LIMITS": LIMITS,
        "AGENT_AUTOMATION_TOOLSETS": "all", "AGENT_AUTOMATION_ALLOWED_ORGS": SERVED}
    process = subprocess.Popen([sys.executable, "-m", "agent_automation_mcp", "serve", "--transport", "http",
                                "--host", "127.0.0.1", "--port", str(port), "--auth", auth, *signing_in], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the HTTP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def connection(url: str, token: str, mode: str = "auto", **headers: str) -> Client:
    named = {"authorization": f"Bearer {token}"} | {name.replace("_", "-"): value for name, value in headers.items()}
    http = httpx2.AsyncClient(headers=named, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def rpc(url: str, method: str, params: dict[str, Any], **headers: str) -> tuple[int, dict[str, Any]]:
    """One 2025-11-25 request as a raw POST (the task methods that era has and the SDK's client no longer sends)."""
    answer = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout=30,
                         headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
                         | {name.replace("_", "-"): value for name, value in headers.items()})
    data = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
    return answer.status_code, json.loads(data[-1] if data else answer.text)


async def which_organisation(api: ApiSettings) -> Row:
    """Configured for organisation 2 of a token with two: named by the instructions, or marked by
    list_organizations; else the model guesses the first listed."""
    async with Client(build_server(api, ServerSettings())) as client:
        said = re.search(r"acts in organisation (\d+)", client.instructions or "")
        if said:
            answer, text = int(said[1]), said[0]
        else:
            result = await client.call_tool("list_organizations", {})
            marked = [o["id"] for o in result.structured_content["organizations"] if o.get("in_use")]
            answer = marked[0] if marked else result.structured_content["organizations"][0]["id"]
            text = result.content[0].text + ("" if marked else ": none marked, the model guesses the first")
    return "Which organisation am I working in? (a token with two, set to 2)", answer == 2, text


async def none_chosen(api: ApiSettings) -> Row:
    """No organisation configured for a token with two: right is saying none is chosen and how to choose."""
    async with Client(build_server(api, ServerSettings())) as client:
        said = re.search(r"No organisation is chosen[^.]*\.[^.]*\.", client.instructions or "")
        if said:
            return "Which organisation am I working in? (a token with two, none set)", True, said[0]
        result = await client.call_tool("list_organizations", {})
    return ("Which organisation am I working in? (a token with two, none set)", False,
            result.content[0].text + ": nothing says none is chosen, the model guesses the first")


async def read_only_start(url: str) -> list[Row]:
    """Over a connection narrowed to reading (X-MCP-Readonly): start a run, and the delegate_task prompt."""
    async with connection(url, SOLO, x_mcp_readonly="true") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        told = client.instructions or ""
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        if "create_agent_run" in told and "create_agent_run" not in tools:  # the model follows the instructions
            try:
                await client.call_tool("create_agent_run", {"prompt": "Add a health endpoint", "repo_id": 201})
                refused = "no refusal"
            except MCPError as exc:
                refused = str(exc)
            start = False, f"followed the instructions into: {refused}"
        else:
            start = "Read-only" in told, "told the user this connection only reads: " + told.split(". ")[0]
        if "delegate_task" in prompts:
            plan = (await client.get_prompt("delegate_task", {"task": "Add a health endpoint"})).messages[0]
            named = "create_agent_run" in plan.content.text  # type: ignore[union-attr]
            delegate = not named, "the host offers delegate_task; its plan says: Call create_agent_run once"
        else:
            delegate = True, f"the host offers {', '.join(sorted(prompts))}: no prompt that starts a run"
    return [("Start a run on web-app (a read-only connection)", *start),
            ("/delegate_task Add a health endpoint (a read-only connection)", *delegate)]


async def narrowed_to_runs(url: str) -> Row:
    """X-MCP-Toolsets: runs, "start a run and show me its steps": no trace tool here; the model must not be sent to
    one, and should say why there is none."""
    async with connection(url, SOLO, x_mcp_toolsets="runs") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        told = client.instructions or ""
        run = (await client.call_tool("create_agent_run", {"prompt": "Add a health endpoint"})).structured_content
        read = " ".join((tools["create_agent_run"].description or "").split())
        if "get_agent_run_logs" in read or "get_agent_run_logs" in told:
            try:
                result = await client.call_tool("get_agent_run_logs", {"agent_run_id": run["id"]})
                text = result.content[0].text
            except MCPError as exc:
                text = str(exc)
            return "Start a run and show me its steps (toolsets: runs)", False, f"sent to get_agent_run_logs: {text}"
        said = next((part for part in told.split(". ") if "leaves out" in part), "no word on why")
    return "Start a run and show me its steps (toolsets: runs)", "logs" in said, f"started {run['id']}; {said}"


def organisation_not_served(url: str) -> Row:
    """X-Organization-Id: 2 on a deployment serving 1 and 3, with a token of 1 and 2: the refusal's reason."""
    status, body = rpc(url, "tools/list", {}, authorization=f"Bearer {DEMO_TOKEN}", x_organization_id="2")
    error = body.get("error", {}).get("data", body.get("error", {}))
    said = f"{error.get('message')}. {error.get('hint')}"
    right = status == 403 and "organisation 2" in said and "belongs to none" not in said and "1" in error["hint"]
    return "Use organisation 2 (a deployment serving 1 and 3)", right, said


async def cancel_a_task(url: str) -> Row:
    """A run followed as a task (2025-11-25), cancelled: every later message says it goes on, in sentences, naming
    the tool whose description says it comes closest, until the task ends."""
    auth = {"authorization": f"Bearer {SOLO}"}
    async with connection(url, SOLO) as client:
        tools = (await client.list_tools()).tools
    closest = next(tool.name for tool in tools if "comes closest" in (tool.description or ""))
    _, started = rpc(url, "tools/call", {"name": "create_agent_run", "arguments": {"prompt": "Cancel me"},
                                         "task": {}}, **auth)
    task_id = started["result"]["task"]["taskId"]
    rpc(url, "tasks/cancel", {"taskId": task_id}, **auth)
    messages: list[str] = []
    for _ in range(40):  # the sandbox's runs here take 2 s
        _, task = rpc(url, "tasks/get", {"taskId": task_id}, **auth)
        messages.append(task["result"]["statusMessage"])
        if task["result"]["status"] != "working":
            break
        await anyio.sleep(0.25)
    wrong = [m for m in messages if not (m.endswith(".") and "cannot cancel" in m and closest in m)]
    said = (wrong or messages)[-1]
    return (f"Cancel that run (a task; descriptions say {closest} comes closest)", not wrong and len(messages) > 1,
            said)


async def context_requests() -> list[Row]:
    config = SandboxConfig(run_seconds=2.0, seed=3, visible_orgs=2, tokens=(DEMO_TOKEN, SOLO),
                           token_orgs={SOLO: (1,)}, rate_limits=parse_rate_limits(LIMITS))
    async with SandboxServer(config) as sandbox:
        api = ApiSettings(token=DEMO_TOKEN, org_id=2, base_url=sandbox.url, rate_limits=parse_rate_limits(LIMITS))
        rows = [await which_organisation(api), await none_chosen(ApiSettings(
            token=DEMO_TOKEN, base_url=sandbox.url, rate_limits=parse_rate_limits(LIMITS)))]
        with http_server(sandbox) as url:
            rows += [*await read_only_start(url), await narrowed_to_runs(url), organisation_not_served(url),
                     await cancel_a_task(url)]
        after = await sign_in_rows(sandbox)
    return rows + after


# -- Issue 47: what users ask after a run (what the service cannot do, values, times, a failure, limits, sign-ins) --

# What people ask that the service cannot do: the request, the verb and target the instructions would name, and the
# closest thing a right answer offers.
CANNOT: tuple[tuple[str, str, str, str], ...] = (
    ("Approve the pull request of run 402", "approve", "pull request", "GitHub"),
    ("Comment \"LGTM\" on PR sandbox-org/web-app#1", "comment on", "pull request", "GitHub"),
    ("Request a review from Bob on the pull request of run 402", "request reviewers", "pull request", "GitHub"),
    ("Re-run the failed CI checks on the pull request of run 402", "re-run the checks", "pull request", "GitHub"),
    ("Delete run 405", "delete", "agent run", "listed"),
    ("Change the prompt of run 405 to use Postgres", "change the prompt", "agent run", "resume_agent_run"),
)


async def cannot_rows(model: Model) -> list[Row]:
    """Merging, and other actions the service lacks: right is telling the user so and the closest thing (from the
    instructions, or a refusal naming it), never doing the nearest thing it can (closing is not merging)."""
    run, _, _ = await model.call("get_agent_run", agent_run_id=407)
    pr = run["pull_requests"][0]
    if said := model.cannot("merge", "pull request"):
        merge = True, f"told the user the service cannot merge a pull request; merge it in GitHub at {pr['url']}"
    else:
        merge = await _merged_by_state(model, {"pr_id": pr["pr_id"]})
    rows = [("Merge the pull request that run 407 opened", *merge),
            ("Set PR #2 of repository 202 to merged", *await _merged_by_state(model, {"repo_id": 202, "number":
                                                                                    pr["number"]}))]
    for request, verb, target, closest in CANNOT:
        said = model.cannot(verb, target)
        instead = next((part for part in (said or "").split(": ", 1)[-1].split("; ") if closest in part), None)
        rows.append((request, instead is not None, f"told the user it cannot be done, and: {instead}" if instead
                     else "nothing says the service cannot: the model guesses"))
    try:  # a model that guesses a tool by the user's words
        await model.client.call_tool("cancel_agent_run", {"agent_run_id": 405})
        told = "the call ran"
    except MCPError as exc:
        told = str(exc)
    rows.append(("Cancel run 405 (the model calls cancel_agent_run, which no server has)",
                 "cannot" in told and "ban_checks" in told, told))
    return rows


async def _merged_by_state(model: Model, pull_request: dict[str, Any]) -> tuple[bool, str]:
    """The model passes the user's word as the state; told why not, it tells the user, else it tries the nearest."""
    data, text, err = await model.call("edit_pull_request", state="merged", **pull_request)
    error = data.get("error", {})
    if err and "GitHub" in error.get("hint", ""):
        return True, f"{error['message'][len('edit_pull_request: '):]}; {error['hint'][:60]}…"
    data, text, err = await model.call("edit_pull_request", state="closed", **pull_request)
    return False, f"told \"{error.get('hint')}\", tried closed: {text}"


async def values_and_times(model: Model) -> list[Row]:
    await model.call("update_check_suite_settings", repo_id=201, check_retry_counts={"unit-tests": 1})
    _, text, _ = await model.call("update_check_suite_settings", repo_id=201,
                                  check_retry_counts={"build": 3, "unit-tests": 2})
    settings = ("Retry build 3 times and unit-tests 2 on web-app; what changed?",
                re.search(r"build\D{0,3}3\b", text) is not None and "1 → 2" in text, text)
    result = await model.client.call_tool("list_agent_runs", {"limit": 100})
    lines = result.content[1].text.split("\n")
    legend = next(line for line in lines if line.startswith("runs, one a line"))
    short = {word for line in lines for word in line.split()[2:3] if re.fullmatch(r":\d\d|\d\d:\d\d:\d\d", word)}
    forms = {":SS" if word.startswith(":") else "HH:MM:SS" for word in short}
    unexplained = sorted(form for form in forms if form not in legend)
    times = ("When was each of my runs created? (read from the list)", bool(forms) and not unexplained,
             f"the legend explains {', '.join(sorted(forms))}" if not unexplained else
             f"times written {', '.join(unexplained)}, which the legend does not explain: the model guesses the date")
    prompt = (await model.client.get_prompt("explain_run_failure", {"agent_run_id": "404"})).messages[0]
    plan = " ".join(prompt.content.text.split())  # type: ignore[union-attr]
    digest = "digest true" in plan
    unreported = "does not report a run's repository" in plan
    explain = ("/explain_run_failure 404", digest and unreported,
               f"{'reads the digest' if digest else 'reads the trace page by page'}; "
               f"{'says' if unreported else 'does not say'} the run's repository may be unreported")
    return [settings, times, explain]


async def throttled_rows() -> list[Row]:
    """A 429 asking 150 s on a tool counted against standard, then another tool: what each answer says."""
    async with SandboxServer(long_runs()) as sandbox:
        api = settings_for(sandbox)
        httpx2.put(f"{sandbox.url}/_sandbox/faults", json={"throttle_rate": 1.0, "throttle_retry_after": 150,
                                                           "operations": ["list_agent_runs"]}).raise_for_status()
        async with Client(build_server(api, ServerSettings(toolsets=ALL))) as client:
            model = Model(client)
            first, _, _ = await model.call("list_agent_runs")
            second, _, _ = await model.call("get_agent_run", agent_run_id=401)
    refused, held = first.get("error", {}), second.get("error", {})
    said = f"{refused.get('message')} {refused.get('hint')}"
    right = "150 s" in said and "standard" in said and "Every tool" in said and "still work" not in said
    wait = held.get("retry_after_seconds") or 0
    again = f"{held.get('message')} (retry after {wait} s)"
    return [("List my runs (the service answers 429, asking 150 s)", right, said[said.find("asked"):]),
            ("Then show me run 401", "the service refused" in again and "150 s" in again and wait > 120, again)]


async def sign_in_rows(sandbox: SandboxServer) -> list[Row]:
    """Over HTTP with sign-ins: an organisation named beside a sign-in; a read-only sign-in calling a write."""
    sys.path.append(str(Path(__file__).parents[1] / "tests" / "e2e"))
    from oauth_flow import RawFlow, pkce, query_of  # the consent page as a browser posts it

    with http_server(sandbox, auth="oauth") as url:
        flow = RawFlow(url.removesuffix("/mcp"))
        token = flow.tokens(flow.register(), DEMO_TOKEN)["access_token"]  # served: organisation 1 only
        other = flow.mcp_status(token, x_organization_id="2")
        client_id = flow.register()
        verifier, challenge = pkce()
        answer = flow.approve(flow.consent_page(client_id, challenge), SOLO, access="read")
        reader = flow.exchange(client_id, query_of(answer.headers["location"])["code"], verifier).json()
        status, body = rpc(url, "tools/call", {"name": "create_agent_run", "arguments": {"prompt": "x"}},
                           authorization=f"Bearer {reader['access_token']}")
    error = other.json().get("error", {}) if other.status_code != 200 else {}
    named = ("Use organisation 2 (signed in; a deployment serving 1 and 3)",
             other.status_code == 403 and "organisation 2" in str(error.get("message")),
             str(error.get("message")) if error else "served in the sign-in's organisation 1: the header is ignored")
    message = str(body.get("error", {}).get("message"))
    return [named, ("Start a run (a read-only sign-in)", status == 403 and message.startswith("create_agent_run "),
                    message)]


# -- Issue 47, part two: tags as people type them, a day's runs at a glance --

USER_ZONE = timezone(timedelta(hours=-7))  # the user's: "today" began DAY_HOURS ago for them
DAY_HOURS = 16
TODAY, YESTERDAY = 128, 24  # runs started in the user's today, and in the 8 hours before it
SHORT_ANSWER_TOKENS = 800  # the bar for a day's runs "in one short answer"
DAY_STATUSES = ("COMPLETE",) * 14 + ("ERROR", "ERROR", "TIMEOUT", "OUT_OF_TOKENS", "STOPPED", "PAUSED", "ACTIVE")
DAY_REPOS = (201, 202, 205, None)
DAY_SOURCES = ("API", "API", "API", "SLACK", "GITHUB", "LINEAR")
MAX_PAGES = 10  # of 100 runs: the day's TODAY + YESTERDAY and the seeded runs take 2


async def sprint_row(model: Model) -> Row:
    """Runs tagged sprint 14 by two scripts, one writing the number and one its text: right is finding both."""
    tagged = [(await model.call("create_agent_run", prompt=f"Sprint task {index}", repo_id=201,
                                metadata={"sprint": value}))[0]["id"] for index, value in enumerate((14, "14", 15))]
    data, _, _ = await model.call("list_agent_runs", metadata={"sprint": 14}, limit=100)
    found = sorted(run["id"] for run in data.get("runs", []) if run["id"] in tagged)
    right = found == sorted(tagged[:2])
    return ("Which runs were in sprint 14? (one script tagged 14, another \"14\")", right,
            f"found runs {found} of {sorted(tagged[:2])}" + ("" if right else ": the run tagged \"14\" is missed"))


async def a_day(url: str) -> None:
    """YESTERDAY runs in the 8 hours before the user's day, then TODAY in it, oldest first (ids follow times), in
    several endings, on repositories or none, from several sources: through the sandbox's controls, which both trees
    have."""
    rng = random.Random(47)
    ages = [DAY_HOURS * 3600 + 1800 + (8 * 3600 - 3600) * (1 - i / YESTERDAY) for i in range(YESTERDAY)]
    ages += [(DAY_HOURS * 3600 - 1800) * (1 - i / TODAY) + 60 for i in range(TODAY)]
    async with httpx2.AsyncClient(base_url=url) as control:
        for age in ages:
            status, repo = rng.choice(DAY_STATUSES), rng.choice(DAY_REPOS)
            (await control.post("/_sandbox/runs", json={
                "status": status, "repo_id": repo, "source_type": rng.choice(DAY_SOURCES), "log_entries": 2,
                "idle_seconds": age, "goes_on": False,
                "with_pull_request": repo is not None and status in ("COMPLETE", "ERROR")})).raise_for_status()


def day_truth(url: str, token: str, since: datetime) -> dict[str | None, list[int]]:
    """The runs created since `since`, read from the service without our code: runs and failed ones per repository
    a pull request names (None: no pull request), as a person counting would."""
    runs: list[dict[str, Any]] = []
    with httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        for _ in range(MAX_PAGES):
            items = http.get("/v1/organizations/1/agent/runs", params={"skip": len(runs), "limit": 100}).json()["items"]
            runs += items
            if len(items) < 100:
                break
        else:
            raise RuntimeError(f"the service still had runs after {MAX_PAGES} pages of 100")
    return _tally(run for run in runs if _created(run["created_at"]) >= since)


def _created(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _tally(runs: Any) -> dict[str | None, list[int]]:
    """Runs and failed runs per repository named by a pull request's URL (None: none), and the total under "*"."""
    tally: dict[str | None, list[int]] = {"*": [0, 0]}
    for run in runs:
        failed = run["status"] in FAILURES
        named = {pr["url"].split("github.com/")[1].split("/pull")[0] for pr in run.get("github_pull_requests")
                 or run.get("pull_requests") or [] if pr.get("url")}
        for key in ("*", *(named or {None})):
            tally.setdefault(key, [0, 0])
            tally[key][0] += 1
            tally[key][1] += failed
    return tally


async def day_row() -> Row:
    """"How many runs did we start today, how many failed, and on which repositories?" with TODAY runs in the user's
    day: right is the true counts in one short answer; the tokens read are said either way."""
    async with SandboxServer(long_runs()) as sandbox:
        await a_day(sandbox.url)
        since = (datetime.now(UTC) - timedelta(hours=DAY_HOURS)).astimezone(USER_ZONE).replace(microsecond=0)
        truth = day_truth(sandbox.url, sandbox.token, since)
        api = settings_for(sandbox)
        async with Client(build_server(api, ServerSettings(toolsets=ALL))) as client:
            model = Model(client)
            await model.load()
            if model.param("list_agent_runs", "counts") and model.param("list_agent_runs", "since"):
                answer, tokens, calls = await _counted_day(client, since)
            else:
                answer, tokens, calls = await _paged_day(client, since)
    right = answer == truth and tokens <= SHORT_ANSWER_TOKENS
    total, failed = answer.get("*", [0, 0])
    said = (f"{tokens:,} tokens read in {calls} call{'s' * (calls > 1)}: {total} runs, {failed} failed, on "
            f"{len(answer) - 1 - (None in answer)} repositories named and {answer.get(None, [0])[0]} runs with none")
    return ("How many runs did we start today, how many failed, and on which repositories?", right,
            said + ("" if right else ("; true, by the model's own arithmetic" if answer == truth
                                      else f"; the truth: {truth['*'][0]} runs, {truth['*'][1]} failed")))


async def _counted_day(client: Client, since: datetime) -> tuple[dict[str | None, list[int]], int, int]:
    """The model asks for counts since the start of the user's day."""
    result = await client.call_tool("list_agent_runs", {"since": since.isoformat(), "counts": True})
    counts = (result.structured_content or {}).get("counts") or {}
    answer: dict[str | None, list[int]] = {"*": [counts.get("runs", 0), counts.get("by_status", {}).get("failed", 0)]}
    for repo in counts.get("by_repository", []):
        answer[repo["repository"]] = [repo["runs"], repo["failed"]]
    return answer, _read(result), 1


async def _paged_day(client: Client, since: datetime) -> tuple[dict[str | None, list[int]], int, int]:
    """No time bound and no counts: the model pages the list until a run from before the user's day, and counts."""
    kept: list[dict[str, Any]] = []
    tokens, calls, skip = 0, 0, 0
    while skip is not None and calls < 20:
        result = await client.call_tool("list_agent_runs", {"limit": 100, "skip": skip})
        calls += 1
        tokens += _read(result)
        page = result.structured_content or {}
        fresh = [run for run in page.get("runs", []) if _created(run["created_at"]) >= since]
        kept += fresh
        skip = page.get("next_skip") if len(fresh) == len(page.get("runs", [])) else None
    return _tally(kept), tokens, calls


async def chat_repository_row() -> Row:
    """A connection bound to repository 202 (api-service) by its X-Repo-Id header, as Codegen's hosted server takes
    it: "start a run on this chat's repository". Right is a run on 202, with the instructions naming it."""
    async with SandboxServer(long_runs()) as sandbox:
        with http_server(sandbox) as url:
            async with connection(url, DEMO_TOKEN, x_organization_id="1", x_repo_id="202") as client:
                told = " ".join((client.instructions or "").split())
                started = (await client.call_tool("create_agent_run", {"prompt": "Add a health endpoint"}))
        run_id = (started.structured_content or {}).get("id")
        repo = sandbox.state.world.runs[run_id].repo_id if run_id in sandbox.state.world.runs else None
    named = re.search(r"default repository is \d+[^,:]*", told)
    right = repo == 202 and named is not None
    return ("Start a run on this chat's repository (the connection sends X-Repo-Id: 202)", right,
            f"the instructions say its {named[0]}; the run started on {repo}" if named
            else f"nothing names the chat's repository: the run started on {repo}, the service's choice")


def _read(result: Any) -> int:
    """What a model reads of a result: its text, characters / 4."""
    return sum(len(block.text) for block in result.content if block.type == "text") // 4


async def measure() -> list[tuple[str, bool, str]]:
    async with SandboxServer(long_runs()) as sandbox:
        api = settings_for(sandbox)
        async with Client(build_server(api, ServerSettings(toolsets=ALL))) as client:
            model = Model(client)
            await model.load()
            started = [(await model.call("create_agent_run", prompt=f"Task {i}", repo_id=201))[0]["id"]
                       for i in range(3)]
            await model.call("set_webhook", url="https://hooks.example.com/0", secret="first")
            rows = await requests(model, started)
            rows += await faithful(model, sandbox.url)
            after_a_run = await cannot_rows(model) + await values_and_times(model)
            rows += await statuses(model, sandbox)
            listing = [await sprint_row(model)]
        rows.insert(12, await off_toolset(api))
    rows += await context_requests()
    rows += after_a_run + await throttled_rows()
    rows += [*listing, await day_row(), await chat_repository_row()]
    return [(request, bool(right), " ".join(str(said).split())[:140]) for request, right, said in rows]


def render(columns: dict[str, list[tuple[str, bool, str]]], command: str) -> str:
    names = list(columns)
    count = len(columns[names[-1]])
    lines = ["## First try: requests a user types", "",
             f"Produced by `{command}`: a scripted model that reads only `tools/list` (descriptions, schemas, the "
             f"instructions, prompts) picks the calls for each of {count} requests people type, runs them against "
             "the sandbox and judges the answer it could give: **right** when it is true and complete and claims no "
             "effect the service did not report (where the tools list says the service cannot tell, saying so is "
             "right; where it says nothing, a guess is wrong even when it happens to be true). Requests 21 on are "
             "issue 33's: what the service sends reaches the answer, what it never reports is said; 37 to 43 issue "
             "46's: runs as the service runs them (a stuck run, each ending, the paused run); 44 to 50 (over HTTP "
             "too) what a connection is told. Requests 51 on are issue 47's, the questions after a run: what the "
             "service cannot do (merging first), a change's values, a list's times, a failure explained, a 429's "
             "answers, and sign-ins over HTTP; 67 to 69 its second part: a tag as another script typed it, a "
             "day's runs at a glance (right only in one answer under 800 tokens; the tokens read are said either "
             "way) and the chat's repository (X-Repo-Id).", "",
             f"| # | request | {' | '.join(names)} |", f"|---|---|{'---|' * len(names)}"]
    for index, request in enumerate(row[0] for row in columns[names[-1]]):
        cells = [f"{'right' if rows[index][1] else '**wrong**'}: {rows[index][2].replace('|', '/')}"
                 for rows in columns.values()]
        lines.append(f"| {index + 1} | {request} | {' | '.join(cells)} |")
    totals = ", ".join(f"{name} {sum(r[1] for r in rows)} of {len(rows)}" for name, rows in columns.items())
    return "\n".join([*lines, "", f"Fully right on the first try: {totals}.", ""])


def main(argv: list[str] | None = None) -> int:
    return before_and_after("first_try.py", __doc__.splitlines()[0], measure, render, argv)


if __name__ == "__main__":
    sys.exit(main())
