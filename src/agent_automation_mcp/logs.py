"""Log lines on stderr: plain text, or one JSON object per line for log collectors (`--log-format json`)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Final

# Fields a log call may add with `extra=`; none of them ever holds a token (`tenant` is a short hash of one).
FIELDS: Final = ("tool", "outcome", "duration", "tenant")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "event": getattr(record, "event", None) or record.getMessage(),
            "logger": record.name,
        }
        if hasattr(record, "event"):
            line["message"] = record.getMessage()
        line.update({name: getattr(record, name) for name in FIELDS if hasattr(record, name)})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def formatter(log_format: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    return logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
