"""The MCP Apps view of agent runs (`io.modelcontextprotocol/ui`): one HTML page that hosts render for the run tools.

A host that renders MCP Apps reads `_meta.ui.resourceUri` on a tool, fetches that `ui://` resource and shows it in a
sandboxed iframe fed with the tool's result; a client without Apps sees the same tools and results as before, plus
a few bytes of `_meta`. The page reads only the results the host hands it and calls only read tools through the
host (see `runs.html`); the server registers this extension and stamps `meta_for(tool)` on each tool it adds.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files
from typing import Any, Final

from mcp.server.apps import Apps, ResourceCsp

# Short: the URI is repeated on five tools in every tools/list, which has a 4,000-token budget.
VIEW_URI: Final = "ui://runs"
# The tools whose results the page draws: one run, a list of runs, a trace page.
VIEWED_TOOLS: Final = frozenset({"get_agent_run", "create_agent_run", "resume_agent_run", "list_agent_runs",
                                 "get_agent_run_logs"})
_SCRIPT: Final = re.compile(r"<script>(.*?)</script>", re.DOTALL)
_STYLE: Final = re.compile(r"<style>(.*?)</style>", re.DOTALL)


class RunsView(Apps):
    """The Apps extension holding the runs page; tools are the server's, bound to the page by `meta_for`."""

    def __init__(self) -> None:
        super().__init__()
        # `_meta.ui.csp` empty: the page loads nothing from any origin; its own policy (below) says the same.
        self.add_html_resource(VIEW_URI, page(), name="agent-runs-view", title="Agent runs",
                               description="A run's status, trace and pull requests, refreshed while it goes on.",
                               csp=ResourceCsp(), prefers_border=True)

    def meta_for(self, tool: str) -> dict[str, Any] | None:
        """The `_meta` that binds `tool` to the page, or None for a tool the page does not draw."""
        return {"ui": {"resourceUri": VIEW_URI}} if tool in VIEWED_TOOLS else None


def page() -> str:
    """`runs.html` with a Content-Security-Policy that admits its own script and style and nothing else.

    The policy names them by hash, computed here so that editing the page needs no build step: an injected
    `<script>` or inline event handler (`onerror=`) cannot run even if some text ever reached the page as markup.
    """
    html = files(__package__).joinpath("runs.html").read_text(encoding="utf-8")
    (script,), (style,) = _SCRIPT.findall(html), _STYLE.findall(html)
    policy = ("default-src 'none'; "
              f"script-src '{_sha256(script)}'; style-src '{_sha256(style)}'; "
              "img-src data:; base-uri 'none'; form-action 'none'")
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    return html.replace("<head>", f"<head>\n{meta}", 1)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
