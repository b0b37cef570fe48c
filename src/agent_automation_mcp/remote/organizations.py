"""Which organisations this deployment serves (`AGENT_AUTOMATION_ALLOWED_ORGS`): a company's own server should not
serve every Codegen customer whose token reaches it.

`*`: any token the service accepts is served (fine on a private network; on the open Internet every Codegen user
can then spend this server's capacity). Unset: the same, but the server starts so only on a loopback address. Ids:
a token is served only for the listed organisations it sees: one that sees none of them is refused (403, reason
`org_not_allowed`) at `/mcp` and on the consent page, and a request naming another organisation
(`X-Organization-Id`) is refused the same way, told which of the two it is (not served here, or not the token's)
and which of the token's organisations it may name. While the service cannot say which organisations a token sees
(and no recent verdict says it: `verdicts.py`), the request is refused for now, never served unchecked: 502, which
the shipped balancers do not send again (they retry only 503, a draining replica's), so a failing check is not
repeated on every replica.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final, NamedTuple

from ..api.client import AgentAutomationClient
from ..api.models import Organization
from .access import note_reason
from .refusals import Refused, refusal

ORG_NOT_ALLOWED: Final = "org_not_allowed"
UNDECIDED: Final = "undecided"
# An unanswered check is not asked again before this, by any replica (`verdicts.py`): the wait a refusal names.
UNDECIDED_RETRY_SECONDS: Final = 10
LISTED: Final = 100  # a token's organisations read: the service's largest page


class TokenOrganizations(NamedTuple):
    """What the service says of a token's organisations: whether it sees any, and those this server serves."""

    seen: bool
    served: tuple[Organization, ...]


@dataclass(frozen=True, slots=True)
class AllowedOrganizations:
    """The organisations served; None: every one."""

    ids: frozenset[int] | None = None

    @classmethod
    def of(cls, ids: tuple[int, ...] | None) -> AllowedOrganizations:
        return cls(frozenset(ids) if ids else None)

    def allows(self, org_id: int) -> bool:
        return self.ids is None or org_id in self.ids

    @property
    def restricted(self) -> bool:
        return self.ids is not None

    async def of_token(self, client: AgentAutomationClient) -> TokenOrganizations:
        """The organisations `client`'s token sees, and those of them served: the one reading of them that the token
        check (`verdicts.py`) and the consent page share."""
        page = await client.list_organizations(limit=LISTED)
        return TokenOrganizations(bool(page.items), tuple(org for org in page.items if self.allows(org.id)))

    @property
    def fingerprint(self) -> str:
        """Names the list in shared cache keys, so a verdict made under another list is never reused."""
        if self.ids is None:
            return "all"
        return hashlib.sha256(",".join(map(str, sorted(self.ids))).encode()).hexdigest()[:12]

    @property
    def refusal(self) -> str:
        return ("This server serves only its company's Codegen organisations, and this token belongs to none of "
                "them. Use a token of the company's organisation (ask the server's operator which).")

    def named_refusal(self, named: int, served: tuple[int, ...], *, signed_in: bool = False) -> tuple[str, str]:
        """Why a request naming organisation `named` is refused, and what to do instead: name one of the token's
        organisations this server serves (never the rest of the list), or, for a sign-in, sign in again choosing
        one."""
        why = ("this API token does not belong to organisation" if self.allows(named)
               else "this server does not serve organisation")
        ids = ", ".join(map(str, served))
        if signed_in:  # the sign-in's organisation stands in for any header the client sends
            instead = (f"Sign in again and choose organisation {ids}" if len(served) == 1 else
                       f"Sign in again and choose one of {ids}") + ": this token's organisations this server serves."
        elif len(served) == 1:
            instead = (f"Send X-Organization-Id: {ids} (this token's organisation that this server serves), or leave "
                       "the header out to act in it.")
        else:
            instead = f"Send X-Organization-Id with one of {ids}: this token's organisations that this server serves."
        return f"{why} {named}", instead


def named_beside_sign_in(named: int | None, chosen: int | None, served: tuple[int, ...] | None,
                         organizations: AllowedOrganizations) -> Refused | None:
    """A sign-in acts in the organisation chosen on the consent page (`chosen`), which stands in for the client's
    `X-Organization-Id` (`named`); a header naming another is refused as a token's would be (403, `org_not_allowed`),
    never served in the sign-in's organisation unsaid: one the server does not serve or the token is not in, for that
    reason; any other, told that this sign-in acts elsewhere and how to act there."""
    if named is None or named == chosen or (served is not None and not served):  # none served: refused for that
        return None
    note_reason(ORG_NOT_ALLOWED)
    if served is not None and named not in served:
        return refusal(403, *organizations.named_refusal(named, served, signed_in=True))
    where = f"organisation {chosen}" if chosen is not None else "the organisation chosen when signing in"
    return refusal(403, f"this sign-in acts in {where}, not in organisation {named} (X-Organization-Id)",
                   f"Leave X-Organization-Id out to act in {where}, or sign in again and choose organisation "
                   f"{named}.")


def served_organization(named: int | None, served: tuple[int, ...] | None, organizations: AllowedOrganizations, *,
                        signed_in: bool = False) -> Refused | None:
    """With an allowed list (`served`: the listed organisations the token sees; None without a list, or when the
    service could not answer): refuse a token that sees none of them, or a request naming (`named`) another one
    (403, `org_not_allowed`, saying which and why). With a list and no answer, nothing is known of the token's
    organisations: 502, to be sent again later, never served."""
    if served is None:
        if not organizations.restricted:
            return None
        note_reason(UNDECIDED)
        return refusal(502, "the service could not say yet which organisations this API token belongs to",
                       "Send the request again in a few seconds.", retry_after=UNDECIDED_RETRY_SECONDS)
    if not served:
        note_reason(ORG_NOT_ALLOWED)
        return refusal(403, "this API token belongs to none of the organisations this server serves",
                       organizations.refusal)
    if named is not None and named not in served:
        note_reason(ORG_NOT_ALLOWED)
        return refusal(403, *organizations.named_refusal(named, served, signed_in=signed_in))
    return None


def acting_in(named: int | None, served: tuple[int, ...] | None) -> int | None:
    """The organisation a served request acts in: the one it names, else the token's one served organisation when
    there is an allowed list, else none yet (the tool finds the token's only one: `tools/callers.py`)."""
    if named is None and served is not None and len(served) == 1:
        return served[0]
    return named
