"""The typed REST client: usable on its own, knows nothing of MCP."""

from . import errors, models
from .client import AgentAutomationClient
from .credentials import Credentials
from .operations import EXCLUDED_OPERATIONS, OPERATIONS, Operation
from .transport import ApiTransport

__all__ = [
    "EXCLUDED_OPERATIONS",
    "OPERATIONS",
    "AgentAutomationClient",
    "ApiTransport",
    "Credentials",
    "Operation",
    "errors",
    "models",
]
