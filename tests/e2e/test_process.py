"""The server's process as a host or an operator starts it: the stdio wire (`stdio.py`: pipes and sockets read and
written on the event loop, the protocol's descriptors kept from stray output, anything else served the SDK's way),
and the garbage collector, off while the process starts (`__main__.py`) and on once it serves (`cli.serving`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from harness import HttpServer, clean_env, free_port, stdio_server
from mcp import Client
from mcp.client.stdio import stdio_client

from agent_automation_mcp.stdio import LINE_LIMIT
from stdio_session import SESSION

SECONDS = 60  # for a start, a session or an exit, however loaded the machine
SERVER = [sys.executable, "-m", "agent_automation_mcp"]
HANDSHAKE, LIST = SESSION[:2], SESSION[2]  # a host's first messages: `initialize`, `initialized`; `tools/list`


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


class Host:
    """One end of a server's stdin and stdout, written and read as a host does; a timer kills a hung server."""

    def __init__(self, process: subprocess.Popen[bytes], write: IO[bytes], read: IO[bytes],
                 end_input: Callable[[], None] | None = None) -> None:
        self.process, self.write, self.read = process, write, read
        self._end_input = end_input or write.close
        self._stopper = threading.Timer(SECONDS, process.kill)
        self._stopper.start()

    def send(self, *lines: bytes) -> None:
        self.write.write(b"".join(lines))
        self.write.flush()

    def answer(self, request_id: int) -> dict[str, Any]:
        """The answer to `request_id`, past any notification before it."""
        for line in self.read:
            message = json.loads(line)
            if message.get("id") == request_id:
                return message  # type: ignore[no-any-return]
        raise AssertionError(f"the output ended before the answer to {request_id}")

    def end(self) -> int:
        """The input ended; the exit status."""
        self._end_input()
        try:
            return self.process.wait(SECONDS)
        finally:
            self._stopper.cancel()


@contextmanager
def host(wire: str, **env: str) -> Iterator[tuple[Host, int]]:
    """A server spawned on `wire` (`pipe`: two pipes; `socket`: a socket pair for each, as Node's `child_process`
    gives; `one socket`: one socket pair for both, as inetd gives), and a descriptor sharing the state of the
    server's end of its input (its blocking mode, for one)."""
    with ExitStack() as stack:
        if wire == "pipe":
            read_in, write_in = os.pipe()
            read_out, write_out = os.pipe()
            shared = os.dup(read_in)
            stack.callback(os.close, shared)
            process = subprocess.Popen(SERVER, stdin=read_in, stdout=write_out, stderr=subprocess.DEVNULL,
                                       env=clean_env(**env))
            os.close(read_in)
            os.close(write_out)
            writer, reader = open(write_in, "wb"), open(read_out, "rb")  # noqa: SIM115 (closed by the stack)
            end_input = writer.close
        else:
            ours_in, theirs_in = socket.socketpair()
            ours_out, theirs_out = (ours_in, theirs_in) if wire == "one socket" else socket.socketpair()
            shared = os.dup(theirs_in.fileno())
            stack.callback(os.close, shared)
            process = subprocess.Popen(SERVER, stdin=theirs_in, stdout=theirs_out, stderr=subprocess.DEVNULL,
                                       env=clean_env(**env))
            theirs_in.close()
            theirs_out.close()
            writer, reader = ours_in.makefile("wb"), ours_out.makefile("rb")
            end_input = lambda: ours_in.shutdown(socket.SHUT_WR)  # noqa: E731
            stack.callback(ours_in.close)
            stack.callback(ours_out.close)
        stack.callback(reader.close)
        stack.callback(lambda: process.poll() is None and process.kill())
        yield Host(process, writer, reader, end_input), shared


@pytest.mark.parametrize("wire", ["pipe", "socket"])
def test_pipes_and_sockets_are_served_on_the_event_loop_and_left_as_they_were(wire: str) -> None:
    with host(wire) as (server, shared):
        server.send(_line(HANDSHAKE[0]))
        assert "result" in server.answer(1)
        server.send(_line(HANDSHAKE[1]), _line(LIST))  # what comes once the server serves is read as well
        assert server.answer(2)["result"]["tools"]
        assert not os.get_blocking(shared)  # read by the event loop, not by a thread blocked on it
        threads = len(os.listdir(f"/proc/{server.process.pid}/task"))
        assert server.end() == 0
        assert os.get_blocking(shared)  # as the server found it, for whoever holds the same pipe
    assert threads == 1  # no worker thread hands a message over


def test_one_socket_for_both_is_served_the_sdks_way() -> None:
    with host("one socket") as (server, shared):
        server.send(_line(HANDSHAKE[0]))
        assert "result" in server.answer(1)
        server.send(_line(HANDSHAKE[1]), _line(LIST))
        assert server.answer(2)["result"]["tools"]
        assert os.get_blocking(shared)  # a thread's blocking reads
        assert server.end() == 0


def test_a_host_that_stops_reading_ends_the_server_in_a_line() -> None:
    """Its output's reader gone (the host crashed, say), the server exits at its next answer, where the SDK's
    threads waited for input for good."""
    read_out, write_out = os.pipe()
    process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=write_out, stderr=subprocess.PIPE,
                               env=clean_env())
    os.close(write_out)
    os.close(read_out)
    assert process.stdin is not None and process.stderr is not None
    process.stdin.write(_line(HANDSHAKE[0]))
    process.stdin.flush()
    try:
        status = process.wait(SECONDS)
    finally:
        process.kill()
    said = process.stderr.read().decode()
    assert status == 1 and "the host closed its end of this server's stdio: stopping" in said
    assert "Traceback" not in said


def test_a_line_past_the_limit_is_dropped_and_the_next_one_answered() -> None:
    with host("pipe") as (server, _):
        server.send(*map(_line, HANDSHAKE))
        assert "result" in server.answer(1)
        overlong = b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"pad": "' + b"x" * LINE_LIMIT + b'"}}\n'
        server.send(overlong, _line(LIST))
        assert server.answer(2)["result"]["tools"]
        assert server.end() == 0


def test_anything_but_pipes_and_sockets_is_served_the_sdks_way(tmp_path: Path) -> None:
    """stdin a pipe, stdout a file (a host that keeps the wire): no stream goes to the event loop unless both can."""
    output = tmp_path / "output.jsonl"
    with output.open("wb") as sink:
        process = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.DEVNULL,
                                   env=clean_env())
        assert process.stdin is not None
        with open(output, "rb") as read:
            server = Host(process, process.stdin, read)
            server.send(*map(_line, HANDSHAKE), _line(LIST))
            deadline = time.monotonic() + SECONDS  # the input ended only once answered: the SDK cancels the rest
            while b'"id":2' not in output.read_bytes() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.end() == 0
            lines = [json.loads(line) for line in read.read().splitlines()]
    assert [m.get("id") for m in lines if "id" in m] == [1, 2] and lines[-1]["result"]["tools"]


STRAY = textwrap.dedent("""
    import os, sys, anyio
    from mcp.server import MCPServer
    from agent_automation_mcp.stdio import serve_stdio

    server = MCPServer(name="stray")

    @server.tool()
    def shout() -> str:
        print("a stray print", flush=True)
        os.write(1, b"a stray write\\n")
        os.system("echo a child writes")
        return "said"

    anyio.run(serve_stdio, server)
""")


@pytest.mark.anyio
async def test_what_a_handler_or_a_child_prints_misses_the_wire(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.txt"
    params = stdio_server(clean_env())
    params.args = ["-c", STRAY]
    with stderr.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            result = await client.call_tool("shout", {})
    assert [block.text for block in result.content if block.type == "text"] == ["said"]
    assert stderr.read_text().splitlines() == ["a stray print", "a stray write", "a child writes"]



WATCHED = textwrap.dedent("""
    import gc, sys, threading, time
    from agent_automation_mcp.__main__ import main

    def watch() -> None:  # the collector turned off as `main` starts, then on again
        deadline = time.monotonic() + 60
        while gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.001)
        print("starting", gc.isenabled(), file=sys.stderr, flush=True)
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.001)
        print("serving", gc.isenabled(), gc.get_freeze_count(), file=sys.stderr, flush=True)

    threading.Thread(target=watch, daemon=True).start()
    sys.exit(main())
""")


def test_the_collector_is_off_while_starting_and_on_once_serving_without_what_the_start_made() -> None:
    process = subprocess.Popen([sys.executable, "-c", WATCHED], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=clean_env())
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    server = Host(process, process.stdin, process.stdout)
    server.send(*map(_line, HANDSHAKE), _line(LIST))
    assert server.answer(2)["result"]["tools"]
    assert server.end() == 0
    said = process.stderr.read().decode().splitlines()  # the program's notice of no token among them
    (serving,) = [line for line in said if line.startswith("serving ")]
    assert said[0] == "starting False"
    enabled, frozen = serving.split()[1:]
    assert enabled == "True" and int(frozen) > 100_000  # the modules, models and tools of the start


def test_a_remote_replica_collects_garbage_once_it_listens() -> None:
    port = free_port()
    server = HttpServer(clean_env(), command=[sys.executable, "-c", WATCHED, "serve", "--transport", "http",
                                              "--host", "127.0.0.1", "--port", str(port), "--auth", "request"],
                        port=port)
    said = server.stop().splitlines()
    (serving,) = [line for line in said if line.startswith("serving ")]
    assert said[0] == "starting False" and serving.split()[1] == "True" and int(serving.split()[2]) > 100_000
