"""Every operation of the table through the typed client, over real HTTP to the sandbox."""

from __future__ import annotations

import anyio
import pytest

from agent_automation_mcp.api import OPERATIONS, AgentAutomationClient, ApiTransport, Credentials
from agent_automation_mcp.api.errors import InvalidRequestError, OperationFailedError, PermissionDeniedError
from agent_automation_mcp.sandbox import SandboxConfig, SandboxServer
from catalogue import CASES

from .conftest import requests_log, settings_for

pytestmark = pytest.mark.anyio


async def _writable_repo_and_pr(client: AgentAutomationClient) -> tuple[int, int]:
    """A pull request on a repository the demo user may write to, found through the API itself."""
    repos = (await client.list_repositories()).items
    runs = await client.list_agent_runs(limit=100)
    for run in runs.items:
        for pr in run.github_pull_requests or []:
            try:
                edit = await client.edit_pull_request(pr.id, "open")
            except (PermissionDeniedError, OperationFailedError):
                continue
            assert edit.success
            owners = [repo.id for repo in repos if repo.full_name and f"/{repo.full_name}/" in (pr.url or "")]
            if owners:
                return owners[0], pr.id
    pytest.fail("the sandbox world has no writable pull request")


async def test_organisation_reads(client: AgentAutomationClient, sandbox: SandboxServer) -> None:
    orgs = await client.list_organizations()
    assert sandbox.org_id in {org.id for org in orgs.items}
    me = await client.get_current_user()
    users = await client.list_users(limit=2)
    assert users.total is not None and users.total >= len(users.items) and len(users.items) <= 2
    assert (await client.get_user(me.id)).id == me.id
    repos = await client.list_repositories()
    assert repos.items and all(repo.organization_id == sandbox.org_id for repo in repos.items)
    integrations = await client.list_integrations()
    assert integrations.integrations
    models = await client.list_models()
    assert models.default_model and models.providers
    assert isinstance(await client.list_mcp_providers(), list)
    rules = await client.get_cli_rules()
    assert "organization_rules" in rules.model_dump()


async def test_run_life_cycle_and_trace(client: AgentAutomationClient) -> None:
    repo = (await client.list_repositories()).items[0]
    run = await client.create_agent_run("Add a health check endpoint", repo.id, metadata={"ticket": "T-1"})
    assert run.status and run.status.upper() == "ACTIVE" and not run.is_terminal and run.web_url
    with anyio.fail_after(15):
        while not (run := await client.get_agent_run(run.id)).is_terminal:
            await anyio.sleep(0.2)
    listed = await client.list_agent_runs(limit=5)
    assert run.id in {r.id for r in listed.items}
    first = await client.get_agent_run_logs(run.id, limit=3)
    assert first.logs and first.total_logs and len(first.logs) <= 3
    newest_first = await client.get_agent_run_logs(run.id, limit=1, reverse=True)
    assert newest_first.logs[0].created_at >= first.logs[0].created_at
    resumed = await client.resume_agent_run(run.id, "Also add a test")
    assert not resumed.is_terminal
    after = await client.get_agent_run_logs(run.id, skip=0, limit=100)
    assert any(entry.message_type == "USER_MESSAGE" for entry in after.logs)


async def test_checks_pull_requests_and_settings(client: AgentAutomationClient) -> None:
    repo_id, pr_id = await _writable_repo_and_pr(client)
    moved = await client.edit_pull_request(pr_id, "draft", repo_id=repo_id)
    assert moved.state == "draft"
    assert (await client.edit_pull_request(pr_id, "ready_for_review")).state == "ready_for_review"

    runs = [r for r in (await client.list_agent_runs(limit=100)).items if r.github_pull_requests]
    target = runs[0].id
    assert isinstance(await client.ban_checks(target), dict)
    assert isinstance(await client.unban_checks(target), dict)
    assert isinstance(await client.remove_from_pull_request(target), dict)

    before = await client.get_check_suite_settings(repo_id)
    await client.update_check_suite_settings(repo_id, check_retry_count=7)
    after = await client.get_check_suite_settings(repo_id)
    assert after.check_retry_count == 7
    assert after.ignored_checks == before.ignored_checks  # partial update left the rest alone


async def test_setup_oauth_and_webhooks(client: AgentAutomationClient) -> None:
    repo = (await client.list_repositories()).items[0]
    setup = await client.generate_setup_commands(repo.id, "install and run the tests")
    assert setup.agent_run_id
    status = await client.get_oauth_token_status()
    assert status and all(token.is_active for token in status)
    provider = sorted({token.provider for token in status if token.provider})[0]
    await client.revoke_oauth_tokens(provider)
    after = await client.get_oauth_token_status()
    assert [t.id for t in after] == [t.id for t in status]
    assert {t.provider for t in after if not t.is_active} == {provider}

    await client.set_webhook("https://example.invalid/hook", secret="s3cret", enabled=True)
    config = await client.get_webhook()
    assert config.url == "https://example.invalid/hook" and config.has_secret
    assert "s3cret" not in config.model_dump_json()
    assert isinstance(await client.test_webhook("https://example.invalid/hook"), dict)
    await client.delete_webhook()
    assert (await client.get_webhook()).url is None


async def test_analyze_sandbox_logs(client: AgentAutomationClient, sandbox: SandboxServer) -> None:
    analysis = await client.analyze_sandbox_logs(sandbox.app.state.world.sandbox_with_logs)
    assert analysis.agent_run_id


async def test_arguments_are_refused_before_anything_is_sent(client: AgentAutomationClient,
                                                             sandbox: SandboxServer) -> None:
    sent = len(requests_log(sandbox))
    bad_calls = [
        client.create_agent_run("   "),
        client.list_users(limit=0),
        client.list_agent_runs(skip=-1),
        client.update_check_suite_settings(1, check_retry_count=11),
        client.update_check_suite_settings(1),
        client.edit_pull_request(1, "merged"),  # type: ignore[arg-type]
        client.get_agent_run_logs(1, limit=101),
        client.set_webhook("not a url"),
        client.revoke_oauth_tokens("github; rm -rf"),
    ]
    for call in bad_calls:
        with pytest.raises(InvalidRequestError) as caught:
            await call
        assert caught.value.kind == "invalid_arguments"
    assert len(requests_log(sandbox)) == sent


async def test_every_operation_of_the_table_reached_the_sandbox(sandbox: SandboxServer) -> None:
    """Runs last in this module: the request log proves the tests above exercised every operation, but those
    a tool sends: `tests/tools/test_catalogue.py` sends each of them through this client with real arguments."""
    seen = {entry["operation"] for entry in requests_log(sandbox) if entry.get("operation")}
    by_tools = {op for case in CASES for op in case.sends}
    unsent = sorted(set(OPERATIONS) - by_tools - seen)
    assert not unsent, (f"{unsent} sent by no tool of tests/catalogue.py and by no test here: call each through the "
                        "client in tests/api/test_client.py (or give it a tool and its ToolCase)")


async def test_the_real_services_quirks_parse() -> None:
    """String integration ids, string tool output, upper-case statuses, zone-less timestamps, bare provider names."""
    with SandboxServer(SandboxConfig(seed=5, quirks=True)) as sandbox:
        async with ApiTransport(settings_for(sandbox)) as transport:
            client = AgentAutomationClient(transport, Credentials(sandbox.token, sandbox.org_id)).within(20)
            integrations = await client.list_integrations()
            assert any(isinstance(i.token_id, str) for i in integrations.integrations)
            runs = (await client.list_agent_runs(limit=100)).items
            assert {run.status for run in runs} & {"COMPLETE", "ERROR"}
            endings = {"COMPLETE", "ERROR", "STOPPED", "TIMEOUT", "MAX_ITERATIONS_REACHED", "OUT_OF_TOKENS"}
            assert all(run.is_terminal == (run.status in endings) for run in runs)
            assert any(run.created_at and "T" not in run.created_at for run in runs)
            outputs = [entry.tool_output for run in runs[:5]
                       for entry in (await client.get_agent_run_logs(run.id)).logs]
            assert any(isinstance(output, str) for output in outputs)
            assert any(isinstance(output, dict) for output in outputs)
            connected = await client.get_oauth_token_status()  # provider names, not records
            assert connected and all(t.provider and t.id is None and t.is_active is None for t in connected)
