"""Shared fixtures: the anyio backend and the reference OpenAPI document (a vendored copy, so CI needs nothing else)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

OPENAPI_PATH = Path(__file__).parent / "sandbox" / "codegen-openapi.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def openapi_document() -> dict[str, Any]:
    return json.loads(OPENAPI_PATH.read_text())
