"""Sending one operation: pacing, the HTTP exchange, the retry policy and error mapping, in one place.

Retries follow one rule: a request is sent again only when doing so cannot do anything twice.
That is any request that never left (connection refused, pool or connect timeout), any request
refused with 429 (the limiter ran before the handler), and operations the table marks
`retry_safe` after a 5xx or a lost response. Everything else that may have reached the service
and got no clear answer is reported as "outcome unknown".

Success is only what the service says it is: a 2xx with a JSON body (every operation of the table
answers with one). Redirects are never followed (the token would go wherever they point) and, like
every other status outside 2xx, are errors that name the real status.
"""

from __future__ import annotations

import email.utils
import enum
import functools
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

import anyio
import httpx2
from pydantic import TypeAdapter, ValidationError

from .. import tracing
from .credentials import Credentials
from .errors import (
    ApiError,
    ApiTimeoutError,
    ConfigurationError,
    ConnectionFailedError,
    OutcomeUnknownError,
    RateLimitError,
    UnexpectedResponseError,
    UnexpectedStatusError,
    ValidationFailedError,
    error_class_for_status,
)
from .limits import named_limits
from .observer import TransportObserver
from .operations import OPERATIONS, Operation
from .pacer import REQUEST_SECONDS, Pacer, Receipt
from .text import excerpt, redact

if TYPE_CHECKING:
    from .settings import ApiSettings

logger = logging.getLogger(__name__)
T = TypeVar("T")

USER_AGENT: Final = "agent-automation-mcp/0.1"
MAX_RETRIES: Final = 2  # after the first attempt, for failures that are safe to repeat
MAX_RATE_LIMIT_RETRIES: Final = 3
BACKOFF_BASE: Final = 0.25
BACKOFF_CAP: Final = 4.0
MIN_ATTEMPT_SECONDS: Final = 0.05
MAX_DETAILS: Final = 20  # validation problems quoted from one answer
URLS_KEPT: Final = 1024  # request URLs kept parsed: httpx2 parses a relative URL, its merge and its query each time

Query = Mapping[str, str | int | bool | None]


class Kind(enum.Enum):
    """How one attempt ended, as far as sending it again is concerned."""

    UNSENT = "never left this process"  # connection refused, connect or pool timeout
    LOST = "may have reached the service, no answer"  # read timeout, dropped connection, broken response
    THROTTLED = "429"  # the limiter refused it before any work
    MOVED = "404 for the primary path, which this service does not serve"  # the table names a fallback path
    REDIRECTED = "3xx"  # never followed: the token would go wherever it points
    SERVER_ERROR = "5xx"
    REFUSED = "another status outside 2xx"
    ANSWERED = "2xx"


def may_send_again(op: Operation, kind: Kind) -> bool:
    """The one retry rule: again only when that cannot do anything twice (see the module's docstring)."""
    return kind in (Kind.UNSENT, Kind.THROTTLED) or (kind in (Kind.LOST, Kind.SERVER_ERROR) and op.retry_safe)


@dataclass(slots=True)
class _Send:
    """One call of `send`: the request as prepared once, and the retries it has spent."""

    op: Operation
    credentials: Credentials
    path_values: dict[str, int]
    params: dict[str, str | int]
    json: Any
    headers: dict[str, str]
    buckets: Sequence[str]
    deadline: float | None
    bulk: bool
    once: bool = False  # one attempt, whatever its end: see `ApiTransport.send`
    retries: int = 0  # after UNSENT, LOST or SERVER_ERROR, with backoff
    rate_limit_retries: int = 0
    attempts: int = 0
    again_after: Kind | None = None  # why the request is being sent again


@dataclass(slots=True)
class _Outcome:
    """One attempt: its kind, the answer or the transport error, and for a 429 the pause it asks for."""

    kind: Kind
    response: httpx2.Response | None = None
    error: httpx2.TransportError | None = None
    retry_after: float | None = None  # what the service's Retry-After said
    wait: float | None = None  # what the pacer will hold, at most

    @property
    def clamped(self) -> bool:
        """The service asked for a longer wait than the pacer holds: answered now, not waited out in a call.
        (A second of slack: an HTTP-date Retry-After and the pacer's rounding may differ by a little.)"""
        return self.retry_after is not None and self.wait is not None and self.retry_after > self.wait + 1


class ApiTransport:
    """One pooled HTTP client per process, shared by every caller; credentials come with each call."""

    def __init__(self, settings: ApiSettings, pacer: Pacer | None = None, *,
                 http: httpx2.AsyncClient | None = None, observer: TransportObserver | None = None) -> None:
        self.settings = settings
        self.pacer = pacer
        self.observer = observer
        self._client = http
        # Operations whose primary path turned out not to exist at this base URL (one transport, one base URL):
        # a cache, not state; a new process pays one 404 to learn it again.
        self._on_fallback: set[str] = set()
        self._url = functools.lru_cache(maxsize=URLS_KEPT)(self._absolute_url)

    async def __aenter__(self) -> ApiTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def _http(self) -> httpx2.AsyncClient:
        return self.open()

    def open(self) -> httpx2.AsyncClient:
        """The HTTP client, made at the first send unless asked for earlier: making it imports the HTTP/1.1
        client library and loads the system's CA certificates, a good part of a start-up that only lists the tools
        (a host starting a stdio session). HTTP serving asks for it before the replica says it is ready. A send
        asks for it before it is paced: made between the pacer's stamp and the request (0.3 s here), it would
        have the service count the request later than the pacer does, and a window's worth could meet a 429."""
        if self._client is None:
            self._client = httpx2.AsyncClient(
                base_url=self.settings.base_url,
                timeout=httpx2.Timeout(self.settings.timeout, connect=self.settings.connect_timeout),
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self.pacer is not None:
            await self.pacer.aclose()

    @overload
    async def send(self, op: Operation, credentials: Credentials, *, path: Mapping[str, int] | None = None,
                   query: Query | None = None, json: Any = None, deadline: float | None = None,
                   bulk: bool = False, once: bool = False, model: type[T]) -> T: ...

    @overload
    async def send(self, op: Operation, credentials: Credentials, *, path: Mapping[str, int] | None = None,
                   query: Query | None = None, json: Any = None, deadline: float | None = None,
                   bulk: bool = False, once: bool = False, model: None = None) -> object: ...

    async def send(self, op: Operation, credentials: Credentials, *, path: Mapping[str, int] | None = None,
                   query: Query | None = None, json: Any = None, deadline: float | None = None,
                   bulk: bool = False, once: bool = False, model: type[T] | None = None) -> T | object:
        """Send `op` for `credentials` and return the decoded JSON body (read as `model` if given, so a shape
        we cannot read is reported with the status that came with it), or raise an `ApiError`.

        Each attempt is paced, sent, classified and settled with the pacer; then it is either sent again
        (`_again`, the retry rule) or answered (`_answer`). Errors quote the service in short excerpts without
        the caller's token, even when the service echoes it. `once` sends one attempt and never another: for a
        question whose caller answers a failure itself (the gate's token check), where each retry would be one more
        request to a service that is failing already.
        """
        send = self._prepared(op, credentials, path, query, json, deadline, bulk, once)
        self.open()  # before pacing (see open)
        while True:
            receipt = await self._pace(send)
            outcome = await self._attempt(send)
            await self._settle(send, receipt, outcome)
            if not await self._again(send, outcome):
                return self._answer(send, outcome, model)
            send.again_after = outcome.kind

    def _prepared(self, op: Operation, credentials: Credentials, path: Mapping[str, int] | None,
                  query: Query | None, json: Any, deadline: float | None, bulk: bool, once: bool) -> _Send:
        path_values = dict(path or {})
        if "org_id" in op.path_params:
            path_values["org_id"] = require_org_id(credentials)
        unknown = set(query or {}) - set(op.query)
        if unknown or set(path_values) != set(op.path_params):
            raise AssertionError(f"{op.name}: arguments do not match the operation table")  # a bug, not input
        return _Send(op=op, credentials=credentials, path_values=path_values,
                     params={k: _query_value(v) for k, v in (query or {}).items() if v is not None},
                     json=json, headers={"Authorization": credentials.authorization},
                     buckets=self.settings.bucket_map.get(op.name, op.buckets), deadline=deadline, bulk=bulk,
                     once=once)

    async def _pace(self, send: _Send) -> Receipt | None:
        """Wait until every bucket of the operation has room (within the deadline); the pacer's receipt."""
        if self.pacer is None:
            return None
        queued = time.monotonic()
        with tracing.pacing_wait(send.buckets, send.bulk) as span:
            try:
                receipt = await self.pacer.acquire(send.credentials.token_key, send.buckets, send.deadline,
                                                   bulk=send.bulk)
            except RateLimitError as exc:
                raise self._shared(exc) from None
            waited = time.monotonic() - queued
            tracing.paced(span, waited, receipt.shared is not None)
        if self.observer is not None:
            self.observer.paced(waited)
        return receipt

    async def _attempt(self, send: _Send) -> _Outcome:
        """One HTTP exchange within what is left of the deadline, classified."""
        op = send.op
        template = op.fallback_path if op.name in self._on_fallback and op.fallback_path else op.path
        timeout = _attempt_timeout(self.settings.timeout, send.deadline)
        send.attempts += 1
        again_after = send.again_after.name.lower() if send.again_after is not None else None
        with tracing.upstream_request(op.method, template, op.name, send.attempts, again_after, send.headers) as span:
            outcome = await self._exchange(send, template, timeout)
            tracing.upstream_answered(span, outcome.response.status_code if outcome.response is not None else None,
                                      outcome.kind.name.lower())
        return outcome

    async def _exchange(self, send: _Send, template: str, seconds: float) -> _Outcome:
        op = send.op
        started = time.monotonic()
        try:
            response = await self._request(op, self._url(template.format(**send.path_values),
                                                          tuple(send.params.items())),
                                           send.json, send.headers, seconds, send.buckets)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
            return _Outcome(Kind.UNSENT, error=exc)
        except httpx2.TransportError as exc:
            return _Outcome(Kind.LOST, error=exc)
        logger.debug("%s %s -> %s in %.3fs", op.method, op.name, response.status_code, time.monotonic() - started)
        return _Outcome(self._classify(op, response), response=response)

    def _classify(self, op: Operation, response: httpx2.Response) -> Kind:
        status = response.status_code
        if status == 429:
            return Kind.THROTTLED
        if status == 404 and op.fallback_path and op.name not in self._on_fallback and _route_missing(response):
            return Kind.MOVED
        if 300 <= status < 400:
            return Kind.REDIRECTED
        if status >= 500:
            return Kind.SERVER_ERROR
        return Kind.ANSWERED if 200 <= status < 300 else Kind.REFUSED

    async def _settle(self, send: _Send, receipt: Receipt | None, outcome: _Outcome) -> None:
        """Tell the pacer how the attempt ended; for a 429, first how long to pause (the outcome's `wait`)."""
        if outcome.kind is Kind.THROTTLED:
            assert outcome.response is not None
            outcome.retry_after = parse_retry_after(outcome.response.headers.get("Retry-After"))
            outcome.wait = (await self.pacer.rate_limited(send.credentials.token_key, send.buckets,
                                                          outcome.retry_after)
                            if self.pacer is not None else
                            (outcome.retry_after if outcome.retry_after is not None else 1.0))
            # Only now: until the pause is set, a refused probe holds its slot.
        await self._settled(receipt, outcome.response.status_code if outcome.response is not None else None)

    async def _again(self, send: _Send, outcome: _Outcome) -> bool:
        """Whether to send once more, after waiting here: only what `may_send_again` allows, within the bounds."""
        op = send.op
        if send.once:
            return False
        if outcome.kind is Kind.MOVED:
            logger.info("%s: %s is not served here; using %s from now on", op.name, op.path, op.fallback_path)
            self._on_fallback.add(op.name)
            return True
        if not may_send_again(op, outcome.kind):
            return False
        if outcome.kind is Kind.THROTTLED:
            wait = outcome.wait or 0.0
            if outcome.clamped or send.rate_limit_retries >= MAX_RATE_LIMIT_RETRIES or not _fits(wait, send.deadline):
                return False
            send.rate_limit_retries += 1
            logger.info("%s: 429 from the service, retrying in %.2fs", op.name, wait)
            with tracing.throttled_wait(send.buckets, wait):
                await anyio.sleep(wait)
            return True
        if send.retries >= MAX_RETRIES or not await _backoff(send.retries, send.deadline):
            return False
        send.retries += 1
        return True

    def _answer(self, send: _Send, outcome: _Outcome, model: type[T] | None) -> T | object:
        """The decoded body of a 2xx, or the `ApiError` that says what is known."""
        op, secret, response = send.op, send.credentials.token, outcome.response
        if response is None:
            assert outcome.error is not None
            if outcome.kind is Kind.UNSENT:
                error_type = ApiTimeoutError if isinstance(outcome.error, httpx2.TimeoutException) else \
                    ConnectionFailedError
                raise error_type(f"could not reach the service: {type(outcome.error).__name__}", operation=op.name)
            raise _lost_response_error(op, outcome.error)
        status = response.status_code
        if outcome.kind is Kind.THROTTLED:
            raise self._shared(self._throttled(send, outcome, response))
        if outcome.kind is Kind.REDIRECTED:
            raise _redirect_error(op, response, secret)
        if outcome.kind is Kind.SERVER_ERROR and not op.retry_safe:
            raise outcome_unknown(op, f"the service answered {status} ({_message(response, secret)}) to {op.name}",
                                  status)
        if outcome.kind is not Kind.ANSWERED:
            raise _error_from_response(op, response, secret)
        return _read(op, response, model)

    def _throttled(self, send: _Send, outcome: _Outcome, response: httpx2.Response) -> RateLimitError:
        """The service's 429, answered: what it refused and the wait it asked for, under which limit (the service does
        not say which, where the operation counts against several), and that what counts against it waits too."""
        op, asked, limits = send.op, outcome.retry_after, tuple(send.buckets)
        wanted = "without saying how long to wait" if asked is None else f"and asked to wait {asked:.0f} s"
        named = named_limits(self.settings.rate_limits, limits)
        which = (f"It refused under its limit {named}, and refuses every request counted against that limit" if
                 len(limits) == 1 else f"{op.name} counts against {named}; the service does not say which it "
                                       "refused, and refuses every request counted against that one")
        why = ("longer than a call can wait: a quota, perhaps" if outcome.clamped else
               f"refused again after {send.rate_limit_retries} waits" if send.rate_limit_retries else
               "longer than this call had left")
        return RateLimitError(
            f"the service refused {op.name} (429) {wanted}: {_message(response, send.credentials.token)}",
            status=response.status_code, operation=op.name, limits=limits,
            retry_after=outcome.retry_after if outcome.clamped else outcome.wait,
            hint=f"{which} until then ({why}). Call again after retry_after_seconds, or tell the user.")

    def _shared(self, error: RateLimitError) -> RateLimitError:
        """`error` with the operations that count against each of its limits, as this server charges them."""
        error.shared_by = {bucket: frozenset(name for name, op in OPERATIONS.items()
                                             if bucket in self.settings.bucket_map.get(name, op.buckets))
                           for bucket in error.limits}
        return error

    async def _settled(self, receipt: Receipt | None, status: int | None) -> None:
        """Tell the pacer how a charged send ended: an answer means the service has stamped it by now."""
        if receipt is not None and self.pacer is not None:
            await self.pacer.settled(receipt, status)

    def _absolute_url(self, path: str, params: tuple[tuple[str, str | int], ...]) -> httpx2.URL:
        """`path` under the base URL with `params` as its query, as httpx2 merges them: built once per URL, as a
        repeated call (the same run, the same page) asks for the same one."""
        base = self._http.base_url
        query = f"?{httpx2.QueryParams(params)}" if params else ""
        return base.copy_with(raw_path=base.raw_path + f"{path.lstrip('/')}{query}".encode())

    async def _request(self, op: Operation, url: httpx2.URL, json: Any, headers: dict[str, str], seconds: float,
                       buckets: Sequence[str]) -> httpx2.Response:
        """One HTTP exchange, reported to the observer whatever its end."""
        try:
            response = await self._http.request(op.method, url, json=json, headers=headers, timeout=seconds)
        except httpx2.TransportError as exc:
            if self.observer is not None:
                self.observer.upstream(buckets, "timeout" if isinstance(exc, httpx2.TimeoutException) else "connection")
            raise
        if self.observer is not None:
            self.observer.upstream(buckets, str(response.status_code))
        return response


def require_org_id(credentials: Credentials) -> int:
    if credentials.org_id is None:
        raise ConfigurationError(
            "no organisation id: set AGENT_AUTOMATION_ORG_ID (list_organizations shows the ones your token sees)")
    return credentials.org_id


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from now, from either form RFC 9110 allows (delta-seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if seconds == seconds else None  # NaN guard


def _query_value(value: str | int | bool) -> str | int:
    return str(value).lower() if isinstance(value, bool) else value


def _attempt_timeout(configured: float, deadline: float | None) -> float:
    if deadline is None:
        return configured
    remaining = deadline - time.monotonic()
    if remaining < MIN_ATTEMPT_SECONDS:
        raise ApiTimeoutError("the call's time budget ran out before the request could be sent")
    return min(configured, remaining)


def _fits(wait: float, deadline: float | None) -> bool:
    """Whether waiting `wait` leaves the request its time before the deadline (the pacer's rule, `REQUEST_SECONDS`)."""
    return deadline is None or time.monotonic() + wait + REQUEST_SECONDS < deadline


async def _backoff(attempt: int, deadline: float | None) -> bool:
    """Sleep a full-jitter exponential delay if it fits the deadline; say whether a retry may follow."""
    delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
    if not _fits(delay, deadline):
        return False
    await anyio.sleep(delay)
    return True


def _lost_response_error(op: Operation, exc: httpx2.TransportError) -> ApiError:
    what = "timed out waiting for the answer" if isinstance(exc, httpx2.TimeoutException) else \
        f"lost the connection ({type(exc).__name__})"
    if op.retry_safe:
        error_type = ApiTimeoutError if isinstance(exc, httpx2.TimeoutException) else ConnectionFailedError
        return error_type(f"the service {what}", operation=op.name)
    return outcome_unknown(op, f"the service {what} after the {op.name} request was sent")


def outcome_unknown(op: Operation, message: str, status: int | None = None) -> OutcomeUnknownError:
    """The write may have taken effect; the hint says whether repeating it is safe."""
    hint = OutcomeUnknownError.idempotent_hint if op.idempotent else None
    return OutcomeUnknownError(message, status=status, operation=op.name, hint=hint)


def _redirect_error(op: Operation, response: httpx2.Response, secret: str) -> ApiError:
    """Not followed: the request (and its token) would go to an address nobody configured."""
    status = response.status_code
    location = response.headers.get("Location")
    where = f"to {excerpt(location, secret, 120)}" if location else "without a Location"
    return UnexpectedStatusError(
        f"the service answered {status}, a redirect {where}, to {op.name}; it was not followed", status=status,
        operation=op.name,
        hint=f"The redirect pointed {where}: AGENT_AUTOMATION_BASE_URL is probably wrong (its scheme, host or path); "
             "correct it and restart. The redirect was not followed.")


def _decode(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _message(response: httpx2.Response, secret: str) -> str:
    """The service's own words: `message`, else `detail` (string or list), else `error`, else the text."""
    body = _decode(response)
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, str) and value.strip():
                return excerpt(value, secret)
            if isinstance(value, list) and value:
                return excerpt("; ".join(_validation_item(item) for item in value[:10]), secret)
    text = response.text.strip()
    return excerpt(text, secret) if text else f"HTTP {response.status_code}"


def _validation_item(item: Any) -> str:
    if isinstance(item, dict):
        loc = ".".join(str(part) for part in item.get("loc", []) if part not in ("body", "query", "path"))
        return f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", item))
    return str(item)


def _route_missing(response: httpx2.Response) -> bool:
    """A 404 for the path itself (the framework's default), not for a resource the handler looked up."""
    body = _decode(response)
    if not isinstance(body, dict):
        return True
    return "message" not in body and str(body.get("detail", "")).strip().lower() == "not found"


def _error_from_response(op: Operation, response: httpx2.Response, secret: str) -> ApiError:
    status = response.status_code
    error_type = error_class_for_status(status)
    details = None
    if error_type is ValidationFailedError:
        body = _decode(response)
        items = body.get("detail") if isinstance(body, dict) else None
        if isinstance(items, list):  # the service's words: a few, short, without the values it was sent
            details = [{"loc": redact(item.get("loc"), secret), "msg": excerpt(str(item.get("msg", "")), secret),
                        "type": item.get("type")} if isinstance(item, dict) else excerpt(str(item), secret)
                       for item in items[:MAX_DETAILS]]
    return error_type(_message(response, secret), status=status, details=details, operation=op.name)


def _read(op: Operation, response: httpx2.Response, model: type[T] | None) -> T | object:
    if not response.content:
        raise unreadable_answer(op, response.status_code, "no body")
    try:
        body: object = response.json()
    except ValueError:
        raise unreadable_answer(op, response.status_code, "a body that is not JSON") from None
    if model is None:
        return body
    try:
        return _adapter(model).validate_python(body)
    except ValidationError as exc:
        raise unreadable_answer(op, response.status_code, f"an unexpected shape ({exc.error_count()} problems)") \
            from None


# Each model's adapter, built at its first answer: as many as the client's models, a bounded set.
_ADAPTERS: Final[dict[type[Any], TypeAdapter[Any]]] = {}


def _adapter(model: type[T]) -> TypeAdapter[T]:
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        adapter = _ADAPTERS[model] = TypeAdapter(model)
    return adapter


def unreadable_answer(op: Operation, status: int, what: str) -> ApiError:
    """A success we cannot read. For a write it most likely took effect, so it must not invite a blind repeat."""
    message = f"{op.name}: the service answered {status} with {what}"
    if op.retry_safe:
        return UnexpectedResponseError(message, status=status, operation=op.name)
    # 202 means accepted for processing, not done.
    known = "it was accepted, but whether it was done is not known" if status == 202 else \
        "the change most likely took effect"
    return outcome_unknown(op, f"{message}; {known}", status)
