"""What people ask of a pull request or an agent run that the service cannot do, each with the closest thing that can.

One table, read where a model reaches for one of them at no cost to the tools' descriptions: the instructions say
them all (`said`), a value asking for one is refused naming it (`refuse_missing`: `edit_pull_request(state="merged")`),
and a call of a tool named for one (`merge_pull_request`) is answered with it (`named_in`). Each was checked against
the service's operations (docs/tools.md, "What the service cannot do"): the service edits a pull request's state only
(open, closed, draft, ready for review), and a run only starts, resumes, and has its pull request's checks banned
(stopping a run is missing only while no operation of the table stops one: `RUN_STOPPERS`, `CLOSEST_TO_CANCEL`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic_core import PydanticCustomError

from ..wording import listed
from .checks import CLOSEST_TO_CANCEL
from .errors import ASKED_CHARS, MISSING_ERROR

Target = Literal["pull request", "agent run"]
PULL_REQUEST: Final[Target] = "pull request"
AGENT_RUN: Final[Target] = "agent run"
IN_GITHUB: Final = ("the user does that in GitHub at the pull request's url, from pull_requests of get_agent_run "
                    "(edit_pull_request sets only open, closed, draft or ready_for_review: closed is not merged)")
FOLLOW_UP: Final = "resume_agent_run sends the run a follow-up instruction, and create_agent_run starts a new run"
# How a tool's name names each target, word by word.
TARGET_WORDS: Final[dict[Target, frozenset[str]]] = {
    PULL_REQUEST: frozenset({"pull", "pulls", "pr", "prs", "check", "checks", "ci"}),
    AGENT_RUN: frozenset({"run", "runs", "agent", "agents", "task", "job"}),
}
READING: Final = frozenset({"get", "list", "read", "show", "fetch", "search", "find", "view"})  # a name's first word


@dataclass(frozen=True, slots=True)
class MissingAction:
    """One thing people ask that the service cannot do: `verb` as a sentence writes it before its target ("comment on"
    a pull request), the `words` a tool's name or a value asks for it with (several words joined by `_`), and the
    `closest` thing that can be done, as a clause that names no pronoun's noun (the instructions carry it)."""

    verb: str
    target: Target
    words: tuple[str, ...]
    closest: str

    @property
    def what(self) -> str:
        return f"{self.verb} {_one(self.target)}"


def _stopping(closest: str | None) -> tuple[MissingAction, ...]:
    """Stopping a run, while the service cannot (`closest` is then the tool that comes closest); once an operation
    stops one (`RunEffect.STOPS`), a tool does and nothing is missing."""
    if closest is None:
        return ()
    return (MissingAction("stop", AGENT_RUN, ("stop", "stopped", "cancel", "cancelled", "canceled", "abort", "kill",
                                              "terminate", "halt", "interrupt", "pause", "paused", "suspend"),
                          f"{closest} stops every agent working on the run's pull request (a run without a pull "
                          "request goes on)"),)


MISSING_ACTIONS: Final = (
    MissingAction("merge", PULL_REQUEST, ("merge", "merged", "merging", "squash", "rebase"), IN_GITHUB),
    MissingAction("approve", PULL_REQUEST, ("approve", "approved", "approval", "lgtm"), IN_GITHUB),
    MissingAction("review", PULL_REQUEST, ("review", "reviewed", "request_changes", "changes_requested"), IN_GITHUB),
    MissingAction("comment on", PULL_REQUEST, ("comment", "commented", "comments", "reply"), IN_GITHUB),
    MissingAction("rename", PULL_REQUEST, ("rename", "renamed", "retitle", "title", "description"), IN_GITHUB),
    MissingAction("request reviewers for", PULL_REQUEST, ("request_review", "request_reviewers", "reviewer",
                                                          "reviewers", "assign", "assignee"), IN_GITHUB),
    MissingAction("label", PULL_REQUEST, ("label", "labels", "labeled", "tag"), IN_GITHUB),
    MissingAction("re-run the checks of", PULL_REQUEST, ("rerun", "re_run", "retrigger", "rerun_checks",
                                                         "retry_checks", "run_checks", "restart_checks"), IN_GITHUB),
    MissingAction("delete", PULL_REQUEST, ("delete", "deleted", "destroy"),
                  "edit_pull_request with state closed closes a pull request (GitHub deletes none)"),
    *_stopping(CLOSEST_TO_CANCEL),
    MissingAction("delete", AGENT_RUN, ("delete", "deleted", "remove", "archive", "purge", "destroy"),
                  "every run stays listed"),
    MissingAction("change the prompt of", AGENT_RUN, ("edit", "update", "change", "modify", "rename", "set_prompt",
                                                      "edit_prompt", "update_prompt", "reprompt"),
                  FOLLOW_UP),
    MissingAction("re-run", AGENT_RUN, ("rerun", "re_run", "retry", "restart"), FOLLOW_UP),
)


def said() -> list[str]:
    """The instructions' sentences, one per target: what the service cannot do, and the closest things (the guide
    cuts them to the tools a request is offered)."""
    sentences = []
    for target in (PULL_REQUEST, AGENT_RUN):
        actions = [action for action in MISSING_ACTIONS if action.target == target]
        verbs = listed([action.verb for action in actions], "or")
        closest = "; ".join(dict.fromkeys(action.closest for action in actions))
        sentences.append(f"The service cannot {verbs} {_one(target)}: {closest}")
    return sentences


def refuse_missing(target: Target, allowed: tuple[str, ...]) -> Callable[[Any], Any]:
    """A validator, before the argument's own type (the `allowed` values), that refuses a value asking for what the
    service cannot do to `target`, naming the value asked and why, with the closest thing as the refusal's hint
    (`tools.errors.argument_error`). A value that is an allowed one misspelt is left to the type's own refusal."""

    def check(value: Any) -> Any:
        if not isinstance(value, str) or len(value) > ASKED_CHARS or "_".join(words := _words(value)) in allowed:
            return value
        action = _asked_for(words, target)
        if action is not None:
            raise PydanticCustomError(MISSING_ERROR, "{message}", {
                "message": f'asked "{value}": the service cannot {action.what}', "hint": _hint(action)})
        return value

    return check


def named_in(tool: str) -> str:
    """For a tool that does not exist, named for something the service cannot do (`merge_pull_request`): what and the
    closest thing, as sentences; else nothing. A name that asks to read (`get_pr_comments`) is not an action."""
    words = _words(tool)
    if not words or words[0] in READING:
        return ""
    named = {target for target, known in TARGET_WORDS.items() if known & set(words)} or set(TARGET_WORDS)
    found = [action for target in (PULL_REQUEST, AGENT_RUN)
             if target in named and (action := _asked_for(words, target)) is not None]
    return " ".join(f"No tool can {action.what}: the service cannot. {_hint(action)}" for action in found)


def _hint(action: MissingAction) -> str:
    return f"Nothing was sent: {action.closest}."


def _asked_for(words: tuple[str, ...], target: Target) -> MissingAction | None:
    """The action on `target` that `words` ask for: the one whose words cover most of them."""
    scored = [(_matches(action, words), action) for action in MISSING_ACTIONS if action.target == target]
    best = max(scored, key=lambda pair: pair[0], default=(0, None))
    return best[1] if best[0] else None


def _matches(action: MissingAction, words: tuple[str, ...]) -> int:
    """How many of `words` the longest of the action's words covers, in a row; 0 for none."""
    joined = f"_{'_'.join(words)}_"
    return max((word.count("_") + 1 for word in action.words if f"_{word}_" in joined), default=0)


def _words(text: str) -> tuple[str, ...]:
    """`mergePullRequest`, `merge-pull-request`, `Merge pull request` → (merge, pull, request)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text)
    return tuple(word for word in re.split(r"[^a-z0-9]+", spaced.lower()) if word)


def _one(target: Target) -> str:
    return f"{'an' if target == AGENT_RUN else 'a'} {target}"

