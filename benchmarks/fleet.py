"""The server side of the HTTP benchmarks: server processes, HAProxy in front of them, and their memory.

Every process is started on a free loopback port with its stderr in a file (a full pipe would stall it under
load); `stop` ends it (terminate, then kill after a grace period), and the caller stops every one it started
with an `ExitStack`, on error too. The memory and CPU time of a process are read from /proc.
"""

from __future__ import annotations

import csv
import ctypes
import io
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

import httpx2

# The tests' loopback ports, after this folder's modules (a benchmark's `tasks` is not `tests/tasks`): a port chosen
# up front stays out of other binds to port 0 until its server binds it.
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from ports import free_port

HAPROXY = "/usr/sbin/haproxy"
# What replicas sharing Redis must be given alike (they refuse to start without): benchmark values, not secrets.
SHARED_KEYS = {"AGENT_AUTOMATION_STATE_KEYS": "benchmark-state-key-" + "s" * 32,
               "AGENT_AUTOMATION_LOG_SECRET": "benchmark-log-secret-" + "l" * 16}
# util-linux's setpriv execs the command (same pid) with SIGTERM due when the process that started it dies,
# however it dies: no server outlives a benchmark killed outright.
DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "TERM", "--") if shutil.which("setpriv") else ()
PR_SET_PDEATHSIG = 1  # prctl(2)


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (the peak) of a process, in KiB, from /proc."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0])
    return values


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> tuple[int, ...]:
    """A process and its descendants (a server that serves from worker processes, like Granian), from /proc."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            found += process_tree(int(child))
    return tuple(found)


def without_httptools(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """`env` for a server in which `import httptools` fails, so uvicorn parses HTTP with h11, as it did before
    httptools was a dependency: a package of that name ahead of the installed one that refuses to import."""
    (folder / "httptools").mkdir(exist_ok=True)
    (folder / "httptools" / "__init__.py").write_text("raise ImportError('hidden for the benchmark')\n")
    paths = [str(folder), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return dict(env) | {"PYTHONPATH": os.pathsep.join(paths)}


class ServerProcess:
    """A command that serves on `port` of 127.0.0.1; started at once, ready when the port accepts."""

    def __init__(self, name: str, command: Sequence[str], port: int, env: Mapping[str, str] | None = None,
                 startup_timeout: float = 30.0) -> None:
        self.name = name
        self.port = port
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop)
        self.process = subprocess.Popen([*DIE_WITH_PARENT, *command], env=dict(env) if env is not None else None,
                                        stdout=subprocess.DEVNULL, stderr=self._stderr)
        deadline = time.monotonic() + startup_timeout
        while True:
            if self.process.poll() is not None:
                tail = self.stderr_tail()
                self._stderr.close()
                raise RuntimeError(f"{name} exited at start: {tail}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{name} did not listen on port {port} within {startup_timeout:g} s") from None
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def memory_kib(self) -> dict[str, int]:
        return memory_kib(self.process.pid)

    def stderr_text(self) -> str:
        """pread: the file offset is shared with the writing process, so reading must not move it."""
        fd = self._stderr.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def stderr_tail(self, chars: int = 2000) -> str:
        return self.stderr_text()[-chars:]

    def stop(self, grace: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self._stderr.close()


def mcp_server(name: str, env: Mapping[str, str], *args: str, port: int | None = None) -> ServerProcess:
    """`agent-automation-mcp serve --transport http` on `port` (a free one by default)."""
    port = port or free_port()
    return ServerProcess(name, [sys.executable, "-m", "agent_automation_mcp", "serve", "--transport", "http",
                                "--port", str(port), *args], port, env)


def bare_server(env: Mapping[str, str], base_url: str, org_id: int, *args: str) -> ServerProcess:
    """benchmarks/bare_server.py, the SDK's bare server, on a free port."""
    port = free_port()
    return ServerProcess("bare server", [sys.executable, str(Path(__file__).with_name("bare_server.py")), "--port",
                                         str(port), "--base-url", base_url, "--org-id", str(org_id), *args], port, env)


def redis_server(port: int | None = None) -> ServerProcess:
    """A private redis-server without persistence (on `port`: started again there, it is empty)."""
    port = port or free_port()
    return ServerProcess("redis-server", [shutil.which("redis-server") or "redis-server", "--port", str(port),
                                          "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], port)


def shipped_config() -> Path:
    """The HAProxy config of the tree whose code runs (a benchmark's process imports it from there: `--before`)."""
    import agent_automation_mcp

    return Path(agent_automation_mcp.__file__).resolve().parents[2] / "manifests" / "haproxy" / "haproxy.cfg"


def balancer(config: Path, port: int, replicas: Sequence[int], env: Mapping[str, str] | None = None) -> ServerProcess:
    """HAProxy running `config` (a copy of the shipped one) at `port` in front of `replicas`, its metrics on a free
    port. It needs two file descriptors a connection and will not start where it cannot have them: under a hard
    limit lower than its maxconn needs (20,000 on the machine these figures come from), `-n` lowers maxconn to fit."""
    found = re.search(r"^global\n\s+maxconn (\d+)", config.read_text(), re.M)
    shipped = int(found.group(1)) if found else 4000
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    fits = shipped if hard == resource.RLIM_INFINITY else min(shipped, (hard - 1000) // 2)
    balancer_env = {**(env or {}), "MCP_BIND": f"127.0.0.1:{port}", "METRICS_BIND": f"127.0.0.1:{free_port()}",
                    **{f"REPLICA_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(replicas)}}
    return ServerProcess("haproxy", [HAPROXY, "-db", "-n", str(fits), "-f", str(config)], port, env=balancer_env)


def balanced_fleet(stack: ExitStack, env: Mapping[str, str],
                   replicas: int = 3) -> tuple[ServerProcess, list[ServerProcess]]:
    """A redis-server, `replicas` servers (`--auth request`, `env` beside the shared keys) sharing it, and HAProxy
    in front of them running `shipped_config()`, each stopped by `stack`: HAProxy and the replicas, once all are up."""
    redis = redis_server()
    stack.callback(redis.stop)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))} | {
        "AGENT_AUTOMATION_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0", **SHARED_KEYS, **env}
    servers = [mcp_server(f"replica{i}", env, "--auth", "request") for i in range(replicas)]
    for server in servers:
        stack.callback(server.stop)
    front = balancer(shipped_config(), free_port(), [server.port for server in servers])
    stack.callback(front.stop)
    time.sleep(3)  # health checks: every replica up
    return front, servers


def die_with_parent() -> None:
    """For a child process the `multiprocessing` way: SIGTERM when its parent dies (Linux; elsewhere nothing)."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def haproxy_config(port: int, stats_port: int, backends: Sequence[int], health_path: str | None) -> str:
    """Round robin per request: HTTP mode balances each request on a kept-alive client connection by itself (no
    `prefer-last-server`, no stickiness); `http-reuse always` lets any idle server connection carry any request."""
    check = f"    option httpchk GET {health_path}\n" if health_path else ""
    servers = "".join(f"    server replica{i} 127.0.0.1:{p}{' check inter 2s' if health_path else ''}\n"
                      for i, p in enumerate(backends))
    return (
        "global\n    maxconn 4000\n\n"
        "defaults\n    mode http\n    option http-keep-alive\n    timeout connect 5s\n    timeout client 120s\n"
        "    timeout server 120s\n    timeout http-keep-alive 60s\n\n"
        f"frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\n"
        f"backend replicas\n    balance roundrobin\n    http-reuse always\n{check}{servers}\n"
        f"frontend stats\n    bind 127.0.0.1:{stats_port}\n    stats enable\n    stats uri /stats\n"
    )


class Haproxy:
    """HAProxy from its config in a temporary folder, in the foreground (`-db`)."""

    def __init__(self, backends: Sequence[int], health_path: str | None, binary: str = HAPROXY) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="haproxy-")
        port, self.stats_port = free_port(), free_port()
        config = Path(self._folder.name) / "haproxy.cfg"
        config.write_text(haproxy_config(port, self.stats_port, backends, health_path))
        check = subprocess.run([binary, "-c", "-q", "-f", str(config)], capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its config: {check.stderr or check.stdout}")
        self.server = ServerProcess("haproxy", [binary, "-db", "-f", str(config)], port)

    @property
    def url(self) -> str:
        return self.server.url

    def responses_per_server(self) -> dict[str, int]:
        """Responses each replica gave so far, from the stats page: how evenly requests were spread."""
        text = httpx2.get(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5).text
        rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
        return {row["svname"]: sum(int(row[f"hrsp_{k}"] or 0) for k in ("1xx", "2xx", "3xx", "4xx", "5xx", "other"))
                for row in rows if row["pxname"] == "replicas" and row["svname"] not in ("FRONTEND", "BACKEND")}

    def stop(self) -> None:
        self.server.stop()
        self._folder.cleanup()

