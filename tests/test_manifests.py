"""manifests/: every file parsed and validated, and names and versions the same everywhere.

The registry's `server.json` against the vendored 2025-12-11 schema; the MCP Bundle with the `mcpb` CLI
(when Node.js is here) and its tool list against the server's; the client configurations against the
shape each client reads and their commands against the CLI's parser; the Dockerfile by reading it (no
container engine here); the Kubernetes kustomizations rendered by `kubectl kustomize` and every document
validated, strictly, against one Kubernetes version's schemas, their arguments and settings read by the package's
own parsers. (tests/e2e/test_manifests_served.py runs what these files run.)

The bundle's tool list follows the server's: `UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_manifests.py`
rewrites it after a tool or its description changed.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import jsonschema
import kubernetes_validate
import promql_parser
import pytest
import yaml
from cryptography.fernet import Fernet
from mcp import Client
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from prometheus_client.parser import text_string_to_metric_families

from agent_automation_mcp import __version__
from agent_automation_mcp.api.settings import ApiSettings
from agent_automation_mcp.cli import COMMANDS, auth_mode, build_parser, require_allowed_orgs, settings_from
from agent_automation_mcp.config import (
    CHAT_APP_REDIRECT_HOSTS,
    LogSettings,
    RemoteSettings,
    ServerSettings,
    parse_org_ids,
)
from agent_automation_mcp.headers import REPOSITORY
from agent_automation_mcp.remote.hosts import HostPolicy
from agent_automation_mcp.remote.metrics import REDIS_STATES, SERVICE_SIDE_FAILURES, Metrics
from agent_automation_mcp.remote.oauth.preflight import check_oauth_settings
from agent_automation_mcp.server import build_server
from pacing.redis_server import RedisServer

ROOT: Final = Path(__file__).resolve().parent.parent
MANIFESTS: Final = ROOT / "manifests"
PYPROJECT: Final = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE: Final[str] = PYPROJECT["project"]["name"]
VERSION: Final[str] = __version__  # the one place (pyproject.toml reads it too: tests/test_release.py)
SCRIPT: Final = next(iter(PYPROJECT["project"]["scripts"]))

# The one place the GitHub owner is chosen: every file must say this name.
OWNER: Final = "agent-automation"
REGISTRY_NAME: Final = f"io.github.{OWNER}/{PACKAGE}"
IMAGE: Final = f"ghcr.io/{OWNER}/{PACKAGE}:{VERSION}"
REMOTE_URL: Final = "https://mcp.example.com/mcp"

SERVER_SCHEMA: Final = Path(__file__).parent / "mcp-server.schema.2025-12-11.json"
SERVER_SCHEMA_SHA256: Final = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
KUBERNETES_VERSION: Final = "1.33.0"
IN_CI: Final = os.environ.get("CI") == "true"


def _missing(tool: str, why: str) -> None:
    """Skip on a developer's machine; in CI `.ci/run` installs the tool, so its absence is a failure."""
    reason = f"{tool} is not on this machine ({why}); .ci/run installs it"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def manifest_json(relative: str) -> Any:
    return json.loads((MANIFESTS / relative).read_text())


class _AskedEnvironment(dict[str, str]):
    """An environment that notes every name looked up in it: the package's settings parsers say what they read."""

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__(values)
        self.asked: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        self.asked.add(name)
        return super().get(name, default)

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        return super().__getitem__(name)


def _settings_read(env: Mapping[str, str]) -> set[str]:
    """The names the package's settings parsers look up in `env`, each value accepted on the way (or ValueError)."""
    asked = _AskedEnvironment(env)
    ApiSettings.from_env(asked)
    ServerSettings.from_env(asked)
    RemoteSettings.from_env(asked)
    LogSettings.from_env(asked)
    return asked.asked


SETTINGS_READ: Final = frozenset(_settings_read({}))  # every setting: with none set, each parser asks for all


def _parse_command_line(args: list[str]) -> argparse.Namespace:
    """What `agent-automation-mcp ARGS` would run with, by the CLI's own parser; exits on a bad argument."""
    argv = args if args and args[0] in COMMANDS else ["serve", *args]
    try:
        return build_parser(argv[0]).parse_args(argv)
    except SystemExit:
        pytest.fail(f"the CLI refuses {argv}")


def _check_launch(command: str, args: list[str]) -> None:
    """A client's stdio command runs our console script (by uvx, pipx, docker or its path) with valid arguments."""
    if command == "uvx":
        assert args[0] in (PACKAGE, f"{PACKAGE}=={VERSION}")
        rest = args[1:]
    elif command == "pipx":
        assert args[:2] == ["run", PACKAGE]
        rest = args[2:]
    elif command == "docker":
        assert args[:3] == ["run", "-i", "--rm"] and IMAGE in args
        rest = args[args.index(IMAGE) + 1:]
    else:
        assert Path(command).name == SCRIPT and Path(command).is_absolute(), command
        rest = args
    _parse_command_line(rest)


# --- the MCP registry's server.json ------------------------------------------------------------------------

def test_the_vendored_registry_schema_is_the_pinned_one() -> None:
    assert hashlib.sha256(SERVER_SCHEMA.read_bytes()).hexdigest() == SERVER_SCHEMA_SHA256


def test_server_json_is_valid_on_the_2025_12_11_schema() -> None:
    schema = json.loads(SERVER_SCHEMA.read_text())
    server = manifest_json("server.json")
    assert server["$schema"] == schema["$id"]
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(server)
    assert server["name"] == REGISTRY_NAME and server["version"] == VERSION
    assert len(server["description"]) <= 100  # the registry refuses longer ones


def test_server_json_packages_are_the_pypi_release_and_the_image() -> None:
    pypi, oci = manifest_json("server.json")["packages"]
    assert (pypi["registryType"], pypi["identifier"], pypi["version"]) == ("pypi", PACKAGE, VERSION)
    assert pypi["runtimeHint"] == "uvx" and pypi["transport"] == {"type": "stdio"}
    assert (oci["registryType"], oci["identifier"]) == ("oci", IMAGE)
    oci_args = [arg.get("name", "") + ("=" if arg["type"] == "named" else "") + arg["value"]
                for arg in oci["packageArguments"]]
    assert oci_args == ["serve", "--transport=stdio"]
    _parse_command_line(oci_args)
    for package in (pypi, oci):
        variables = {variable["name"]: variable for variable in package["environmentVariables"]}
        assert set(variables) <= SETTINGS_READ
        assert variables["AGENT_AUTOMATION_API_TOKEN"]["isSecret"] is True
        assert [name for name, variable in variables.items() if variable.get("isSecret")] == [
            "AGENT_AUTOMATION_API_TOKEN"]


def test_server_json_remote_is_streamable_http_and_signs_in_with_oauth() -> None:
    (remote,) = manifest_json("server.json")["remotes"]
    assert remote["type"] == "streamable-http" and remote["url"] == "https://{host}/mcp"
    # No header to fill in: the client signs in with OAuth (docs/oauth.md); the default repository is optional.
    assert [(header["name"].lower(), header.get("isRequired", False)) for header in remote["headers"]] == [
        (REPOSITORY, False)]
    assert "OAuth" in remote["variables"]["host"]["description"]


# --- the README ---------------------------------------------------------------------------------------------

README: Final = (ROOT / "README.md").read_text()
# What a reader is told: the README and the pages under docs/ it points to (install ways, remote, tools).
DOCS: Final = "\n".join([README, *(path.read_text() for path in sorted((ROOT / "docs").glob("*.md")))])


def test_readme_keeps_its_first_two_lines_and_names_the_server_for_the_registry() -> None:
    assert README.splitlines()[:2] == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/agent-automation-mcp demo",
        "bash .ci/run"]
    # PyPI ownership proof for the registry: this line in the package's long description.
    assert re.findall(r"mcp-name: (\S+)", README) == [REGISTRY_NAME]


def test_readme_and_manifests_name_one_image_tag_the_package_version() -> None:
    texts = [DOCS, *(path.read_text(errors="replace") for path in MANIFESTS.rglob("*") if path.is_file())]
    tags = {tag for text in texts for tag in re.findall(rf"ghcr\.io/[\w-]+/{PACKAGE}:([\w.-]+)", text)}
    assert tags == {VERSION}
    owner_of = rf"(?:github\.com/|github\.|ghcr\.io/)([\w-]+)/{PACKAGE}\b"
    owners = {owner for text in texts for owner in re.findall(owner_of, text)}
    assert owners == {OWNER}


def _claude_code_lines() -> list[list[str]]:
    joined = DOCS.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.startswith("claude mcp add ")]


def test_claude_code_lines_in_the_readme_launch_the_server_or_reach_the_remote_url() -> None:
    lines = _claude_code_lines()
    stdio = [words for words in lines if "--" in words]
    remote = [words for words in lines if "--" not in words]
    assert len(stdio) >= 4 and len(remote) >= 1
    for words in stdio:
        command, *args = words[words.index("--") + 1:]
        _check_launch(command, args)
    for words in remote:
        assert words[words.index("--transport") + 1] == "http"
        assert any(word.endswith("/mcp") for word in words)
    assert any(REMOTE_URL in words and "Authorization: Bearer your-codegen-token" in words for words in remote)


# --- client configurations ----------------------------------------------------------------------------------

_STRINGS = {"type": "array", "items": {"type": "string"}}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_STDIO = {"type": "object", "required": ["command"], "additionalProperties": False,
          "properties": {"command": {"type": "string"}, "args": _STRINGS, "env": _STRING_MAP}}
_URL = {"type": "object", "required": ["url"], "additionalProperties": False,
        "properties": {"url": {"type": "string", "format": "uri"}, "headers": _STRING_MAP}}


def _servers_of(key: str, entry: dict[str, Any], **more: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": [key, *more], "additionalProperties": False,
            "properties": {key: {"type": "object", "minProperties": 1, "additionalProperties": entry}, **more}}


def _typed(entry: dict[str, Any], kind: str) -> dict[str, Any]:
    return {**entry, "required": ["type", *entry["required"]],
            "properties": {**entry["properties"], "type": {"const": kind}}}


_PROMPT = {"type": "object", "required": ["type", "id", "description"], "additionalProperties": False,
           "properties": {"type": {"const": "promptString"}, "id": {"type": "string"},
                          "description": {"type": "string"}, "password": {"type": "boolean"}}}

# What each client reads: Claude Desktop stdio servers only; Cursor stdio or a URL; VS Code typed entries and inputs.
CLIENT_SHAPES: Final = {
    "claude_desktop_config.json": _servers_of("mcpServers", _STDIO),
    "cursor-mcp.json": _servers_of("mcpServers", {"oneOf": [_STDIO, _URL]}),
    "vscode-mcp.json": _servers_of("servers", {"oneOf": [_typed(_STDIO, "stdio"), _typed(_URL, "http")]},
                                   inputs={"type": "array", "items": _PROMPT}),
}


@pytest.mark.parametrize("file", sorted(CLIENT_SHAPES))
def test_client_config_has_the_clients_shape_a_stdio_launch_and_the_remote_url(file: str) -> None:
    config = manifest_json(f"clients/{file}")
    jsonschema.Draft7Validator(CLIENT_SHAPES[file], format_checker=jsonschema.FormatChecker()).validate(config)
    entries = config.get("mcpServers") or config["servers"]
    (launch,) = [entry for entry in entries.values() if entry.get("command") not in (None, "npx")]
    _check_launch(launch["command"], launch.get("args", []))
    assert set(launch["env"]) <= SETTINGS_READ and "AGENT_AUTOMATION_API_TOKEN" in launch["env"]
    (remote,) = [entry for entry in entries.values() if entry is not launch]
    if "url" in remote:  # a client that speaks OAuth: the URL alone, it signs in on the consent page
        assert remote["url"] == REMOTE_URL and "headers" not in remote
    else:  # Claude Desktop's file holds stdio servers only: mcp-remote carries the URL and signs in with OAuth
        assert remote["args"] == ["-y", "mcp-remote@0.15.1", REMOTE_URL] and "env" not in remote


def test_client_configs_in_the_readme_have_a_clients_shape_and_launch_the_server() -> None:
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", DOCS, re.S)
              if '"mcpServers"' in block or '"servers"' in block]
    assert len(blocks) >= 6
    for config in blocks:
        assert any(jsonschema.Draft7Validator(shape).is_valid(config) for shape in CLIENT_SHAPES.values()), config
        for entry in (config.get("mcpServers") or config["servers"]).values():
            if "command" in entry:
                _check_launch(entry["command"], entry.get("args", []))
            else:
                assert entry["url"].endswith("/mcp") and entry["headers"]["Authorization"].startswith("Bearer ")


def test_vscode_config_asks_for_the_token_instead_of_storing_it() -> None:
    config = manifest_json("clients/vscode-mcp.json")
    inputs = {item["id"]: item for item in config["inputs"]}
    text = json.dumps(config["servers"])
    used = set(re.findall(r"\$\{input:([\w-]+)\}", text))
    assert used == set(inputs) and all(inputs[name].get("password") is True for name in used)
    (token_input,) = used
    token = f"${{input:{token_input}}}"
    assert config["servers"]["agent-automation"]["env"]["AGENT_AUTOMATION_API_TOKEN"] == token


# --- the Dockerfile -----------------------------------------------------------------------------------------

def dockerfile() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, stage by stage, as (INSTRUCTION, arguments) with continuations joined."""
    text = re.sub(r"\\\n\s*", " ", (MANIFESTS / "Dockerfile").read_text())
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, arguments = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), arguments.strip()))
    return stages


def only(stage: list[tuple[str, str]], instruction: str) -> str:
    (arguments,) = [args for name, args in stage if name == instruction]
    return arguments


def test_dockerfile_builds_in_one_stage_and_runs_slim_and_unprivileged_in_another() -> None:
    build, runtime = dockerfile()
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)? AS build", only(build, "FROM"))
    assert only(runtime, "FROM") == only(build, "FROM").replace("AS build", "AS runtime")  # same Python
    assert [args for name, args in build if name == "COPY"] == [
        "requirements.lock requirements-build.lock ./", "pyproject.toml README.md ./", "src ./src"]
    assert [args for name, args in runtime if name == "COPY"] == ["--from=build /opt/venv /opt/venv"]
    runs = " ".join(args for name, args in runtime if name == "RUN")
    assert not re.search(r"pip |apt-get|apk |gcc|build-essential", runs)  # no build tools in the image
    user = only(runtime, "USER")
    assert re.fullmatch(r"[1-9]\d*:[1-9]\d*", user)  # numeric, so Kubernetes can check runAsNonRoot
    assert json.loads(only(runtime, "ENTRYPOINT")) == [SCRIPT]
    cmd = json.loads(only(runtime, "CMD"))
    assert cmd[:5] == ["serve", "--transport", "http", "--host", "0.0.0.0"]
    _parse_command_line(cmd)
    assert only(runtime, "EXPOSE") == cmd[cmd.index("--port") + 1]
    healthcheck = only(runtime, "HEALTHCHECK")
    assert f"http://127.0.0.1:{cmd[cmd.index('--port') + 1]}/healthz" in healthcheck and "curl" not in healthcheck


def _locked(file: str) -> dict[str, tuple[Version, list[str]]]:
    """A lock file's pins: name → (version, hashes); every requirement is `name==version` with its hashes."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / file).read_text())
    pins: dict[str, tuple[Version, list[str]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        requirement, *options = line.split()
        name, _, version = requirement.partition("==")
        assert version, f"{file}: {requirement} is not pinned to one version"
        hashes = [option.removeprefix("--hash=sha256:") for option in options if option.startswith("--hash=sha256:")]
        assert hashes and len(hashes) == len(options), f"{file}: {requirement} without hashes only"
        pins[canonicalize_name(name)] = (Version(version), hashes)
    return pins


IMAGE_PYTHON: Final = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
                       "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython"}


@pytest.mark.parametrize(("file", "requirements"), [
    # The image traces when the OTEL_* variables say so: the `otel` extra is in it.
    ("requirements.lock",
     [*PYPROJECT["project"]["dependencies"], *PYPROJECT["project"]["optional-dependencies"]["otel"]]),
    # The build backend, and `build` itself: the release workflow builds with these pins (RELEASING.md).
    ("requirements-build.lock", [*PYPROJECT["build-system"]["requires"],
                                 *(line for line in PYPROJECT["project"]["optional-dependencies"]["test"]
                                   if Requirement(line).name == "build")])])
def test_the_images_lock_files_pin_every_requirement_with_hashes_in_range(file: str, requirements: list[str]) -> None:
    """What the Dockerfile installs with --require-hashes: each requirement of pyproject.toml that applies to the
    image's Python, at a version its range allows (a bound raised in pyproject.toml needs a new lock)."""
    build = dockerfile()[0]
    assert f"--require-hashes --no-deps -r {file}" in " ".join(args for name, args in build if name == "RUN")
    assert f"python:{IMAGE_PYTHON['python_version']}-" in only(build, "FROM")
    pins = _locked(file)
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(IMAGE_PYTHON):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{file} does not pin {requirement.name}"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), (
            f"{file} pins {requirement.name} {pins[name][0]}, outside {requirement.specifier}")


def test_the_lock_check_refuses_an_unpinned_or_unhashed_requirement(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """So that the test above could fail."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for text in ("anyio>=4\n", "anyio==4.16.0\n", "anyio==4.16.0 \\\n    --hash=md5:abc\n"):
        (tmp_path / "broken.lock").write_text(text)
        with pytest.raises(AssertionError):
            _locked("broken.lock")


def test_dockerfile_labels_the_registry_name_and_version() -> None:
    labels = dict(re.findall(r'([\w.]+)="([^"]*)"', only(dockerfile()[1], "LABEL")))
    assert labels["io.modelcontextprotocol.server.name"] == REGISTRY_NAME
    assert labels["org.opencontainers.image.version"] == VERSION


def test_dockerignore_sends_only_what_the_build_copies() -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"  # everything out, then back in only what the Dockerfile copies
    kept = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {source for name, args in dockerfile()[0] if name == "COPY" for source in args.split()[:-1]}
    assert kept == copied == {"requirements.lock", "requirements-build.lock", "pyproject.toml", "README.md", "src"}


# --- the MCP Bundle -----------------------------------------------------------------------------------------

MCPB: Final = MANIFESTS / "mcpb"
MCPB_CLI_VERSION: Final = re.search(r"^MCPB_VERSION=(\S+)", (MCPB / "build.sh").read_text(), re.M).group(1)  # type: ignore[union-attr]


def _first_sentence(description: str) -> str:
    paragraph = " ".join(description.split("\n\n")[0].split())
    return re.split(r"(?<=[.!?])\s+(?=[A-Z])", paragraph)[0]


def _with_tools(text: str, tools: list[dict[str, str]]) -> str:
    """manifest.json's text with only its `tools` array replaced, one compact line per tool as the file keeps them."""
    lines = ",\n".join(f"    {json.dumps(tool, ensure_ascii=False)}" for tool in tools)
    replaced, count = re.subn(r'(?<=\n  "tools": \[\n).*?(?=\n  \]\n)', lambda _: lines, text, flags=re.S)
    assert count == 1, 'manifest.json has no `"tools": [` array, one tool a line, where it is expected'
    return replaced


@pytest.mark.anyio
async def test_bundle_lists_the_tools_the_server_lists() -> None:
    path = MCPB / "manifest.json"
    env = {name: "" for name in json.loads(path.read_text())["server"]["mcp_config"]["env"]}  # defaults
    async with Client(build_server(ApiSettings.from_env(env), ServerSettings.from_env(env))) as client:
        listed = [{"name": tool.name, "description": _first_sentence(tool.description or "")}
                  for tool in (await client.list_tools()).tools]
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(_with_tools(path.read_text(), listed))
    bundled = json.loads(path.read_text())["tools"]
    differ = sorted({t["name"] for t in listed} ^ {t["name"] for t in bundled} | {
        new["name"] for new, old in zip(listed, bundled, strict=False) if new != old})
    assert bundled == listed, (f"the tools {differ} of the default listing differ from the bundle's list in "
                               f"{path.relative_to(ROOT)}: review, then UPDATE_SNAPSHOTS=1 .venv/bin/pytest "
                               "tests/test_manifests.py")


def test_rewriting_the_bundles_tools_changes_nothing_else() -> None:
    text = (MCPB / "manifest.json").read_text()
    tools = json.loads(text)["tools"]
    assert _with_tools(text, tools) == text  # the file's own format, byte for byte
    changed = [tools[0] | {"description": "Something else."}, *tools[1:], {"name": "new_tool", "description": "New."}]
    rewritten = _with_tools(text, changed)
    assert json.loads(rewritten) == json.loads(text) | {"tools": changed}
    assert len(rewritten.splitlines()) == len(text.splitlines()) + 1


def test_bundle_is_the_pinned_release_from_its_own_wheel_with_the_token_sensitive() -> None:
    manifest = manifest_json("mcpb/manifest.json")
    assert (manifest["name"], manifest["version"]) == (PACKAGE, VERSION)
    entry_point = manifest["server"]["entry_point"]
    assert manifest["server"]["type"] == "uv" and manifest["server"]["mcp_config"]["args"][-1] == entry_point
    started = subprocess.run([sys.executable, str(MCPB / entry_point), "--version"], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    assert started.stdout.strip() == f"{SCRIPT} {VERSION}"  # the entry point is the package's command line
    project = tomllib.loads((MCPB / "pyproject.toml").read_text())
    bundle = project["project"]
    assert bundle["dependencies"] == [f"{PACKAGE}=={VERSION}"] and bundle["version"] == VERSION
    # uv installs the wheel build.sh packs beside it, not a download of the same name.
    wheel = f"wheels/agent_automation_mcp-{VERSION}-py3-none-any.whl"
    assert project["tool"]["uv"]["sources"] == {PACKAGE: {"path": wheel}}
    assert bundle["requires-python"] == PYPROJECT["project"]["requires-python"]
    config = manifest["server"]["mcp_config"]
    assert set(config["env"]) <= SETTINGS_READ
    used = set(re.findall(r"\$\{user_config\.(\w+)\}", json.dumps(config)))
    assert used == set(manifest["user_config"])
    assert config["env"]["AGENT_AUTOMATION_API_TOKEN"] == "${user_config.api_token}"
    assert manifest["user_config"]["api_token"]["sensitive"] is True
    assert [key for key, option in manifest["user_config"].items() if option.get("sensitive")] == ["api_token"]


def _mcpb(*args: str, cwd: Path = MCPB) -> subprocess.CompletedProcess[str]:
    """The pinned mcpb CLI, from npm's cache only (tests reach nothing beyond loopback; .ci/run fills the cache)."""
    if shutil.which("npx") is None:
        _missing("npx", "Node.js: mcpb validate and mcpb pack were not run")
    env = {**os.environ, "npm_config_offline": "true", "npm_config_update_notifier": "false"}
    return subprocess.run(["npx", "--yes", f"@anthropic-ai/mcpb@{MCPB_CLI_VERSION}", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def mcpb_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    if _mcpb("--version").returncode != 0:
        _missing(f"@anthropic-ai/mcpb@{MCPB_CLI_VERSION} in npm's cache", "mcpb validate and mcpb pack were not run")
    return _mcpb


def test_mcpb_validate_accepts_the_manifest(mcpb_cli: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = mcpb_cli("validate", "manifest.json")
    assert done.returncode == 0 and "Manifest schema validation passes!" in done.stdout, done.stdout + done.stderr


def test_mcpb_validate_refuses_a_broken_manifest(mcpb_cli: Callable[..., subprocess.CompletedProcess[str]],
                                                tmp_path: Path) -> None:
    """So that the test above could fail: a manifest without its server is refused."""
    broken = {key: value for key, value in manifest_json("mcpb/manifest.json").items() if key != "server"}
    (tmp_path / "manifest.json").write_text(json.dumps(broken))
    assert mcpb_cli("validate", "manifest.json", cwd=tmp_path).returncode != 0


# The bundle packed around the release's wheel: tests/test_release.py.


# --- Kubernetes ---------------------------------------------------------------------------------------------

def _kustomize(folder: str | Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` of a folder of manifests/kubernetes (or any path)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        _missing("kubectl", "Debian: apt-get install kubernetes-client; the kustomizations were not rendered")
    done = subprocess.run([kubectl, "kustomize", str(MANIFESTS / "kubernetes" / folder)], capture_output=True,
                          text=True, timeout=60, check=True, stdin=subprocess.DEVNULL)
    return [document for document in yaml.safe_load_all(done.stdout) if document]


def _kustomize_kind(folder: str, kind: str) -> list[dict[str, Any]]:
    return [document for document in _kustomize(folder) if document["kind"] == kind]


def env_file(path: Path) -> dict[str, str]:
    """A kustomize generator's env file: KEY=VALUE lines; blank lines and # comments skipped."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


@pytest.fixture(scope="module")
def rendered_base() -> list[dict[str, Any]]:
    return _kustomize("base")


@pytest.fixture(scope="module")
def base(rendered_base: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The base's documents by kind; the Secrets (there are several) are in `secrets`."""
    return {document["kind"]: document for document in rendered_base if document["kind"] != "Secret"}


@pytest.fixture(scope="module")
def secrets(rendered_base: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The base's Secrets by their rendered name (with the content hash), each one's data decoded."""
    return {document["metadata"]["name"]: {key: base64.b64decode(value).decode()
                                           for key, value in document.get("data", {}).items()}
            for document in rendered_base if document["kind"] == "Secret"}


@pytest.fixture(scope="module")
def redis() -> list[dict[str, Any]]:
    return _kustomize("redis")


def test_every_rendered_document_is_valid_kubernetes(rendered_base: list[dict[str, Any]],
                                                     redis: list[dict[str, Any]]) -> None:
    assert sorted(document["kind"] for document in rendered_base) == [
        "ConfigMap", "Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget", "Secret",
        "Secret", "Secret", "Service"]
    assert sorted(document["kind"] for document in redis) == ["Deployment", "NetworkPolicy",
                                                               "PersistentVolumeClaim", "Service"]
    for document in [*rendered_base, *redis]:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_strict_validation_refuses_a_misspelt_field(base: dict[str, dict[str, Any]]) -> None:
    """So that the test above could fail: strict validation catches a field Kubernetes would ignore."""
    spec = dict(base["Deployment"]["spec"], replica=3)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**base["Deployment"], "spec": spec}, KUBERNETES_VERSION, strict=True)


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_deployment_runs_three_locked_down_replicas_of_the_image(base: dict[str, dict[str, Any]]) -> None:
    deployment = base["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    container = _container(deployment)
    assert "replicas" not in deployment["spec"] and container["image"] == IMAGE  # the autoscaler's (3 to 6)
    assert pod["securityContext"]["runAsNonRoot"] is True
    user = only(dockerfile()[1], "USER")
    assert f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}" == user
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert set(container["resources"]) == {"requests", "limits"}
    assert all(set(container["resources"][kind]) == {"cpu", "memory"} for kind in ("requests", "limits"))
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} >= {"kubernetes.io/hostname"}


KEYS_SECRET: Final = "agent-automation-mcp-keys"  # keys.env: shipped empty, filled by the operator


def _as_the_operator_fills(secrets: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The base's Secrets once the operator has filled keys.env as it says (a Fernet key, a random hex key)."""
    (name,) = [name for name in secrets if name.startswith(KEYS_SECRET + "-")]
    filled = {"AGENT_AUTOMATION_OAUTH_KEYS": Fernet.generate_key().decode(),
              "AGENT_AUTOMATION_STATE_KEYS": "0123456789abcdef" * 4}
    return secrets | {name: secrets[name] | filled}


def _container_env(base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The server container's environment, as the kubelet builds it: `envFrom` (the ConfigMap and Secrets), then
    `env` (a value, or one key of a Secret). Every reference names a document the base renders."""
    env: dict[str, str] = {}
    container = _container(base["Deployment"])
    for source in container["envFrom"]:
        if "configMapRef" in source:
            assert source["configMapRef"]["name"] == base["ConfigMap"]["metadata"]["name"]
            env.update(base["ConfigMap"]["data"])
        else:
            env.update(secrets[source["secretRef"]["name"]])
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
            continue
        reference = variable["valueFrom"]["secretKeyRef"]
        env[variable["name"]] = secrets[reference["name"]][reference["key"]]
    return env


def _as_the_container_runs(base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]],
                           monkeypatch: pytest.MonkeyPatch) -> tuple[argparse.Namespace, RemoteSettings]:
    """The Deployment's arguments by the CLI's parser over its environment, combined as `serve` combines them."""
    for name in [name for name in os.environ if name.startswith(("AGENT_AUTOMATION_", "CODEGEN_"))]:
        monkeypatch.delenv(name)
    for name, value in _container_env(base, secrets).items():
        monkeypatch.setenv(name, value)
    args = _parse_command_line(_container(base["Deployment"])["args"])
    return args, settings_from(args)[2]


def test_deployment_serves_http_as_the_image_does_with_its_probes_and_a_long_enough_grace(
        base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    container = _container(base["Deployment"])
    cmd = json.loads(only(dockerfile()[1], "CMD"))
    assert container["args"][:len(cmd)] == cmd  # the image's command, then the Deployment's own flags
    args, remote = _as_the_container_runs(base, secrets, monkeypatch)
    assert args.log_format == "json"  # one object a line, for the cluster's log collector
    assert args.shutdown_grace is not None and remote.shutdown_grace == args.shutdown_grace  # explicit, and used
    port, _ = container["ports"]
    assert port["containerPort"] == args.port
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    pause = container["lifecycle"]["preStop"]["exec"]["command"]
    pause_seconds = float(re.search(r"sleep\((\d+)\)", pause[-1]).group(1))  # type: ignore[union-attr]
    grace = base["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > pause_seconds + remote.shutdown_grace  # the kubelet's SIGKILL comes after the drain


def test_settings_come_from_the_configmap_and_redis_and_the_log_key_from_secrets(
        base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]], redis: list[dict[str, Any]]) -> None:
    config = base["ConfigMap"]["data"]
    env = _container_env(base, secrets)
    unknown = set(env) - _settings_read(env)  # and the package's parsers accept each value
    assert not unknown, f"settings the package does not read (misspelt?): {sorted(unknown)}"
    assert config["AGENT_AUTOMATION_AUTH"] == "oauth" and config["AGENT_AUTOMATION_LOG_LEVEL"] == "INFO"
    assert "mcp.example.com" in config["AGENT_AUTOMATION_ALLOWED_HOSTS"].split(",")
    assert config["AGENT_AUTOMATION_PUBLIC_URL"] == REMOTE_URL.removesuffix("/mcp")
    # The sign-in and confirmation keys ship empty, in a generated Secret: unfilled, the server refuses to start
    # (and says why); filled as keys.env says, it starts.
    assert env["AGENT_AUTOMATION_OAUTH_KEYS"] == env["AGENT_AUTOMATION_STATE_KEYS"] == ""
    assert "Fernet.generate_key()" in (MANIFESTS / "kubernetes" / "base" / "keys.env").read_text()
    with pytest.raises(ValueError, match="AGENT_AUTOMATION_OAUTH_KEYS"):
        check_oauth_settings(RemoteSettings.from_env(env))
    filled = _container_env(base, _as_the_operator_fills(secrets))
    assert check_oauth_settings(RemoteSettings.from_env(filled)) == "https://mcp.example.com"
    assert len(RemoteSettings.from_env(filled).state_keys) == 1
    # The Redis URL and the log key are in Secrets, not in the ConfigMap; the key is empty until the operator
    # sets it (each replica then warns that tenants are named differently on each).
    assert not {"AGENT_AUTOMATION_REDIS_URL", "AGENT_AUTOMATION_LOG_SECRET"} & set(config)
    assert env["AGENT_AUTOMATION_LOG_SECRET"] == "" and LogSettings.from_env(env).secret is None
    assert ApiSettings.from_env(env).redis_url
    (redis_service,) = [document for document in redis if document["kind"] == "Service"]
    assert env["AGENT_AUTOMATION_REDIS_URL"].startswith(f"redis://{redis_service['metadata']['name']}:6379/")


def test_the_shipped_redis_keeps_what_it_holds_across_a_restart(redis: list[dict[str, Any]],
                                                                 tmp_path: Path) -> None:
    """Its data is on a volume that outlives the pod, and the container's own arguments, given to Debian's
    redis-server, bring back after a restart what was written before it (a revocation, a refresh chain)."""
    by_kind = {document["kind"]: document for document in redis}
    deployment, claim = by_kind["Deployment"], by_kind["PersistentVolumeClaim"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # never two servers on one append-only file
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (mount,) = container["volumeMounts"]
    (volume,) = [volume for volume in pod["volumes"] if volume["name"] == mount["name"]]
    assert volume == {"name": mount["name"], "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    args = container["args"]
    assert args[args.index("--dir") + 1] == mount["mountPath"]
    binary = shutil.which("redis-server")
    if binary is None:
        _missing("redis-server", "Debian: apt-get install redis-server; the arguments were not tried")
    options = [str(tmp_path) if previous == "--dir" else arg for previous, arg in zip(["", *args], args, strict=False)]
    server = RedisServer(binary, options)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as connection:
            connection.sendall(b"SET aamcp:oauth:ended:g1 1 PX 600000\r\n")
            assert connection.recv(16).startswith(b"+OK")
        server.stop()  # SIGTERM, as the kubelet stops the pod
        server.start()
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as connection:
            connection.sendall(b"GET aamcp:oauth:ended:g1\r\n")
            assert connection.recv(16) == b"$1\r\n1\r\n"
    finally:
        server.stop()


def test_a_misspelt_or_unknown_setting_is_caught() -> None:
    """So that the check above could fail: the parsers never ask for a name they do not know."""
    env = {"AGENT_AUTOMATION_AUTH": "request", "AGENT_AUTOMATION_ALLOWED_HOST": "mcp.example.com",
           "AGENT_AUTOMATION_LOG_FORMATS": "json", "AGENT_AUTOMATION_LOG_LEVEL": "INFO"}
    assert set(env) - _settings_read(env) == {"AGENT_AUTOMATION_ALLOWED_HOST", "AGENT_AUTOMATION_LOG_FORMATS"}
    with pytest.raises(ValueError, match="AGENT_AUTOMATION_MAX_REPLICAS"):
        _settings_read({"AGENT_AUTOMATION_MAX_REPLICAS": "six"})


def test_the_base_refuses_to_start_until_the_operator_names_the_organisations_served(
        base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Shipped empty, the allow-list would serve every Codegen user: the replicas refuse to start, naming it, until
    it lists ids (or says `*`, every organisation, on purpose)."""
    args, remote = _as_the_container_runs(base, secrets, monkeypatch)
    assert base["ConfigMap"]["data"]["AGENT_AUTOMATION_ALLOWED_ORGS"] == "" and remote.allowed_orgs == ()
    auth = auth_mode(args.transport, args.host, remote.auth)
    with pytest.raises(ValueError, match=r"AGENT_AUTOMATION_ALLOWED_ORGS .* is not set: on 0\.0\.0\.0.*set it to \*"):
        require_allowed_orgs(auth, args.host, remote)
    for filled, served in (("41,42", (41, 42)), ("*", None)):
        monkeypatch.setenv("AGENT_AUTOMATION_ALLOWED_ORGS", filled)
        remote = settings_from(args)[2]
        assert remote.allowed_orgs == served
        require_allowed_orgs(auth, args.host, remote)
    with pytest.raises(ValueError, match=r"\* alone"):
        parse_org_ids("*,41")


def test_the_container_answers_requests_for_its_public_and_service_names_with_their_own_tokens(
        base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    args, remote = _as_the_container_runs(base, _as_the_operator_fills(secrets), monkeypatch)
    assert auth_mode(args.transport, args.host, remote.auth) == "oauth"
    assert check_oauth_settings(remote) == "https://mcp.example.com"  # the public URL and the keys are usable
    policy = HostPolicy.build(args.host, remote.allowed_hosts, remote.allowed_origins)
    service = base["Service"]
    name, (port,) = service["metadata"]["name"], service["spec"]["ports"]
    # Through the load balancer or Ingress, which pass the client's Host; in the namespace, by the Service.
    for host in ("mcp.example.com", "mcp.example.com:443", name, f"{name}:{port['port']}"):
        assert policy.refusal(host, None) is None, host
    # /mcp refuses other names, a pod's address too: the probes ask /healthz and /readyz, which answer any Host.
    pod_address = f"10.244.1.17:{args.port}"
    for host in ("evil.example", pod_address, f"{name}.other-namespace"):
        assert policy.refusal(host, None) is not None, host


def test_service_autoscaler_and_budget_select_the_deployment(base: dict[str, dict[str, Any]]) -> None:
    deployment = base["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert base["Service"]["spec"]["selector"] == labels
    assert base["Service"]["spec"]["ports"][0]["targetPort"] == _container(deployment)["ports"][0]["name"]
    assert base["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == labels
    hpa = base["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": deployment["metadata"]["name"]}
    assert hpa["minReplicas"] == 3
    # With Redis unreachable each replica paces at 1/AGENT_AUTOMATION_MAX_REPLICAS: never more replicas than that.
    assert hpa["maxReplicas"] == int(base["ConfigMap"]["data"]["AGENT_AUTOMATION_MAX_REPLICAS"])


def _ports(container: dict[str, Any]) -> dict[str, int]:
    return {port["name"]: port["containerPort"] for port in container["ports"]}


def _admitted(policy: dict[str, Any]) -> dict[int, set[str]]:
    """Which namespaces (by kubernetes.io/metadata.name) each port admits; every rule names its sources."""
    admitted: dict[int, set[str]] = {}
    for rule in policy["ingress"]:
        assert rule["from"], "a rule without sources admits everyone"
        namespaces = {source["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                      for source in rule["from"]}
        for port in rule["ports"]:
            assert port["protocol"] == "TCP"
            admitted.setdefault(port["port"], set()).update(namespaces)
    return admitted


def test_network_policy_admits_the_ingress_and_the_scraper_and_lets_out_dns_redis_and_https(
        base: dict[str, dict[str, Any]]) -> None:
    policy = base["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"] == base["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    ports = _ports(_container(base["Deployment"]))
    assert _admitted(policy) == {ports["http"]: {"ingress-nginx"}, ports["metrics"]: {"monitoring"}}
    egress = {(port["port"], port["protocol"]) for rule in policy["egress"] for port in rule["ports"]}
    assert egress == {(53, "UDP"), (53, "TCP"), (6379, "TCP"), (6380, "TCP"), (443, "TCP")}
    (dns,) = [rule for rule in policy["egress"] if {port["port"] for port in rule["ports"]} == {53}]
    # kube-dns's pods, and NodeLocal DNSCache, which answers on a link-local address of every node.
    assert {"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}} in dns["to"]
    assert {"ipBlock": {"cidr": "169.254.20.10/32"}} in dns["to"]
    assert all("to" not in rule for rule in policy["egress"] if rule is not dns)  # Redis and the API: any address


def test_the_example_overlay_admits_other_namespaces_and_stays_valid() -> None:
    """The documented way to name another ingress controller's or Prometheus' namespace."""
    documents = _kustomize("example-overlay")
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    kinds = {document["kind"]: document for document in documents}
    ports = _ports(_container(kinds["Deployment"]))
    assert _admitted(kinds["NetworkPolicy"]["spec"]) == {ports["http"]: {"traefik"},
                                                         ports["metrics"]: {"prometheus"}}


def test_metrics_have_their_own_port_that_the_service_does_not_expose(
        base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    args, remote = _as_the_container_runs(base, secrets, monkeypatch)
    ports = _ports(_container(base["Deployment"]))
    assert remote.metrics_port == ports["metrics"] != args.port == ports["http"]
    assert [port["targetPort"] for port in base["Service"]["spec"]["ports"]] == ["http"]
    (monitor,) = _kustomize_kind("monitoring", "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    assert monitor["spec"]["selector"]["matchLabels"] == base["Deployment"]["spec"]["template"]["metadata"]["labels"]


def _rendered_after(tmp_path: Path, file: str, line: str) -> dict[str, Any]:
    """The base's Deployment rendered from a copy in which `file` has `line` instead of the line of the same key."""
    copy = tmp_path / "base"
    shutil.copytree(MANIFESTS / "kubernetes" / "base", copy)
    key = line.split("=", 1)[0]
    text, count = re.subn(rf"^{re.escape(key)}=.*$", line, (copy / file).read_text(), flags=re.M)
    assert count == 1
    (copy / file).write_text(text)
    return next(document for document in _kustomize(copy) if document["kind"] == "Deployment")


def _references(deployment: dict[str, Any]) -> set[str]:
    container = _container(deployment)
    secret_keys = [variable["valueFrom"]["secretKeyRef"] for variable in container.get("env", [])
                   if "valueFrom" in variable]
    return {next(iter(source.values()))["name"] for source in container["envFrom"]} | {
        reference["name"] for reference in secret_keys}


@pytest.mark.parametrize(("file", "line"), [("settings.env", "AGENT_AUTOMATION_TOOLSETS=all"),
                                            ("redis.env", "url=redis://agent-automation-mcp-redis:6379/1"),
                                            ("logs.env", "AGENT_AUTOMATION_LOG_SECRET=" + "0" * 64),
                                            ("keys.env", "AGENT_AUTOMATION_STATE_KEYS=" + "0" * 64)])
def test_a_changed_setting_or_secret_changes_the_pod_template_so_the_pods_roll(
        base: dict[str, dict[str, Any]], secrets: dict[str, dict[str, str]], tmp_path: Path, file: str,
        line: str) -> None:
    before = _references(base["Deployment"])
    assert before == {base["ConfigMap"]["metadata"]["name"], *secrets}  # every generated name, with its hash
    after = _references(_rendered_after(tmp_path, file, line))
    assert len(before - after) == 1 and len(after - before) == 1  # exactly the changed one has a new name


def test_the_redirect_hosts_example_keeps_every_default_host() -> None:
    """Setting AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS replaces the default list: an example that left a chat app out
    would lock its users out when uncommented."""
    settings = (MANIFESTS / "kubernetes" / "base" / "settings.env").read_text()
    (example,) = re.findall(r"^# AGENT_AUTOMATION_OAUTH_REDIRECT_HOSTS=(\S+)$", settings, re.MULTILINE)
    assert set(CHAT_APP_REDIRECT_HOSTS) <= set(example.split(","))




# --- monitoring: alerts and the dashboard read what /metrics exposes ---------------------------------------

MONITORING: Final = MANIFESTS / "kubernetes" / "monitoring"
# Labels Prometheus adds to every series it scrapes from a pod (the PodMonitor's target labels).
TARGET_LABELS: Final = frozenset({"namespace", "pod", "container", "instance", "job", "endpoint", "service"})
# Grafana's variables, as a query sees them once Grafana has filled them in.
GRAFANA_VARIABLES: Final = {"$__rate_interval": "1m", "$namespace": "default"}


def _exposed_series() -> dict[str, frozenset[str]]:
    """Each series name `/metrics` serves, with its label names: every metric of a server's registry used once."""
    metrics = Metrics()
    metrics.call_started("list_models")
    metrics.call_finished("list_models", "ok", 0.2)
    metrics.request_started("tasks/get")
    metrics.request_finished("tasks/get", "ok", 0.1)
    metrics.paced(0.1)
    metrics.upstream(["standard"], "429")
    metrics.responded(401, "no_token")
    metrics.token_checked(True)
    metrics.signin_answered("token", 200, "ok")
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics.exposition("reachable").decode()):
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in series.items()}


EXPOSED: Final = _exposed_series()
# What Prometheus itself records for every target it scrapes: the targets-down alert and a panel read it.
SCRAPE_SERIES: Final = {"up": frozenset()}
# What others serve that the balancer and out-of-memory alerts read: HAProxy's own exporter (each name checked
# against a running HAProxy by tests/e2e/test_connections.py), ingress-nginx's controller and kube-state-metrics
# (as their documentation names them: neither runs here).
OTHERS_SERIES: Final = {
    "haproxy_frontend_current_sessions": frozenset({"proxy"}),
    "haproxy_frontend_limit_sessions": frozenset({"proxy"}),
    "haproxy_frontend_denied_connections_total": frozenset({"proxy"}),
    "nginx_ingress_controller_nginx_process_connections_total": frozenset(
        {"state", "controller_class", "controller_namespace", "controller_pod"}),
    "kube_pod_container_status_restarts_total": frozenset({"namespace", "pod", "container", "uid"}),
    "kube_pod_container_status_last_terminated_reason": frozenset({"namespace", "pod", "container", "uid", "reason"}),
}


def _selectors(node: Any) -> Iterator[tuple[str, set[str]]]:
    """Every series a PromQL expression reads, with the label names it matches or groups by near it."""
    if isinstance(node, promql_parser.VectorSelector):
        yield node.name, {matcher.name for matcher in node.matchers.matchers}
        return
    if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
        for name, labels in _selectors(node.expr):
            yield name, labels | set(node.modifier.labels)
        return
    for attribute in ("lhs", "rhs", "expr", "vector_selector", "param"):
        child = getattr(node, attribute, None)
        if child is not None:
            yield from _selectors(child)
    for argument in getattr(node, "args", None) or []:
        yield from _selectors(argument)


def _check_promql(expression: str) -> set[str]:
    """Parses the expression (balance, known functions, syntax) and checks each series and label it reads against
    what the server exposes; the series names read."""
    for variable, value in GRAFANA_VARIABLES.items():
        expression = expression.replace(variable, value)
    tree = promql_parser.parse(expression)  # ValueError on anything Prometheus would refuse to parse
    read = set()
    for name, labels in _selectors(tree):
        series = EXPOSED | SCRAPE_SERIES | OTHERS_SERIES
        assert name in series, f"{name} is not a series /metrics serves: {expression}"
        unknown = labels - series[name] - TARGET_LABELS
        assert not unknown, f"{name} has no label {sorted(unknown)}: {expression}"
        read.add(name)
    return read


def _error_kinds() -> set[str]:
    """Every `outcome` a tool call can end with besides ok: the error kinds of the one error shape."""
    from agent_automation_mcp.api import errors as api_errors
    from agent_automation_mcp.tools import errors as tool_errors

    classes = [value for module in (api_errors, tool_errors) for value in vars(module).values()
               if isinstance(value, type) and issubclass(value, api_errors.ApiError)]
    return {cls.kind for cls in classes}


def test_the_promql_check_refuses_what_prometheus_or_the_server_would_not_have() -> None:
    """So that the checks below could fail: unbalanced, an unknown function, a series or label that is not served."""
    _check_promql('sum by (tool) (rate(agent_automation_tool_calls_total{outcome="ok"}[5m]))')
    for broken in ("sum(rate(agent_automation_tool_calls_total[5m])",
                   "rates(agent_automation_tool_calls_total[5m])",
                   "rate(agent_automation_tool_calls[5m])",
                   'rate(agent_automation_tool_calls_total{tenant="x"}[5m])',
                   "sum by (organisation) (rate(agent_automation_tool_calls_total[5m]))"):
        with pytest.raises((ValueError, AssertionError)):
            _check_promql(broken)


def test_prometheus_rule_alerts_on_outages_redis_refusals_errors_latency_and_streams_with_served_metrics() -> None:
    (rule,) = _kustomize_kind("monitoring", "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    (group,) = rule["spec"]["groups"]
    alerts = {alert["alert"]: alert for alert in group["rules"]}
    reads = {name: _check_promql(alert["expr"]) for name, alert in alerts.items()}
    responses, refused = "agent_automation_http_responses_total", "agent_automation_http_refused_total"
    assert reads == {
        "AgentAutomationTargetsDown": {"up"},
        "AgentAutomationOutage": {responses},
        "AgentAutomationUpstreamDown": {"agent_automation_upstream_requests_total"},
        "AgentAutomationRedisDown": {"agent_automation_redis_state"},
        "AgentAutomationRedisDataLost": {"agent_automation_redis_data_lost_total"},
        "AgentAutomationClockOffset": {"agent_automation_clock_offset_seconds"},
        "AgentAutomationUpstream429s": {"agent_automation_upstream_requests_total"},
        "AgentAutomationToolErrors": {"agent_automation_tool_calls_total"},
        "AgentAutomationSlowToolCalls": {"agent_automation_tool_call_duration_seconds_bucket"},
        "AgentAutomationGate5xx": {responses},
        "AgentAutomationStrangerTokens": {refused},
        "AgentAutomationTokenBudgetSpent": {refused},
        "AgentAutomationSignInRefusals": {"agent_automation_oauth_requests_total"},
        "AgentAutomationOrgNotAllowed": {refused, "agent_automation_oauth_requests_total"},
        "AgentAutomationOpenStreams": {"agent_automation_open_streams"},
        "AgentAutomationBalancerSaturated": {"haproxy_frontend_current_sessions", "haproxy_frontend_limit_sessions",
                                             "nginx_ingress_controller_nginx_process_connections_total"},
        "AgentAutomationOutOfMemory": {"kube_pod_container_status_restarts_total",
                                       "kube_pod_container_status_last_terminated_reason"},
        "AgentAutomationMemoryHigh": {"process_resident_memory_bytes", "agent_automation_memory_limit_bytes"},
        "AgentAutomationListenStreams": {"agent_automation_listen_streams", "agent_automation_listen_streams_limit",
                                         "agent_automation_listen_refused_total"},
    }
    # The targets-down alert finds the replicas by the job the PodMonitor names after the pods' label.
    (monitor,) = _kustomize_kind("monitoring", "PodMonitor")
    job = monitor["spec"]["selector"]["matchLabels"][monitor["spec"]["jobLabel"]]
    assert alerts["AgentAutomationTargetsDown"]["expr"].count(f'up{{job="{job}"}}') == 2
    # The Redis states the alert names are the server's.
    (states,) = re.findall(r'state=~"([^"]+)"', alerts["AgentAutomationRedisDown"]["expr"])
    assert set(states.split("|")) <= set(REDIS_STATES) - {"reachable", "not configured"}
    assert 'status="429"' in alerts["AgentAutomationUpstream429s"]["expr"]
    # The out-of-memory alert watches the containers of the server's and Redis' Deployments, by their pods' names.
    deployments = [document for folder in ("base", "redis") for document in _kustomize_kind(folder, "Deployment")]
    oom = alerts["AgentAutomationOutOfMemory"]["expr"]
    (containers,) = set(re.findall(r'container=~"([^"]+)"', oom))
    assert set(containers.split("|")) == {container["name"] for deployment in deployments
                                          for container in deployment["spec"]["template"]["spec"]["containers"]}
    (pods,) = set(re.findall(r'pod=~"([^"]+)"', oom))
    assert all(re.fullmatch(pods, f"{deployment['metadata']['name']}-5d9c7b-x2k4q") for deployment in deployments)
    # The balancer alert reads HAProxy's frontend for /mcp, at a threshold below its maxconn.
    haproxy = (MANIFESTS / "haproxy" / "haproxy.cfg").read_text()
    assert set(re.findall(r'proxy="(\w+)"', alerts["AgentAutomationBalancerSaturated"]["expr"])) == {"mcp"}
    assert re.search(r"^frontend mcp$", haproxy, re.M)
    assert "histogram_quantile(0.99," in alerts["AgentAutomationSlowToolCalls"]["expr"]
    (outcomes,) = re.findall(r'outcome=~"([^"]+)"', alerts["AgentAutomationToolErrors"]["expr"])
    # Kinds the code has (a renamed kind breaks this test), each exported at 0 from a replica's start.
    assert set(outcomes.split("|")) == set(SERVICE_SIDE_FAILURES) <= _error_kinds()
    for alert in alerts.values():
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
        assert re.fullmatch(r"\d+[smh]", alert.get("for", "0s"))


def test_grafana_dashboard_is_a_configmap_for_the_sidecar_and_every_panel_reads_served_metrics() -> None:
    (config,) = _kustomize_kind("monitoring", "ConfigMap")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config["data"]["dashboard.json"])
    assert dashboard == json.loads((MONITORING / "dashboard.json").read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert {f"${name}" for name in variables} | {"$__rate_interval"} >= set(GRAFANA_VARIABLES)
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    read: set[str] = set()
    for panel in panels:
        assert panel["title"] and set(panel["gridPos"]) == {"h", "w", "x", "y"} and panel["targets"]
        assert len({target["refId"] for target in panel["targets"]}) == len(panel["targets"])
        for target in panel["targets"]:
            read |= _check_promql(target["expr"])
    # Every family the server exposes has a panel: calls, durations, refusals, token checks, upstream, pacing, Redis,
    # connections and streams, sign-in.
    families = {re.sub(r"_(total|bucket|count|sum|created)$", "", name) for name in EXPOSED}
    shown = {re.sub(r"_(total|bucket|count|sum|created)$", "", name)
             for name in read - SCRAPE_SERIES.keys() - OTHERS_SERIES.keys()}
    assert shown == families
    # And the balancer's connections: how full it is, and what it refuses per address.
    assert {"haproxy_frontend_current_sessions", "haproxy_frontend_denied_connections_total"} <= read
