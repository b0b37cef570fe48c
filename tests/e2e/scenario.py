"""One session that calls every tool (each of `tests/catalogue.py`), checking each result against the output
schema the server listed."""

from __future__ import annotations

from typing import Any

import jsonschema
from harness import ERAS
from mcp import Client

from catalogue import CASES, LONG_RUN, PR_ID, REPO_ID, RUN_WITH_PR, SANDBOX_ID


class Session:
    def __init__(self, client: Client, schemas: dict[str, dict[str, Any]]) -> None:
        self.client = client
        self.schemas = schemas
        self.called: list[str] = []

    async def ok(self, name: str, arguments: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        result = await self.client.call_tool(name, arguments or {}, **options)
        assert not result.is_error, (name, result.content)
        jsonschema.validate(result.structured_content, self.schemas[name])
        summary = result.content[0].text
        assert summary and "\n" not in summary, name
        self.called.append(name)
        return result.structured_content  # type: ignore[return-value]


async def open_session(client: Client) -> Session:
    tools = (await client.list_tools()).tools
    return Session(client, {tool.name: tool.output_schema for tool in tools})  # type: ignore[misc]


async def check_every_tool(client: Client, mode: str) -> None:
    assert client.protocol_version == ERAS[mode]
    session = await call_every_tool(client)
    assert set(session.called) == {case.name for case in CASES}


async def call_every_tool(client: Client) -> Session:
    s = await open_session(client)
    orgs = await s.ok("list_organizations")
    assert orgs["organizations"] and orgs["next_skip"] is None
    me = await s.ok("get_user")
    users = await s.ok("list_users", {"limit": 2})
    assert users["next_skip"] == 2
    assert (await s.ok("get_user", {"user_id": users["users"][0]["id"]}))["id"] == users["users"][0]["id"]
    assert me["id"] != 0
    repos = await s.ok("list_repositories")
    assert REPO_ID in {r["id"] for r in repos["repositories"]}
    await s.ok("list_integrations")
    models = await s.ok("list_models")

    run = await s.ok("create_agent_run", {"prompt": "Add a health endpoint", "repo_id": REPO_ID,
                                          "model": models["default_model"]})
    assert run["web_url"].startswith("http") and run["is_terminal"] is False
    done = await s.ok("get_agent_run", {"agent_run_id": run["id"], "wait_seconds": 20})
    assert done["is_terminal"] and done["web_url"]
    listed = await s.ok("list_agent_runs", {"limit": 3})
    assert len(listed["runs"]) == 3 and listed["next_skip"] == 3 and all(r["web_url"] for r in listed["runs"])
    resumed = await s.ok("resume_agent_run", {"agent_run_id": run["id"], "prompt": "Also add a test"})
    assert resumed["id"] == run["id"] and resumed["web_url"]

    first = await s.ok("get_agent_run_logs", {"agent_run_id": LONG_RUN, "limit": 100})
    assert len(first["entries"]) == 100 and first["next_skip"] == 100 and first["total_logs"] > 200
    last = await s.ok("get_agent_run_logs", {"agent_run_id": LONG_RUN, "skip": 200, "limit": 100})
    assert last["next_skip"] is None and len(last["entries"]) == first["total_logs"] - 200

    await s.ok("ban_checks", {"agent_run_id": RUN_WITH_PR})
    await s.ok("unban_checks", {"agent_run_id": RUN_WITH_PR})
    await s.ok("remove_from_pull_request", {"agent_run_id": RUN_WITH_PR})
    edited = await s.ok("edit_pull_request", {"pr_id": PR_ID, "state": "ready_for_review"})
    assert edited["state"] == "ready_for_review"
    await s.ok("edit_pull_request", {"pr_id": PR_ID, "state": "open", "repo_id": REPO_ID})

    await s.ok("update_check_suite_settings", {"repo_id": REPO_ID, "check_retry_count": 4,
                                               "ignored_checks": ["lint"]})
    settings = await s.ok("get_check_suite_settings", {"repo_id": REPO_ID})
    assert settings["check_retry_count"] == 4 and settings["ignored_checks"] == ["lint"]

    await s.ok("generate_setup_commands", {"repo_id": REPO_ID})
    await s.ok("analyze_sandbox_logs", {"sandbox_id": SANDBOX_ID})

    await s.ok("get_oauth_token_status")
    await s.ok("revoke_oauth_tokens", {"provider": "github"})

    await s.ok("set_webhook", {"url": "https://example.com/hooks/runs", "secret": "s3cret"})
    hook = await s.ok("get_webhook")
    assert hook["url"] == "https://example.com/hooks/runs"
    await s.ok("test_webhook", {"url": "https://example.com/hooks/runs"})
    await s.ok("delete_webhook")
    for case in CASES:  # a tool the story above does not tell yet: its catalogue call
        if case.name not in s.called:
            await s.ok(case.name, case.call)
    return s
