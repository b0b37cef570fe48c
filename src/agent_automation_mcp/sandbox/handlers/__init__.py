"""Every operation's endpoint, by operation name (the table in `api.operations` says where each is served)."""

from __future__ import annotations

from types import MappingProxyType

from ..call import Endpoint
from . import account, org, repos, runs

AREAS = (org, runs, repos, account)  # one module an area of the service, each with its ENDPOINTS
ENDPOINTS: MappingProxyType[str, Endpoint] = MappingProxyType(
    {name: endpoint for area in AREAS for name, endpoint in area.ENDPOINTS.items()}
)
