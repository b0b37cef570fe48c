"""`docs/benchmarks.md` holds one section per benchmark; each run rewrites only its own."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

TITLE = "# Benchmarks"


def write_section(path: Path, section: str) -> None:
    """Replace the section whose `## ` heading `section` starts with, or append it; keep the others."""
    heading = section.splitlines()[0]
    if not heading.startswith("## "):
        raise ValueError("a section starts with its '## ' heading")
    text = path.read_text() if path.exists() else f"{TITLE}\n"
    parts = re.split(r"(?m)^(?=## )", text)  # the title block, then one part per section
    body = section.rstrip("\n") + "\n\n"
    for index, part in enumerate(parts):
        if part.splitlines()[0] == heading:
            parts[index] = body
            break
    else:
        parts[-1] = parts[-1].rstrip("\n") + "\n\n"
        parts.append(body)
    path.write_text("".join(parts).rstrip("\n") + "\n")


def command_line(script: str, argv: list[str] | None) -> str:
    """How this run was started, for the report to quote."""
    return f"python benchmarks/{script}" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))


def publish(section: str, path: Path | None) -> None:
    print(section)
    if path is not None:
        write_section(path, section)


def answer_counts(statuses: dict[Any, int]) -> str:
    """A flood's answers by status, as its table shows them: "1,029 × 401, 583 × 429"."""
    return ", ".join(f"{count:,} × {status}" for status, count in sorted(statuses.items()) if count)


def before_and_after(script: str, about: str, measure: Callable[[], Awaitable[Any]],
                     render: Callable[[dict[str, Any], str], str], argv: list[str] | None = None,
                     add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
                     timeout: float = 300.0) -> int:
    """The command line of a benchmark that measures this tree and, with `--before SRC`, another source tree's code
    (e.g. `git archive main src | tar -x -C /tmp/main`) in a process of its own, given the same options and `timeout`
    seconds; `--write` publishes the section. `add_arguments` adds the benchmark's own options."""
    parser = argparse.ArgumentParser(description=about)
    parser.add_argument("--before", type=Path, help="a source tree (its src/) to measure as well")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one measurement, as JSON
    parser.add_argument("--write", type=Path, help="write the section into this report (e.g. docs/benchmarks.md)")
    if add_arguments is not None:
        add_arguments(parser)
    given = argv if argv is not None else sys.argv[1:]
    args = parser.parse_args(given)
    if args.measure:
        print(json.dumps(anyio.run(measure)))
        return 0
    rows = {}
    if args.before:
        env = os.environ | {"PYTHONPATH": str(args.before)}  # ahead of the installed package: the other tree's code
        # The same options: `--measure` measures and prints, whatever `--before` and `--write` say.
        out = subprocess.run([sys.executable, str(Path(__file__).with_name(script)), "--measure", *given], env=env,
                             capture_output=True, text=True, timeout=timeout, check=True).stdout
        rows["before"] = json.loads(out.strip().splitlines()[-1])
    rows["this tree"] = anyio.run(measure)
    publish(render(rows, command_line(script, argv)), args.write)
    return 0
