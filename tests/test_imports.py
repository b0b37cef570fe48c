"""The package's import graph has no circle, not even one that only a `TYPE_CHECKING` guard or a
function-local import keeps from failing at run time.

The graph is drawn from the source, not from `sys.modules`: every `import` and `from ... import` statement
anywhere in a module (top level, under `if TYPE_CHECKING:`, inside functions) is an edge to the module it
names; `from pkg import name` points at `pkg.name` when that is a module, else at `pkg`. Importing `a.b.c`
also runs the `__init__` of `a.b` unless the importer already lives inside `a.b`, so that is an edge too.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from stdio_session import first_session

SOURCE = Path(__file__).parents[1] / "src"
PACKAGE = "agent_automation_mcp"
# What a stdio server has no use for until it serves HTTP (our remote side, its event loop and parser, Redis,
# metrics, the trace exporter), runs the sandbox, sends its first request (the HTTP client's connection layer), or
# writes its first result as text (the renderers of runs and traces).
STDIO_NEVER_LOADS = (f"{PACKAGE}.remote", f"{PACKAGE}.sandbox", "redis", "prometheus_client", "uvloop", "httptools",
                     "opentelemetry.sdk", "httpcore2", f"{PACKAGE}.tools.run_text", f"{PACKAGE}.tools.trace_text",
                     f"{PACKAGE}.tools.line_text")


# Our models whose validators wait for their first use (`defer_build`: results, prompt and task arguments, the
# service's answers) and were built all the same: what a stdio start evaluates as it exits.
BUILT_MODELS = ("sorted(f'{c.__module__}.{c.__qualname__}' for m in list(sys.modules.values()) "
                f"if m.__name__.startswith('{PACKAGE}.') for c in vars(m).values() if isinstance(c, type) "
                "and c.__module__ == m.__name__ and getattr(c, 'model_config', {}).get('defer_build') "
                "and getattr(c, '__pydantic_complete__', False))")


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name → file, for every `.py` file of the package (`__init__.py` names the package)."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    targets = {f"{origin}.{alias.name}" for alias in node.names if f"{origin}.{alias.name}" in known}
    return targets if len(targets) == len(node.names) else targets | {origin}


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of the package → the modules of the package its source imports (see the docstring above)."""
    names = module_names(root, package)
    known = set(names)
    graph: dict[str, set[str]] = {}
    for module, path in names.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _imported(module, path.name == "__init__.py", node, known):
                parts = target.split(".")
                for depth in range(1, len(parts) + 1):  # the packages on the way run their __init__ first
                    step = ".".join(parts[:depth])
                    inside = module == step or module.startswith(step + ".")
                    if step in known and step != module and (step == target or not inside):
                        edges.add(step)
        graph[module] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan's algorithm, then a path back)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_back(graph, group) for group in groups]


def _path_back(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph[node] & group):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                frontier.append(nxt)
    raise AssertionError("a strongly connected group always has a way back")


def test_the_package_imports_no_circle() -> None:
    graph = import_graph(SOURCE, PACKAGE)
    assert len(graph) > 60 and f"{PACKAGE}.toolsets" in graph[f"{PACKAGE}.config"]
    assert f"{PACKAGE}.config" in graph[f"{PACKAGE}.tools.callers"]
    assert circles(graph) == [], "\n".join(" → ".join(circle) for circle in circles(graph))


def test_settings_and_toolset_names_import_nothing_of_the_tools() -> None:
    graph = import_graph(SOURCE, PACKAGE)
    for leaf in ("config", "toolsets"):
        tools = {m for m in graph[f"{PACKAGE}.{leaf}"] if f"{m}.".startswith(f"{PACKAGE}.tools.")}
        assert not tools, (leaf, tools)


def test_the_oauth_settings_check_loads_none_of_the_sign_in() -> None:
    """A mistake in `--auth oauth`'s settings is named before the sign-in and the SDK's auth load (`preflight`)."""
    graph = import_graph(SOURCE, PACKAGE)
    # What the CLI's import of it runs: the module and the packages' `__init__` on the way.
    reached, frontier = set(), [f"{PACKAGE}.remote", f"{PACKAGE}.remote.oauth", f"{PACKAGE}.remote.oauth.preflight"]
    while frontier:
        module = frontier.pop()
        if module not in reached:
            reached.add(module)
            frontier.extend(graph[module])
    assert f"{PACKAGE}.remote.oauth.sealing" in reached
    assert not {f"{PACKAGE}.remote.oauth.signin", f"{PACKAGE}.remote.oauth.client_rules", f"{PACKAGE}.server"} & reached


def test_a_circle_behind_type_checking_or_a_package_init_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "tools").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "config.py").write_text("from .tools.names import NAMES\n")
    (package / "tools" / "__init__.py").write_text("from .registry import ALL\n")
    (package / "tools" / "names.py").write_text("NAMES = ()\n")
    (package / "tools" / "registry.py").write_text("from . import runs\nALL = ()\n")
    (package / "tools" / "runs.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..config import Settings\n")
    found = circles(import_graph(tmp_path, "pkg"))
    assert found == [["pkg.config", "pkg.tools", "pkg.tools.registry", "pkg.tools.runs", "pkg.config"]]


@pytest.mark.parametrize(("statement", "expected"), [
    ("from . import toolsets", {"pkg.toolsets"}),
    ("from .toolsets import X, Y", {"pkg.toolsets"}),
    ("import pkg.toolsets", {"pkg.toolsets"}),
    ("def f():\n    from .toolsets import X", {"pkg.toolsets"}),
])
def test_every_form_of_import_is_an_edge(tmp_path: Path, statement: str, expected: set[str]) -> None:
    (tmp_path / "pkg").mkdir()
    for name, text in (("__init__", ""), ("toolsets", ""), ("config", statement)):
        (tmp_path / "pkg" / f"{name}.py").write_text(text + "\n")
    assert import_graph(tmp_path, "pkg")["pkg.config"] == expected


def test_a_stdio_start_that_lists_the_tools_loads_no_remote_serving(tmp_path: Path) -> None:
    """A host starting a session (the handshake, `tools/list`, then the end of its input) waits for every import, so
    what only HTTP serving or a request needs is loaded (and a validator built) when it is needed. The input ends
    only once the list is answered: at the end of its input the SDK cancels what is still in flight, so ending it
    with the request could leave the list unanswered on a busy machine."""
    loaded = tmp_path / "modules.json"
    code = ("import atexit, json, sys\n"
            "atexit.register(lambda: open(sys.argv[1], 'w').write(json.dumps("
            f"{{'modules': sorted(sys.modules), 'built': {BUILT_MODELS}}})))\n"
            "from agent_automation_mcp.cli import main\n"
            "sys.exit(main([]))\n")
    with (tmp_path / "stderr").open("w+") as stderr, subprocess.Popen(
            [sys.executable, "-c", code, str(loaded)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SOURCE)}) as server:
        lines, returncode = first_session(server, 120)
        answers = [json.loads(line) for line in lines]
        stderr.seek(0)
        assert returncode == 0 and [answer["id"] for answer in answers] == [1, 2], stderr.read()[-2000:]
    assert len(answers[1]["result"]["tools"]) > 10
    found = json.loads(loaded.read_text())
    modules = found["modules"]
    assert f"{PACKAGE}.server" in modules
    assert [m for m in modules if any(m == n or m.startswith(f"{n}.") for n in STDIO_NEVER_LOADS)] == []
    assert found["built"] == [], "built at start, though their validators wait for their first use (defer_build)"
