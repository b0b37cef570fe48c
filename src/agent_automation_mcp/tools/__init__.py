"""MCP tools, one module per toolset; `registry` decides which are offered."""

from .registry import Toolset, ToolSpec, all_tools, select_tools

__all__ = ["ToolSpec", "Toolset", "all_tools", "select_tools"]
