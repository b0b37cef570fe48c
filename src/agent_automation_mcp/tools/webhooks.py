"""Toolset `webhooks` (opt-in): the organisation's agent-run completion webhook."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ..api.models import WebhookConfig
from ..api.params import WebhookSecret, WebhookUrl
from .callers import client_for
from .confirm import Answer, Question, ask, require_confirmation
from .declarations import Toolset
from .results import Output, ok, reported

toolset = Toolset("webhooks", "Read, set, delete and test the organisation's agent-run completion webhook.")


class WebhookChange(Output):
    action: str
    url: str | None = None
    has_secret: bool | None = None  # after the change, as the service reports it; null when it does not say
    secret_removed: bool = False  # a signing secret was set before and is not now: deliveries go unsigned
    previous: WebhookConfig  # the webhook as it was before the change
    response: dict[str, Any]


def _was(previous: WebhookConfig, url: str | None = None) -> str:
    """The webhook before a change, in our words (its URL is another's text: the result holds it)."""
    if not previous.url:
        return "no webhook was set"
    where = "the same URL" if previous.url == url else "a URL (previous.url in the result)"
    state = "enabled" if previous.enabled else "paused" if previous.enabled is False else "state not given"
    signing = ", signed" if previous.has_secret else ", unsigned" if previous.has_secret is False else ""
    return f"it was {where}, {state}{signing}"


@toolset.tool("Get webhook", "get_webhook")
async def get_webhook(ctx: Context) -> Annotated[CallToolResult, WebhookConfig]:
    """Show the webhook called when an agent run finishes (url, enabled, whether a secret is set). The
    service does not report past deliveries."""
    out = await (await client_for(ctx)).get_webhook()
    state = "not set" if not out.url else "set" if out.enabled else "set but disabled"
    return ok(out, f"Webhook {state}{'; its URL is in the result' if out.url else ''}")


@toolset.tool("Set webhook", "get_webhook", "set_webhook")
async def set_webhook(
    url: WebhookUrl, ctx: Context,
    secret: Annotated[WebhookSecret | None, Field(description="Shared secret to sign deliveries.")] = None,
    enabled: Annotated[bool, Field(description="false keeps the URL but pauses deliveries.")] = True,
) -> Annotated[CallToolResult, WebhookChange]:
    """Set (or replace) the organisation's agent-run completion webhook. The service never returns a secret,
    so one set before cannot be kept: without secret it is removed and deliveries go unsigned (the result
    says so)."""
    client = await client_for(ctx)
    previous = await client.get_webhook()
    had_secret = previous.has_secret
    response = await client.set_webhook(url, secret, enabled)
    has_secret = reported(response, ("has_secret",), bool)
    if has_secret is None:  # the contract leaves the answer unspecified: read what is set now
        has_secret = (await client.get_webhook()).has_secret
    removed = bool(had_secret) and has_secret is False
    out = WebhookChange(action="set", url=url, has_secret=has_secret, secret_removed=removed, previous=previous,
                        response=response)
    signing = ("; its signing secret was REMOVED: deliveries are now unsigned (pass secret to sign them)" if removed
               else "; deliveries are signed" if has_secret else "; deliveries are unsigned" if has_secret is False
               else "; the service did not say whether deliveries are signed")
    return ok(out, f"Webhook set to {url}{'' if enabled else ' (paused)'}{signing} ({_was(previous, url)})")


def _delete_question(ctx: Context) -> Question:
    return ask(ctx, "Delete the organisation's agent-run completion webhook: no deliveries until one is set again.")


@toolset.tool("Delete webhook", "get_webhook", "delete_webhook")
async def delete_webhook(ctx: Context, confirmed: Annotated[Answer, Resolve(_delete_question)]) -> Annotated[
        CallToolResult, WebhookChange]:
    """Remove the organisation's agent-run completion webhook (URL and secret). Only on the user's explicit
    request."""
    require_confirmation(confirmed, "delete_webhook")
    client = await client_for(ctx)
    previous = await client.get_webhook()
    response = await client.delete_webhook()
    out = WebhookChange(action="deleted", previous=previous, response=response)
    if reported(response, ("success",), bool) is False:
        return ok(out, "Not deleted: the service reports failure (its answer is in response)")
    return ok(out, f"The service accepted deleting the webhook (URL and secret; {_was(previous)})")


class WebhookTest(Output):
    url: str
    delivered: bool | None  # as the service reports it; null when it does not say
    response: dict[str, Any]


@toolset.tool("Test webhook", "test_webhook")
async def test_webhook(url: WebhookUrl, ctx: Context) -> Annotated[CallToolResult, WebhookTest]:
    """Have the service send a test delivery to a URL. Returns delivered (true or false as the service
    reports it, null if it does not say) and the service's answer."""
    response = await (await client_for(ctx)).test_webhook(url)
    delivered = reported(response, ("delivered", "success"), bool)
    said = {True: "The service reports that the test delivery succeeded",
            False: "The service reports that the test delivery failed (its answer is in response)",
            None: "The service accepted the test delivery but did not say whether the URL answered"}[delivered]
    return ok(WebhookTest(url=url, delivered=delivered, response=response), said)
