"""Every tool's facts for the tests, in one place: a valid call, the requests it sends, what it may change.

Each cross-cutting test (names and toolsets, annotations, read-only listing, calls without a token, the
secrets scan, fuzzing, the fault matrix, confirmations, snapshots, the stdio scenario) loops over `CASES`,
and `tests/tools/test_catalogue.py` fails while a served tool has no entry here, or an entry says what the
tool does not do. Adding a tool means adding one `ToolCase`, in listing order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent_automation_mcp.api.statuses import STATUSES
from agent_automation_mcp.sandbox import ids
from agent_automation_mcp.toolsets import DEFAULT_TOOLSETS

# Seeded in the sandbox's demo organisation (the same for every seed).
REPO_ID: Final = ids.WRITABLE_REPO_ID
RUN_WITH_PR: Final = ids.RUN_WITH_PR_ID
PR_ID: Final = ids.PR_ID
LONG_RUN: Final = ids.LONG_RUN_ID
SANDBOX_ID: Final = ids.SANDBOX_WITH_LOGS
HOOK_URL: Final = "https://example.com/hook"
# The endings the status table says why of in words ("out of time"): a run that reached one of its limits.
ENDS_WITH_REASON: Final = tuple(status.value for status in STATUSES if status.reason)

Effect = Literal["reads", "writes", "destroys"]


@dataclass(frozen=True, slots=True)
class ToolCase:
    """`call` succeeds on the seeded sandbox with the organisation configured, and sends exactly `sends`
    (operations of the table, in order). A tool that `destroys` asks the user first when the client can ask."""

    name: str
    toolset: str
    call: dict[str, Any] = field(hash=False)
    sends: tuple[str, ...]
    effect: Effect = "reads"

    @property
    def read_only(self) -> bool:
        return self.effect == "reads"

    @property
    def destructive(self) -> bool:
        return self.effect == "destroys"

    @property
    def asks_first(self) -> bool:
        """Needs the user's confirmation (MCP elicitation) before it sends anything."""
        return self.destructive

    @property
    def default(self) -> bool:
        """Offered when no toolsets are chosen."""
        return self.toolset in DEFAULT_TOOLSETS


def _case(name: str, toolset: str, effect: Effect = "reads", sends: tuple[str, ...] | None = None,
          **call: Any) -> ToolCase:
    """Most tools send the one operation they are named after."""
    return ToolCase(name, toolset, call, (name,) if sends is None else sends, effect)


CASES: Final[tuple[ToolCase, ...]] = (
    _case("create_agent_run", "runs", "writes", prompt="x", repo_id=REPO_ID),
    _case("get_agent_run", "runs", sends=("list_agent_runs",), agent_run_id=RUN_WITH_PR),  # read among the newest
    _case("list_agent_runs", "runs"),
    _case("resume_agent_run", "runs", "writes", agent_run_id=RUN_WITH_PR, prompt="x"),
    _case("get_agent_run_logs", "logs", agent_run_id=LONG_RUN),
    _case("ban_checks", "checks", "destroys", agent_run_id=RUN_WITH_PR),
    _case("unban_checks", "checks", "writes", agent_run_id=RUN_WITH_PR),
    _case("remove_from_pull_request", "checks", "destroys", agent_run_id=RUN_WITH_PR),
    _case("edit_pull_request", "pulls", "destroys", ("edit_pull_request_simple",), pr_id=PR_ID, state="open"),
    _case("get_check_suite_settings", "settings", repo_id=REPO_ID),
    _case("update_check_suite_settings", "settings", "writes",  # reads first, to say what changed
          sends=("get_check_suite_settings", "update_check_suite_settings"), repo_id=REPO_ID, check_retry_count=2),
    _case("list_organizations", "org"),
    _case("list_users", "org"),
    _case("get_user", "org", sends=("get_current_user",)),
    _case("list_repositories", "org"),
    _case("list_integrations", "org"),
    _case("list_models", "org"),
    _case("generate_setup_commands", "setup", "writes", repo_id=REPO_ID),
    _case("analyze_sandbox_logs", "setup", "writes", sandbox_id=SANDBOX_ID),
    _case("get_oauth_token_status", "oauth"),
    _case("revoke_oauth_tokens", "oauth", "destroys", ("get_oauth_token_status", "revoke_oauth_tokens"),
          provider="github"),
    _case("get_webhook", "webhooks"),
    _case("set_webhook", "webhooks", "writes",  # reads first, to say whether a secret is removed
          sends=("get_webhook", "set_webhook"), url=HOOK_URL),
    _case("delete_webhook", "webhooks", "destroys", ("get_webhook", "delete_webhook")),  # says what it deleted
    _case("test_webhook", "webhooks", "writes", url=HOOK_URL),
)
BY_NAME: Final = {case.name: case for case in CASES}


def catalogue_gap(listed: Sequence[str], cases: Iterable[ToolCase] = CASES, *, ordered: bool = True) -> str:
    """What a server's listing of tools has beyond `cases` or lacks of them, said with the file to fix ("" when it
    lists exactly them, in their order unless not `ordered`): for every test that holds a listing to the catalogue."""
    expected = [case.name for case in cases]
    if (list(listed) if ordered else sorted(listed)) == (expected if ordered else sorted(expected)):
        return ""
    unlisted = [name for name in listed if name not in expected]
    missing = [name for name in expected if name not in listed]
    problems = [f"the server lists {', '.join(unlisted)}, which no ToolCase in tests/catalogue.py names with that "
                "toolset and effect: add one for each there, in listing order (or correct its ToolCase)"
                ] if unlisted else []
    if missing:
        problems.append(f"ToolCases in tests/catalogue.py the server does not list: {', '.join(missing)}: declare "
                        "each in the toolset its ToolCase names (toolset.tool(...) in tools/<toolset>.py), or "
                        "correct its ToolCase")
    return "; ".join(problems) or (f"tests/catalogue.py lists {expected}, the server {list(listed)}: order the "
                                   "ToolCases as the toolsets declare their tools")


def calls(cases: tuple[ToolCase, ...] | list[ToolCase] = CASES) -> dict[str, dict[str, Any]]:
    """Tool name → its valid call, for tests that loop over name and arguments."""
    return {case.name: case.call for case in cases}
