"""The operator's ends of sign-ins, from the deployment's configuration: every sign-in made before a time
(`AGENT_AUTOMATION_OAUTH_ENDED_BEFORE`), and every one a person made before a time
(`AGENT_AUTOMATION_OAUTH_ENDED_USERS`).

They live in no store: when a sign-in was made and who made it are sealed with its service token under the sign-in
keys (`sealing.GrantSecret`), which a state key alone cannot alter, so these ends hold whatever Redis holds, has lost
or cannot say. A time rather than a list of sign-ins: the person signs in again afterwards, and the setting stays
short however many sign-ins it ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...config import RemoteSettings
from .sealing import GrantSecret


@dataclass(frozen=True, slots=True)
class Cutoffs:
    before: float | None = None  # every sign-in made before this (Unix seconds)
    users: Mapping[int, float] = field(default_factory=dict)  # a Codegen user's id: their sign-ins made before this

    @classmethod
    def of(cls, remote: RemoteSettings) -> Cutoffs:
        return cls(remote.oauth_ended_before, dict(remote.oauth_ended_users))

    def ended(self, secret: GrantSecret, user: int | None = None) -> bool:
        """Whether the operator ended this sign-in; `user` is whom the service says its token is, for a sign-in sealed
        before its person was (an earlier release's)."""
        if self.before is not None and secret.issued < self.before:
            return True
        person = secret.user if secret.user is not None else user
        cutoff = self.users.get(person) if person is not None else None
        return cutoff is not None and secret.issued < cutoff
