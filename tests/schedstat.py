"""How long a process's threads have waited for a CPU: what a busy machine took from a test, so that the test asks
of the time a process got to run, not of the clock's (Linux' schedstat; nothing where there is none)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path


def waiting_for_cpu(pid: int | str = "self") -> dict[str, int]:
    """Per thread of the process, the nanoseconds it has spent ready to run but waiting for a CPU."""
    waits = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            fields = stat.read_text().split()
        except OSError:  # the thread, or the process, ended meanwhile
            continue
        if len(fields) > 1:  # else ending as it was read
            waits[stat.parent.name] = int(fields[1])
    return waits


def waiting_for_cpu_in(*pids: int | str) -> dict[str, int]:
    """`waiting_for_cpu` of several processes together, per process and thread."""
    return {f"{pid}/{thread}": waited for pid in pids for thread, waited in waiting_for_cpu(pid).items()}


def waited_since(before: dict[str, int], after: dict[str, int]) -> list[float]:
    """Per thread, the seconds it waited for a CPU between the two readings (a thread born since: all of its)."""
    return [max(0, then - before.get(thread, 0)) / 1e9 for thread, then in after.items()]


@dataclass(frozen=True)
class Mark:
    """An instant of a test, and how long each thread of this process had waited for a CPU by then."""

    at: float = field(default_factory=time.time)
    waited: dict[str, int] = field(default_factory=waiting_for_cpu)

    def ran_until(self, stop: Mark) -> float:
        """Seconds from here to `stop` less the time the threads waited for a CPU, summed: work that needs several
        threads by turns (an event loop and a server's thread) is held up by a wait of either. Without schedstat,
        the whole time: the full throughput of every second is asked."""
        return stop.at - self.at - sum(waited_since(self.waited, stop.waited))
