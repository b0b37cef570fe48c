"""A task requester for the tests, built on the SDK's client: the 2026-07-28 extension through its `ResultClaim`, and
the 2025-11-25 task methods as plain requests."""

from __future__ import annotations

from typing import Any, Literal

import anyio
from mcp import Client
from mcp.client import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.types import CallToolResult, NotificationParams, Request, RequestParams, Result
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
MAX_POLLS = 60


class TaskIdParams(RequestParams):
    task_id: str


class TaskState(Result):
    """A task as `tasks/get` or a `tools/call` answers it (the fields of either era are kept as sent)."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str | None = None


class TaskHandle(TaskState):
    result_type: Literal["task"] = "task"


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class TaskResult(Request[TaskIdParams, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: TaskIdParams


class ListTasks(Request[RequestParams, Literal["tasks/list"]]):
    method: Literal["tasks/list"] = "tasks/list"
    params: RequestParams


class AnyResult(Result):
    model_config = ConfigDict(extra="allow")


class ListenParams(RequestParams):
    notifications: dict[str, Any]


class ListenTasks(Request[ListenParams, Literal["subscriptions/listen"]]):
    method: Literal["subscriptions/listen"] = "subscriptions/listen"
    params: ListenParams


class TaskNotice(NotificationParams):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str


class TaskPoller(ClientExtension):
    """Declares the tasks extension; a `tools/call` answered with a task is followed with `tasks/get` until it ends.
    `handles` keeps every task handle seen; `follow=False` returns at once (the test polls by itself). It polls every
    `poll_seconds`, the first time after that long."""

    identifier = TASKS

    def __init__(self, *, follow: bool = True, poll_seconds: float = 0.2) -> None:
        self.handles: list[TaskHandle] = []
        self.notices: list[TaskNotice] = []
        self.follow = follow
        self.poll_seconds = poll_seconds

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [NotificationBinding(method="notifications/tasks", params_type=TaskNotice, handler=self._heard)]

    async def _heard(self, notice: TaskNotice) -> None:
        self.notices.append(notice)

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        if not self.follow:
            return CallToolResult(content=[], structured_content={"task": handle.model_dump(by_alias=True)})
        for _ in range(MAX_POLLS):
            await anyio.sleep(self.poll_seconds)
            state = await ctx.session.send_request(GetTask(params=TaskIdParams(task_id=handle.task_id)), TaskState)
            if state.status != "working":
                return CallToolResult.model_validate((state.model_extra or {})["result"])
        raise AssertionError(f"task {handle.task_id} still working after {MAX_POLLS} polls")


async def get_task(client: Client, task_id: str) -> TaskState:
    return await client.session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), TaskState)


async def request(client: Client, method: type[Request[Any, Any]], task_id: str | None = None) -> AnyResult:
    params = TaskIdParams(task_id=task_id) if task_id is not None else RequestParams()
    return await client.session.send_request(method(params=params), AnyResult)  # type: ignore[call-arg]


async def call_as_task(client: Client, tool: str, arguments: dict[str, Any], ttl_ms: int | None = None) -> Any:
    """A 2025-11-25 `tools/call` with a `task` field, answered by `{task}`. The SDK 2.3 client dropped that era's
    tasks and would refuse the answer as a `CallToolResult`, so this one request goes out raw through its dispatcher
    (the SDK's own connection and stamping, without the result check)."""
    task: dict[str, Any] = {} if ttl_ms is None else {"ttl": ttl_ms}
    return await client.session._dispatcher.send_raw_request(
        "tools/call", {"name": tool, "arguments": arguments, "task": task}, {})


async def listen(client: Client, task_ids: list[str]) -> AnyResult:
    """`subscriptions/listen` on tasks, until the stream ends (every task ended); notices go to the TaskPoller."""
    params = ListenParams(notifications={"taskIds": task_ids})
    return await client.session.send_request(ListenTasks(params=params), AnyResult)
