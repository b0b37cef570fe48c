"""Error bodies as the service sends them: the plain error, FastAPI's 422 and FastAPI's `{"detail": ...}`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any, ClassVar

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


class ServiceRefusal(Exception):
    """The service's plain error `{message, status_code}`. Handlers raise one of the named cases below; the
    client's `ApiError` hierarchy is what the other side makes of them."""

    status: ClassVar[HTTPStatus]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def response(self) -> JSONResponse:
        return plain_error(self.status, self.message)


class CannotDo(ServiceRefusal):
    """A well-formed request the service will not act on: an archived repository, a sandbox without logs."""

    status = HTTPStatus.BAD_REQUEST


class QuotaReached(ServiceRefusal):
    """The organisation's plan allows no more agent runs."""

    status = HTTPStatus.PAYMENT_REQUIRED


class Forbidden(ServiceRefusal):
    """The token's user may not see this organisation, or may not write to this repository."""

    status = HTTPStatus.FORBIDDEN


class NotFound(ServiceRefusal):
    """No such run, user, repository, pull request or sandbox in this organisation."""

    status = HTTPStatus.NOT_FOUND


class RequestInvalid(Exception):
    """Raised while reading a request: answered with 422 and the collected `ValidationError` items."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} validation error(s)")
        self.errors = errors

    def response(self) -> JSONResponse:
        return JSONResponse({"detail": self.errors}, status_code=HTTPStatus.UNPROCESSABLE_ENTITY)


def plain_error(status: HTTPStatus, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"message": message, "status_code": status}, status_code=status, headers=headers)


def detail_error(status: int, detail: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def validation_items(exc: ValidationError, *prefix: str) -> list[dict[str, Any]]:
    """pydantic's errors as FastAPI renders them: `loc` prefixed with `body`, `query` or `path` (and its name)."""
    return [_item(error, prefix) for error in exc.errors(include_url=False)]


def missing_body() -> dict[str, Any]:
    return {"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}


def invalid_json(error: json.JSONDecodeError) -> dict[str, Any]:
    return {"type": "json_invalid", "loc": ["body", error.pos], "msg": "JSON decode error", "input": {},
            "ctx": {"error": error.msg}}


def _item(error: Any, prefix: tuple[str, ...]) -> dict[str, Any]:
    item: dict[str, Any] = {"type": error["type"], "loc": [*prefix, *error["loc"]], "msg": error["msg"],
                            "input": _jsonable(error.get("input"))}
    if error.get("ctx"):
        item["ctx"] = {key: _jsonable(value) for key, value in error["ctx"].items()}
    return item


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, Iterable):
        return [_jsonable(v) for v in value]
    return str(value)


async def http_exception(request: Request, exc: Exception) -> Response:
    """Unknown routes and wrong methods, like FastAPI: 404 `{"detail": "Not Found"}`, 405 likewise."""
    assert isinstance(exc, HTTPException)
    return detail_error(exc.status_code, exc.detail, exc.headers)
