"""CPU shares from py-spy: which part of a server process's busy time went where, sampled while a load runs.

py-spy (PyPI, `pip install py-spy`) samples the Python stacks of a running process from outside, without pausing
it (`--nonblocking`) and without recording idle stacks, so a share of its samples is a share of busy CPU time.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

RATE = 100  # samples a second per process


def py_spy() -> str | None:
    here = Path(sys.executable).with_name("py-spy")
    return str(here) if here.exists() else shutil.which("py-spy")


@dataclass
class Samples:
    """Per process, collapsed stacks (frames joined by `;`) and how many samples each got."""

    stacks: list[dict[str, int]] = field(default_factory=list)

    def share(self, frame: str) -> float | None:
        """The share of all samples whose stack has a frame matching the regular expression `frame`."""
        pattern = re.compile(frame)
        total = sum(n for stacks in self.stacks for n in stacks.values())
        hits = sum(n for stacks in self.stacks for stack, n in stacks.items() if pattern.search(stack))
        return hits / total if total else None


@contextmanager
def sampling(pids: Sequence[int]) -> Iterator[Samples]:
    """Sample every process in `pids` until the block ends; the result is filled in on exit."""
    binary = py_spy()
    if binary is None:
        raise RuntimeError("--profile needs py-spy (pip install py-spy)")
    samples = Samples()
    with tempfile.TemporaryDirectory() as folder:
        outputs = [Path(folder, f"{pid}.txt") for pid in pids]
        spies = [subprocess.Popen([binary, "record", "--pid", str(pid), "--rate", str(RATE), "--nonblocking",
                                   "--format", "raw", "--output", str(out)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for pid, out in zip(pids, outputs, strict=True)]
        try:
            yield samples
        finally:
            for spy in spies:
                spy.send_signal(signal.SIGINT)  # py-spy writes what it has, then exits
            for spy in spies:
                try:
                    spy.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    spy.wait()
        for out in outputs:
            stacks: dict[str, int] = {}
            for line in out.read_text().splitlines() if out.exists() else ():
                stack, _, count = line.rpartition(" ")
                if count.isdigit():
                    stacks[stack] = stacks.get(stack, 0) + int(count)
            samples.stacks.append(stacks)
