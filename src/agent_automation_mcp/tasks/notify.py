"""`notifications/tasks` for a 2026-07-28 client listening on a task (`subscriptions/listen` with `taskIds`).

Every status read of a run (`RunStatus`, whichever replica makes it, for whichever poller) is published on the
run's channel: through Redis to every replica, or on the SDK's in-process `SubscriptionBus` without one. A listen
stream follows the channels of its tasks' runs and sends a task's state when its status changes, so a client hears
the end of a run on the replica it listens on, whichever replica read it. With nobody polling, the stream reads its
runs itself, every one and a half `pollIntervalMs` (the reads are the shared ones: no more requests to the service
than a poller).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio
import anyio.abc
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

from ..caching import KEY_PREFIX, SharedStore

logger = logging.getLogger(__name__)

MAX_STREAMS: Final = 256  # listen streams on tasks held open at once on one replica
MAX_TASKS_PER_STREAM: Final = 20
STREAM_SECONDS: Final = 900.0  # then the stream ends gracefully; the client listens again (no state is lost)
EVENTS_BUFFERED: Final = 64
# A stream reads its runs itself only after this many poll intervals without a read by anyone: while clients poll
# (on any replica), their reads reach it through the channel and it adds none.
SELF_READ_AFTER: Final = 1.5


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


class RunReads:
    """Publishes run reads and serves listen streams on tasks; across replicas through the store's Redis."""

    def __init__(self, store: SharedStore) -> None:
        self._store = store
        self._local = InMemorySubscriptionBus()
        self._streams = 0

    async def publish(self, event: RunRead) -> None:
        if (redis := self._store.reachable()) is not None:
            try:
                await redis.publish(channel(event.org_id, event.run_id), json.dumps(event.reading))
                return
            except self._store.failures as exc:
                self._store.lost(exc)
        await self._local.publish(event)  # type: ignore[arg-type]  # the bus carries any event; ours is a run read

    async def stream(self, ctx: ServerRequestContext[Any, Any], tasks: dict[str, tuple[int, int]],
                     view: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
                     refresh: Callable[[str], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """One listen stream: the ack naming the tasks honoured, then each task's state when its status changes,
        until every task has ended, the client goes, or `STREAM_SECONDS` pass. `tasks` maps a task id to its
        (organisation, run); `view(task, reading)` is the task as a reading shows it, `refresh(task)` reads it."""
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        if self._streams >= MAX_STREAMS:
            raise MCPError(INTERNAL_ERROR, "Subscription limit reached on this replica: listen again in a moment")
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        last: dict[str, dict[str, Any]] = {}  # what the client was last told of each task
        send, receive = anyio.create_memory_object_stream[RunRead](EVENTS_BUFFERED)
        runs = set(tasks.values())

        def deliver(event: Any) -> None:
            if isinstance(event, RunRead) and (event.org_id, event.run_id) in runs:
                with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):  # a level trigger: the next
                    send.send_nowait(event)  # read says the same or newer

        async def tell(task_id: str, state: dict[str, Any]) -> None:
            told = last.get(task_id)
            last[task_id] = state
            if told is None or told["status"] != state["status"]:
                await ctx.session.send_notification(TaskStatusNotification(params={**state, "_meta": meta}),
                                                    related_request_id=subscription_id)

        self._streams += 1
        unsubscribe = self._local.subscribe(deliver)
        try:
            honoured = SubscriptionFilter.model_validate({"taskIds": list(tasks)})
            await ctx.session.send_notification(SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(notifications=honoured, _meta=meta)),
                related_request_id=subscription_id)
            with anyio.move_on_after(STREAM_SECONDS):
                async with anyio.create_task_group() as group:
                    if (redis := self._store.reachable()) is not None:
                        group.start_soon(self._follow_redis, redis, runs, deliver)
                    for task_id in tasks:  # where each stands now (a read shared with every poller)
                        await tell(task_id, await refresh(task_id))
                    while any(state["status"] == "working" for state in last.values()):
                        quiet = SELF_READ_AFTER * min(_poll_seconds(state) for state in last.values())
                        with anyio.move_on_after(quiet) as waited:
                            event = await receive.receive()
                            for task_id, run in tasks.items():
                                if run == (event.org_id, event.run_id):
                                    await tell(task_id, await view(task_id, event.reading))
                        if waited.cancelled_caught:  # nobody read them meanwhile: read them here
                            for task_id in tasks:
                                await tell(task_id, await refresh(task_id))
                    group.cancel_scope.cancel()
        finally:
            unsubscribe()
            self._streams -= 1
            send.close()
            receive.close()
        return {"resultType": "complete", "_meta": meta}

    async def _follow_redis(self, redis: Any, runs: set[tuple[int, int]], deliver: Callable[[Any], None]) -> None:
        """This stream's runs' channels, from every replica, into `deliver`."""
        pubsub = redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(*(channel(org, run) for org, run in runs))
            async for message in pubsub.listen():
                name = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
                org_run = name.split("{", 1)[1].split("}", 1)[0]  # org<o>-run<r>
                org, run = (int(part.removeprefix("org").removeprefix("run")) for part in org_run.split("-"))
                deliver(RunRead(org, run, json.loads(message["data"])))
        except self._store.failures as exc:  # the stream goes on reading by itself
            self._store.lost(exc)
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(*self._store.failures):
                    await pubsub.aclose()


def _poll_seconds(state: dict[str, Any]) -> float:
    value = state.get("pollIntervalMs")
    return value / 1000 if isinstance(value, int | float) and math.isfinite(value) else 5.0
