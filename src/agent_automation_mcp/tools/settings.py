"""Toolset `settings`: a repository's check-suite settings (how failed CI checks are retried and fixed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from ..api.errors import InvalidRequestError
from ..api.models import CheckSuiteSettings
from ..api.params import MAX_CHECKS, CheckLists, CheckName, CheckPrompt, CheckRetryCount, Id, RetryCount
from .callers import client_for
from .declarations import Toolset
from .results import Output, counted, label, ok

toolset = Toolset("settings", "Read and change a repository's check-suite settings.", budget=420)

RepoId = Annotated[Id, Field(description="Repository id; see list_repositories.")]
# Maps merge key by key: a null value removes the key. The client's types check the merged map before it is sent.
RetryCountChanges = Annotated[dict[CheckName, RetryCount | None], Field(max_length=MAX_CHECKS)]
PromptChanges = Annotated[dict[CheckName, CheckPrompt | None], Field(max_length=MAX_CHECKS)]


class EntryChanges(Output):
    """What a list or map setting gained and lost (for a map, by key; `changed`: keys whose value changed)."""

    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)


class SettingsChange(Output):
    repo_id: int
    changed: list[str]  # settings given that differed from what the service had, and its answer shows as given
    already: list[str]  # settings given that were already so: left as they were
    unconfirmed: list[str] = Field(default_factory=list)  # sent to change, but its answer does not show them
    not_applied: list[str] = Field(default_factory=list)  # sent to change, but its answer shows another value
    before: dict[str, Any] = Field(default_factory=dict)  # the values of the settings sent to change, before
    entries: dict[str, EntryChanges] = Field(default_factory=dict)  # of the lists and maps sent to change
    response: dict[str, Any]


@toolset.tool("Get check-suite settings", "get_check_suite_settings")
async def get_check_suite_settings(repo_id: RepoId, ctx: Context) -> Annotated[CallToolResult, CheckSuiteSettings]:
    """Read how a repository's failed CI checks are handled: retries, ignored checks, prompts per check,
    apps handled first."""
    out = await (await client_for(ctx)).get_check_suite_settings(repo_id)
    retries = "an unreported number of times" if out.check_retry_count is None else counted(out.check_retry_count,
                                                                                               "time")
    return ok(out, f"Repository {repo_id}: retry failed checks {retries}, "
                   f"{counted(len(out.ignored_checks), 'ignored check')}")


@toolset.tool("Update check-suite settings", "get_check_suite_settings", "update_check_suite_settings")
async def update_check_suite_settings(
    repo_id: RepoId, ctx: Context,
    check_retry_count: CheckRetryCount | None = None,
    ignored_checks: Annotated[CheckLists | None, Field(description="Check names to ignore.")] = None,
    check_retry_counts: Annotated[RetryCountChanges | None, Field(description="Retry count per check name.")] = None,
    custom_prompts: Annotated[PromptChanges | None, Field(description="Fix instructions per check name.")] = None,
    high_priority_apps: Annotated[CheckLists | None, Field(
        description="Apps whose check failures are handled immediately.")] = None,
) -> Annotated[CallToolResult, SettingsChange]:
    """Change a repository's check-suite settings; only those given change. A list replaces the current one
    unless every entry is +name or -name (add, remove); a map merges by key (null removes one). The result
    says what changed, from what."""
    asked = {name: value for name, value in {
        "check_retry_count": check_retry_count, "ignored_checks": ignored_checks,
        "check_retry_counts": check_retry_counts, "custom_prompts": custom_prompts,
        "high_priority_apps": high_priority_apps}.items() if value is not None}
    for name, value in asked.items():
        if isinstance(value, list):
            _list_edit(name, value)  # refused before any request
    client = await client_for(ctx)
    before = (await client.get_check_suite_settings(repo_id)).model_dump() if asked else {}
    given = {name: _applied(name, value, before.get(name)) for name, value in asked.items()}
    response = await client.update_check_suite_settings(repo_id, **given)
    return settings_result(repo_id, given, before, response)


def _list_edit(name: str, entries: list[str]) -> list[tuple[str, str]] | None:
    """`+name`/`-name` entries as (sign, name), or None for a whole list; a mix, or a bare sign, is refused."""
    signed = [entry[:1] in ("+", "-") for entry in entries]
    if not entries or not any(signed):
        return None
    if not all(signed) or any(len(entry) < 2 for entry in entries):
        raise InvalidRequestError(
            f"update_check_suite_settings: {name} mixes +name/-name entries with plain names, or has a bare sign",
            operation="update_check_suite_settings",
            hint=f"Give {name} as the whole list, or only +name (add) and -name (remove) entries.")
    return [(entry[0], entry[1:]) for entry in entries]


def _applied(name: str, value: Any, current: Any) -> Any:
    """The value to send: a whole list as given, a list edited with +/- entries, a map merged into the current one."""
    if isinstance(value, list):
        edit = _list_edit(name, value)
        if edit is None:
            return value
        result = list(current) if isinstance(current, list) else []
        for sign, entry in edit:
            if sign == "+" and entry not in result:
                result.append(entry)
            elif sign == "-":
                result = [item for item in result if item != entry]
        return result
    if isinstance(value, dict):
        merged = dict(current) if isinstance(current, dict) else {}
        for key, item in value.items():
            if item is None:
                merged.pop(key, None)
            else:
                merged[key] = item
        return merged
    return value


def _entries(before: Any, after: Any) -> EntryChanges | None:
    """The entries a list or map gained and lost, or None for a setting that is neither."""
    if isinstance(after, list):
        old = before if isinstance(before, list) else []
        return EntryChanges(added=[e for e in after if e not in old], removed=[e for e in old if e not in after])
    if isinstance(after, dict):
        had = before if isinstance(before, dict) else {}
        return EntryChanges(added=[k for k in after if k not in had], removed=[k for k in had if k not in after],
                            changed=[k for k in after if k in had and had[k] != after[k]])
    return None


def _names(values: list[str], said: Callable[[str], str] = str) -> str:
    """Names for a summary, each as `said` writes it: those that are short identifiers, and a count of the others
    (text from elsewhere)."""
    shown = [said(value) for value in values if label(value, "") == value]
    more = len(values) - len(shown)
    return ", ".join([*shown, *([f"{more} {'more' if shown else 'names'} (in the result)"] if more else [])])


def _value(value: Any) -> str:
    """A map entry's value in a summary: a number or a short identifier as it is; text by its length (the result
    holds it: a summary repeats no text from elsewhere)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return value if label(value, "") == value else f"{len(value)}-character text"
    return "(in the result)"


def _what_changed(name: str, before: Any, after: Any, entries: EntryChanges | None) -> str:
    """A setting's change in words: `check_retry_count 3 → 5`, `ignored_checks (added e2e; removed lint)`,
    `check_retry_counts (added build: 3; removed lint (was 2); changed unit-tests: 1 → 2)`."""
    if entries is None:
        return f"{name} {'unset' if before is None else label(str(before), '?')} → {label(str(after), '?')}"
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}
    said: dict[str, Callable[[str], str]] = {"added": str, "removed": str, "changed": str}
    if isinstance(after, dict):  # a map's entries with their values, from and to
        said = {"added": lambda key: f"{key}: {_value(new[key])}",
                "changed": lambda key: f"{key}: {_value(old[key])} → {_value(new[key])}",
                "removed": lambda key: f"{key} (was {_value(old[key])})"}
    parts = [f"{verb} {_names(keys, said[verb])}" for verb, keys in
             (("added", entries.added), ("removed", entries.removed), ("changed", entries.changed)) if keys]
    return f"{name} ({'; '.join(parts)})" if parts else name


def settings_result(repo_id: int, given: dict[str, Any], before: dict[str, Any],
                    response: dict[str, Any]) -> CallToolResult:
    """What an update did, from the settings before it and the service's answer: changed (and shown so), already
    so, sent but not shown (the answer is untyped), or shown with another value. Each change says from what: a
    number from and to, a list or map by the entries added, removed and changed."""
    changed = [name for name, value in given.items() if before.get(name) != value]
    already = [name for name in given if name not in changed]
    unconfirmed = [name for name in changed if name not in response]
    not_applied = [name for name in changed if name in response and response[name] != given[name]]
    entries = {name: found for name in changed if (found := _entries(before.get(name), given[name])) is not None}
    out = SettingsChange(repo_id=repo_id, changed=[n for n in changed if n not in unconfirmed + not_applied],
                         already=already, unconfirmed=unconfirmed, not_applied=not_applied,
                         before={name: before.get(name) for name in changed}, entries=entries, response=response)

    def what(name: str) -> str:
        return _what_changed(name, before.get(name), given[name], entries.get(name))

    parts = [f"changed {', '.join(map(what, out.changed))}" if out.changed else "changed nothing",
             *([f"already so (left as they were): {', '.join(already)}"] if already else []),
             *([f"sent {', '.join(map(what, unconfirmed))}, accepted; the answer does not show the new values"]
               if unconfirmed else []),
             *([f"the service's answer shows other values for {', '.join(not_applied)}"] if not_applied else [])]
    return ok(out, f"Repository {repo_id}: {'; '.join(parts)}")
