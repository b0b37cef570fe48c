"""Agent runs followed as MCP tasks (both protocol eras): sealed ids, the shared status read, the extension."""

from .extension import TASKS_EXTENSION, RunTasks

__all__ = ["TASKS_EXTENSION", "RunTasks"]
