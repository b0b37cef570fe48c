"""Per-address budgets, one per purpose: how many requests of one kind a client address, its network and (when the
purpose has one) every stranger together may make in a sliding minute, shared by every replica.

Every budget follows one rule. The last `window` seconds are counted per client address, per network (its /24,
or its /64 for IPv6: one host or one subscriber holds whole networks, so moving between their addresses buys
nothing) and, when the purpose has a total, over every network nobody vouched for; past any of these counts the
request is refused (`OverBudget`, answered 429 with `Retry-After`). A network vouches for itself when a token the
service accepted (and, with an allowed list, one of the company's) comes from it (`vouch`): for a week it spends
only its own address and network budgets, so strangers who spend the total from elsewhere lock out no network the
company works from. A total is sized to need many networks at their own bounds, so a handful of addresses cannot
spend it either.

The counts live in the replicas' shared Redis (`SharedStore`), so a budget is the deployment's, not each
replica's; in this process's memory without Redis, or while it does not answer (each replica then allows what the
whole deployment would, which errs towards serving the company rather than locking it out). No address is stored
as it is: keys hold a hash.

The purposes (`remote/app.py` and `remote/oauth/signin.py` name them and their sizes):
- `strangers`: checks with the service of tokens never accepted before (`verdicts.py`, and the consent page), so
  random tokens cannot become an unbounded stream of requests from this server's address;
- `register`, `authorize`, `token`, `revoke`: the sign-in endpoints. A request that carries a live code or refresh
  token spends nothing (only its holder has one), so junk cannot stop a real refresh.
- `requests_per_token`: an accepted token's task and completion requests (`gate.py`); its key is the token's hash
  where the others' is an address.
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ..caching import KEY_PREFIX, RedisAway, SharedCache, SharedStore

WINDOW_SECONDS: Final = 60.0
TOTAL: Final = "total"
LOCAL_LOGS: Final = 10_000  # in memory, past this many logs those that hold nothing in the window are dropped
VOUCHED_SECONDS: Final = 7 * 86_400.0  # a network an accepted token came from spends no total for this long
MAX_VOUCHED: Final = 10_000  # networks each replica remembers in memory (Redis holds them all)
IPV4_NETWORK, IPV6_NETWORK = 24, 64

# KEYS: the address's log, the network's, then the total's when counted. ARGV: window µs, then each key's limit.
# Each log is a list of instants (Redis' clock, µs), newest first, at most its limit long: a request is allowed
# when every log is short of its limit or its oldest entry has left the window. Answers {0} when the request is
# counted, or {the µs until it would be allowed, the position of the log that holds it longest}.
_SPEND: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local wait, which = 0, 0
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[i + 1])
  if redis.call('LLEN', key) >= limit then
    local oldest = tonumber(redis.call('LINDEX', key, limit - 1))
    if oldest + window - now > wait then wait, which = oldest + window - now, i end
  end
end
if wait > 0 then return {wait, which} end
for i, key in ipairs(KEYS) do
  redis.call('LPUSH', key, now)
  redis.call('LTRIM', key, 0, tonumber(ARGV[i + 1]) - 1)
  redis.call('PEXPIRE', key, math.ceil(window / 1000))
end
return {0}
"""
# Whose count refused a request, in the words a refusal uses (the logs' order in `_SPEND`'s KEYS).
WHOSE: Final = {"address": "from your address", "network": "from your network", TOTAL: "from everyone"}


def network_of(address: str | None) -> str:
    """The network an address belongs to, as budgets count it: its /24, or /64 for IPv6 (an IPv4 address mapped
    into IPv6 is the IPv4 one); anything else (a Unix socket, no address) is its own network."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return address or "-"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    prefix = IPV4_NETWORK if ip.version == 4 else IPV6_NETWORK
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


@dataclass(frozen=True, slots=True)
class Budget:
    """Requests of one purpose allowed per `window` seconds: per client address, per network (None: not counted
    by network, for a budget whose key is not an address, such as a token's), and over the networks nobody vouched
    for (None: no total)."""

    purpose: str
    per_address: int
    per_network: int | None = None
    total: int | None = None
    window: float = WINDOW_SECONDS

    def __post_init__(self) -> None:
        if min(self.per_address, self.per_network or 1, self.total or 1) < 1:
            raise ValueError(f"the {self.purpose} budget must allow at least 1 request per window")
        if self.per_network is not None and self.per_network < self.per_address:
            raise ValueError(f"the {self.purpose} budget per network must be at least its budget per address "
                             f"({self.per_address})")


class OverBudget(Exception):
    """The address (or its network, or the strangers together) has used this purpose's budget of the last window:
    `scope` says which (`address`, `network` or `total`), `whose` says it to the person refused."""

    def __init__(self, purpose: str, retry_after: float, scope: str = "address") -> None:
        super().__init__(f"over the {purpose} budget {WHOSE[scope]}; retry after {retry_after:.0f} s")
        self.purpose = purpose
        self.retry_after = retry_after
        self.scope = scope

    @property
    def whose(self) -> str:
        return WHOSE[self.scope]


class AddressBudgets:
    """The budgets of several purposes over one store: in Redis, or in this process's memory; and the networks
    vouched for, which every purpose's total spares."""

    def __init__(self, store: SharedStore, budgets: Iterable[Budget], vouched_networks: Iterable[str] = ()) -> None:
        self.store = store
        self.budgets = {budget.purpose: budget for budget in budgets}
        # The operator's (AGENT_AUTOMATION_VOUCHED_NETWORKS): vouched for whatever tokens came from them.
        self.vouched_networks = tuple(ipaddress.ip_network(network) for network in vouched_networks)
        self._script = store.redis.register_script(_SPEND) if store.redis is not None else None
        self._logs: dict[str, deque[float]] = {}  # memory: "purpose:…:hash" (or "purpose:total") -> instants
        self._vouched: SharedCache[bool] = SharedCache(store, "vouched-network", MAX_VOUCHED)

    async def vouch(self, address: str | None) -> None:
        """A token the service accepted came from `address`: its network spends no total for `VOUCHED_SECONDS`."""
        name = _hashed(network_of(address))
        if await self._vouched.get(name) is None:
            await self._vouched.put(name, True, VOUCHED_SECONDS)

    async def spend(self, purpose: str, address: str | None) -> None:
        """Count one request for `address` (None: unknown, counted as one address); `OverBudget` if none is left."""
        budget = self.budgets[purpose]
        network = _hashed(network_of(address))
        limits = {f"{KEY_PREFIX}:{{{purpose}}}:address:{_hashed(address or '-')}": budget.per_address}
        if budget.per_network is not None:
            limits[f"{KEY_PREFIX}:{{{purpose}}}:network:{network}"] = budget.per_network
        if budget.total is not None and not await self._vouched_for(address, network):
            limits[f"{KEY_PREFIX}:{{{purpose}}}:{TOTAL}"] = budget.total
        if self._script is not None:
            script = self._script
            try:
                wait, *which = await self.store.ask(lambda redis: script(
                    keys=list(limits), args=[round(budget.window * 1_000_000), *limits.values()], client=redis))
            except RedisAway:
                pass
            else:
                if wait > 0:
                    raise OverBudget(purpose, wait / 1_000_000, _scope(list(limits)[which[0] - 1]))
                return
        self._spend_locally(budget, limits)

    async def _vouched_for(self, address: str | None, network: str) -> bool:
        """Whether `address` spends no total: in a network the operator named, or one an accepted token came from
        (`network`: its network's hash, as `vouch` keeps it)."""
        try:
            ip = ipaddress.ip_address(address or "")
        except ValueError:
            ip = None
        if ip is not None and any(ip in network for network in self.vouched_networks):
            return True
        return await self._vouched.get(network) is not None

    def _spend_locally(self, budget: Budget, limits: dict[str, int]) -> None:
        """As the script does, in this process: the logs hold instants, oldest first, at most their limit."""
        now = time.monotonic()
        waits = {key: log[0] + budget.window - now for key, limit in limits.items()
                 if (log := self._logs.get(key)) is not None and len(log) >= limit}
        longest = max(waits, key=waits.__getitem__, default=None)
        if longest is not None and waits[longest] > 0:
            raise OverBudget(budget.purpose, waits[longest], _scope(longest))
        for key, limit in limits.items():
            self._logs.setdefault(key, deque(maxlen=limit)).append(now)
        if len(self._logs) > LOCAL_LOGS:  # logs whose last request left the window hold nothing
            widest = max(budget.window for budget in self.budgets.values())
            for key in [key for key, log in self._logs.items() if log[-1] + widest <= now]:
                del self._logs[key]


def _scope(key: str) -> str:
    """Which count a log's key is (`aamcp:{<purpose>}:<scope>[:<hash>]`): `address`, `network` or `total`."""
    return key.split(":")[2]


def _hashed(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:24]
