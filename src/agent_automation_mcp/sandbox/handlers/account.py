"""The caller's OAuth tokens and the organisation's agent-run webhook (recorded, never called)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..call import Call, Endpoint
from ..entities import OAuthToken, Webhook
from ..inputs import OrgQuery, RevokeQuery, WebhookConfigRequest, WebhookTestRequest


def _tokens(call: Call, org_id: int, provider: str | None = None) -> list[OAuthToken]:
    return [token for token in call.world.oauth_tokens
            if token.user_id == call.user.id and token.organization_id == org_id
            and (provider is None or token.provider == provider)]


def get_oauth_token_status(call: Call) -> Any:
    tokens = _tokens(call, call.query.org_id)
    if call.config.quirks:  # the spec's own words: "a list of connected provider names"
        return sorted({token.provider for token in tokens if token.is_active})
    return [{"id": token.id, "provider": token.provider, "is_active": token.is_active,
             "created_at": token.created_at, "scopes": list(token.scopes)} for token in tokens]


def revoke_oauth_tokens(call: Call) -> Any:
    query: RevokeQuery = call.query
    tokens = [token for token in _tokens(call, query.org_id, query.provider) if token.is_active]
    for token in tokens:  # counted: the ones this call revoked, not those revoked before
        token.is_active = False
    return {"message": f"Revoked {len(tokens)} {query.provider} token(s)", "provider": query.provider,
            "org_id": query.org_id, "revoked": len(tokens)}


def _webhook(call: Call) -> Webhook:
    return call.world.webhooks[call.org.id]


def _url(call: Call) -> str:
    """The URL as sent (pydantic's parsed form would add a trailing slash)."""
    return str(call.raw_body["url"]).strip()


def get_webhook(call: Call) -> Any:
    webhook = _webhook(call)
    return {"url": webhook.url, "enabled": webhook.enabled, "has_secret": bool(webhook.secret)}


def set_webhook(call: Call) -> Any:
    body: WebhookConfigRequest = call.body
    webhook = _webhook(call)
    webhook.url, webhook.secret, webhook.enabled = _url(call), body.secret, body.enabled
    return {"message": "Webhook configuration updated", "url": webhook.url, "enabled": webhook.enabled,
            "has_secret": bool(webhook.secret)}


def delete_webhook(call: Call) -> Any:
    call.world.webhooks[call.org.id] = Webhook()
    return {"message": "Webhook configuration deleted"}


def test_webhook(call: Call) -> Any:
    url = _url(call)
    call.state.webhook_tests.append({"time": call.wall, "organization_id": call.org.id, "url": url,
                                     "user_id": call.user.id})
    if (urlsplit(url).hostname or "").endswith(".invalid"):  # RFC 2606: never resolves, so never answers
        return {"success": False, "message": "Could not connect to the webhook URL", "url": url}
    return {"success": True, "message": "Test event recorded (the sandbox sends no network traffic)", "url": url}


ENDPOINTS = {
    "get_oauth_token_status": Endpoint(get_oauth_token_status, query=OrgQuery),
    "revoke_oauth_tokens": Endpoint(revoke_oauth_tokens, query=RevokeQuery),
    "get_webhook": Endpoint(get_webhook),
    "set_webhook": Endpoint(set_webhook, body=WebhookConfigRequest),
    "delete_webhook": Endpoint(delete_webhook),
    "test_webhook": Endpoint(test_webhook, body=WebhookTestRequest),
}
