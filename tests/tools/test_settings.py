"""The server's settings: toolsets, the read-only ceiling and trimming, from the environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_automation_mcp.cli import build_parser
from agent_automation_mcp.config import ServerSettings
from agent_automation_mcp.tools.registry import DEFAULT_TOOLSETS, TOOLSETS, TOOLSETS_DECLARED, parse_toolsets


@pytest.mark.parametrize(("value", "expected"), [
    (None, DEFAULT_TOOLSETS),
    ("", DEFAULT_TOOLSETS),
    ("all", TOOLSETS),
    ("logs, runs", ("runs", "logs")),
    ("default,oauth", (*DEFAULT_TOOLSETS, "oauth")),
    ("WEBHOOKS,webhooks", ("webhooks",)),
])
def test_parse_toolsets(value: str | None, expected: tuple[str, ...]) -> None:
    assert parse_toolsets(value) == expected


def test_unknown_toolset_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown toolset 'pull'.*pulls"):
        parse_toolsets("runs,pull")


def test_from_env() -> None:
    assert ServerSettings.from_env({}) == ServerSettings()
    settings = ServerSettings.from_env({"AGENT_AUTOMATION_TOOLSETS": "runs", "AGENT_AUTOMATION_READ_ONLY": "true",
                                        "AGENT_AUTOMATION_MAX_FIELD_CHARS": "400"})
    assert settings == ServerSettings(toolsets=("runs",), read_only=True, max_field_chars=400)
    with pytest.raises(ValueError, match="AGENT_AUTOMATION_MAX_FIELD_CHARS must be an integer >= 100"):
        ServerSettings.from_env({"AGENT_AUTOMATION_MAX_FIELD_CHARS": "5"})


@pytest.mark.parametrize(("value", "read_only"), [("1", True), ("TRUE", True), ("on", True), ("yes", True),
                                                   ("0", False), ("false", False), ("Off", False), ("no", False)])
def test_read_only_takes_clear_words(value: str, read_only: bool) -> None:
    assert ServerSettings.from_env({"AGENT_AUTOMATION_READ_ONLY": value}).read_only is read_only


@pytest.mark.parametrize("value", ["y", "enabled", "tru", "2"])
def test_a_read_only_value_that_is_neither_true_nor_false_refuses_to_start(value: str) -> None:
    """Fails closed: an unknown word must not leave every write tool on offer without a word."""
    with pytest.raises(ValueError, match=rf"AGENT_AUTOMATION_READ_ONLY must be one of 1, true, yes, on .*'{value}'"):
        ServerSettings.from_env({"AGENT_AUTOMATION_READ_ONLY": value})


def test_help_and_readme_describe_each_toolset_as_declared(capsys: pytest.CaptureFixture[str]) -> None:
    """`--help` and the README's toolset table say what each toolset's declaration says, in listing order."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (yes|no \(opt-in\)) \| (.+) \|$", readme, re.M)
    declared = [(t.name, "yes" if t.default else "no (opt-in)", t.about) for t in TOOLSETS_DECLARED]
    wrong = [" | ".join(row) for row in declared if row not in rows] + [
        f"{row[0]} (no such toolset declared)" for row in rows if row[0] not in TOOLSETS]
    assert rows == declared, (f"README.md's toolset table should read, in this order: {declared}; rows to write or "
                              f"correct: {wrong}")
    with pytest.raises(SystemExit):
        build_parser("serve").parse_args(["serve", "--help"])
    listed = capsys.readouterr().out.split("toolsets:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listed] == list(TOOLSETS)
    assert all(t.about in line for t, line in zip(TOOLSETS_DECLARED, listed, strict=True))
