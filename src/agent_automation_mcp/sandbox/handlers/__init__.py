"""Every operation's endpoint, by operation name (the table in `api.operations` says where each is served)."""

from __future__ import annotations

from types import MappingProxyType

from ..call import Endpoint
from . import account, org, repos, runs

ENDPOINTS: MappingProxyType[str, Endpoint] = MappingProxyType(
    {**org.ENDPOINTS, **runs.ENDPOINTS, **repos.ENDPOINTS, **account.ENDPOINTS}
)
