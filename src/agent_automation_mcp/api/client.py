"""The typed client: one method per operation of the table.

`AgentAutomationClient` is a cheap view (credentials, a deadline) over one shared `ApiTransport`, so a
remote server can make one per caller and per call. Arguments are validated before anything is sent.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, ParamSpec, TypeVar, overload

from pydantic import BeforeValidator, ValidationError, validate_call
from pydantic_core import ErrorDetails

from .credentials import Credentials
from .errors import InvalidRequestError, OperationFailedError
from .models import (
    AgentRun,
    CheckSuiteSettings,
    CliRules,
    Integrations,
    LogAnalysis,
    LogPage,
    Models,
    OAuthProvider,
    OAuthToken,
    Organization,
    Page,
    PullRequestEdit,
    Repository,
    SetupCommands,
    User,
    WebhookConfig,
    WebhookOverride,
)
from .operations import OPERATIONS, Operation
from .params import (
    AgentType,
    CardOrderId,
    CheckLists,
    CheckPrompts,
    CheckRetryCount,
    CheckRetryCounts,
    Id,
    Images,
    Limit,
    Metadata,
    ModelName,
    Prompt,
    Provider,
    PullRequestState,
    Skip,
    SourceType,
    TriggerSource,
    WebhookSecret,
    WebhookUrl,
)
from .transport import ApiTransport, Query, require_org_id

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _checked(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Validate arguments against their annotations and refuse bad ones before any request goes out. The validator
    is built at a method's first call: a server that starts pays only for the methods its calls use."""
    names = list(inspect.signature(method).parameters)

    @functools.cache
    def validated() -> Callable[..., Awaitable[R]]:
        return validate_call(method)

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await validated()(*args, **kwargs)
        except ValidationError as exc:  # responses are read by the transport, so this is about the arguments
            errors: list[ErrorDetails] = [{**error, "loc": named(error["loc"])}
                                          for error in exc.errors(include_url=False)]
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
            raise InvalidRequestError(f"{method.__name__}: {problems}", details=errors,
                                      operation=method.__name__) from None

    def named(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
        """An argument given by position named as a parameter, so errors name the argument, not its place."""
        first = loc[0] if loc else None
        return (names[first], *loc[1:]) if isinstance(first, int) and first < len(names) else loc

    return wrapper


def _token_records(data: Any) -> Any:
    """The spec leaves the OAuth status shape open: a list of token records or of provider names, or one record."""
    if isinstance(data, dict):
        data = next((data[key] for key in ("tokens", "items") if isinstance(data.get(key), list)), [data])
    if isinstance(data, list):
        data = [{"provider": item} if isinstance(item, str) else item for item in data]
    return data


OAuthTokens = Annotated[list[OAuthToken], BeforeValidator(_token_records)]


@dataclass(frozen=True, slots=True)
class AgentAutomationClient:
    """Calls the service for one caller. `deadline` (a `time.monotonic()` instant) bounds pacing waits,
    retries and each request; `bulk` marks trace paging so it leaves room for interactive calls; `once` sends each
    request once, never again whatever its end (`ApiTransport.send`)."""

    transport: ApiTransport
    credentials: Credentials
    deadline: float | None = None
    bulk: bool = False
    once: bool = False

    # When the credentials name no organisation: finds the one to use, at the first request that needs one.
    organization: Callable[[AgentAutomationClient], Awaitable[int]] | None = field(default=None, repr=False)

    def within(self, seconds: float) -> AgentAutomationClient:
        return replace(self, deadline=time.monotonic() + seconds)

    def as_bulk(self) -> AgentAutomationClient:
        return replace(self, bulk=True)

    def single_attempt(self) -> AgentAutomationClient:
        return replace(self, once=True)

    @overload
    async def _call(self, name: str, *, path: dict[str, int] | None = None, query: Query | None = None,
                    json: Any = None, model: type[T]) -> T: ...

    @overload
    async def _call(self, name: str, *, path: dict[str, int] | None = None, query: Query | None = None,
                    json: Any = None, model: None = None) -> object: ...

    async def _call(self, name: str, *, path: dict[str, int] | None = None, query: Query | None = None,
                    json: Any = None, model: type[T] | None = None) -> T | object:
        op = OPERATIONS[name]
        credentials = await self._credentials_for(op)
        if "org_id" in op.query:  # a few operations take the organisation in the query, not the path
            query = {**(query or {}), "org_id": require_org_id(credentials)}
        return await self.transport.send(op, credentials, path=path, query=query, json=json,
                                         deadline=self.deadline, bulk=self.bulk, once=self.once, model=model)

    async def in_organization(self) -> AgentAutomationClient:
        """This client with the organisation its run requests act in found (see `organization`), for what is kept
        per organisation."""
        return replace(self, credentials=await self._credentials_for(OPERATIONS["get_agent_run"]))

    async def _credentials_for(self, op: Operation) -> Credentials:
        """The credentials, with the organisation found first if `op` needs one (the table says) and none is set."""
        if op.needs_org and self.credentials.org_id is None and self.organization is not None:
            return replace(self.credentials, org_id=await self.organization(self))
        return self.credentials

    # Organisation data

    @_checked
    async def list_organizations(self, skip: Skip = 0, limit: Limit = 100) -> Page[Organization]:
        return await self._call("list_organizations", query={"skip": skip, "limit": limit}, model=Page[Organization])

    async def get_current_user(self) -> User:
        return await self._call("get_current_user", model=User)

    @_checked
    async def list_users(self, skip: Skip = 0, limit: Limit = 100) -> Page[User]:
        return await self._call("list_users", query={"skip": skip, "limit": limit}, model=Page[User])

    @_checked
    async def get_user(self, user_id: Id) -> User:
        return await self._call("get_user", path={"user_id": user_id}, model=User)

    @_checked
    async def list_repositories(self, skip: Skip = 0, limit: Limit = 100) -> Page[Repository]:
        return await self._call("list_repositories", query={"skip": skip, "limit": limit}, model=Page[Repository])

    async def list_integrations(self) -> Integrations:
        return await self._call("list_integrations", model=Integrations)

    async def list_models(self) -> Models:
        return await self._call("list_models", model=Models)

    async def list_mcp_providers(self) -> list[OAuthProvider]:
        return await self._call("list_mcp_providers", model=list[OAuthProvider])

    async def get_cli_rules(self) -> CliRules:
        return await self._call("get_cli_rules", model=CliRules)

    # Agent runs

    @_checked
    async def create_agent_run(self, prompt: Prompt, repo_id: Id | None = None, *, model: ModelName | None = None,
                               agent_type: AgentType | None = None, images: Images | None = None,
                               metadata: Metadata | None = None,
                               webhooks: list[WebhookOverride] | None = None) -> AgentRun:
        body = _without_none(prompt=prompt, repo_id=repo_id, model=model, agent_type=agent_type, images=images,
                             metadata=metadata, webhooks=_dump(webhooks))
        return await self._call("create_agent_run", json=body, model=AgentRun)

    @_checked
    async def get_agent_run(self, agent_run_id: Id) -> AgentRun:
        return await self._call("get_agent_run", path={"agent_run_id": agent_run_id}, model=AgentRun)

    @_checked
    async def list_agent_runs(self, user_id: Id | None = None, source_type: SourceType | None = None,
                              skip: Skip = 0, limit: Limit = 100) -> Page[AgentRun]:
        query = {"user_id": user_id, "source_type": source_type, "skip": skip, "limit": limit}
        return await self._call("list_agent_runs", query=query, model=Page[AgentRun])

    @_checked
    async def resume_agent_run(self, agent_run_id: Id, prompt: Prompt, *, model: ModelName | None = None,
                               images: list[str] | None = None,
                               webhooks: list[WebhookOverride] | None = None) -> AgentRun:
        body = _without_none(agent_run_id=agent_run_id, prompt=prompt, model=model, images=images,
                             webhooks=_dump(webhooks))
        return await self._call("resume_agent_run", json=body, model=AgentRun)

    @_checked
    async def get_agent_run_logs(self, agent_run_id: Id, skip: Skip = 0, limit: Limit = 100,
                                 reverse: bool = False) -> LogPage:
        return await self._call("get_agent_run_logs", path={"agent_run_id": agent_run_id},
                                query={"skip": skip, "limit": limit, "reverse": reverse}, model=LogPage)

    async def iter_agent_run_logs(self, agent_run_id: int, skip: int = 0, limit: int = 100,
                                  reverse: bool = False) -> AsyncIterator[LogPage]:
        """Pages in order, stopping at the first page shorter than `limit` and never reading past `total_logs`."""
        while True:
            page = await self.get_agent_run_logs(agent_run_id, skip=skip, limit=limit, reverse=reverse)
            yield page
            skip += len(page.logs)
            if not trace_continues(page, skip, limit):
                return

    # Checks and pull requests

    @_checked
    async def ban_checks(self, agent_run_id: Id, before_card_order_id: CardOrderId | None = None,
                         after_card_order_id: CardOrderId | None = None) -> dict[str, Any]:
        return await self._stop("ban_checks", agent_run_id, before_card_order_id, after_card_order_id)

    @_checked
    async def unban_checks(self, agent_run_id: Id, before_card_order_id: CardOrderId | None = None,
                           after_card_order_id: CardOrderId | None = None) -> dict[str, Any]:
        return await self._stop("unban_checks", agent_run_id, before_card_order_id, after_card_order_id)

    @_checked
    async def remove_from_pull_request(self, agent_run_id: Id, before_card_order_id: CardOrderId | None = None,
                                       after_card_order_id: CardOrderId | None = None) -> dict[str, Any]:
        return await self._stop("remove_from_pull_request", agent_run_id, before_card_order_id, after_card_order_id)

    async def _stop(self, name: str, agent_run_id: int, before: str | None, after: str | None) -> dict[str, Any]:
        body = _without_none(agent_run_id=agent_run_id, before_card_order_id=before, after_card_order_id=after)
        return _as_object(await self._call(name, json=body))

    @_checked
    async def edit_pull_request(self, pr_id: Id, state: PullRequestState, repo_id: Id | None = None) -> PullRequestEdit:
        """Uses the repository-scoped operation when `repo_id` is given, the simple one otherwise."""
        if repo_id is None:
            name, path = "edit_pull_request_simple", {"pr_id": pr_id}
        else:
            name, path = "edit_pull_request", {"repo_id": repo_id, "pr_id": pr_id}
        edit = await self._call(name, path=path, json={"state": state}, model=PullRequestEdit)
        if not edit.success:
            raise OperationFailedError(edit.error or f"the service did not move pull request {pr_id} to {state}",
                                       status=200, details=edit.model_dump(exclude_none=True), operation=name)
        return edit

    # Check-suite settings

    @_checked
    async def get_check_suite_settings(self, repo_id: Id) -> CheckSuiteSettings:
        return await self._call("get_check_suite_settings", query={"repo_id": repo_id}, model=CheckSuiteSettings)

    @_checked
    async def update_check_suite_settings(self, repo_id: Id, *, check_retry_count: CheckRetryCount | None = None,
                                          ignored_checks: CheckLists | None = None,
                                          check_retry_counts: CheckRetryCounts | None = None,
                                          custom_prompts: CheckPrompts | None = None,
                                          high_priority_apps: CheckLists | None = None) -> dict[str, Any]:
        """Partial update: only the fields given change."""
        body = _without_none(check_retry_count=check_retry_count, ignored_checks=ignored_checks,
                             check_retry_counts=check_retry_counts, custom_prompts=custom_prompts,
                             high_priority_apps=high_priority_apps)
        if not body:
            raise InvalidRequestError("update_check_suite_settings: give at least one setting to change",
                                      operation="update_check_suite_settings")
        return _as_object(await self._call("update_check_suite_settings", query={"repo_id": repo_id}, json=body))

    # Setup and log analysis

    @_checked
    async def generate_setup_commands(self, repo_id: Id, prompt: Prompt | None = None,
                                      trigger_source: TriggerSource | None = None) -> SetupCommands:
        body = _without_none(repo_id=repo_id, prompt=prompt, trigger_source=trigger_source)
        return await self._call("generate_setup_commands", json=body, model=SetupCommands)

    @_checked
    async def analyze_sandbox_logs(self, sandbox_id: Id) -> LogAnalysis:
        return await self._call("analyze_sandbox_logs", path={"sandbox_id": sandbox_id}, model=LogAnalysis)

    # OAuth tokens (the organisation goes in the query here)

    async def get_oauth_token_status(self) -> list[OAuthToken]:
        return await self._call("get_oauth_token_status", model=OAuthTokens)

    @_checked
    async def revoke_oauth_tokens(self, provider: Provider) -> dict[str, Any]:
        data = await self._call("revoke_oauth_tokens", query={"provider": provider})
        return _as_object(data)

    # Agent-run webhook

    async def get_webhook(self) -> WebhookConfig:
        return await self._call("get_webhook", model=WebhookConfig)

    @_checked
    async def set_webhook(self, url: WebhookUrl, secret: WebhookSecret | None = None,
                          enabled: bool = True) -> dict[str, Any]:
        body = _without_none(url=url, secret=secret, enabled=enabled)
        return _as_object(await self._call("set_webhook", json=body))

    async def delete_webhook(self) -> dict[str, Any]:
        return _as_object(await self._call("delete_webhook"))

    @_checked
    async def test_webhook(self, url: WebhookUrl) -> dict[str, Any]:
        return _as_object(await self._call("test_webhook", json={"url": url}))


def trace_continues(page: LogPage, next_skip: int, limit: int) -> bool:
    """The contract's stop rule: a short page ends the trace, and so does reaching `total_logs`."""
    if len(page.logs) < limit:
        return False
    return page.total_logs is None or next_skip < page.total_logs


def _without_none(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _dump(webhooks: list[WebhookOverride] | None) -> list[dict[str, Any]] | None:
    return None if webhooks is None else [w.model_dump(exclude_none=True) for w in webhooks]


def _as_object(data: object) -> dict[str, Any]:
    """Untyped success bodies: keep an object as it is, wrap anything else so callers get one shape."""
    return data if isinstance(data, dict) else {"result": data}
