"""The runs view as the server serves it: one app resource, bound to the run tools, loading nothing from anywhere."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html import unescape

import pytest
from mcp import Client

from agent_automation_mcp.api.limits import parse_rate_limits
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.api.statuses import STATUSES
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.registry import all_tools
from agent_automation_mcp.toolsets import parse_toolsets
from agent_automation_mcp.view import VIEW_URI, page

APP_MIME_TYPE = "text/html;profile=mcp-app"


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_view_is_one_app_resource_with_no_origin_to_load_from(mode: str) -> None:
    async with Client(build_server(ApiSettings(), ServerSettings()), mode=mode) as client:
        (listed,) = (await client.list_resources()).resources
        (content,) = (await client.read_resource(VIEW_URI)).contents
    assert listed.uri == VIEW_URI and listed.mime_type == APP_MIME_TYPE
    assert content.mime_type == APP_MIME_TYPE and content.text == page(10)  # the service's published limits
    assert content.meta == {"ui": {"csp": {}, "prefersBorder": True}}  # no connect, resource or frame origins


@pytest.mark.anyio
@pytest.mark.parametrize(("limits", "seconds"), [("standard=60/30s", 10), ("standard=10/60s", 120),
                                                 ("standard=2000/30s", 5)])
async def test_the_view_refreshes_a_run_no_faster_than_its_share_of_the_tokens_limit(limits: str, seconds: int) -> None:
    api = ApiSettings(rate_limits=parse_rate_limits(limits))
    async with Client(build_server(api, ServerSettings())) as client:
        (content,) = (await client.read_resource(VIEW_URI)).contents
    assert f'<html lang="en" data-refresh-seconds="{seconds}" data-statuses=' in content.text
    assert "dataset.refreshSeconds" in content.text  # what the page's script paces itself by


def test_the_page_is_given_every_status_the_table_knows_and_keeps_no_list_of_its_own() -> None:
    html = page()
    given = json.loads(unescape(re.search(r'data-statuses="([^"]*)"', html).group(1)))  # type: ignore[union-attr]
    assert given == {status.value: status.kind.word for status in STATUSES}
    assert given["TIMEOUT"] == "failed" and given["PAUSED"] == "paused" and given["EVALUATION"] == "running"
    assert "dataset.statuses" in html and '"COMPLETE"' not in html.split("<script>")[1]


def test_the_page_admits_its_own_script_and_style_and_nothing_else() -> None:
    html = page()
    (policy,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)
    (style,) = re.findall(r"<style>(.*?)</style>", html, re.S)
    rules = dict(rule.strip().split(" ", 1) for rule in policy.split(";"))
    assert rules["default-src"] == "'none'" and rules["script-src"] == _sha256(script)
    assert rules["style-src"] == _sha256(style) and "unsafe" not in policy and "http" not in policy
    assert html.count("<script") == 1 and "<link" not in html and "@import" not in html and "url(" not in style
    assert not re.search(r"\s(src|href|on[a-z]+)=", html.split("<script>")[0])  # nothing loaded, no inline handler


def test_before_any_result_the_page_says_what_it_is() -> None:
    main = page().split('<main id="view">')[1].split("</main>")[0]
    assert 'role="status"' in main and "Agent runs view" in main and "when the tool answers" in main


def test_service_text_has_no_way_into_the_page_as_markup() -> None:
    """The page builds its DOM from elements and text nodes; none of the sinks that parse strings as HTML or code."""
    script = re.sub(r"//[^\n]*", "", re.findall(r"<script>(.*?)</script>", page(), re.S)[0])  # code, not comments
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(",
                 "srcdoc", "javascript:", "setAttribute(\"on", "setTimeout(\"", "setInterval(\""):
        assert sink not in script, sink
    # Links open through the host, only when https, from the service's own web_url and pull request url fields.
    assert 'url.protocol === "https:"' in script
    assert re.findall(r"(?<!function )linkTo\(([\w.]+)", script) == ["pr.url", "pr.url", "run.web_url"]
    assert re.findall(r"(?<!function )httpsUrl\(([\w.]+)", script) == ["url", "run.web_url"]  # linkTo's, and a button
    assert re.findall(r"(?<!function )openLink\((\w+)\)", script) == ["safe", "web"]  # both checked by httpsUrl first


@pytest.mark.anyio
async def test_the_run_tools_name_the_view_and_no_other_tool_carries_meta() -> None:
    every = ServerSettings(toolsets=parse_toolsets("all"))
    async with Client(build_server(ApiSettings(), every)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    viewed = {spec.name for spec in all_tools() if spec.viewed}  # as each tool declares (`toolset.tool(viewed=...)`)
    assert {"get_agent_run", "create_agent_run", "list_agent_runs", "get_agent_run_logs"} <= viewed <= set(tools)
    for name, tool in tools.items():
        # Every tool stays visible to the model: the view calls only tools a model may call too.
        assert tool.meta == ({"ui": {"resourceUri": VIEW_URI}} if name in viewed else None), name
