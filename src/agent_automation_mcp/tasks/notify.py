"""`notifications/tasks` for a 2026-07-28 client listening on a task (`subscriptions/listen` with `taskIds`).

Every status read of a run (`RunStatus`, whichever replica makes it, for whichever poller) is published on the
replica's in-process `SubscriptionBus` (the SDK's) and on the run's Redis channel. One relay per replica, with one
Redis connection for the server's life, brings the other replicas' reads onto the bus; listen streams follow the
bus only, so no stream holds a connection of the pool that pacing, caches and sign-in share, and a quiet channel is
not a Redis failure. A stream sends a task's state when its status changes, so a client hears the end of a run on
the replica it listens on, whichever replica read it. With nobody polling, the stream reads its runs itself, every
one and a half `pollIntervalMs` (the reads are the shared ones: no more requests to the service than a poller).

Streams are shared capacity: a replica holds `MAX_STREAMS`, and one tenant (a Codegen user, all its tokens together:
`tenancy.py`) at most `MAX_TENANT_STREAMS` of them, so it takes 32 tenants at their cap to fill a replica. Each
refusal is counted by reason, and a tenant reaching its cap (or the replica its total) is logged. A replica that
drains ends its streams at once, each answered as a stream that ran its course: the client listens again, on
another replica.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import anyio
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, InMemorySubscriptionBus
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    Notification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
)

from ..caching import KEY_PREFIX, RedisAway, SharedStore
from ..logs import tenant_id
from ..run_status import POLL_SECONDS

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger(__name__)

MAX_STREAMS: Final = 256  # listen streams on tasks held open at once on one replica
MAX_TENANT_STREAMS: Final = MAX_STREAMS // 32  # of those, held by one tenant: no handful of tenants takes them all
MAX_TASKS_PER_STREAM: Final = 20
STREAM_SECONDS: Final = 900.0  # then the stream ends gracefully; the client listens again (no state is lost)
EVENTS_BUFFERED: Final = 64
# A stream reads its runs itself only after this many poll intervals without a read by anyone: while clients poll
# (on any replica), their reads reach it through the channel and it adds none.
SELF_READ_AFTER: Final = 1.5
RELAY_WAIT: Final = 10.0  # seconds one read of the relay waits for a message: a quiet channel is no failure
RELAY_PAUSES: Final = (0.5, 30.0)  # the relay's first and longest pause before it tries a lost Redis again


class ListenObserver(Protocol):
    """Sees the listen streams (metrics): how many are open, and why one was refused; never whose."""

    def listen_held(self, streams: int, limit: int) -> None: ...

    def listen_refused_for(self, reason: str) -> None:
        """`tenant` (its cap) or `replica` (every stream taken)."""


@dataclass(frozen=True, slots=True)
class RunRead:
    """A run's status was read: its organisation, id, and the reading as `RunStatus` shares it."""

    org_id: int
    run_id: int
    reading: dict[str, Any]


class TaskStatusNotification(Notification[dict[str, Any], Literal["notifications/tasks"]]):
    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


def channel(org_id: int, run_id: int) -> str:
    return f"{KEY_PREFIX}:{{org{org_id}-run{run_id}}}:status-read"


CHANNELS: Final = f"{KEY_PREFIX}:{{org*-run*}}:status-read"  # the pattern every run's channel matches


class RunReads:
    """Publishes run reads and serves listen streams on tasks; across replicas through the store's Redis."""

    def __init__(self, store: SharedStore, observer: ListenObserver | None = None) -> None:
        self._store = store
        self._observer = observer
        self._local = InMemorySubscriptionBus()
        self._origin = secrets.token_hex(8)  # this replica's reads come back from Redis too: the relay skips them
        self._streams: set[anyio.CancelScope] = set()  # one per open stream: a drain cancels them
        self._tenant_streams: dict[str, int] = {}  # tenant key -> its streams open here (no entry at 0)
        self._ending = False
        self._held()

    def end_streams(self) -> None:
        """The replica drains: every stream ends now, and any that opens later at once (on the event loop)."""
        self._ending = True
        for scope in self._streams:
            scope.cancel()

    def _held(self) -> None:
        if self._observer is not None:
            self._observer.listen_held(len(self._streams), MAX_STREAMS)

    def _refuse(self, reason: str, error: MCPError) -> MCPError:
        if self._observer is not None:
            self._observer.listen_refused_for(reason)
        return error

    async def publish(self, event: RunRead) -> None:
        await self._local.publish(event)  # type: ignore[arg-type]  # the bus carries any event; ours is a run read
        with contextlib.suppress(RedisAway):
            await self._store.ask(lambda redis: redis.publish(
                channel(event.org_id, event.run_id), json.dumps({"from": self._origin, "reading": event.reading})))

    def subscribe(self, listener: Callable[[RunRead], None]) -> Callable[[], None]:
        """`listener` hears every run read this replica hears of, its own and the relayed; returns the unsubscribe."""
        return self._local.subscribe(listener)  # type: ignore[arg-type]  # the bus carries only run reads

    @asynccontextmanager
    async def relaying(self) -> AsyncIterator[None]:
        """While the server runs (its lifespan): the other replicas' reads, from Redis onto this replica's bus."""
        if self._store.redis is None:
            yield
            return
        async with anyio.create_task_group() as group:
            group.start_soon(self._relay, self._store.redis)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    async def _relay(self, redis: Redis) -> None:
        """One pattern subscription on every run's channel, read `RELAY_WAIT` at a time, until cancelled. Redis
        lost, it is tried again after a pause that doubles up to `RELAY_PAUSES[1]`; meanwhile streams hear this
        replica's reads and read their runs themselves. The store is not told: its commands judge Redis for it."""
        pause, working = RELAY_PAUSES[0], True
        while True:
            pubsub = redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(CHANNELS)
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=RELAY_WAIT)
                    if not working:
                        logger.warning("The relay of task status reads reached Redis again")
                    pause, working = RELAY_PAUSES[0], True
                    if message is not None and (event := self._received(message)) is not None:
                        await self._local.publish(event)  # type: ignore[arg-type]  # as in `publish`
            except self._store.failures as exc:
                if working:
                    logger.warning("The relay of task status reads lost Redis (%s): listen streams on this replica "
                                   "hear only its own reads until it is back", type(exc).__name__)
                working = False
            finally:
                with anyio.CancelScope(shield=True), contextlib.suppress(*self._store.failures):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves PubSub.aclose unannotated
            await anyio.sleep(pause)
            pause = min(2 * pause, RELAY_PAUSES[1])

    def _received(self, message: dict[str, Any]) -> RunRead | None:
        """Another replica's read, from a message on a run's channel; None for this replica's own or a malformed
        one (anything may publish there: a bad message is dropped, not a reason to stop relaying)."""
        name = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
        try:
            org, run = name.split("{org", 1)[1].split("}", 1)[0].split("-run")  # aamcp:{org<o>-run<r>}:status-read
            body = json.loads(message["data"])
            if body["from"] == self._origin:
                return None
            return RunRead(int(org), int(run), dict(body["reading"]))
        except (ValueError, TypeError, KeyError, IndexError):
            logger.debug("A malformed message on %s was dropped", name)
            return None

    async def stream(self, ctx: ServerRequestContext[Any, Any], tenant: str, tasks: dict[str, tuple[int, int]],
                     view: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
                     refresh: Callable[[str], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """One listen stream of `tenant` (`tenancy.tenant_key`): the ack naming the tasks honoured, then each task's
        state when its status changes, until every task has ended, the client goes, `STREAM_SECONDS` pass or the
        replica drains. `tasks` maps a task id to its (organisation, run); `view(task, reading)` is the task as a
        reading shows it, `refresh(task)` reads it."""
        if ctx.request_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        held = self._admitted(tenant)
        listener = _Listener(ctx, ctx.request_id, tasks)
        lasting = self._opened(tenant, held)
        unsubscribe = self.subscribe(listener.deliver)
        try:
            await listener.acknowledge()
            with lasting:
                await listener.follow(view, refresh)
        finally:
            unsubscribe()
            self._closed(tenant, lasting)
            listener.close()
        return {"resultType": "complete", "_meta": listener.meta}

    def _admitted(self, tenant: str) -> int:
        """The streams `tenant` holds here, when one more fits the replica and the tenant's share; else refused."""
        if len(self._streams) >= MAX_STREAMS:
            raise self._refuse("replica", MCPError(
                INTERNAL_ERROR, "Subscription limit reached on this replica: listen again in a moment"))
        held = self._tenant_streams.get(tenant, 0)
        if held >= MAX_TENANT_STREAMS:
            raise self._refuse("tenant", MCPError(
                INVALID_REQUEST, f"You already listen on {held} streams on this replica (the most one user may, "
                "whichever of their tokens): listen on several tasks in one stream, or end one first"))
        return held

    def _opened(self, tenant: str, held: int) -> anyio.CancelScope:
        """A stream counted as open, with the scope that ends it (its time up, or the replica draining)."""
        lasting = anyio.CancelScope(deadline=anyio.current_time() + STREAM_SECONDS)
        if self._ending:
            lasting.cancel()
        self._streams.add(lasting)
        self._tenant_streams[tenant] = held + 1
        self._held()
        if held + 1 == MAX_TENANT_STREAMS:
            logger.warning("tenant %s listens on %d streams on this replica, its share: more are refused until one "
                           "ends", tenant_id(tenant), held + 1)
        if len(self._streams) == MAX_STREAMS:
            logger.warning("all %d listen streams of this replica are taken: more are refused until one ends",
                           MAX_STREAMS)
        return lasting

    def _closed(self, tenant: str, lasting: anyio.CancelScope) -> None:
        self._streams.discard(lasting)
        if (left := self._tenant_streams.pop(tenant) - 1) > 0:
            self._tenant_streams[tenant] = left
        self._held()


class _Listener:
    """One stream's side of the bus: the reads of its runs, buffered (a level trigger: a read dropped when the buffer
    is full is followed by one that says the same or newer), and what the client was last told of each task."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], subscription_id: Any,
                 tasks: dict[str, tuple[int, int]]) -> None:
        self._session = ctx.session
        self._subscription_id = subscription_id
        self._tasks = tasks
        self._runs = set(tasks.values())
        self.meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        self._last: dict[str, dict[str, Any]] = {}
        self._send, self._receive = anyio.create_memory_object_stream[RunRead](EVENTS_BUFFERED)

    def deliver(self, event: RunRead) -> None:
        if (event.org_id, event.run_id) in self._runs:
            with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                self._send.send_nowait(event)

    async def acknowledge(self) -> None:
        honoured = SubscriptionFilter.model_validate({"taskIds": list(self._tasks)})
        await self._session.send_notification(SubscriptionsAcknowledgedNotification(
            params=SubscriptionsAcknowledgedNotificationParams(notifications=honoured, _meta=self.meta)),
            related_request_id=self._subscription_id)

    async def follow(self, view: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
                     refresh: Callable[[str], Awaitable[dict[str, Any]]]) -> None:
        """Where each task stands now (a read shared with every poller), then each read of its run, while any task
        is working; when nobody reads them for a while, read here."""
        for task_id in self._tasks:
            await self._tell(task_id, await refresh(task_id))
        while any(state["status"] == "working" for state in self._last.values()):
            quiet = SELF_READ_AFTER * min(_poll_seconds(state) for state in self._last.values())
            with anyio.move_on_after(quiet) as waited:
                event = await self._receive.receive()
                for task_id, run in self._tasks.items():
                    if run == (event.org_id, event.run_id):
                        await self._tell(task_id, await view(task_id, event.reading))
            if waited.cancelled_caught:
                for task_id in self._tasks:
                    await self._tell(task_id, await refresh(task_id))

    async def _tell(self, task_id: str, state: dict[str, Any]) -> None:
        """The task's state, sent when its status differs from what the client was last told."""
        told = self._last.get(task_id)
        self._last[task_id] = state
        if told is None or told["status"] != state["status"]:
            notification = TaskStatusNotification(params={**state, "_meta": self.meta})
            await self._session.send_notification(
                notification,  # type: ignore[arg-type]  # the SDK types only the spec's notifications; it sends any
                related_request_id=self._subscription_id)

    def close(self) -> None:
        self._send.close()
        self._receive.close()


def _poll_seconds(state: dict[str, Any]) -> float:
    value = state.get("pollIntervalMs")
    return value / 1000 if isinstance(value, int | float) and math.isfinite(value) else POLL_SECONDS
