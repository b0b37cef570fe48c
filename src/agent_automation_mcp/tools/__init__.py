"""MCP tools, one module per toolset, each declared with `declarations.Toolset`; `registry` lists them and
decides which are offered."""

from .declarations import Toolset, ToolSpec
from .registry import all_tools, select_tools

__all__ = ["ToolSpec", "Toolset", "all_tools", "select_tools"]
