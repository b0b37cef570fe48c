"""Deadlines for what a client sends that no app is waiting on: a request's headers, and the rest of a body the
app answered without reading.

Headers: a client that opens a connection and sends its request line and headers slowly, or never finishes them, is
answered 408 and closed after `HEADER_SECONDS`, so a thousand half-sent requests cannot hold a replica's
connections (uvicorn bounds only the idle time between requests, `timeout_keep_alive`). The clock starts when the
connection opens and again at the first byte of each request; it stops when the headers are complete.

The rest of a body: the gate answers a stranger (401, 429...) before reading a byte of the body, and uvicorn then
reads what is left of it and drops it, so the connection can carry the next request (closing at once would reset
it, and the answer could be lost). The rest must arrive within `bodies.BODY_SECONDS` of the answer, or the
connection is closed: a body sent a byte at a time after its answer holds no connection.

A body being read is bounded elsewhere (`bodies.py`), as is the call's own time (its deadline). HAProxy's
`timeout http-request` bounds headers and bodies in front (manifests/haproxy/haproxy.cfg).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .bodies import BODY_SECONDS

HEADER_SECONDS: Final = 10.0  # as HAProxy's `timeout http-request`; a real client sends its headers at once
TIMED_OUT: Final = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request headers, or the rest of a body answered
    unread, take too long."""

    _timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn types it
        super().connection_made(transport)
        self._start_clock(HEADER_SECONDS, self._headers_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_clock(HEADER_SECONDS, self._headers_too_slow)

    def on_headers_complete(self) -> None:
        self._stop_clock()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._stop_clock()  # a body answered unread has come whole
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.cycle is not None and self.cycle.more_body and not self.transport.is_closing():
            self._start_clock(BODY_SECONDS, self.transport.close)  # answered before its body came whole

    def _start_clock(self, seconds: float, expired: Callable[[], None]) -> None:
        self._stop_clock()
        self._timer = self.loop.call_later(seconds, expired)

    def _stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _headers_too_slow(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            self.transport.write(TIMED_OUT)
            self.transport.close()
