"""The docs stay true: the configuration reference is the CLI's own parser (every setting is documented:
tests/test_settings_table.py), the guide names files and tests that exist, commands parse, links resolve, each tool
has its row, and the bounds on what one caller may send are the code's.

`UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py` regenerates the flags reference in `docs/configuration.md`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

import pytest

from agent_automation_mcp import trace_provider, wording
from agent_automation_mcp.api.statuses import STATUS_WORDS, STATUSES, STOPPED
from agent_automation_mcp.cli import PROG, build_parser
from agent_automation_mcp.config import DEFAULT_BODY_BYTES_HELD, DEFAULT_REQUESTS_PER_TOKEN
from agent_automation_mcp.remote.bodies import BODY_SECONDS
from agent_automation_mcp.remote.rpc_request import MAX_ID_CHARS, MAX_METHOD_CHARS, MAX_STEPS
from agent_automation_mcp.tasks.extension import CANCEL_ASKED, RUN_ID_FIELDS, STOPPING_TOOLS
from agent_automation_mcp.tools.answers import NOT_REPORTED, WRITTEN, answer_for
from agent_automation_mcp.tools.checks import CLOSEST_TO_CANCEL
from agent_automation_mcp.tools.declarations import CLOSEST_TO_STOP_SAYS
from agent_automation_mcp.tools.missing_actions import MISSING_ACTIONS
from agent_automation_mcp.tools.registry import OPERATIONS_WITHOUT_TOOL, OPT_IN_TOOLSETS, TOOLSETS_DECLARED, all_tools
from budget import measure
from catalogue import CASES

ROOT: Final = Path(__file__).parents[1]
PACKAGE: Final = ROOT / "src" / "agent_automation_mcp"
CONFIGURATION: Final = ROOT / "docs" / "configuration.md"
GUIDE: Final = ROOT / "docs" / "adding-an-operation.md"
PAGES: Final = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "RELEASING.md", ROOT / "CHANGELOG.md",
                        *(ROOT / "docs").glob("*.md")])
BEGIN: Final = "<!-- flags: generated from the CLI's parser by UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py -->"
END: Final = "<!-- end of the generated flags -->"
TOOLS: Final = ROOT / "docs" / "tools.md"
ANSWERS_BEGIN: Final = ("<!-- answers: generated from tools/answers.py by UPDATE_DOCS=1 .venv/bin/pytest "
                        "tests/test_docs.py -->")
ANSWERS_END: Final = "<!-- end of the generated answers -->"
TOOLS_BEGIN: Final = ("<!-- tools: the first three columns generated from the tools' declarations by UPDATE_DOCS=1 "
                      ".venv/bin/pytest tests/test_docs.py; \"What it does\" is written by hand (a new tool's row "
                      "starts with its description) -->")
TOOLS_END: Final = "<!-- end of the generated tools -->"
MISSING_BEGIN: Final = ("<!-- cannot: generated from tools/missing_actions.py by UPDATE_DOCS=1 .venv/bin/pytest "
                        "tests/test_docs.py -->")
MISSING_END: Final = "<!-- end of the generated cannot -->"
STATUSES_BEGIN: Final = ("<!-- statuses: generated from api/statuses.py by UPDATE_DOCS=1 .venv/bin/pytest "
                         "tests/test_docs.py -->")
STATUSES_END: Final = "<!-- end of the generated statuses -->"
_ROW: Final = re.compile(r"^\| .*? \| `(\w+)` \| .*? \| (.*) \|$", re.M)
# The budget's figures as the docs state them (`budget.Measure`: what a model reads, and the whole tools/list).
TOKEN_FIGURES: Final = ((ROOT / "README.md", r"costs about ([\d,]+) tokens", "model_tokens"),
                        (ROOT / "README.md", r"`_meta`\), is about ([\d,]+)\.", "whole_tokens"),
                        (GUIDE, r"about ([\d,]+) today", "model_tokens"))


def listed(names: Iterable[str]) -> str:
    """`a`, `b` and `c`, as the pages' prose lists names; "none" for none."""
    return wording.listed([f"`{name}`" for name in names]) or "none"


def cancel_said() -> str:
    """The Cancel item of docs/tools.md's tasks: what a task's cancel does, while no operation stops a run, and once
    one does."""
    answered = ("`tasks/cancel` is acknowledged (2026-07-28: an empty result; 2025-11-25: the task as it stands, or "
                "-32602 for a task that has already ended)")
    if CLOSEST_TO_CANCEL is not None:
        return (f"The service cannot cancel a run (no operation of the table stops one: `RunEffect.STOPS`). {answered} "
                "and the run goes on: no answer calls it cancelled unless the service reports it stopped, and every "
                f"later message of that task, to its end and after, says so and that `{CLOSEST_TO_CANCEL}` comes "
                "closest, only on the user's explicit request (the tool whose declaration says so, `closest_to_stop`; "
                "a request not offered it reads the rest). Once an operation stops a run, `tasks/cancel` sends it "
                "through a tool that stops one, where the request is offered it, and the messages say so instead.")
    return (f"{answered}, and where the request is offered {listed(STOPPING_TOOLS)}, the run is stopped with it: the "
            "user asked, so nothing more is asked. The task is `cancelled` once the service reports the run stopped, "
            "and every later message says the stop was asked, or why it failed; a request offered no tool that stops "
            "a run gets the acknowledgement alone, and its messages say the run goes on.")


# What the pages' prose says of the declarations, each between two anchors (whitespace aside), with its source;
# `UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py` writes it in.
PROSE: Final[tuple[tuple[Path, str, str, Callable[[], str]], ...]] = (
    (ROOT / "README.md", "**Runs as MCP tasks.** The tools that start or continue a run (", ") answer a client",
     lambda: listed(RUN_ID_FIELDS)),
    (TOOLS, "are offered as tasks:", ". A client that asks", lambda: listed(RUN_ID_FIELDS)),
    (TOOLS, "- **Cancel.**", "Every message is whole sentences.", cancel_said),
    (TOOLS, "no tool sends (the reasons are in `tools/registry.py`):", ". Tool schemas",
     lambda: listed(OPERATIONS_WITHOUT_TOOL)),
    (GUIDE, "`OPERATIONS_WITHOUT_TOOL` in `tools/registry.py` (today:", "), and",
     lambda: listed(OPERATIONS_WITHOUT_TOOL)),
    (ROOT / "README.md", "The opt-in toolsets,", ", are offered", lambda: listed(OPT_IN_TOOLSETS)),
    (TOOLS, "show it inline in the chat:", ". Their `_meta.ui.resourceUri`",
     lambda: listed(spec.name for spec in all_tools() if spec.viewed)),
)


def _rewrapped(text: str, start: int, length: int) -> str:
    """`text` with its lines from the one holding `text[start]` to the paragraph's or the list item's end wrapped
    again at the pages' width (118), the lines after the first indented as a list item's are."""
    first = text.rfind("\n", 0, start) + 1
    ends = [found for mark in ("\n\n", "\n- ", "\n|") if (found := text.find(mark, start + length)) >= 0]
    last = min(ends, default=len(text))
    lines = text[first:last]
    indent = "  " if lines.startswith("- ") else lines[:len(lines) - len(lines.lstrip())]
    wrapped = textwrap.fill(" ".join(lines.split()), width=118, initial_indent=lines[:len(lines) - len(lines.lstrip())],
                            subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return text[:first] + wrapped + text[last:]


def _said_between(text: str, before: str, after: str) -> re.Match[str] | None:
    """Where the page says what stands between `before` and `after` (group 1), whatever the line breaks."""
    def loose(anchor: str) -> str:
        return r"\s+".join(re.escape(word) for word in anchor.split())

    return re.search(rf"{loose(before)}\s*(\S(?:.*?\S)?)\s*{loose(after)}", text, re.S)


@pytest.mark.parametrize(("page", "before", "after", "source"), PROSE, ids=[f"{page.name}:{before.strip(' (:')}"
                                                                          for page, before, _, _ in PROSE])
def test_what_the_prose_says_of_the_declarations_is_theirs(page: Path, before: str, after: str,
                                                          source: Callable[[], str]) -> None:
    text = page.read_text()
    found = _said_between(text, before, after)
    assert found, f"{page.name} no longer says {before!r}...{after!r}: restore it, or edit PROSE in tests/test_docs.py"
    said = source()
    if os.environ.get("UPDATE_DOCS") == "1" and " ".join(found.group(1).split()) != said:
        page.write_text(_rewrapped(text[:found.start(1)] + said + text[found.end(1):], found.start(1), len(said)))
        return
    assert " ".join(found.group(1).split()) == said, (
        f"{page.name} says {found.group(1)!r} after {before!r}; the declarations make it {said!r}: run UPDATE_DOCS=1 "
        ".venv/bin/pytest tests/test_docs.py")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def flags_reference() -> str:
    """Every subcommand's flags, as `--help` states them (the sandbox's too, which load only when asked)."""
    parser = build_parser("sandbox")
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    about = {choice.dest: choice.help or "" for choice in commands._choices_actions}
    lines = []
    for name, command in commands.choices.items():
        formatter = command._get_formatter()
        lines += ["", f"### `{PROG} {name}`", "", f"{about[name][:1].upper()}{about[name][1:]}.", "",
                  "| Flag | What it sets |", "|---|---|"]
        for action in command._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            value = "" if action.nargs == 0 else (
                f" {{{','.join(map(str, action.choices))}}}" if action.choices else
                f" {action.metavar or action.dest.upper()}")
            flags = ", ".join(f"`{flag}{value}`" for flag in action.option_strings)
            lines.append(f"| {flags} | {_cell(formatter._expand_help(action) if action.help else '')} |")
        if command.epilog:
            lines += ["", "```text", command.epilog, "```"]
    return "\n".join([BEGIN, *lines, "", END])


def _names(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def answers_reference() -> str:
    """What results leave out and why, what a tool reads only to find something, where what a user writes is read
    back, and what the service never reports: `tools/answers.py` as tables."""
    left_out: dict[tuple[str, str], list[str]] = {}  # (fields, why) -> tools
    lookups: list[str] = []
    for spec in all_tools():
        tool, by_reason = spec.name, dict[str, list[str]]()
        for operation in spec.operations:
            answer = answer_for(tool, operation)
            for name, why in answer.left_out.items():
                by_reason.setdefault(why, [])
                if name not in by_reason[why]:
                    by_reason[why].append(name)
            if answer.read_for:
                lookups.append(f"| `{tool}` | `{operation}` | {_cell(answer.read_for)} |")
        for why, names in by_reason.items():
            left_out.setdefault((_names(names), why), []).append(tool)
    lines = [ANSWERS_BEGIN, "", "| Tool | Field of the service's answer | Why the result leaves it out |",
             "|---|---|---|",
             *(f"| {_names(tools)} | {names} | {_cell(why)} |" for (names, why), tools in left_out.items()), "",
             "Operations a tool reads only to find something, whose answer is not its result:", "",
             "| Tool | Reads | For |", "|---|---|---|", *lookups, "",
             "### What you write, and where to read it back", "",
             "| Tool | Argument | Read back by |", "|---|---|---|",
             *(f"| `{tool}` | `{argument}` | {_cell(where)} |" for tool, written in WRITTEN.items()
               for argument, where in written.items()), "",
             "### What the service does not report", "",
             "Said where a model looks for it, so that it answers \"not reported\" rather than guess:", "",
             "| About | Not reported, in the description's words | Said by |", "|---|---|---|",
             *(f"| {gap.about} | \"{_cell(gap.said)}\" | `{gap.tool}` |" for gap in NOT_REPORTED), "", ANSWERS_END]
    return "\n".join(lines)


def tools_reference() -> str:
    """The tools table: toolset, name and annotations from each tool's declaration, in listing order; what it does
    as the page says it (a new tool: its description, to be rewritten for a person)."""
    said = dict(_ROW.findall(TOOLS.read_text()))
    lines = [TOOLS_BEGIN, "", "| Toolset | Tool | Annotations | What it does |", "|---|---|---|---|"]
    for toolset in TOOLSETS_DECLARED:
        for spec in toolset.tools:
            effect = "read-only" if spec.read_only else (
                f"{'destructive' if spec.destructive else 'write'}{', idempotent' if spec.idempotent else ''}")
            what = said.get(spec.name) or _cell(spec.description)
            lines.append(f"| `{toolset.name}`{'' if toolset.default else ' (opt-in)'} | `{spec.name}` | {effect} | "
                         f"{what} |")
    return "\n".join([*lines, "", TOOLS_END])


def missing_reference() -> str:
    """What the service cannot do and the closest thing: `tools/missing_actions.py` as a table."""
    return "\n".join([MISSING_BEGIN, "", "| The service cannot | Words that ask for it | Closest |", "|---|---|---|",
                      *(f"| {action.what} | {', '.join(f'`{word}`' for word in action.words)} | "
                        f"{_cell(action.closest)} |" for action in MISSING_ACTIONS), "", MISSING_END])


def statuses_reference() -> str:
    """Every status of the one table: what it means for waits, tasks and the view, and the words that find it."""
    lines = [STATUSES_BEGIN, "", "| Status | Kind | Finished | A task ends | Reason, in words | Words that find it |",
             "|---|---|---|---|---|---|"]
    for status in STATUSES:
        kind = status.kind
        ends = "as an error" if kind.failed else ("cancelled" if kind is STOPPED else
                                                  ("completed" if kind.finished else "no: working"))
        if kind.waits_on_person:
            ends = "no: working, waits for a resume"
        words = [word for word, values in STATUS_WORDS.items() if status.value in values]
        lines.append(f"| `{status.value}` | {kind.word} | {'yes' if kind.finished else 'no'} | {ends} | "
                     f"{_cell(status.reason or '')} | {', '.join(words)} |")
    return "\n".join([*lines, "", STATUSES_END])


@pytest.mark.parametrize(("page", "begin", "end", "generate"), [
    (CONFIGURATION, BEGIN, END, flags_reference), (TOOLS, ANSWERS_BEGIN, ANSWERS_END, answers_reference),
    (TOOLS, TOOLS_BEGIN, TOOLS_END, tools_reference), (TOOLS, MISSING_BEGIN, MISSING_END, missing_reference),
    (TOOLS, STATUSES_BEGIN, STATUSES_END, statuses_reference)],
    ids=["flags", "answers", "tools", "cannot", "statuses"])
def test_the_generated_references_are_their_sources(page: Path, begin: str, end: str,
                                                    generate: Callable[[], str]) -> None:
    text = page.read_text()
    generated = generate()
    current = text[text.index(begin):text.index(end) + len(end)]
    if os.environ.get("UPDATE_DOCS") == "1":
        page.write_text(text.replace(current, generated))
        current = generated
    lacks = [line for line in generated.splitlines() if line not in current.splitlines()]
    stale = [line for line in current.splitlines() if line not in generated.splitlines()]
    said = f"first line it lacks: {lacks[0][:200]!r}" if lacks else (
        f"first line its source no longer makes: {stale[0][:200]!r}" if stale else "its lines are out of order")
    assert current == generated, (f"docs/{page.name} drifted from its source ({said}): UPDATE_DOCS=1 "
                                  ".venv/bin/pytest tests/test_docs.py rewrites it")


def test_the_flags_reference_names_every_command() -> None:
    generated = flags_reference()
    assert "`--toolsets TOOLSETS`" in generated and "### `agent-automation-mcp sandbox`" in generated


def _guide_paths() -> list[str]:
    """Files the guide names in backticks: a path with an extension, or a bare `name.py`."""
    return sorted(set(re.findall(r"`((?:tests|api|tools|sandbox|manifests|docs|pacing|remote)/[\w/.<>*-]+\.\w+"
                                 r"|\w+\.py)(?:::\w+)?`", GUIDE.read_text())))


def _exists(name: str) -> bool:
    """A path from the repository's root or the package's, or a bare file name anywhere in src/ or tests/."""
    if "/" not in name:
        return any(next((ROOT / top).rglob(name), None) for top in ("src", "tests"))
    return (ROOT / name).exists() or (PACKAGE / name).exists()


def test_the_guide_names_files_and_tests_that_exist() -> None:
    text = GUIDE.read_text()
    paths = [p for p in _guide_paths() if "<" not in p and "*" not in p]
    assert len(paths) > 20
    assert [p for p in paths if not _exists(p)] == []
    for file, test in re.findall(r"`([\w/]*test_\w+\.py)::(\w+)`", text):
        found = list((ROOT / "tests").rglob(Path(file).name))
        assert found and any(f"def {test}(" in path.read_text() for path in found), f"{file}::{test}"


def test_the_guide_counts_what_it_lists_and_what_its_walk_found() -> None:
    """Each row of the guide's table lists as many files as it counts, the walk at its end found those counts, and
    every constant and failure message it names is in the code, so a renamed one cannot leave the guide behind."""
    text = GUIDE.read_text()
    rows = re.findall(r"^\| (A [^|]+) \| (\d+) \| ([^|]+) \|", text, re.M)
    assert rows, "the guide's table of files by hand is gone"
    for what, count, which in rows:
        listed = re.sub(r"\([^)]*\)", "", which).split(",")
        assert len(listed) == int(count), f"the guide counts {count} files for {what!r} and lists {len(listed)}"
    walked = re.findall(r"\*\*(\d+) files\*\* by hand", text.split("## How these counts were made")[1])
    assert walked == [count for _, count, _ in rows], "the guide's table and its walk disagree: walk it again"
    code = "\n".join(path.read_text() for top in ("src", "tests") for path in (ROOT / top).rglob("*.py"))
    for name in set(re.findall(r"`(_?[A-Z][A-Z_]{3,})`", text)):
        assert re.search(rf"^\s*{name}\b[^=\n]*=", code, re.M), f"the guide names {name}, which no module defines"
    for message in re.findall(r"\(`([a-z]+(?: [a-z]+)+)`", text):
        assert message in code, f"the guide quotes the failure {message!r}, which no code says any more"


def test_contributing_points_to_the_guides_counts_rather_than_repeating_them() -> None:
    """How many files a change touches is the guide's table, made by walking it; a page that repeats a count goes
    stale with the next walk."""
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert "docs/adding-an-operation.md" in contributing
    repeated = re.findall(r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve) files\b",
                          contributing, re.I)
    assert not repeated, f"CONTRIBUTING.md counts files ({repeated}): point to the guide's table instead"


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_every_shell_command_in_the_docs_parses() -> None:
    commands = [block for page in PAGES for block in _blocks(page.read_text(), "bash")]
    commands.append("\n".join((ROOT / "README.md").read_text().splitlines()[:2]))
    assert len(commands) > 10
    for command in commands:
        checked = subprocess.run(["bash", "-n"], input=command, text=True, capture_output=True, check=False)
        assert checked.returncode == 0, (command, checked.stderr)
    for target in re.findall(r"pytest ((?:tests/[\w/.]+ ?)+)", "\n".join(page.read_text() for page in PAGES)):
        assert all((ROOT / path).exists() for path in target.split()), target


def test_relative_links_resolve() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(((?!https?:|mailto:|#)[^)\s]+)\)", page.read_text()):
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve()
            assert linked.exists(), (page.name, target)
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), re.M)
                slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
                assert anchor in slugs, (page.name, target)


def test_the_tools_page_has_a_row_per_tool_in_listing_order() -> None:
    """One row per tool the declarations hold, as the catalogue lists them; the rows are generated (`tools` above)."""
    rows = _ROW.findall(TOOLS.read_text().split(TOOLS_BEGIN)[1].split(TOOLS_END)[0])
    missing = [case.name for case in CASES if case.name not in dict(rows)]
    assert not missing, f"docs/tools.md has no row for {missing}: run UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py"
    assert [name for name, _ in rows] == [case.name for case in CASES], (
        "docs/tools.md lists the tools out of order: run UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py")


@pytest.mark.anyio
async def test_the_token_figures_in_the_docs_are_measured() -> None:
    """What a model reads of the default tools, as README.md and the guide state it, is what the budget test measures
    (`tests/budget.py`); UPDATE_DOCS=1 writes the measured figures in."""
    measured = await measure()
    for page, pattern, which in TOKEN_FIGURES:
        text = page.read_text()
        found = re.search(pattern, text)
        assert found, f"{page.name} no longer states the token figure /{pattern}/: restore it, or edit TOKEN_FIGURES"
        figure = f"{getattr(measured, which):,}"
        if os.environ.get("UPDATE_DOCS") == "1" and found.group(1) != figure:
            page.write_text(text[:found.start(1)] + figure + text[found.end(1):])
            continue
        assert found.group(1) == figure, (f"{page.name} says {found.group(1)} tokens ({which}), the tools measure "
                                          f"{figure}: run UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py")


def test_the_tool_closest_to_cancelling_a_run_is_one_fact() -> None:
    """While no operation stops a run, the tool declared closest says so in its description, a task's cancel names
    it (`CLOSEST_TO_CANCEL`), and the docs name it and no other; once one does, none of them says anything is."""
    expected = [CLOSEST_TO_CANCEL] if CLOSEST_TO_CANCEL else []
    closest = [spec.name for spec in all_tools() if CLOSEST_TO_STOP_SAYS in spec.description]
    assert closest == expected
    assert [spec.name for spec in all_tools() if spec.closest_to_stop] == ["ban_checks"]
    assert "{tool} comes closest" in CANCEL_ASKED
    said = sorted(set(re.findall(r"`(\w+)` comes closest", " ".join(TOOLS.read_text().split()))))
    assert said == expected, (f"docs/tools.md says {said} comes closest to cancelling a run, the declarations "
                              f"{expected}: run UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py")


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    assert (ROOT / "README.md").read_text().splitlines()[1] == "bash .ci/run"
    assert re.search(r'^\.venv/bin/python -m pytest [^\n]*"\$@"', (ROOT / ".ci" / "run").read_text(), re.M)


def test_the_bounds_the_docs_state_are_the_codes() -> None:
    """What one caller may send is stated in several pages; each figure is the constant's."""
    limits, remote, operations = ((ROOT / "docs" / name).read_text() for name in (
        "remote-limits.md", "remote.md", "operations.md"))
    assert f"within {BODY_SECONDS:g} s of its caller being known" in limits
    held = f"`--body-bytes-held` ({DEFAULT_BODY_BYTES_HELD // 2**20} MiB)"
    assert held in limits and held in remote and held in operations
    assert f"takes more than {MAX_STEPS:,} steps" in limits
    assert f"method of at most {MAX_METHOD_CHARS} characters" in limits
    assert f"an id of at most {MAX_ID_CHARS} characters" in limits
    assert f"{DEFAULT_REQUESTS_PER_TOKEN} a minute per token" in limits
    assert f"{DEFAULT_REQUESTS_PER_TOKEN} task and completion requests a minute per token" in remote
    assert f"longer than {MAX_METHOD_CHARS} characters" in remote and f"longer than {MAX_ID_CHARS}" in remote
    assert f"span's name is at most {trace_provider.MAX_NAME_CHARS} characters" in operations
    assert f"each attribute\nvalue at most {trace_provider.MAX_VALUE_CHARS:,}" in operations
    assert f"{trace_provider.MAX_VALUE_CHARS:,} here unless set" in operations
