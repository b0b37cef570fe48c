"""The service's routes, taken from the operation table, and what happens to each request before its handler:

authentication (401) → rate limits (429) → faults → validation of path, query and body (422) → organisation access
(403) → the handler.
"""

from __future__ import annotations

import json
import time
from http import HTTPStatus
from typing import Any

import anyio
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..api.operations import OPERATIONS, Operation
from .call import Call, Endpoint
from .config import LogsPaths
from .errors import (
    Forbidden,
    RequestInvalid,
    ServiceRefusal,
    detail_error,
    invalid_json,
    missing_body,
    plain_error,
    validation_items,
)
from .faults import choose_fault, malformed
from .handlers import AREAS, ENDPOINTS
from .state import SandboxState, token_hash

OPERATION_KEY = "sandbox.operation"
FAULT_KEY = "sandbox.fault"
DROP_KEY = "sandbox.drop"
NO_ORG_ACCESS = "You do not have access to this organization"
_PATH_ID = TypeAdapter(int)


def operation_routes(state: SandboxState) -> list[Route]:
    _check_endpoints()
    routes = [Route(path, _endpoint(op, ENDPOINTS[op.name], state), methods=[op.method], name=f"{op.name}:{path}")
              for op in OPERATIONS.values() for path in served_paths(op, state.config.logs_paths)]
    return in_matching_order(routes)


def _check_endpoints() -> None:
    """One endpoint per operation of the table: the sandbox refuses to start otherwise, saying what to add where."""
    missing, stray = sorted(set(OPERATIONS) - set(ENDPOINTS)), sorted(set(ENDPOINTS) - set(OPERATIONS))
    files = ", ".join(f"src/{area.__name__.replace('.', '/')}.py" for area in AREAS)
    if missing:
        raise RuntimeError(f"operations without a sandbox endpoint: {missing}: write a handler for each and add it to "
                           f"ENDPOINTS in the module of its area ({files})")
    if stray:
        raise RuntimeError(f"sandbox endpoints for operations the table (api/operations.py) does not have: {stray}: "
                           f"rename or remove them in {files}")


def in_matching_order(routes: list[Route]) -> list[Route]:
    """A literal segment is tried before a path parameter in the same place (`repos/check-suite-settings` before
    `repos/{repo_id}`), whatever order the table lists them in: the first route that matches serves."""
    return sorted(routes, key=lambda route: [(part.startswith("{"), part) for part in route.path.split("/")])


def served_paths(op: Operation, logs_paths: LogsPaths) -> list[str]:
    """An operation's path, and its fallback path too unless the sandbox plays a service with only one of them."""
    if op.fallback_path is None:
        return [op.path]
    paths = [op.path, op.fallback_path]
    if logs_paths == "both":
        return paths
    return [path for path in paths if path.startswith("/v1/alpha/") == (logs_paths == "alpha")]


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _endpoint(op: Operation, endpoint: Endpoint, state: SandboxState) -> Any:
    async def serve(request: Request) -> Response:
        request.scope[OPERATION_KEY] = op.name
        token = bearer_token(request.headers.get("authorization"))
        user = state.world.user_for_token(token) if token else None
        if user is None:
            return detail_error(HTTPStatus.UNAUTHORIZED, "Invalid or missing API token", {"WWW-Authenticate": "Bearer"})
        rejection = state.limiter.admit(token_hash(token) or "", op.buckets, time.monotonic())
        if rejection is not None:
            headers = {"Retry-After": str(max(1, _ceil(rejection.retry_after)))} if state.config.retry_after else None
            return plain_error(HTTPStatus.TOO_MANY_REQUESTS, rejection.message, headers)

        faults = state.faults
        if faults.latency and faults.applies_to(op.name):
            await anyio.sleep(faults.latency)
        fault = choose_fault(faults, op.name, state.fault_rng)
        request.scope[FAULT_KEY] = fault
        if fault == "error":
            return plain_error(HTTPStatus.INTERNAL_SERVER_ERROR, "Internal server error (sandbox fault)")
        if fault == "throttle":
            after = faults.throttle_retry_after
            return plain_error(HTTPStatus.TOO_MANY_REQUESTS,
                               "Rate limit exceeded (sandbox fault). Please try again later.",
                               None if after is None else {"Retry-After": str(after if after % 1 else int(after))})
        if fault == "redirect":
            return Response(status_code=HTTPStatus.TEMPORARY_REDIRECT, headers={"Location": f"https://moved.invalid{request.url.path}"})

        try:
            path, query, raw_body, body = await _read(request, op, endpoint)
            org_id = path.get("org_id", getattr(query, "org_id", None))
            if org_id is not None and not state.world.can_access(user, org_id):
                raise Forbidden(NO_ORG_ACCESS)
            now = state.tick()
            result = endpoint.handle(Call(state, op, user, path, query, body, raw_body, now, time.time()))
            response = result if isinstance(result, Response) else JSONResponse(result)
        except (ServiceRefusal, RequestInvalid) as exc:
            response = exc.response()

        if fault == "malformed" and response.status_code == HTTPStatus.OK:
            response.body = malformed(bytes(response.body))
            response.headers["content-length"] = str(len(response.body))
        elif fault == "empty" and response.status_code == HTTPStatus.OK:
            response = Response(status_code=HTTPStatus.ACCEPTED)
        elif fault == "drop":
            request.scope[DROP_KEY] = True  # the request took effect; its answer is lost (see recorder.py)
        return response

    return serve


async def _read(request: Request, op: Operation, endpoint: Endpoint) -> tuple[dict[str, int], Any, Any, Any]:
    """Path ids, query model and body model, or `RequestInvalid` listing every problem at once."""
    errors: list[dict[str, Any]] = []
    path: dict[str, int] = {}
    for name in op.path_params:
        try:
            path[name] = _PATH_ID.validate_python(request.path_params[name])
        except ValidationError as exc:
            errors += validation_items(exc, "path", name)
    query = _validate(endpoint.query, dict(request.query_params), "query", errors)
    raw_body = body = None
    if endpoint.body is not None:
        raw = await request.body()
        if not raw.strip():
            errors.append(missing_body())
        else:
            try:
                raw_body = json.loads(raw)
            except json.JSONDecodeError as exc:
                errors.append(invalid_json(exc))
            else:
                body = _validate(endpoint.body, raw_body, "body", errors)
    if errors:
        raise RequestInvalid(errors)
    return path, query, raw_body, body


def _validate(model: type[BaseModel] | None, data: Any, where: str, errors: list[dict[str, Any]]) -> Any:
    if model is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors += validation_items(exc, where)
        return None


def _ceil(seconds: float) -> int:
    whole = int(seconds)
    return whole if whole == seconds else whole + 1
