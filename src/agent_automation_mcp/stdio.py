"""Stdio served on the event loop: the SDK's `stdio_server` with its pipes read and written without threads.

The SDK reads each line of stdin and writes each answer through a worker thread (`anyio.wrap_file`): three hand-offs
between threads per call, which cost more CPU and latency than everything this server does with the call. A host
spawns a server with pipes or socket pairs; those the event loop reads and writes itself. Anything else (a file, a
terminal, one socket for both) is served the SDK's way. As the SDK does, the wire is moved to private descriptors
while serving: fd 0 reads the null device and fd 1 writes to stderr, so nothing a handler or a child prints reaches
the protocol.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from mcp.server import MCPServer
from mcp.server.stdio import stdio_server

from .logs import say
from .sdk_seams import lowlevel

LINE_LIMIT = 64 * 1024 * 1024  # bytes of one message (one line): a longer one is dropped, the lines after it read
logger = logging.getLogger(__name__)


class LineReader:
    """Stdin's lines as the SDK's reader takes them (`async for line in stdin`), each at most `LINE_LIMIT`."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                return (await self._reader.readuntil(b"\n")).decode("utf-8", "replace")
            except asyncio.IncompleteReadError as end:  # the input ended, maybe within a last line
                if not end.partial:
                    raise StopAsyncIteration from None
                return end.partial.decode("utf-8", "replace")
            except asyncio.LimitOverrunError as over:
                logger.error("a message longer than %d bytes was dropped", LINE_LIMIT)
                await self._skip_line(over.consumed)

    async def _skip_line(self, consumed: int) -> None:
        """Drops the rest of an overlong line, up to and with its newline (or the end of the input)."""
        try:
            while True:
                await self._reader.readexactly(consumed)
                try:
                    await self._reader.readuntil(b"\n")
                    return
                except asyncio.LimitOverrunError as over:
                    consumed = over.consumed
        except asyncio.IncompleteReadError:
            return


class LineWriter:
    """Stdout as the SDK's writer uses it (`write`, then `flush`)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode())

    async def flush(self) -> None:
        await self._writer.drain()


def _on_the_loop() -> bool:
    """Whether the event loop can serve stdin and stdout: each a pipe or a socket, and not one socket for both
    (asyncio's writing side takes anything that arrives on its socket for the peer closing it)."""
    if sys.platform == "win32":
        return False
    try:
        wires = os.fstat(0), os.fstat(1)
    except OSError:
        return False
    if not all(stat.S_ISFIFO(wire.st_mode) or stat.S_ISSOCK(wire.st_mode) for wire in wires):
        return False
    stdin, stdout = wires
    return not stat.S_ISSOCK(stdin.st_mode) or (stdin.st_dev, stdin.st_ino) != (stdout.st_dev, stdout.st_ino)


def _diversion(fd: int) -> int:
    """What `fd` points at while serving: the null device for stdin, stderr (else the null device) for stdout."""
    if fd == 1:
        try:
            return os.dup(2)
        except OSError:
            pass
    return os.open(os.devnull, os.O_WRONLY if fd == 1 else os.O_RDONLY)


@contextmanager
def _claimed(fd: int) -> Iterator[int]:
    """`fd`'s wire on a private descriptor, `fd` diverted meanwhile; both as they were after."""
    import fcntl  # POSIX only: `_on_the_loop` sends Windows the SDK's way

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    blocking = os.get_blocking(private)
    try:
        diversion = _diversion(fd)
        try:
            os.dup2(diversion, fd)
        finally:
            os.close(diversion)
        try:
            yield private
        finally:
            os.set_blocking(private, blocking)  # the pipe's state is shared with whoever else holds it
            os.dup2(private, fd)
    finally:
        os.close(private)


@asynccontextmanager
async def _pipes() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's streams for stdin and stdout: on the event loop where it can serve them, else the SDK's own."""
    if not _on_the_loop():
        yield None, None
        return
    loop = asyncio.get_running_loop()
    with _claimed(0) as wire_in, _claimed(1) as wire_out:
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0, closefd=False))
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0, closefd=False))
        try:
            yield LineReader(reader), LineWriter(asyncio.StreamWriter(write_transport, protocol, None, loop))
        finally:
            read_transport.close()
            write_transport.close()


async def serve_stdio(server: MCPServer[Any]) -> None:
    """`MCPServer.run_stdio_async`, on the pipes above. A host whose end of the wire broke (it stopped reading the
    answers, say) has gone: the server says so in a line and exits with status 1, where the SDK's threads went on
    waiting for input."""
    gone = False
    try:
        async with _pipes() as (stdin, stdout), stdio_server(stdin, stdout) as (read_stream, write_stream):
            served = lowlevel(server)
            await served.run(read_stream, write_stream, served.create_initialization_options())
    except* ConnectionError:  # a broken pipe or socket, or the loop's "connection lost" on it
        gone = True
    if gone:
        say("the host closed its end of this server's stdio: stopping", logging.WARNING)
        raise SystemExit(1)
