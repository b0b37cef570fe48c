"""The HTTP server's parser."""

from __future__ import annotations

import platform
import sys

import pytest

from agent_automation_mcp.remote.serve import http_protocol


@pytest.mark.skipif(platform.python_implementation() != "CPython", reason="httptools is a dependency on CPython")
def test_http_serving_parses_with_httptools() -> None:
    assert http_protocol() == "httptools"


def test_http_serving_falls_back_to_h11_without_httptools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httptools", None)  # `import httptools` now raises ImportError
    assert http_protocol() == "h11"
