"""Organisation data: organisations, users, repositories, integrations, models, MCP providers, CLI rules."""

from __future__ import annotations

from typing import Any

from .. import views
from ..call import Call, Endpoint
from ..errors import NotFound
from ..inputs import Paging

_MODELS = {
    "providers": [
        {"name": "Anthropic", "models": [{"label": "Claude Sonnet 4.5", "value": "claude-sonnet-4-5"},
                                         {"label": "Claude Opus 4.1", "value": "claude-opus-4-1"}]},
        {"name": "OpenAI", "models": [{"label": "GPT-5", "value": "gpt-5"}]},
        {"name": "Google", "models": [{"label": "Gemini 2.5 Pro", "value": "gemini-2.5-pro"}]},
    ],
    "default_model": "claude-sonnet-4-5",
}

_MCP_PROVIDERS = [
    {"id": 1, "name": "linear", "issuer": "https://linear.app", "authorization_endpoint":
     "https://linear.app/oauth/authorize", "token_endpoint": "https://api.linear.app/oauth/token",
     "default_scopes": ["read", "write"], "is_mcp": True, "meta": {"display_name": "Linear"}},
    {"id": 2, "name": "notion", "issuer": "https://api.notion.com", "authorization_endpoint":
     "https://api.notion.com/v1/oauth/authorize", "token_endpoint": "https://api.notion.com/v1/oauth/token",
     "default_scopes": None, "is_mcp": True, "meta": None},
    {"id": 3, "name": "sentry", "issuer": "https://sentry.io", "authorization_endpoint":
     "https://sentry.io/oauth/authorize/", "token_endpoint": "https://sentry.io/oauth/token/",
     "default_scopes": ["project:read", "event:read"], "is_mcp": True, "meta": None},
]


def list_organizations(call: Call) -> Any:
    orgs = [org for org in call.world.orgs.values() if call.world.can_access(call.user, org.id)]
    return views.page(orgs, call.query.skip, call.query.limit, views.organization)


def get_current_user(call: Call) -> Any:
    return views.user(call.user)


def list_users(call: Call) -> Any:
    members = [call.world.users[user_id] for user_id in sorted(call.org.member_ids)]
    return views.page(members, call.query.skip, call.query.limit, views.user)


def get_user(call: Call) -> Any:
    user_id = call.path["user_id"]
    if user_id not in call.org.member_ids:
        raise NotFound(f"User {user_id} not found")
    return views.user(call.world.users[user_id])


def list_repositories(call: Call) -> Any:
    return views.page(call.world.org_repos(call.org.id), call.query.skip, call.query.limit, views.repository)


def list_integrations(call: Call) -> Any:
    org = call.org
    index = org.id - call.config.org_id
    ids: dict[str, int | None] = {"github": 48_151_600 + index, "slack": 9_001 + 10 * index,
                                  "linear": 9_002 + 10 * index}

    def ref(value: int | None) -> int | str | None:
        return str(value) if call.config.quirks and value is not None else value  # the service sends strings

    integrations = [
        {"integration_type": "github", "active": True, "token_id": None, "installation_id": ref(ids["github"]),
         "metadata": {"account": "sandbox-org", "repositories": len(call.world.org_repos(org.id))}},
        {"integration_type": "slack", "active": True, "token_id": ref(ids["slack"]), "installation_id": None,
         "metadata": {"team": org.name}},
        {"integration_type": "linear", "active": True, "token_id": ref(ids["linear"]), "installation_id": None,
         "metadata": None},
        {"integration_type": "notion", "active": False, "token_id": None, "installation_id": None, "metadata": None},
        {"integration_type": "circleci", "active": False, "token_id": None, "installation_id": None,
         "metadata": None},
        {"integration_type": "postgres", "active": False, "token_id": None, "installation_id": None,
         "metadata": None},
    ]
    return {"organization_id": org.id, "organization_name": org.name, "integrations": integrations,
            "total_active_integrations": sum(1 for item in integrations if item["active"])}


def list_models(call: Call) -> Any:
    return _MODELS


def list_mcp_providers(call: Call) -> Any:
    return _MCP_PROVIDERS


def get_cli_rules(call: Call) -> Any:
    return {"organization_rules": call.org.organization_rules, "user_custom_prompt": call.user.custom_prompt}


ENDPOINTS = {
    "list_organizations": Endpoint(list_organizations, query=Paging),
    "get_current_user": Endpoint(get_current_user),
    "list_users": Endpoint(list_users, query=Paging),
    "get_user": Endpoint(get_user),
    "list_repositories": Endpoint(list_repositories, query=Paging),
    "list_integrations": Endpoint(list_integrations),
    "list_models": Endpoint(list_models),
    "list_mcp_providers": Endpoint(list_mcp_providers),
    "get_cli_rules": Endpoint(get_cli_rules),
}
