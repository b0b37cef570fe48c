"""A deadline for a request's headers: a client that opens a connection and sends its request line and headers
slowly, or never finishes them, is answered 408 and closed after `HEADER_SECONDS`, so a thousand half-sent requests
cannot hold a replica's connections (uvicorn bounds only the idle time between requests, `timeout_keep_alive`).

The clock starts when the connection opens and again at the first byte of each request; it stops when the
headers are complete (the body and the call's own time are bounded elsewhere: the body cap, the call's deadline).
HAProxy's `timeout http-request` does the same in front (manifests/haproxy/haproxy.cfg).
"""

from __future__ import annotations

import asyncio
from typing import Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_SECONDS: Final = 10.0  # as HAProxy's `timeout http-request`; a real client sends its headers at once
TIMED_OUT: Final = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request headers take too long."""

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_clock()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_header_clock()

    def on_headers_complete(self) -> None:
        self._stop_header_clock()
        super().on_headers_complete()

    def _start_header_clock(self) -> None:
        self._stop_header_clock()
        self._header_timer = self.loop.call_later(HEADER_SECONDS, self._headers_too_slow)

    def _stop_header_clock(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.write(TIMED_OUT)
            self.transport.close()
