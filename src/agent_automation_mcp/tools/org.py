"""Toolset `org`: organisations, users, repositories, integrations and models the token can see."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from ..api import models
from ..api.models import Models, OrganizationSettings
from ..api.params import Id
from .callers import client_for, only_organization, state_of
from .declarations import Toolset
from .results import Output, PageLimit, PageSkip, counted, fit_page, label, ok

toolset = Toolset("org", "Organisations, users, repositories, integrations and models: the ids other tools take.",
                  budget=465)


class Organization(Output):
    id: int
    name: str | None = None
    settings: OrganizationSettings | None = None  # whether agents may open pull requests and detect rules
    in_use: bool = False  # the organisation this connection acts in


class User(models.User, Output):
    """The service's user as it is (`is_admin` is deprecated by the service in favour of `role`)."""


class Repository(Output):
    id: int
    full_name: str | None = None
    description: str | None = None
    language: str | None = None
    visibility: str | None = None
    archived: bool | None = None
    setup_status: str | None = None
    github_id: str | None = None
    organization_id: int | None = None


class OrganizationList(Output):
    organizations: list[Organization]
    total: int | None = None
    next_skip: int | None = None


class UserList(Output):
    users: list[User]
    total: int | None = None
    next_skip: int | None = None


class RepositoryList(Output):
    repositories: list[Repository]
    total: int | None = None
    next_skip: int | None = None


class Integration(models.IntegrationStatus, Output):
    """The service's integration as it is; `metadata` is what it says of the connection (e.g. the GitHub account)."""


class IntegrationList(Output):
    organization_id: int | None = None
    organization_name: str | None = None
    integrations: list[Integration]
    total_active_integrations: int | None = None


def _count(items: Sequence[object], total: int | None, following: int | None, what: str, plural: str) -> str:
    more = f"; next_skip={following}" if following is not None else ""
    return f"{counted(len(items), what, plural)} (of {total if total is not None else 'unknown'}){more}"


@toolset.tool("List organizations", "list_organizations")
async def list_organizations(ctx: Context, skip: PageSkip = 0, limit: PageLimit = 100) -> Annotated[
        CallToolResult, OrganizationList]:
    """List the organisations the API token belongs to; in_use marks the one this connection acts in."""
    client = await client_for(ctx)
    page = await client.list_organizations(skip=skip, limit=limit)
    in_use = client.credentials.org_id
    if in_use is None and skip == 0:
        in_use = only_organization(page.total, [org.id for org in page.items])
    kept, following = fit_page([Organization.pick(o, in_use=o.id == in_use) for o in page.items], skip, limit,
                               page.total)
    out = OrganizationList(organizations=kept, total=page.total, next_skip=following)
    if in_use is None:
        acting = f"; none is chosen for this connection: {state_of(ctx).callers.organization_hint}"
    elif any(org.in_use for org in out.organizations) or following is not None or skip:
        acting = f"; this connection acts in {in_use}"
    else:
        acting = f"; this connection is set to organisation {in_use}, which is not among them"
    return ok(out, _count(out.organizations, out.total, out.next_skip, "organisation", "organisations") + ", ids " +
              ", ".join(str(o.id) for o in out.organizations[:10]) + "; names in the result" + acting)


@toolset.tool("List users", "list_users")
async def list_users(ctx: Context, skip: PageSkip = 0, limit: PageLimit = 50) -> Annotated[CallToolResult, UserList]:
    """List the organisation's users: their ids are the user_id of get_user and list_agent_runs."""
    page = await (await client_for(ctx)).list_users(skip=skip, limit=limit)
    kept, following = fit_page([User.pick(u) for u in page.items], skip, limit, page.total)
    out = UserList(users=kept, total=page.total, next_skip=following)
    return ok(out, _count(out.users, out.total, out.next_skip, "user", "users"))


@toolset.tool("Get user", "get_user", "get_current_user")
async def get_user(ctx: Context, user_id: Annotated[Id | None, Field(
        description="Omit for the token's own user.")] = None) -> Annotated[CallToolResult, User]:
    """Get one user of the organisation, or without user_id the user the API token belongs to."""
    if user_id is None:
        user = User.pick(await (await client_for(ctx)).get_current_user())
    else:
        user = User.pick(await (await client_for(ctx)).get_user(user_id))
    return ok(user, f"User {user.id}{f' ({label(user.role)})' if user.role else ''}; name and email in the result")


@toolset.tool("List repositories", "list_repositories")
async def list_repositories(ctx: Context, skip: PageSkip = 0, limit: PageLimit = 50) -> Annotated[
        CallToolResult, RepositoryList]:
    """List the organisation's repositories: the repo_id values other tools take, with names and languages.
    The service reports no repository's pull requests (runs list those they made) or default branch."""
    page = await (await client_for(ctx)).list_repositories(skip=skip, limit=limit)
    kept, following = fit_page([Repository.pick(r) for r in page.items], skip, limit, page.total)
    out = RepositoryList(repositories=kept, total=page.total, next_skip=following)
    return ok(out, _count(out.repositories, out.total, out.next_skip, "repository", "repositories") + ", ids " +
              ", ".join(str(r.id) for r in out.repositories[:10]) + "; names in the result")


@toolset.tool("List integrations", "list_integrations")
async def list_integrations(ctx: Context) -> Annotated[CallToolResult, IntegrationList]:
    """Show which integrations (GitHub, Slack, Linear, ...) the organisation has and which are active."""
    found = await (await client_for(ctx)).list_integrations()
    out = IntegrationList(organization_id=found.organization_id, organization_name=found.organization_name,
                          integrations=[Integration.pick(i) for i in found.integrations],
                          total_active_integrations=found.total_active_integrations)
    active = [label(i.integration_type, "?") for i in out.integrations if i.active]
    where = f" in organisation {out.organization_id}" if out.organization_id is not None else ""
    return ok(out, f"{counted(len(active), 'active integration')}{where}: {', '.join(active) or 'none'}")


@toolset.tool("List models", "list_models")
async def list_models(ctx: Context) -> Annotated[CallToolResult, Models]:
    """List the models agent runs can use (the model argument of create_agent_run) and the default."""
    out = await (await client_for(ctx)).list_models()
    count = sum(len(p.models) for p in out.providers)
    return ok(out, f"{counted(count, 'model')} from {counted(len(out.providers), 'provider')}; default "
                   f"{label(out.default_model)}")
