"""The settings tables are the one place a setting is declared: every field of a settings class is a row, the
flags and variables that the docs and manifests name are rows, and each row is documented where the settings are
listed (docs/configuration.md), its flag beside its variables.

A failure names the setting and where to fix it: the row in its table (`api/settings.py`'s `API_SETTINGS`,
`config.py`'s `SERVER_SETTINGS`, `REMOTE_SETTINGS`, `LOG_SETTINGS`) or the page.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from typing import Final

import pytest

from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.cli import build_parser, settings_from, with_flags
from agent_automation_mcp.config import SETTINGS, LogSettings, RemoteSettings, ServerSettings

ROOT: Final = Path(__file__).parents[1]
PACKAGE: Final = ROOT / "src" / "agent_automation_mcp"
CONFIGURATION: Final = ROOT / "docs" / "configuration.md"
PAGES: Final = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "RELEASING.md", ROOT / "CHANGELOG.md",
                       *(ROOT / "docs").glob("*.md")])
MANIFESTS: Final = sorted(path for path in (ROOT / "manifests").rglob("*") if path.is_file()
                          and path.suffix in (".json", ".yaml", ".yml", ".env", ".cfg", ".toml", ".sh", ""))
ROWS: Final = [(settings, setting) for settings, table in SETTINGS.items() for setting in table]
VARIABLES: Final = {name for _, setting in ROWS for name in setting.env}
# Fields no variable or flag sets: the client's connect timeout is ours to choose, not the operator's.
UNSET_FIELDS: Final = {(ApiSettings, "connect_timeout")}
# Flags the docs name that belong to other programs: pip's, py-spy's (docs/operations.md, docs/benchmarks.md).
OTHER_PROGRAMS_FLAGS: Final = {"--require-hashes", "--nonblocking"}
_VARIABLE: Final = re.compile(r"AGENT_AUTOMATION_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])")  # not a pattern like `..._LOG_*`


def _where(settings: type) -> str:
    return {ApiSettings: "api/settings.py API_SETTINGS", ServerSettings: "config.py SERVER_SETTINGS",
            RemoteSettings: "config.py REMOTE_SETTINGS", LogSettings: "config.py LOG_SETTINGS"}[settings]


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser (the sandbox's flags too, which load only when asked)."""
    parser = build_parser("sandbox")
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def _command_flags() -> set[str]:
    return {flag for command in _commands().values() for action in command._actions for flag in action.option_strings}


def _documented_rows() -> list[tuple[set[str], set[str]]]:
    """docs/configuration.md's settings table: each row's flags (first column) and variables (second)."""
    text = CONFIGURATION.read_text()
    section = text.split("## Settings and their environment variables", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if not line.startswith("| ") or len(cells) < 3 or line.startswith("|---"):
            continue
        rows.append((set(re.findall(r"`(--[a-z-]+)", cells[0])),
                     set(re.findall(r"`([A-Z][A-Z0-9_]*[A-Z0-9])(?:=[^`]*)?`", cells[1]))))
    return rows[1:]  # the header's


def test_every_field_of_every_settings_class_is_a_row_of_its_table() -> None:
    for settings, table in SETTINGS.items():
        fields = {field.name for field in dataclasses.fields(settings)}
        declared = [setting.field for setting in table]
        assert len(declared) == len(set(declared)), f"a field has two rows in {_where(settings)}"
        unknown = set(declared) - fields
        assert not unknown, f"{_where(settings)} has rows for {sorted(unknown)}, not fields of {settings.__name__}"
        missing = fields - set(declared) - {field for owner, field in UNSET_FIELDS if owner is settings}
        assert not missing, (f"{settings.__name__} fields {sorted(missing)} have no row in {_where(settings)}: "
                             "add one (its variable, flag and help), or say here why nothing sets them")


def test_no_variable_or_flag_is_read_twice() -> None:
    names = [name for _, setting in ROWS for name in setting.env]
    flags = [setting.flag for _, setting in ROWS if setting.flag]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert sorted({f for f in flags if flags.count(f) > 1}) == []


def test_the_package_reads_no_variable_outside_the_tables() -> None:
    """A variable named in the source is a row's, so nothing reads a setting beside its table (and its docs)."""
    for path in PACKAGE.rglob("*.py"):
        named = set(re.findall(r"\"((?:AGENT_AUTOMATION|CODEGEN)_[A-Z0-9_]+)\"", path.read_text()))
        assert named <= VARIABLES, (f"{path.relative_to(ROOT)} names {sorted(named - VARIABLES)}, which no settings "
                                    "table declares: add a row (config.py or api/settings.py) and read it there")


def test_each_row_is_documented_with_its_flag_beside_its_variables() -> None:
    documented = _documented_rows()
    assert len(documented) > 20
    for settings, setting in ROWS:
        beside = [flags for flags, variables in documented if set(setting.env) <= variables]
        shown = setting.flag or " and ".join(setting.env)
        assert beside, (f"{shown} ({_where(settings)}) is not in docs/configuration.md's settings table: add a row "
                        f"naming {', '.join(setting.env)}")
        if setting.flag:
            assert any(setting.flag in flags for flags in beside), (
                f"docs/configuration.md's settings table names {setting.env[0]} without its flag {setting.flag}")


def test_every_flag_and_variable_the_settings_page_lists_exists() -> None:
    taken = _command_flags()
    for flags, variables in _documented_rows():
        assert flags <= taken, f"docs/configuration.md lists {sorted(flags - taken)}, which no command takes"
        ours = {name for name in variables if not name.startswith("OTEL_")}  # OpenTelemetry's own, its SDK reads
        assert ours <= VARIABLES, (f"docs/configuration.md lists {sorted(ours - VARIABLES)}, which no settings table "
                                   "declares (misspelt, or a row is missing)")


@pytest.mark.parametrize("page", [*PAGES, *MANIFESTS], ids=lambda path: str(path.relative_to(ROOT)))
def test_every_variable_a_page_or_manifest_names_is_read(page: Path) -> None:
    named = set(_VARIABLE.findall(page.read_text()))
    assert named <= VARIABLES, (f"{page.relative_to(ROOT)} names {sorted(named - VARIABLES)}, which the server "
                                "does not read: misspelt, or a row is missing from its settings table")


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_flag_a_page_names_is_a_commands(page: Path) -> None:
    known = _command_flags() | OTHER_PROGRAMS_FLAGS | set(re.findall(
        r"\"(--[a-z-]+)\"", "\n".join(path.read_text() for path in (ROOT / "benchmarks").glob("*.py"))))
    named = set(re.findall(r"`(--[a-z][a-z-]*)", page.read_text()))
    assert named <= known, (f"{page.relative_to(ROOT)} names {sorted(named - known)}, which no command of ours "
                            "takes (nor a benchmark)")


def test_server_json_passes_flags_that_serve_takes() -> None:
    packages = json.loads((ROOT / "manifests" / "server.json").read_text())["packages"]
    named = {argument["name"] for package in packages for argument in package.get("packageArguments", [])
             if argument["type"] == "named"}
    assert named and named <= _command_flags()


# --- the table at work: flags over variables, bad values named -------------------------------------------------

def _serve(*flags: str) -> argparse.Namespace:
    return build_parser("serve").parse_args(["serve", *flags])


def test_a_flag_wins_over_its_variable_and_an_unset_flag_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENT_AUTOMATION_MAX_TENANT_CALLS", "3")
    monkeypatch.setenv("AGENT_AUTOMATION_ALLOWED_HOSTS", "a.example.com")
    monkeypatch.setenv("AGENT_AUTOMATION_ORG_ID", "7")
    api, server, remote = settings_from(_serve("--allowed-host", "b.example.com,c.example.com", "--allowed-host",
                                               "d.example.com", "--shutdown-grace", "2.5", "--read-only"))
    assert remote.max_tenant_calls == 3 and remote.shutdown_grace == 2.5 and api.org_id == 7 and server.read_only
    assert remote.allowed_hosts == ("b.example.com", "c.example.com", "d.example.com")
    monkeypatch.setenv("AGENT_AUTOMATION_READ_ONLY", "1")
    assert settings_from(_serve())[1].read_only  # the switch only turns it on: unset, the variable holds
    monkeypatch.setenv("AGENT_AUTOMATION_ALLOWED_ORGS", "41")
    assert settings_from(_serve("--allowed-org", "*"))[2].allowed_orgs is None  # `*`: every organisation


def test_log_flags_fill_the_log_settings_in_any_case() -> None:
    args = build_parser("demo").parse_args(["demo", "--log-level", "debug", "--log-format", "JSON"])
    assert with_flags(LogSettings(), args) == LogSettings(level="DEBUG", format="json")


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-tenant-calls", "0"], "argument --max-tenant-calls: a whole number >= 1, got '0'"),
    (["--shutdown-grace", "-1"], "argument --shutdown-grace: a number of seconds >= 0, got '-1'"),
    (["--max-field-chars", "5"], "argument --max-field-chars: a whole number >= 100, got '5'"),
    (["--metrics-port", "70000"], "argument --metrics-port: a port must be a number from 1 to 65535"),
    (["--log-level", "loud"], "argument --log-level: one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'loud'"),
    (["--toolsets", "runs,nope"], "argument --toolsets: unknown toolset 'nope'"),
])
def test_a_bad_flag_is_a_usage_error_that_names_it(flags: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _serve(*flags)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_help_says_each_flags_default_and_variable() -> None:
    """The default and the variable are the settings class's and the row's, not restated by hand."""
    help = " ".join(_commands()["serve"].format_help().split())
    for _, setting in ROWS:
        if setting.flag and setting.env:
            assert f"env {setting.env[0]}" in help, setting.flag
    assert f"(default {RemoteSettings().max_tenant_calls}; env AGENT_AUTOMATION_MAX_TENANT_CALLS)" in help
    assert "(default 60; env AGENT_AUTOMATION_SHUTDOWN_GRACE)" in help  # 60.0 said as a person would

