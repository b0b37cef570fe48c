"""Log lines on stderr: plain text, or one JSON object per line for log collectors (`--log-format json`).

In JSON mode every line the process writes is an object: the program's own notices (`say`), uvicorn's
lines, Python warnings and an uncaught exception's traceback go through the same formatter.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import secrets
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final

# Fields a log call may add with `extra=`; none of them ever holds a token (`tenant` is `tenant_id`'s HMAC).
FIELDS: Final = ("request_id", "http_method", "path", "method", "tool", "outcome", "status", "duration", "tenant",
                 "client", "endpoint", "reason", "trace_id")
PROG: Final = "agent-automation-mcp"
# What the command line tells its user (where it serves, what it refuses): shown whatever the level.
CONSOLE: Final = logging.getLogger(f"{__package__}.console")
TENANT_ID_CHARS: Final = 16
NAMES_KEPT: Final = 4096  # tenants' log names remembered, by token hash

# The `/mcp` request being served, so every line logged while serving it carries its id.
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = vars(record)  # what `extra=` added is among the record's attributes
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "event": fields.get("event") or record.getMessage(),
            "logger": record.name,
        }
        if "event" in fields:
            line["message"] = record.getMessage()
        current = request_id.get()
        if current is not None:
            line["request_id"] = current
        line.update({name: fields[name] for name in FIELDS if name in fields})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _encode(line)


# One encoder for every line: `json.dumps` with `default=` builds a new one each time.
_encode: Final = json.JSONEncoder(default=str).encode


def formatter(log_format: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    return logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


def configure(level: str, log_format: str) -> None:
    """Before the SDK's own `basicConfig`, so ours wins: plain lines (or JSON objects) on stderr."""
    # No line says which thread or process wrote it, nor where in the code (see the formats above): none of it is
    # collected, as the logging HOWTO's "Optimization" advises.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # the HOWTO's way to skip looking for the caller's frame
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":  # one line per HTTP request the server sends, and the SDK's chatter, are debugging detail
        for name in ("httpx2", "httpcore", "mcp"):
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(f"{PROG}: %(message)s"))
    CONSOLE.handlers[:] = [console]
    CONSOLE.propagate = False
    CONSOLE.setLevel(logging.INFO)
    logging.captureWarnings(True)
    if log_format == "json":
        sys.excepthook = _log_uncaught


def _log_uncaught(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
    logging.getLogger(__package__).critical("uncaught %s", kind.__name__, exc_info=(kind, error, trace))


def say(message: str, level: int = logging.INFO) -> None:
    """A notice for whoever started the program: `agent-automation-mcp: message`, or a JSON line."""
    CONSOLE.log(level, message)


class TenantIds:
    """Names a tenant in logs by an HMAC of its token's hash with a deployment's secret.

    With the same secret every replica names a tenant alike, so one tenant's lines can be followed across
    replicas; without the secret nobody can tell which token a name stands for, or link it to the token's
    plain hash (the key its pacing uses in Redis).
    """

    def __init__(self, secret: str | None = None) -> None:
        self.shared = secret is not None
        self._key = (secret or secrets.token_hex(32)).encode()
        # The same tenants call again and again (a served call writes two lines): each name is computed once.
        self._named = functools.lru_cache(maxsize=NAMES_KEPT)(self._name)

    def of(self, token_key: str | None) -> str | None:
        return None if token_key is None else self._named(token_key)

    def _name(self, token_key: str) -> str:
        return hmac.new(self._key, token_key.encode(), hashlib.sha256).hexdigest()[:TENANT_ID_CHARS]


# This process's naming of tenants: random per process until `use_tenant_ids` sets the deployment's.
tenant_ids = TenantIds()


def use_tenant_ids(ids: TenantIds) -> None:
    global tenant_ids
    tenant_ids = ids


def tenant_id(token_key: str | None) -> str | None:
    """What a log line calls the tenant whose token has this hash (`Credentials.token_key`)."""
    return tenant_ids.of(token_key)
