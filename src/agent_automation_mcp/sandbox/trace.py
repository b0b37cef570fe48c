"""Trace entries of an agent run, one builder per message type, fields populated as the contract's table says.

ACTION always has tool_name, tool_input and tool_output (often thought and observation); PLAN_EVALUATION always a
thought; ERROR and FINAL_ANSWER always an observation. Observations are strings or objects, as on the service.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

MESSAGE_TYPES: Final = (
    "ACTION", "PLAN_EVALUATION", "FINAL_ANSWER", "ERROR", "USER_MESSAGE", "USER_GITHUB_ISSUE_COMMENT",
    "INITIAL_PR_GENERATION", "DETECT_PR_ERRORS", "FIX_PR_ERRORS", "PR_CREATION_FAILED", "PR_EVALUATION",
    "COMMIT_EVALUATION", "AGENT_RUN_LINK",
)
_PR_TYPES: Final = ("COMMIT_EVALUATION", "PR_CREATION_FAILED", "INITIAL_PR_GENERATION", "DETECT_PR_ERRORS",
                    "FIX_PR_ERRORS", "PR_EVALUATION")
# The order a long fixture trace cycles through (FINAL_ANSWER or ERROR closes it).
_LONG_CYCLE: Final = ("PLAN_EVALUATION", "ACTION", "ACTION", "ACTION", "ERROR", "ACTION", "USER_MESSAGE",
                      "USER_GITHUB_ISSUE_COMMENT", "ACTION", "AGENT_RUN_LINK", *_PR_TYPES, "ACTION")


@dataclass(frozen=True, slots=True)
class TraceContext:
    """What the entries of one run talk about."""

    run_id: int
    prompt: str
    repo_full_name: str | None
    quirks: bool = False


def entry(run_id: int, created_at: str, message_type: str, *, thought: str | None = None,
          tool_name: str | None = None, tool_input: dict[str, Any] | None = None,
          tool_output: dict[str, Any] | str | None = None, observation: dict[str, Any] | str | None = None
          ) -> dict[str, Any]:
    """An `AgentRunLogResponse`, every key present like on the service."""
    return {"agent_run_id": run_id, "created_at": created_at, "tool_name": tool_name, "message_type": message_type,
            "thought": thought, "observation": observation, "tool_input": tool_input, "tool_output": tool_output}


def segment_types(rng: random.Random, *, first: bool, has_repo: bool, outcome: str) -> list[str]:
    """The message types of one stretch of work (a run's first, or one resume), in order."""
    def actions(low: int, high: int) -> list[str]:
        return ["ACTION"] * rng.randint(low, high)

    final = "FINAL_ANSWER" if outcome == "COMPLETE" else "ERROR"
    if not first:
        tail = ["COMMIT_EVALUATION"] if has_repo else []
        return ["USER_MESSAGE", "PLAN_EVALUATION", *actions(1, 3), *tail, final]
    types = ["PLAN_EVALUATION", "USER_GITHUB_ISSUE_COMMENT", *actions(2, 4), "ERROR", *actions(1, 2),
             "USER_MESSAGE", "PLAN_EVALUATION", "AGENT_RUN_LINK", *actions(1, 2)]
    if has_repo:
        types += [*_PR_TYPES[:5], *actions(1, 1), _PR_TYPES[5]]
    return [*types, final]


def long_trace_types(count: int, outcome: str | None) -> list[str]:
    """`count` types cycling through all of them, closed by FINAL_ANSWER or ERROR unless `outcome` is None."""
    if count <= 0:
        return []
    closing = {"COMPLETE": ["FINAL_ANSWER"], "ERROR": ["ERROR"]}.get(outcome or "", [])
    body = [_LONG_CYCLE[i % len(_LONG_CYCLE)] for i in range(count - len(closing))]
    return [*body, *closing]


def build_entry(message_type: str, rng: random.Random, ctx: TraceContext, created_at: str, *,
                fatal: bool = False, text: str | None = None) -> dict[str, Any]:
    """One entry of `message_type`. `fatal` marks the ERROR that ends a run; `text` is a user message's text."""
    fields = _BUILDERS[message_type](rng, ctx, fatal=fatal, text=text)
    return entry(ctx.run_id, created_at, message_type, **fields)


Fields = dict[str, Any]
_FILES: Final = ("src/app/models.py", "src/app/views.py", "tests/test_views.py", "README.md", "pyproject.toml",
                 "src/app/settings.py", "docs/usage.md")
_CHECKS: Final = ("build", "lint", "unit-tests", "e2e")
_PEOPLE: Final = ("octocat", "mona", "hubot", "sandbox-reviewer")


def _pick(rng: random.Random, options: tuple[str, ...]) -> str:
    return options[rng.randrange(len(options))]


def _action(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    path = _pick(rng, _FILES)
    tool = rng.randrange(4)
    tool_input: Fields
    if tool == 0:
        name, tool_input = "ripgrep_search", {"query": _pick(rng, ("def ", "TODO", "import ", "raise ")), "path": "src"}
        output: dict[str, Any] = {"matches": rng.randint(0, 40), "files": [path]}
    elif tool == 1:
        name, tool_input = "view_file", {"filepath": path, "start_line": 1, "end_line": rng.randint(40, 400)}
        output = {"content": f"# {path}\n...", "total_lines": rng.randint(40, 900)}
    elif tool == 2:
        name, tool_input = "edit_file", {"filepath": path, "edit": "replace the failing branch with a guard clause"}
        output = {"success": True, "diff": f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@"}
    else:
        name, tool_input = "run_command", {"command": _pick(rng, ("pytest -q", "ruff check .", "npm test", "make"))}
        output = {"exit_code": rng.choice((0, 0, 1)), "stdout": "collected 42 items\n42 passed", "stderr": ""}
    tool_output: dict[str, Any] | str = output
    if ctx.quirks and rng.random() < 0.3:
        tool_output = str(output)  # the service sometimes sends the tool's output as plain text
    thought = f"Next I use {name} on {path}." if rng.random() < 0.75 else None
    observation: Fields | str | None = None
    if rng.random() < 0.7:
        observation = (f"{name} finished; the result looks as expected." if rng.random() < 0.5
                       else {"summary": f"{name} succeeded", "files_touched": [path]})
    return {"tool_name": name, "tool_input": tool_input, "tool_output": tool_output, "thought": thought,
            "observation": observation}


def _plan_evaluation(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    steps = ["read the relevant code", "make the change", "run the tests", "open a pull request"]
    fields: Fields = {"thought": f"Plan for '{ctx.prompt[:60]}': " + "; ".join(steps[: rng.randint(2, 4)]) + "."}
    if rng.random() < 0.5:
        fields["observation"] = {"plan": steps, "step": rng.randint(1, len(steps))}
    if rng.random() < 0.1:
        fields.update(tool_name="todo_write", tool_input={"todos": steps}, tool_output={"saved": len(steps)})
    return fields


def _error(rng: random.Random, ctx: TraceContext, *, fatal: bool = False, **_: Any) -> Fields:
    if fatal:
        return {"observation": {"error_type": "AgentExecutionError",
                                "message": "The agent stopped: the sandbox could not install the dependencies.",
                                "retryable": False}}
    fields: Fields = {}
    if rng.random() < 0.5:
        fields.update(tool_name="run_command", tool_input={"command": "pytest -q"})
        fields["observation"] = "Command failed with exit code 1: 2 tests failed"
    else:
        fields["observation"] = {"error_type": "ToolTimeout", "message": "The tool did not answer within 120 s"}
    return fields


def _final_answer(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    answer = f"Done: {ctx.prompt[:80]}" + (f" (see the pull request on {ctx.repo_full_name})." if ctx.repo_full_name
                                          else ".")
    fields: Fields = {"observation": answer if rng.random() < 0.7 else {"answer": answer, "confidence": "high"}}
    if rng.random() < 0.5:
        fields["thought"] = "All steps are complete and the checks pass."
    return fields


def _user_message(rng: random.Random, ctx: TraceContext, *, text: str | None = None, **_: Any) -> Fields:
    return {"observation": text if text is not None else "Please also update the docs while you are at it."}


def _issue_comment(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    number = rng.randint(1, 500)
    repo = ctx.repo_full_name or "sandbox-org/web-app"
    return {"observation": {"author": _pick(rng, _PEOPLE), "body": "This still fails on the main branch.",
                            "issue_number": number, "url": f"https://github.com/{repo}/issues/{number}"}}


def _initial_pr(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    # The pull request's url and number are filled in when the run reaches this entry and the PR exists.
    return {"thought": "The change is ready; opening a pull request.",
            "observation": {"title": f"Codegen: {ctx.prompt[:50]}", "head_branch_name": _branch(ctx)}}


def _detect_pr_errors(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    check = _pick(rng, _CHECKS)
    return {"observation": {"failed_checks": [check], "summary": f"The {check} check failed on the pull request."}}


def _fix_pr_errors(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    return {"thought": "Fixing the failing check.", "tool_name": "edit_file",
            "tool_input": {"filepath": _pick(rng, _FILES), "edit": "fix the lint error"},
            "tool_output": {"success": True}, "observation": "Pushed a fix commit to the pull request branch."}


def _pr_creation_failed(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    return {"observation": "GitHub refused the pull request (the branch was not pushed yet); retrying."}


def _pr_evaluation(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    return {"thought": "Reviewing the pull request diff.",
            "observation": {"verdict": _pick(rng, ("ready", "ready", "needs_changes")), "comments": rng.randint(0, 5)}}


def _commit_evaluation(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    return {"observation": {"commit_sha": f"{rng.getrandbits(160):040x}", "message": "Apply the requested change",
                            "verdict": "ok"}}


def _agent_run_link(rng: random.Random, ctx: TraceContext, **_: Any) -> Fields:
    linked = max(1, ctx.run_id - rng.randint(1, 50))
    return {"observation": {"linked_agent_run_id": linked, "relation": "parent",
                            "web_url": f"https://codegen.com/agent/trace/{linked}"}}


def _branch(ctx: TraceContext) -> str:
    return f"codegen-bot/run-{ctx.run_id}"


_BUILDERS: Final[dict[str, Callable[..., Fields]]] = {
    "ACTION": _action, "PLAN_EVALUATION": _plan_evaluation, "FINAL_ANSWER": _final_answer, "ERROR": _error,
    "USER_MESSAGE": _user_message, "USER_GITHUB_ISSUE_COMMENT": _issue_comment,
    "INITIAL_PR_GENERATION": _initial_pr, "DETECT_PR_ERRORS": _detect_pr_errors, "FIX_PR_ERRORS": _fix_pr_errors,
    "PR_CREATION_FAILED": _pr_creation_failed, "PR_EVALUATION": _pr_evaluation,
    "COMMIT_EVALUATION": _commit_evaluation, "AGENT_RUN_LINK": _agent_run_link,
}
assert set(_BUILDERS) == set(MESSAGE_TYPES)
