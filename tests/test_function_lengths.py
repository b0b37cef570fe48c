"""No function in src/ is longer than 60 lines, counted from its `def` to its last line (decorators left out, nested
functions counted in the one that holds them): a longer one is split into named steps, as httpx splits `send`.

Read from the source with `ast`, like the import graph in `tests/test_imports.py`, so a function the tests never
import is held to it too.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

SOURCE: Final = Path(__file__).parents[1] / "src"
MAX_LINES: Final = 60


def function_lengths(root: Path) -> list[tuple[int, str]]:
    """(lines, `file:line qualified.name`) for every function and method under `root`, longest first."""
    found: list[tuple[int, str]] = []

    def walk(node: ast.AST, path: Path, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                assert child.end_lineno is not None
                where = f"{path.relative_to(root.parent)}:{child.lineno} {prefix}{child.name}"
                found.append((child.end_lineno - child.lineno + 1, where))
                walk(child, path, f"{prefix}{child.name}.")
            else:
                walk(child, path, f"{prefix}{child.name}." if isinstance(child, ast.ClassDef) else prefix)

    for path in sorted(root.rglob("*.py")):
        walk(ast.parse(path.read_text(), str(path)), path, "")
    return sorted(found, reverse=True)


def test_no_function_in_src_is_longer_than_60_lines() -> None:
    lengths = function_lengths(SOURCE)
    assert len(lengths) > 500, "the walk found too few functions: is SOURCE still the package's root?"
    longer = [f"{where} ({lines} lines)" for lines, where in lengths if lines > MAX_LINES]
    assert not longer, (f"functions over {MAX_LINES} lines, from `def` to the last line: {'; '.join(longer)}: split "
                        "each into named steps (one short function or method per step)")


def test_the_count_starts_at_def_and_takes_in_what_is_nested(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("@decorated\n@twice\ndef outer():\n    def inner():\n        pass\n"
                                  "    return inner\n\nclass C:\n    async def method(self):\n        return 1\n")
    assert function_lengths(package) == [(4, "pkg/m.py:3 outer"), (2, "pkg/m.py:9 C.method"),
                                         (2, "pkg/m.py:4 outer.inner")]
