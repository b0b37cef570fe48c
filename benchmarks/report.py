"""`docs/benchmarks.md` holds one section per benchmark; each run rewrites only its own."""

from __future__ import annotations

import re
import sys
from pathlib import Path

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
