"""The consent page: one server-rendered HTML form, usable without JavaScript, that asks for the service token.

Everything shown that a client or the service chose (its name, its redirect host, organisation names) is
HTML-escaped. The page loads nothing from elsewhere and may not be framed; its one inline style is allowed
by a per-response nonce. There is no CSP `form-action`: browsers apply it to the redirect that follows the
form too, and the redirect back to the client is the point of the form.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

STYLE: Final = """
body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1d2330}
h1{font-size:1.4rem}.who{background:#f2f4f8;border-radius:.5rem;padding:.75rem 1rem}
label{display:block;font-weight:600;margin:1rem 0 .25rem}input,select{width:100%;padding:.5rem;font:inherit;
box-sizing:border-box}label.check{font-weight:400}label.check input{width:auto;margin-right:.5rem}
.error{background:#fde8e8;color:#8a1c1c;border-radius:.5rem;padding:.75rem 1rem}
.actions{display:flex;gap:.75rem;margin-top:1.25rem}button{padding:.55rem 1.2rem;font:inherit;border-radius:.4rem;
border:1px solid #8892a6;background:#fff;cursor:pointer}button.approve{background:#1f5eff;border-color:#1f5eff;
color:#fff}small{color:#5a6275}
"""


@dataclass(frozen=True, slots=True)
class ConsentForm:
    """What one rendering of the consent page shows and carries."""

    client_name: str  # as the client states it
    redirect_host: str
    document_host: str | None  # a metadata document client: the host its description comes from
    request: str  # the sealed authorization request (and, at the organisation step, the sealed token)
    csrf: str
    error: str | None = None
    organizations: Sequence[tuple[int, str | None]] = ()  # non-empty: the step that asks which organisation
    read_only: bool = False  # the app asked for the read-only scope: the box starts ticked
    unnamed_host: bool = False  # the redirect host is not one the operator named (they allow any): warned about


def page_headers(nonce: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": f"default-src 'none'; style-src 'nonce-{nonce}'; frame-ancestors 'none'; "
                                   "base-uri 'none'",
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def _page(title: str, body: str, nonce: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{escape(title)}</title>'
            f'<style nonce="{nonce}">{STYLE}</style></head><body>{body}</body></html>')


def consent_page(form: ConsentForm, nonce: str) -> str:
    error = f'<p class="error" role="alert">{escape(form.error)}</p>' if form.error else ""
    if form.organizations:
        options = "".join(f'<option value="{org_id}">{escape(name or "")} ({org_id})</option>'
                          for org_id, name in form.organizations)
        field = ('<label for="organization">Organisation</label>'
                 f'<select id="organization" name="organization" required>{options}</select>'
                 "<small>Your token sees several organisations; the client will act in this one.</small>")
    else:
        field = ('<label for="token">Your Codegen API token</label>'
                 '<input id="token" type="password" name="token" autocomplete="off" required>'
                 '<small>From https://codegen.com/token. It is kept encrypted with this server\'s keys; the '
                 "client never sees it.</small>")
    access = ("" if form.organizations else  # chosen at the first step, carried through the organisation step
              '<label class="check"><input type="checkbox" name="access" value="read"'
              f'{" checked" if form.read_only else ""}> Read only</label>'
              "<small>The app may read runs, logs and settings, but never start, change or delete anything "
              "(its tool list holds no such tool). Choose this for a chat app you do not want to act for you."
              "</small>")
    warning = ("" if not form.unnamed_host else
               '<p class="error" role="alert">This server does not know '
               f"<strong>{escape(form.redirect_host)}</strong>: any app may call itself by any name. Approve only if "
               "you started this sign-in yourself, from an app you trust, and it is the address you expect to go back "
               "to.</p>")
    source = (f" (described by <strong>{escape(form.document_host)}</strong>)" if form.document_host
              else " (a name the app gave itself)")
    body = (
        "<main><h1>Sign in to Agent Automation</h1>"
        f'<p class="who"><strong>{escape(form.client_name)}</strong>{source} wants to use your Codegen account '
        f"through this server. After you approve, you go back to <strong>{escape(form.redirect_host)}</strong>.</p>"
        f"{warning}{error}"
        '<form method="post" action="/authorize">'
        f'<input type="hidden" name="request" value="{escape(form.request)}">'
        f'<input type="hidden" name="csrf" value="{escape(form.csrf)}">{field}{access}'
        '<div class="actions"><button class="approve" type="submit" name="action" value="approve">Approve</button>'
        '<button type="submit" name="action" value="deny" formnovalidate>Deny</button></div></form>'
        "<p><small>Approving lets the client call the Agent Automation tools as you until you revoke it or it "
        "stops using it for 30 days.</small></p></main>")
    return _page("Sign in to Agent Automation", body, nonce)


def error_page(message: str, nonce: str) -> str:
    body = (f'<main><h1>This sign-in cannot go on</h1><p class="error" role="alert">{escape(message)}</p>'
            "<p>Go back to the app you came from and connect again.</p></main>")
    return _page("Sign-in error", body, nonce)
