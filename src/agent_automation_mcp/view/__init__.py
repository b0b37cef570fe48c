"""The MCP Apps view of agent runs (`io.modelcontextprotocol/ui`): one HTML page that hosts render for the run tools.

A host that renders MCP Apps reads `_meta.ui.resourceUri` on a tool, fetches that `ui://` resource and shows it in a
sandboxed iframe fed with the tool's result; a client without Apps sees the same tools and results as before, plus
a few bytes of `_meta`. The page reads only the results the host hands it and calls only read tools through the
host (see `runs.html`); the server registers this extension and stamps `meta_for(tool)` on each tool it adds, from
the tool's declaration (`viewed`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Mapping
from html import escape as html_escape
from importlib.resources import files
from typing import Any, Final

from mcp.server.apps import Apps, ResourceCsp

from ..api.limits import DEFAULT_RATE_LIMITS, STANDARD, RateLimit
from ..api.statuses import kinds_by_value
from ..tools.declarations import ToolSpec

# Short: the URI is repeated on every viewed tool in each tools/list.
VIEW_URI: Final = "ui://runs"
# An open view may spend this share of its token's `standard` bucket (get_agent_run) re-reading a run: several views
# following runs, and a model working beside them, still fit. The default 60/30 s gives a refresh every 10 s at most.
VIEW_SHARE: Final = 1 / 20
MIN_REFRESH_SECONDS: Final = 5
_SCRIPT: Final = re.compile(r"<script>(.*?)</script>", re.DOTALL)
_STYLE: Final = re.compile(r"<style>(.*?)</style>", re.DOTALL)


class RunsView(Apps):
    """The Apps extension holding the runs page; tools are the server's, bound to the page by `meta_for`."""

    def __init__(self, rate_limits: Mapping[str, RateLimit] = DEFAULT_RATE_LIMITS) -> None:
        super().__init__()
        # `_meta.ui.csp` empty: the page loads nothing from any origin; its own policy (below) says the same.
        self.add_html_resource(VIEW_URI, page(refresh_seconds(rate_limits[STANDARD])), name="agent-runs-view",
                               title="Agent runs", csp=ResourceCsp(), prefers_border=True,
                               description="A run's status, trace and pull requests, refreshed while it goes on.")

    @staticmethod
    def meta_for(tool: ToolSpec) -> dict[str, Any] | None:
        """The `_meta` that binds `tool` to the page, or None for a tool whose declaration does not say the page draws
        its result (`viewed`)."""
        return {"ui": {"resourceUri": VIEW_URI}} if tool.viewed else None


def refresh_seconds(reads: RateLimit) -> int:
    """How often an open view may re-read a run, at the fastest, to stay within its share of `reads`."""
    return max(MIN_REFRESH_SECONDS, math.ceil(reads.window / (reads.count * VIEW_SHARE)))


def page(refresh: int = MIN_REFRESH_SECONDS) -> str:
    """`runs.html` with the fastest refresh the server allows it (`data-refresh-seconds` on `<html>`), what each status
    means (`data-statuses`, from `api.statuses`: the page keeps no list of its own), and a Content-Security-Policy that
    admits its own script and style and nothing else.

    The policy names them by hash, computed here so that editing the page needs no build step: an injected
    `<script>` or inline event handler (`onerror=`) cannot run even if some text ever reached the page as markup.
    """
    html = files(__package__).joinpath("runs.html").read_text(encoding="utf-8")
    (script,), (style,) = _SCRIPT.findall(html), _STYLE.findall(html)
    policy = ("default-src 'none'; "
              f"script-src '{_sha256(script)}'; style-src '{_sha256(style)}'; "
              "base-uri 'none'; form-action 'none'")
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    statuses = html_escape(json.dumps(kinds_by_value(), separators=(",", ":")), quote=True)
    html = html.replace("<html lang=\"en\">",
                        f'<html lang="en" data-refresh-seconds="{refresh}" data-statuses="{statuses}">', 1)
    return html.replace("<head>", f"<head>\n{meta}", 1)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
