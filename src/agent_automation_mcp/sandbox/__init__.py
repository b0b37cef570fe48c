"""The sandbox: a faithful in-memory simulator of the Agent Automation Service, for tests, demos and newcomers."""

from .app import create_app
from .config import Faults, SandboxConfig
from .server import SandboxServer

__all__ = ["Faults", "SandboxConfig", "SandboxServer", "create_app"]
