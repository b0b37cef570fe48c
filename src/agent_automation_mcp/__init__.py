"""MCP server for the Agent Automation Service (Codegen's public API)."""

__version__ = "0.1.0"
