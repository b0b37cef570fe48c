"""The sign-in endpoints: metadata, `/register`, `/authorize` (the consent page), `/token` and `/revoke`.

`/register` and `/token` are the SDK's own handlers over `SignInProvider`; around them, and around ours, every
request's body is bounded to `MAX_BODY_BYTES` and must arrive within `bodies.BODY_SECONDS` (else 408), each request
is counted against its address's budget for the endpoint (`budgets.py`; a token request carrying a live code or
refresh token spends nothing), and writes one access line. A token pasted
on the consent page is checked with the service only as `/mcp` checks one: from the strangers' budget unless it was
accepted lately, and once, never retried (`verdicts.py`). An error at `/authorize` before the client and its
redirect URI are known goes to the person in the browser as a page, never to an unchecked redirect.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Final
from urllib.parse import urlsplit

from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.provider import construct_redirect_uri
from mcp.server.auth.routes import cors_middleware
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp

from ...api.client import AgentAutomationClient
from ...api.credentials import Credentials
from ...api.errors import ApiError, AuthenticationError
from ...api.transport import ApiTransport
from ..access import SignInAccess, note_reason
from ..bodies import read_within
from ..budgets import OverBudget
from ..forwarded import client_address
from ..metrics import Metrics
from ..organizations import ORG_NOT_ALLOWED
from ..scopes import is_read_only, with_read_only
from ..verdicts import TokenVerdicts
from .clients import Clients, SecretHashAuthenticator
from .consent import ConsentForm, consent_page, error_page, new_nonce, page_headers
from .documents import is_document_url
from .grants import Grants
from .metadata import ServerMetadata
from .provider import SignInProvider
from .sealing import Sealer
from .store import StoreUnavailable

MAX_BODY_BYTES: Final = 64 * 1024
REQUEST_SECONDS: Final = 900  # a consent page must be answered within this time
CSRF_COOKIE: Final = "aamcp_csrf"
CHECK_SECONDS: Final = 10.0
MAX_STATE_CHARS: Final = 1000
Handler = Callable[[Request], Awaitable[Response]]
PAGE_GONE: Final = "This sign-in page has expired, or was used already (the app has its answer)."
UNSHARED_REVOCATION: Final = (
    "The sign-in is ended on the replica that answered, but the store the replicas share is unreachable: the others "
    "still honour its tokens (an access token for at most an hour) until it answers again, when the end reaches them "
    "all. Send the revocation again in a few seconds to be sure.")


@dataclass(frozen=True, slots=True)
class Unusable:
    """Why a pasted token cannot sign in: a short reason (the access line's) and the page's message."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Usable:
    """A pasted token the service accepts: whose it is, and the organisations it sees that this server serves."""

    user: int | None
    organizations: list[tuple[int, str | None]]


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """What a checked `/authorize` request asked for, sealed into the consent form between its steps."""

    client_id: str
    redirect_uri: str
    code_challenge: str
    state: str | None
    scopes: list[str]
    page: str = ""  # names the page in the store, which ends it REQUEST_SECONDS after it was shown (by its clock)


class Endpoints:
    def __init__(self, metadata: ServerMetadata, clients: Clients, grants: Grants, sealer: Sealer,
                 verdicts: TokenVerdicts, transport: Callable[[], ApiTransport | None], metrics: Metrics) -> None:
        self.metadata = metadata
        self.clients = clients
        self.grants = grants
        self.sealer = sealer
        self.verdicts = verdicts
        self.budgets = verdicts.budgets
        self.transport = transport
        self.metrics = metrics
        self.organizations = verdicts.organizations
        provider: Any = SignInProvider(clients, grants)
        self.token_handler = TokenHandler(provider, SecretHashAuthenticator(provider))
        self.registration = RegistrationHandler(provider, ClientRegistrationOptions(enabled=True))

    def routes(self) -> list[Route]:
        resource = ProtectedResourceMetadataHandler(self.metadata.protected_resource()).handle
        server = MetadataHandler(self.metadata.authorization_server()).handle
        read = ["GET", "OPTIONS"]
        def logged(endpoint: str, app: ASGIApp) -> ASGIApp:
            return SignInAccess(app, endpoint, self.metrics)

        return [
            Route("/.well-known/oauth-protected-resource", logged("metadata", cors_middleware(resource, read)),
                  methods=read),
            Route("/.well-known/oauth-protected-resource/mcp", logged("metadata", cors_middleware(resource, read)),
                  methods=read),
            Route("/.well-known/oauth-authorization-server", logged("metadata", cors_middleware(server, read)),
                  methods=read),
            Route("/authorize", logged("authorize", _bounded(self._budgeted("authorize", self.authorize))),
                  methods=["GET", "POST"]),
            Route("/token", logged("token", self._public("token", self.token)), methods=["POST", "OPTIONS"]),
            Route("/register", logged("register", self._public("register", self.registration.handle)),
                  methods=["POST", "OPTIONS"]),
            Route("/revoke", logged("revoke", self._public("revoke", self.revoke)), methods=["POST", "OPTIONS"]),
        ]

    def _public(self, endpoint: str, handler: Handler) -> ASGIApp:
        """An endpoint clients call directly (also from a browser: CORS), bounded and budgeted."""
        return CORSMiddleware(_bounded(self._budgeted(endpoint, handler)), allow_origins="*",
                              allow_methods=["POST", "OPTIONS"], allow_headers=[MCP_PROTOCOL_VERSION_HEADER])

    def _budgeted(self, endpoint: str, handler: Handler) -> Handler:
        """`handler`, once the address's budget for `endpoint` allows; a page for the person at `/authorize`,
        JSON for a client elsewhere, when it does not (or when the store does not answer)."""
        async def budgeted(request: Request) -> Response:
            address = client_address(request.scope)
            try:
                if not await self._holds_credential(endpoint, request):
                    await self.budgets.spend(endpoint, address)
                return await handler(request)
            except OverBudget as exc:
                note_reason("rate_limited")
                refusal = (429, "too_many_requests", f"Too many sign-in requests {exc.whose}; wait a minute.",
                           str(max(1, math.ceil(exc.retry_after))))
            except StoreUnavailable:
                note_reason("unavailable")
                refusal = (503, "temporarily_unavailable", "Sign-in is unavailable for a moment; try again.", "5")
            status, error, message, retry_after = refusal
            headers = {"Retry-After": retry_after, "Cache-Control": "no-store"}
            if endpoint == "authorize":
                nonce = new_nonce()
                return self._page(error_page(message, nonce), nonce, status, headers)
            return JSONResponse({"error": error, "error_description": message}, status_code=status, headers=headers)
        return budgeted

    async def _holds_credential(self, endpoint: str, request: Request) -> bool:
        """Whether a token request carries a live code or refresh token: its holder signed in, and spends nothing."""
        if endpoint != "token" or request.method != "POST":
            return False
        form = await request.form()
        grant_type = form.get("grant_type")
        secret = form.get("refresh_token" if grant_type == "refresh_token" else "code")
        return isinstance(secret, str) and await self.grants.is_live(secret)

    async def token(self, request: Request) -> Response:
        form = await request.form()
        resource = form.get("resource")
        if isinstance(resource, str) and not self.metadata.is_resource(resource):
            return JSONResponse({"error": "invalid_target", "error_description": "this server issues tokens only "
                                 f"for {self.metadata.resource}"}, status_code=400,
                                headers={"Cache-Control": "no-store"})
        answer: Response = await self.token_handler.handle(request)  # the SDK leaves `handle` unannotated
        return answer

    async def revoke(self, request: Request) -> Response:
        """RFC 7009, for public clients too (no client_secret): the token itself is the authority, and either
        token of a grant ends the whole grant. An unknown token is no error."""
        form = await request.form()
        token = form.get("token")
        if not isinstance(token, str) or not token:
            return JSONResponse({"error": "invalid_request", "error_description": "token is required"},
                                status_code=400)
        try:
            await self.grants.revoke(token)
        except StoreUnavailable:
            note_reason("unavailable")
            return JSONResponse({"error": "temporarily_unavailable", "error_description": UNSHARED_REVOCATION},
                                status_code=503, headers={"Retry-After": "5", "Cache-Control": "no-store"})
        return Response(status_code=200, headers={"Cache-Control": "no-store"})

    async def authorize(self, request: Request) -> Response:
        nonce = new_nonce()
        if request.method == "GET":
            return await self._consent(request, nonce)
        return await self._answer(request, nonce)

    async def _consent(self, request: Request, nonce: str) -> Response:
        params = request.query_params
        checked = await self._checked_client(params.get("client_id"), params.get("redirect_uri"))
        if isinstance(checked, str):
            note_reason("invalid_client")
            return self._page(error_page(checked, nonce), nonce, 400)
        client, redirect_uri = checked
        state = params.get("state")
        if state is not None and len(state) > MAX_STATE_CHARS:
            note_reason("invalid_request")
            return self._page(error_page("The request's state is too long.", nonce), nonce, 400)
        problem = _request_problem(params.get("response_type"), params.get("code_challenge"),
                                   params.get("code_challenge_method"))
        resource = params.get("resource")
        if problem is None and resource is not None and not self.metadata.is_resource(resource):
            problem = ("invalid_target", f"this server signs in only for {self.metadata.resource}")
        if problem is not None:
            return self._back(redirect_uri, state, error=problem[0], error_description=problem[1])
        asked = AuthorizationRequest(client_id=client.client_id, redirect_uri=redirect_uri,
                                     code_challenge=params["code_challenge"], state=state,
                                     scopes=(params.get("scope") or "").split()[:20], page=secrets.token_urlsafe(16))
        await self.grants.store.put(f"consent:{asked.page}", "1", REQUEST_SECONDS)
        browser = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
        response = self._form(client, asked, browser, nonce)
        response.set_cookie(CSRF_COOKIE, browser, max_age=REQUEST_SECONDS, path="/authorize", httponly=True,
                            samesite="lax", secure=self.metadata.public_url.startswith("https://"))
        return response

    async def _answer(self, request: Request, nonce: str) -> Response:
        form = await request.form()
        csrf, browser = form.get("csrf"), request.cookies.get(CSRF_COOKIE)
        if not isinstance(csrf, str) or not browser or not self.sealer.signed(browser, csrf):
            note_reason("csrf")
            return self._page(error_page("This form did not come from this browser's sign-in page, or the page "
                                         "was opened too long ago.", nonce), nonce, 403)
        sealed = form.get("request")
        opened = self.sealer.open(sealed) if isinstance(sealed, str) else None
        step: dict[str, Any] = json.loads(opened) if opened is not None else {}  # as `_form` sealed it
        asked = AuthorizationRequest(**step["asked"]) if step else None
        if asked is None or await self.grants.store.get(f"consent:{asked.page}") is None:
            note_reason("expired")
            return self._page(error_page(PAGE_GONE, nonce), nonce, 400)
        checked = await self._checked_client(asked.client_id, asked.redirect_uri)
        if isinstance(checked, str):
            note_reason("invalid_client")
            return self._page(error_page(checked, nonce), nonce, 400)
        client = checked[0]
        if form.get("action") != "approve":
            return self._back(asked.redirect_uri, asked.state, error="access_denied",
                              error_description="the user denied the request")
        if form.get("access") == "read":  # the person chose read only: carried through the organisation step
            asked = replace(asked, scopes=with_read_only(asked.scopes))
        if "token" in step:  # the organisation step: the token was checked at the first
            organization = form.get("organization")
            chosen = [org for org, _ in step["organizations"] if str(org) == organization]
            if not chosen:
                note_reason("invalid_request")
                return self._form(client, asked, browser, nonce, "Choose one of the organisations listed.",
                                  step["organizations"], step["token"], step.get("user"))
            return await self._approved(asked, self.sealer.open(step["token"]) or "", chosen[0], step.get("user"))
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        outcome = await self._check_token(token, client_address(request.scope))
        if isinstance(outcome, Unusable):
            note_reason(outcome.reason)
            return self._form(client, asked, browser, nonce, outcome.message)
        if len(outcome.organizations) == 1:
            return await self._approved(asked, token, outcome.organizations[0][0], outcome.user)
        return self._form(client, asked, browser, nonce, None, outcome.organizations, self.sealer.seal(token),
                          outcome.user)

    async def _approved(self, asked: AuthorizationRequest, token: str, org_id: int, user: int | None) -> Response:
        """A code for the approved request: once per page, whichever of its forms (posted twice, or from two tabs)
        comes first."""
        if await self.grants.store.take(f"consent:{asked.page}") is None:
            note_reason("expired")
            nonce = new_nonce()
            return self._page(error_page(PAGE_GONE, nonce), nonce, 400)
        code = await self.grants.issue_code(client_id=asked.client_id, redirect_uri=asked.redirect_uri,
                                            code_challenge=asked.code_challenge, scopes=asked.scopes,
                                            service_token=token, org_id=org_id, user=user)
        return self._back(asked.redirect_uri, asked.state, code=code)

    async def _check_token(self, token: str, address: str | None) -> Unusable | Usable:
        """The organisations the token sees (those this server serves), or why it cannot be used (shown on the page,
        the form kept: an unknown token from an address or network with no checks left is not checked yet)."""
        try:
            credentials = Credentials(token)
        except ValueError:
            return Unusable("bad_token", "Paste your API token: printable characters without spaces.")
        transport = self.transport()
        if transport is None:
            return Unusable("unavailable", "The server is starting; try again in a moment.")
        try:
            await self.verdicts.spend_unless_known(credentials, address)
        except OverBudget as exc:
            return Unusable("rate_limited", f"Too many unknown tokens were checked {exc.whose} in the last minute; "
                            f"this one was not checked yet. Try again in {max(1, math.ceil(exc.retry_after))} s.")
        # Sent once, as `/mcp`'s check: a retry would only add requests to a service that is failing already.
        client = AgentAutomationClient(transport, credentials).within(CHECK_SECONDS).single_attempt()
        try:
            user = await client.get_current_user()
            organizations = await self.organizations.of_token(client)
        except AuthenticationError:
            return Unusable("token_refused", "The service refused this token (invalid or revoked). Create a new one "
                            "at https://codegen.com/token.")
        except ApiError:
            return Unusable("upstream_error", "The service could not be asked about this token just now; try again "
                            "in a minute.")
        if not organizations.seen:
            return Unusable("no_organization", "This token sees no organisation at the service.")
        if not organizations.served:
            return Unusable(ORG_NOT_ALLOWED, self.organizations.refusal)
        await self.verdicts.remember_accepted(credentials, address)
        return Usable(user.id, [(org.id, org.name) for org in organizations.served])

    async def _checked_client(self, client_id: str | None, redirect_uri: str | None
                              ) -> str | tuple[OAuthClientInformationFull, str]:
        """The client and the redirect URI to use, or why there is none (shown as a page, never redirected to)."""
        client = await self.clients.get(client_id) if client_id else None
        if client is None:
            return ("This app is not known to this server (its registration has ended, or its client_id is wrong): "
                    "remove this server from the app and add it again.")
        registered = [str(uri) for uri in client.redirect_uris or []]
        if redirect_uri is None and len(registered) == 1:
            return client, registered[0]
        if redirect_uri is None or redirect_uri not in registered:
            return "This app asked to return to an address it did not register."
        problem = self.clients.redirect_hosts.problem([redirect_uri])
        if problem is not None:
            return f"This app cannot sign in here: {problem}."
        return client, redirect_uri

    def _form(self, client: OAuthClientInformationFull, asked: AuthorizationRequest, browser: str, nonce: str,
              error: str | None = None, organizations: list[Any] | None = None,
              sealed_token: str | None = None, user: int | None = None) -> HTMLResponse:
        step: dict[str, Any] = {"asked": asdict(asked)}
        if sealed_token is not None:
            step |= {"token": sealed_token, "organizations": organizations, "user": user}
        form = ConsentForm(client_name=client.client_name or client.client_id,
                           redirect_host=urlsplit(asked.redirect_uri).netloc,
                           document_host=urlsplit(client.client_id).netloc if is_document_url(client.client_id)
                           else None,
                           request=self.sealer.seal(json.dumps(step)),
                           csrf=self.sealer.sign(browser), error=error, read_only=is_read_only(asked.scopes),
                           unnamed_host=not self.clients.redirect_hosts.names(asked.redirect_uri),
                           organizations=[tuple(org) for org in organizations or []] if sealed_token else ())
        return self._page(consent_page(form, nonce), nonce, 200 if error is None else 400)

    def _back(self, redirect_uri: str, state: str | None, **params: str) -> Response:
        """To the client's (checked) redirect URI, with RFC 9207's `iss`."""
        url = construct_redirect_uri(redirect_uri, **params, state=state, iss=self.metadata.issuer)
        return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})

    @staticmethod
    def _page(html: str, nonce: str, status: int, headers: dict[str, str] | None = None) -> HTMLResponse:
        return HTMLResponse(html, status_code=status, headers=page_headers(nonce) | (headers or {}))


def _request_problem(response_type: str | None, challenge: str | None, method: str | None) -> tuple[str, str] | None:
    if response_type != "code":
        return "unsupported_response_type", "response_type must be code"
    if not challenge or not 43 <= len(challenge) <= 128 or method != "S256":
        return "invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256"
    return None


def _bounded(handler: Handler) -> ASGIApp:
    return read_within(request_response(handler), MAX_BODY_BYTES)
