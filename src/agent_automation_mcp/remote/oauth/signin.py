"""`--auth oauth`: this server as the OAuth 2.1 authorization server in front of the service, assembled.

`SignIn` holds the store, the keys, the clients and the grants; it gives the app its routes and the gate its
one check of our access tokens (`admit`): a token of ours stands for a grant, and the request's caller is the
grant's service token and organisation (`caller.py`), so everything after the gate is the `--auth request` path (a
client's `X-Organization-Id` naming another organisation is refused, as it would be beside a token).
Tokens and client ids are sealed with `AGENT_AUTOMATION_STATE_KEYS`, the service token inside a grant encrypted
with `AGENT_AUTOMATION_OAUTH_KEYS` too: a sign-in needs both key sets, and no longer Redis (`grants.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Final

from starlette.routing import Route
from starlette.types import Scope

from ...api.credentials import Credentials
from ...api.transport import ApiTransport
from ...caching import SharedStore
from ...caller import Caller
from ...config import ADDRESSES_PER_NETWORK, RemoteSettings
from ...headers import READONLY_HEADER
from ..budgets import Budget
from ..metrics import Metrics
from ..organizations import acting_in, named_beside_sign_in, served_organization
from ..refusals import Refused, refusal
from ..scopes import is_read_only
from ..verdicts import TokenVerdicts
from .client_rules import RedirectHosts
from .clients import Clients
from .cutoffs import Cutoffs
from .documents import MetadataDocuments
from .endpoints import Endpoints
from .grants import Grants, is_ours
from .metadata import ServerMetadata
from .preflight import check_oauth_settings
from .sealing import Sealer
from .store import Store, StoreUnavailable, create_store
from .tokens import TokenSeal

logger = logging.getLogger(__name__)

# Requests per sign-in, per endpoint: one registration, two or three consent requests (the page, the form,
# perhaps the choice of organisation), one token request plus refreshes; a network, two addresses' worth. None has
# a total over every stranger: a registration is sealed into its client id and costs Redis nothing (`clients.py`),
# so a total would bound nothing but new colleagues (120 registrations a minute from 6 networks refused every new
# connection from a fresh network); what a registration costs is its request, which the balancer bounds.
PER_SIGNIN: Final = {"register": 1, "authorize": 3, "token": 3, "revoke": 3}


def signin_budgets(signins: int) -> list[Budget]:
    """The sign-in endpoints' budgets, sized to fit `signins` sign-ins per address and minute."""
    return [Budget(endpoint, per * signins, ADDRESSES_PER_NETWORK * per * signins)
            for endpoint, per in PER_SIGNIN.items()]


class SignIn:
    def __init__(self, metadata: ServerMetadata, store: Store, sealer: Sealer, state_keys: Sequence[str],
                 verdicts: TokenVerdicts, transport: Callable[[], ApiTransport | None], metrics: Metrics,
                 trusted_client_hosts: tuple[str, ...] = (), cutoffs: Cutoffs | None = None,
                 redirect_hosts: RedirectHosts | None = None) -> None:
        self.metadata = metadata
        self.store = store
        self.grants = Grants(store, sealer, TokenSeal(state_keys, metadata.resource), cutoffs)
        self.clients = Clients(state_keys, metadata.resource, store, MetadataDocuments(store, trusted_client_hosts),
                               redirect_hosts)
        self.endpoints = Endpoints(metadata, self.clients, self.grants, sealer, verdicts, transport, metrics)

    @classmethod
    def from_settings(cls, remote: RemoteSettings, shared: SharedStore, verdicts: TokenVerdicts,
                      transport: Callable[[], ApiTransport | None], metrics: Metrics) -> SignIn:
        """`verdicts` holds the budgets, `signin_budgets` among them, and the allowed organisations."""
        public_url = check_oauth_settings(remote)
        if remote.oauth_keys:
            sealer = Sealer(remote.oauth_keys)
        else:
            logger.warning("AGENT_AUTOMATION_OAUTH_KEYS is not set: sign-ins are sealed with a key that ends with "
                           "this process (fine on loopback; set the keys so they outlive a restart)")
            sealer = Sealer.ephemeral()
        redirect_hosts = RedirectHosts.of(remote.oauth_redirect_hosts)
        if redirect_hosts.any:
            logger.warning("AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS allows any host: anyone may register an app named "
                           "\"Claude\" that sends people back to their own address, and it gets this server's real "
                           "consent page (which warns them). For a company deployment, name the chat apps' hosts "
                           "instead")
        return cls(ServerMetadata(public_url), create_store(shared), sealer, remote.state_keys, verdicts, transport,
                   metrics, remote.oauth_trusted_client_hosts, Cutoffs.of(remote), redirect_hosts)

    @property
    def challenge(self) -> str:
        return self.metadata.challenge

    @staticmethod
    def owns(token: str) -> bool:
        """Whether a bearer token is one of our access tokens (a service token is let through as in `request` mode)."""
        return is_ours(token)

    def routes(self) -> list[Route]:
        return self.endpoints.routes()

    async def admit(self, scope: Scope, token: str, named: int | None, transport: ApiTransport,
                    verdicts: TokenVerdicts, address: str | None) -> Caller | Refused:
        """The caller a request with one of our access tokens is made for, its grant's; or its refusal (401; 503 for
        a token of the previous scheme while the shared store does not answer). `named`: the client's own
        `X-Organization-Id`, for which the grant's organisation stands in."""
        try:
            signed_in = await self.grants.signed_in(token)
        except StoreUnavailable:
            return _refusal(503, "sign-ins cannot be checked just now", self.challenge)
        if signed_in is None:
            return _refusal(401, "this sign-in has expired or ended", self.challenge)
        # The grant vouches for its token (this server checked it at the sign-in): no strangers' budget is spent.
        verdict = await verdicts.verdict(transport, signed_in.service_token, address, vouched=True)
        # The operator's end of a person, for a sign-in an earlier release sealed without its person: the token's user.
        if self.grants.cutoffs.ended(signed_in.secret, verdict.user):
            return _refusal(401, "this sign-in has expired or ended", self.challenge)
        if not verdict.accepted:
            with suppress(StoreUnavailable):  # ended now if the store answers; refused again at the next call if not
                await self.grants.end(signed_in.grant.id)
            return _refusal(401, "the service no longer accepts the token this sign-in was made with",
                            self.challenge)
        chosen = signed_in.grant.org_id
        if refused := named_beside_sign_in(named, chosen, verdict.served, verdicts.organizations):
            return refused
        read_only = is_read_only(signed_in.grant.scopes)
        if read_only:  # listed and offered as to a request that asks for reading only, whatever the client sent
            scope["headers"] = _reading_only(scope["headers"])
        refused = served_organization(chosen, verdict.served, verdicts.organizations, signed_in=True)
        return refused or Caller(Credentials(signed_in.service_token, acting_in(chosen, verdict.served)),
                                 read_only=read_only, signed_in=True)

    async def close(self) -> None:
        await self.store.close()


def _refusal(status: int, message: str, challenge: str) -> Refused:
    if status == 503:
        return refusal(503, message, "Send the request again in a few seconds.", headers={"Retry-After": "5"})
    return refusal(401, message, "Sign in again: your MCP client does so when it sees this answer.",
                   headers={"WWW-Authenticate": f'{challenge}, error="invalid_token"'})


def _reading_only(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request's headers narrowed to reading (`X-MCP-Readonly: true`), as the server lists and offers tools."""
    kept = [(name, value) for name, value in headers if name.lower() != READONLY_HEADER.encode()]
    return [*kept, (READONLY_HEADER.encode(), b"true")]
