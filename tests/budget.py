"""The context budget, measured one way for every test that states it: what a model reads of the default tools.

A model reads each tool's name, description and input schema; the rest of `tools/list` (output schemas,
annotations, `_meta`, task support) is for the host. Tokens are characters of compact JSON / 4.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from mcp import Client

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.server import build_server
from agent_automation_mcp.tools.declarations import CONTEXT_BUDGET_TOKENS
from agent_automation_mcp.tools.registry import TOOLSETS_DECLARED

BUDGET_TOKENS: Final = CONTEXT_BUDGET_TOKENS
READ_BY_A_MODEL: Final = ("name", "description", "inputSchema")


def tokens(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)) // 4


@dataclass(frozen=True, slots=True)
class Measure:
    tools: list[dict[str, Any]]  # the default tools/list, as wire JSON

    @property
    def read(self) -> list[dict[str, Any]]:
        return [{key: tool[key] for key in READ_BY_A_MODEL if key in tool} for tool in self.tools]

    @property
    def model_tokens(self) -> int:
        """What the budget counts."""
        return tokens(self.read)

    @property
    def whole_tokens(self) -> int:
        """The whole `tools/list` result, reported beside the budget."""
        return tokens({"tools": self.tools})

    def toolset_costs(self) -> list[tuple[str, int, int, list[tuple[str, int]]]]:
        """Each default toolset's cost against its share: (toolset, share, cost, its tools' costs), in listing
        order. A toolset's cost is what a model reads of its tools as the list holds them (with their separators)."""
        read = {tool["name"]: tool for tool in self.read}
        each = dict(self.costs())
        rows = []
        for toolset in TOOLSETS_DECLARED:
            if toolset.budget is None:
                continue
            names = [spec.name for spec in toolset.tools if spec.name in read]
            rows.append((toolset.name, toolset.budget, tokens([read[name] for name in names]),
                         [(name, each[name]) for name in names]))
        return rows

    def costs(self) -> list[tuple[str, int]]:
        """Each tool's share of the budget, largest first."""
        return sorted(((tool["name"], tokens(tool)) for tool in self.read), key=lambda cost: (-cost[1], cost[0]))


async def measure(settings: ServerSettings | None = None) -> Measure:
    async with Client(build_server(ApiSettings(), settings or ServerSettings())) as client:
        listed = (await client.list_tools()).tools
    return Measure([tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed])
