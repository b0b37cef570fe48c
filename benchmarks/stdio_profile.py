"""Where a stdio server's CPU goes, beside the SDK's floors: py-spy on each server process.

    .venv/bin/python benchmarks/stdio_profile.py calls [--before SRC] [--calls 1500] [--rate 250]
    .venv/bin/python benchmarks/stdio_profile.py startup [--before SRC] [--spawns 10] [--rate 1000]

**calls**: benchmarks/floors.py's stdio part (every subject open at once, taking turns call by call on
`get_agent_run`) in one round, while py-spy (from PyPI; `--nonblocking`, idle threads left out) samples each server
process; the components and our functions are benchmarks/serving_profile.py's, and a share is also microseconds of
the server's CPU per call. **startup**: each subject spawned `--spawns` times under `py-spy record` (the server its
child) and given a host's first messages (`initialize`, `tools/list`, then the end of its input), until it exits;
the samples of every spawn together, by what the running code was doing: importing a module (ours, or the SDK's and
the libraries'), building the server (the SDK's tool from each function, or our own code), or serving; a share is
also milliseconds of a start-up's CPU.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
from floors import call_subjects, measure_calls, rotated, startup_subjects
from report import command_line
from serving import set_up
from serving_profile import PY_SPY, Profile, parse, summarise
from startup import spawn_to_list

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from stdio_session import first_session  # the import test's session, not a copy

Stacks = list[tuple[list[tuple[str, str]], int]]
ENTRY = ("agent_automation_mcp/__main__.py", "bare_server.py", "/runpy.py")  # a program's own top level


@contextmanager
def sampled(pids: dict[str, int], rate: int, found: dict[str, Stacks]) -> Iterator[None]:
    """py-spy on each process while the block runs; each one's stacks into `found`."""
    with tempfile.TemporaryDirectory(prefix="py-spy-") as folder:
        spies = {name: subprocess.Popen(
            [str(PY_SPY), "record", "--nonblocking", "--full-filenames", "--format", "raw", "--rate", str(rate),
             "--output", str(Path(folder) / name), "--pid", str(pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name, pid in pids.items()}
        try:
            yield
        finally:
            for spy in spies.values():
                spy.send_signal(signal.SIGINT)  # py-spy writes what it has and exits
            for name, spy in spies.items():
                spy.wait(timeout=60)
                found[name] = parse((Path(folder) / name).read_text())


def profile_calls(before: Path | None, calls: int, rate: int) -> list[Profile]:
    stacks: dict[str, Stacks] = {}
    with ExitStack() as stack:
        setup = set_up(stack, 1)
        subjects = anyio.run(measure_calls, setup, call_subjects(setup, before), calls, 1,
                             lambda pids: sampled(pids, rate, stacks))
    load = os.getloadavg()[0]
    return [Profile("bare" if name == "floor" else name, stacks[name], subject.cpu[0] * 1e6,
                    calls / sum(subject.samples[0]), subject.errors, load)
            for name, subject in subjects.items() if name in stacks]


def startup_part(frames: list[tuple[str, str]]) -> str:
    """What a start-up sample was doing: the innermost module being imported (not the program's own top level),
    else building the server (the SDK's `Tool.from_function`, which `add_tool` calls, or ours), else serving."""
    for function, file in reversed(frames):
        if function == "<module>" and not file.endswith(ENTRY):
            return "imports: ours (our modules' bodies)" if "agent_automation_mcp/" in file else \
                "imports: the SDK and the libraries"
    if any(function.endswith(("add_tool", "from_function")) and "/mcp/" in file for function, file in frames):
        return "building the server: the SDK's tools (argument models and schemas per tool)"
    if any("agent_automation_mcp/" in file for _, file in frames):
        return "our own code, not imports (settings, building the server, lifespan)"
    return "the SDK serving (transport, session, tools/list) and the interpreter"


def ours_at_work(frames: list[tuple[str, str]]) -> str | None:
    """Which of ours a sample is in: the innermost of our modules being imported, else the outermost of our
    functions below the command line's own (`main`, `serve`): `build_server`, the lifespan, settings..."""
    modules = [file for function, file in frames if function == "<module>" and not file.endswith(ENTRY)]
    if modules:
        return f"import {modules[-1].partition('agent_automation_mcp/')[2]}" \
            if "agent_automation_mcp/" in modules[-1] else None
    functions = [(function, file) for function, file in frames if "agent_automation_mcp/" in file
                 and not file.endswith(ENTRY) and not (file.endswith("cli.py") and function in ("main", "serve"))]
    return f"`{functions[0][0]}` ({functions[0][1].partition('agent_automation_mcp/')[2]})" if functions else None


def sampled_session(command: list[str], env: dict[str, str] | None) -> None:
    """Runs `command` (py-spy, the server its child) through a host's first session (tests/stdio_session.py); what
    py-spy says of itself on the same output is read past."""
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, env=env) as spy:
        if first_session(spy, 300)[1]:
            raise RuntimeError(f"{command[-1]}: the profiled start-up failed")


def profile_startup(before: Path | None, spawns: int, rate: int, top: int) -> str:
    subjects = startup_subjects(before)
    stacks: dict[str, Counter[str]] = {name: Counter() for name in subjects}
    ours: dict[str, Counter[str]] = {name: Counter() for name in subjects}
    with tempfile.TemporaryDirectory(prefix="py-spy-") as folder:
        for params in subjects.values():
            anyio.run(spawn_to_list, "auto", params)  # caches the bytecode
        for turn in range(spawns):
            for name in rotated(list(subjects), turn):
                out = Path(folder) / f"{name}-{turn}"
                params = subjects[name]
                sampled_session([str(PY_SPY), "record", "--nonblocking", "--full-filenames", "--format", "raw",
                                 "--rate", str(rate), "--output", str(out), "--", params.command, *params.args],
                                params.env)
                for frames, count in parse(out.read_text()):
                    stacks[name][startup_part(frames)] += count
                    if where := ours_at_work(frames):
                        ours[name][where] += count
    names = list(subjects)
    parts = sorted(set().union(*stacks.values()), key=lambda p: -max(stacks[n][p] for n in names))
    label = {"floor": "echo floor", "ours": "this tree", "before": "before"}
    per_start = {n: 1000 / rate / spawns for n in names}  # ms of CPU per sample, per start-up

    def cell(name: str, count: int) -> str:
        total = sum(stacks[name].values())
        return f"{count * per_start[name]:.0f} ({count / total:.0%})" if total else "—"

    lines = [f"stdio start-up, {spawns} spawns per subject sampled at {rate} Hz; load average "
             f"{os.getloadavg()[0]:.1f}", "",
             "| part | " + " | ".join(f"{label[n]}: ms per start-up (share)" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    lines += [f"| {part} | " + " | ".join(cell(n, stacks[n][part]) for n in names) + " |" for part in parts]
    lines.append("| **all** | " + " | ".join(f"**{sum(stacks[n].values()) * per_start[n]:.0f}**" for n in names)
                 + " |")
    for name in names[1:]:
        lines += ["", f"{label[name]}: where ours spends it: the innermost of our modules being imported (its body "
                  "and the libraries it is first to import), else the outermost of our functions under the command "
                  "line's", "", "| ours | ms per start-up (share) |", "|---|---|"]
        lines += [f"| {where} | {cell(name, count)} |" for where, count in ours[name].most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("calls", "startup"))
    parser.add_argument("--before", type=Path, help="a source tree (its src/) of our server to profile as well")
    parser.add_argument("--calls", type=int, default=1500, help="calls per subject")
    parser.add_argument("--spawns", type=int, default=10, help="start-ups per subject")
    parser.add_argument("--rate", type=int, help="samples per second (default 250 for calls, 1000 for startup)")
    parser.add_argument("--top", type=int, default=15, help="our functions (or modules) listed")
    args = parser.parse_args(argv)
    rate = args.rate or (250 if args.part == "calls" else 1000)
    if not 1 <= args.calls <= 20_000 or not 1 <= args.spawns <= 100 or not 10 <= rate <= 2000:
        parser.error("calls 1-20000, spawns 1-100, rate 10-2000 Hz")
    print(f"({command_line('stdio_profile.py', argv)})\n")
    if args.part == "calls":
        print(summarise(profile_calls(args.before, args.calls, rate), args.top))
    else:
        print(profile_startup(args.before, args.spawns, rate, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
