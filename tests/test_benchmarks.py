"""The benchmarks run on demand, not in this suite: each still imports, so a change to what they share with the
tests (a launcher, a helper) cannot break one unseen until somebody runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"

# Each benchmark in turn, as its own run would: its folder first on the path, and what it adds to the path or
# imports of benchmarks/ and tests/ undone before the next (a benchmark's `tasks` is not tests/tasks).
IMPORT_EACH = """
import importlib, sys
folders = sys.argv[1:3]
base = list(sys.path)
for name in sys.argv[3:]:
    sys.path[:] = base
    for module in [m for m, v in sys.modules.items() if any(str(getattr(v, "__file__", "")).startswith(f)
                                                             for f in folders)]:
        del sys.modules[module]
    where = importlib.import_module(name).__file__
    assert where.startswith(folders[0]), f"{name} was found at {where}"
"""


def test_every_benchmark_imports() -> None:
    names = sorted(path.stem for path in BENCHMARKS.glob("*.py"))
    assert len(names) > 20
    done = subprocess.run([sys.executable, "-c", IMPORT_EACH, str(BENCHMARKS), str(BENCHMARKS.parent / "tests"),
                           *names], cwd=BENCHMARKS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
