"""`/_sandbox/...`: unauthenticated controls for tests, demos and benchmarks that run in another process."""

from __future__ import annotations

import json
import time
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..api.statuses import STATUSES
from . import views
from .config import FAULT_RATES
from .errors import detail_error, validation_items
from .faults import faults_from_json, faults_to_json
from .inputs import SourceType
from .lifecycle import MOVING
from .state import SandboxState

# Every status the service gives a run (`api.statuses`): a fixture may be made in any, and a run ended in any. Made
# from the table at run time, so a type checker knows it only as the text it is.
if TYPE_CHECKING:
    ServiceStatus = str
else:
    ServiceStatus = Literal[tuple(status.value for status in STATUSES)]


class FixtureRun(BaseModel):
    """The body of `POST /_sandbox/runs`."""

    model_config = ConfigDict(extra="forbid")
    log_entries: int = Field(20, ge=0, le=200_000)
    status: ServiceStatus = "COMPLETE"
    idle_seconds: float = Field(0.0, ge=0, le=365 * 86_400)  # how long ago its last entry was
    goes_on: bool = True  # false: a run in a moving status (ACTIVE...) is stuck, with no end coming
    # Fields the run is sent with beyond the OpenAPI's, as a newer service may send them (names it does not use).
    beyond_spec: dict[str, Any] = Field(default_factory=dict, max_length=20)
    org_id: int | None = None
    user_id: int | None = None
    repo_id: int | None = None
    with_pull_request: bool = False  # open a new pull request for it (needs repo_id)
    pull_request_id: int | None = None  # or make it one more agent on this existing pull request
    prompt: str = "A fixture run"
    source_type: SourceType = "API"


class RunEnding(BaseModel):
    """The body of `POST /_sandbox/runs/{run_id}/end`: end the run now in this status, or pause it (PAUSED)."""

    model_config = ConfigDict(extra="forbid")
    status: ServiceStatus

    @field_validator("status")
    @classmethod
    def _an_end_or_a_pause(cls, value: str) -> str:
        if value in MOVING:
            raise ValueError(f"a run ends in a finished status or pauses (PAUSED), not {value}")
        return value


def control_routes(state: SandboxState) -> list[Route]:
    async def list_requests(request: Request) -> Response:
        operation = request.query_params.get("operation")
        return JSONResponse([record.to_json() for record in list(state.request_log)
                             if operation is None or record.operation == operation])

    async def clear_requests(request: Request) -> Response:
        cleared = len(state.request_log)
        state.request_log.clear()
        return JSONResponse({"cleared": cleared})

    async def get_faults(request: Request) -> Response:
        return JSONResponse(faults_to_json(state.faults))

    async def put_faults(request: Request) -> Response:
        try:
            new = faults_from_json(json.loads(await request.body() or b"{}"))
        except ValueError as exc:  # also bad JSON
            return detail_error(HTTPStatus.BAD_REQUEST, str(exc))
        for name in ("latency", *FAULT_RATES, "throttle_retry_after", "operations"):
            setattr(state.faults, name, getattr(new, name))  # in place: holders of `state.faults` see the change
        return JSONResponse(faults_to_json(state.faults))

    async def reset_rate_limits(request: Request) -> Response:
        state.limiter.reset()
        return JSONResponse({"reset": True})

    async def pull_requests(request: Request) -> Response:
        state.tick()
        return JSONResponse([views.pull_request_state(state.world, pr) for pr in state.world.prs.values()])

    async def webhook_tests(request: Request) -> Response:
        return JSONResponse(list(state.webhook_tests))

    async def info(request: Request) -> Response:
        config = state.config
        return JSONResponse({
            "org_id": config.org_id, "visible_org_ids": list(config.visible_org_ids),
            "forbidden_org_id": config.forbidden_org_id, "tokens": len(config.tokens),
            "rate_limits": {name: str(limit) for name, limit in config.rate_limits.items()},
            "algorithm": config.algorithm, "retry_after": config.retry_after, "run_seconds": config.run_seconds,
            "seed": config.seed, "logs_paths": config.logs_paths, "quirks": config.quirks,
        })

    return [
        Route("/_sandbox/requests", list_requests, methods=["GET"]),
        Route("/_sandbox/requests", clear_requests, methods=["DELETE"]),
        Route("/_sandbox/faults", get_faults, methods=["GET"]),
        Route("/_sandbox/faults", put_faults, methods=["PUT"]),
        Route("/_sandbox/rate-limits", reset_rate_limits, methods=["DELETE"]),
        *_run_routes(state),
        Route("/_sandbox/state/prs", pull_requests, methods=["GET"]),
        Route("/_sandbox/state/webhook-tests", webhook_tests, methods=["GET"]),
        Route("/_sandbox/info", info, methods=["GET"]),
    ]


def _run_routes(state: SandboxState) -> list[Route]:
    """Runs made or ended as a test or a demo needs them: a fixture in any status, a run ended or paused now."""

    async def create_run(request: Request) -> Response:
        try:
            spec = FixtureRun.model_validate_json(await request.body() or b"{}")
        except ValidationError as exc:
            return JSONResponse({"detail": validation_items(exc, "body")}, status_code=HTTPStatus.UNPROCESSABLE_ENTITY)
        world, config = state.world, state.config
        org_id = spec.org_id if spec.org_id is not None else config.org_id
        pull_request = world.pr_in_org(org_id, spec.pull_request_id) if spec.pull_request_id is not None else None
        if (org_id not in world.orgs or (spec.repo_id is not None and world.repo_in_org(org_id, spec.repo_id) is None)
                or (spec.pull_request_id is not None and pull_request is None)):
            return detail_error(HTTPStatus.NOT_FOUND, "unknown organisation, repository or pull request")
        user_id = spec.user_id if spec.user_id is not None else world.token_users[config.token]
        now = state.tick()
        run = world.add_fixture_run(org_id=org_id, user_id=user_id, repo_id=spec.repo_id, prompt=spec.prompt,
                                    source_type=spec.source_type, status=spec.status, log_entries=spec.log_entries,
                                    with_pull_request=spec.with_pull_request, now=now, wall=time.time(),
                                    pull_request=pull_request, idle_seconds=spec.idle_seconds, goes_on=spec.goes_on)
        named = views.agent_run(world, run)  # what the OpenAPI names stays as the sandbox has it
        run.beyond_spec = {key: value for key, value in spec.beyond_spec.items() if key not in named}
        return JSONResponse({**named, **run.beyond_spec})  # as `views.agent_run` sends it from now on

    async def end_run(request: Request) -> Response:
        try:
            ending = RunEnding.model_validate_json(await request.body() or b"{}")
            run_id = int(request.path_params["run_id"])
        except (ValidationError, ValueError) as exc:
            detail = validation_items(exc, "body") if isinstance(exc, ValidationError) else str(exc)
            return JSONResponse({"detail": detail}, status_code=HTTPStatus.UNPROCESSABLE_ENTITY)
        state.tick()
        run = state.world.runs.get(run_id)
        if run is None:
            return detail_error(HTTPStatus.NOT_FOUND, f"no run {run_id}")
        state.world.end_run(run, ending.status)
        return JSONResponse(views.agent_run(state.world, run))

    return [Route("/_sandbox/runs", create_run, methods=["POST"]),
            Route("/_sandbox/runs/{run_id}/end", end_run, methods=["POST"])]
