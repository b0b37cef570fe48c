"""A host's first session with a stdio server it started: the handshake, then `tools/list`, the input ended only
once the list is answered (at the end of its input the SDK cancels what is still in flight, so ending it with the
request could leave the list unanswered on a busy machine). Shared by the import test and the start-up profile
(benchmarks/stdio_profile.py)."""

from __future__ import annotations

import json
import subprocess
import threading

SESSION = (  # what a host sends a server it starts: the handshake, then the tool list
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
)


def first_session(process: subprocess.Popen[str], seconds: float) -> tuple[list[str], int]:
    """Every line `process` wrote on its output up to the list's answer, and its exit status once its input ended;
    a process that hangs is killed after `seconds` (reading, then again waiting for it to exit)."""
    assert process.stdin is not None and process.stdout is not None
    stopper = threading.Timer(seconds, process.kill)  # a hung server ends the reading below
    stopper.start()
    lines: list[str] = []
    try:
        process.stdin.write("".join(json.dumps(message) + "\n" for message in SESSION))
        process.stdin.flush()
        for line in process.stdout:
            lines.append(line)
            if line.startswith("{") and json.loads(line).get("id") == SESSION[-1]["id"]:
                break
        process.stdin.close()
        return lines, process.wait(seconds)
    finally:
        stopper.cancel()
