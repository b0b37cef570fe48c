"""What each tool tells of the service's answers, in one place: the fields a result carries under another name or
leaves out (and why), where what a user writes is read back, and what the service never reports.

`docs/tools.md` is generated from these tables (`UPDATE_DOCS=1 .venv/bin/pytest tests/test_docs.py`), and
`tests/tools/test_answers.py` holds them to the reference OpenAPI and the tools: a field an operation's answer
carries that a tool's result neither shows nor leaves out here with its reason fails it, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType, UnionType
from typing import Annotated, Any, Final, Union, get_args, get_origin

from pydantic import BaseModel

from ..api.models import OAuthToken
from .org import Repository
from .registry import all_tools
from .runs import PR_FIELDS_SHOWN, Run


@dataclass(frozen=True, slots=True)
class Answer:
    """How a tool's result carries the service's answer to one of its operations.

    Fields are named by their path in the answer (`items[].github_pull_requests[].id`). Each is in the result under
    the same path unless `renamed` maps it (or the field it is in) to another, or `whole` names where the answer is
    kept as it came; `left_out` gives the reason for each field the result does not carry. `read_for`: the tool
    reads this operation only to find something, and its answer is not the result. `listed` is derived, never
    written (`derived_answer`): the result's one list field, which carries the items of an answer that is a bare list.
    """

    renamed: Mapping[str, str] = field(default_factory=dict)
    left_out: Mapping[str, str] = field(default_factory=dict)
    whole: str | None = None
    read_for: str | None = None
    listed: str | None = None

    def result_path(self, path: str) -> str:
        """Where the result carries the answer's field `path` (the longest renamed prefix applies)."""
        if self.whole is not None:
            return f"{self.whole}.{path}" if path else self.whole
        for prefix in sorted(self.renamed, key=len, reverse=True):
            if path == prefix or path.startswith((f"{prefix}.", f"{prefix}[]")):
                return self.renamed[prefix] + path[len(prefix):]
        if self.listed is not None and path.startswith("[]"):
            return self.listed + path
        return path

    def answer_paths(self, result_path: str) -> set[str]:
        """The fields of the answer the result may carry at `result_path` (`result_path` the other way): under the
        `listed` field, the item of a bare list as well as the field of the same name."""
        for prefix, renamed in sorted(self.renamed.items(), key=lambda item: len(item[1]), reverse=True):
            if result_path == renamed or result_path.startswith((f"{renamed}.", f"{renamed}[]")):
                return {prefix + result_path[len(renamed):]}
        if self.listed is not None and result_path.startswith(f"{self.listed}[]"):
            return {result_path, result_path[len(self.listed):]}
        return {result_path}

    def within(self, answer_at: str, result_at: str) -> Answer:
        """This answer of one resource, for a result that carries the resource at `answer_at` at `result_at`."""
        return Answer(renamed={_joined(answer_at, key): _joined(result_at, to) for key, to in self.renamed.items()},
                      left_out={_joined(answer_at, key): why for key, why in self.left_out.items()})


def _joined(prefix: str, path: str) -> str:
    return f"{prefix}.{path}" if prefix and path else prefix or path


_PAGING: Final = ("the page's number, size and count: next_skip says where the next page starts, total how many "
                  "there are")
_PAGE: Final = MappingProxyType({"page": _PAGING, "size": _PAGING, "pages": _PAGING})
_PULL_REQUESTS: Final = MappingProxyType({"github_pull_requests": "pull_requests",
                                          "github_pull_requests[].id": "pull_requests[].pr_id"})
_TRACE_RUN: Final = ("the run's own fields, the same on every page of its trace: get_agent_run shows them (result and "
                     "metadata are long)")
_EDIT: Final = Answer(left_out={
    "success": "said by the result itself: false makes the call an operation_failed error",
    "error": "the message of that operation_failed error (the whole answer is in its details)",
})
_PREVIOUS: Final = Answer(whole="previous")

# Per tool, the operations it may send (as `toolset.tool` names them) whose answer reaches the result otherwise than
# field for field under the same names; an operation not named here is `SHOWN` (see `answer_for`).
ANSWERS: Final[Mapping[str, Mapping[str, Answer]]] = MappingProxyType({
    "get_agent_run": {
        "list_agent_runs": Answer(read_for="the run among the newest runs, read once per poll interval for every run "
                                           "followed (run_status.py): the run found there is the result"),
        "get_agent_run_logs": Answer(read_for="when the newest trace entry of a run not finished was (last_step_at, "
                                              "last_step_seconds)"),
    },
    "list_agent_runs": {"list_agent_runs": Answer(renamed={"items": "runs"}, left_out=_PAGE)},
    "get_agent_run_logs": {"get_agent_run_logs": Answer(
        renamed={"id": "agent_run_id", "logs": "entries"},
        left_out={**dict.fromkeys(("organization_id", "created_at", "web_url", "result", "metadata"), _TRACE_RUN),
                  "logs[].agent_run_id": "the same for every entry: the page's agent_run_id",
                  **dict.fromkeys(("page", "size", "pages"),
                                  "the page's number, size and count: next_skip says where the trace goes on, "
                                  "total_logs how long it is")})},
    "ban_checks": {"ban_checks": Answer(whole="response")},
    "unban_checks": {"unban_checks": Answer(whole="response")},
    "remove_from_pull_request": {"remove_from_pull_request": Answer(whole="response")},
    "edit_pull_request": {
        "edit_pull_request_simple": _EDIT, "edit_pull_request": _EDIT,
        "list_agent_runs": Answer(read_for="the pr_id of a pull request named by its URL or number"),
        "list_repositories": Answer(read_for="a repository's owner/name, from its repo_id"),
    },
    "update_check_suite_settings": {
        "get_check_suite_settings": Answer(read_for="what each setting given was before (before, entries)"),
        "update_check_suite_settings": Answer(whole="response"),
    },
    "list_organizations": {"list_organizations": Answer(renamed={"items": "organizations"}, left_out=_PAGE)},
    "list_users": {"list_users": Answer(renamed={"items": "users"}, left_out=_PAGE)},
    "list_repositories": {"list_repositories": Answer(renamed={"items": "repositories"}, left_out=_PAGE)},
    "revoke_oauth_tokens": {
        "get_oauth_token_status": Answer(read_for="the provider as the service spells it, and its active tokens "
                                                  "before (active_before)"),
        "revoke_oauth_tokens": Answer(whole="response"),
    },
    "set_webhook": {"get_webhook": _PREVIOUS, "set_webhook": Answer(whole="response")},
    "delete_webhook": {"get_webhook": _PREVIOUS, "delete_webhook": Answer(whole="response")},
    "test_webhook": {"test_webhook": Answer(whole="response")},
})

# How a result model carries the service's resource, for every tool whose result holds it (whole, or as the items of
# a list, at any depth): written once for the model, not for each tool. A subclass (`WaitedRun`) is carried alike.
CARRIED: Final[Mapping[type[BaseModel], Answer]] = MappingProxyType({
    Run: Answer(renamed=_PULL_REQUESTS),
    Repository: Answer(left_out={"name": "the part of full_name after the slash"}),
})

SHOWN: Final = Answer()  # every field of the answer is in the result under its own name


def answer_for(tool: str, operation: str) -> Answer:
    """How `tool`'s result carries the answer to `operation`: as ANSWERS says, else every field as it is (`SHOWN`),
    with what CARRIED says of each model its result holds; tests/tools/test_answers.py checks the whole against the
    reference. An answer that is a bare list has its items in the result's one list field (`get_oauth_token_status`:
    `[]` is `tokens[]`), unless the entry maps `[]` itself."""
    (output,) = [spec.output for spec in all_tools() if spec.name == tool]
    return derived_answer(output, ANSWERS.get(tool, {}).get(operation, SHOWN))


def derived_answer(output: type[BaseModel], answer: Answer) -> Answer:
    """`answer`, declared for a result of model `output`, with the two rules applied: a bare list's items in the one
    list field, and what CARRIED says of each model the result holds."""
    if answer.whole is not None or answer.read_for is not None:
        return answer
    listed = [name for name, info in output.model_fields.items() if _unwrapped(info.annotation)[1]]
    if "[]" not in answer.renamed and len(listed) == 1:
        answer = replace(answer, listed=listed[0])
    for result_at, model in _models_in(output):
        carried = next((CARRIED[base] for base in model.__mro__ if base in CARRIED), None)
        if carried is None:
            continue
        for answer_at in answer.answer_paths(result_at):
            inner = carried.within(answer_at, result_at)
            answer = replace(answer, renamed={**inner.renamed, **answer.renamed},
                             left_out={**inner.left_out, **answer.left_out})
    return answer


def _models_in(model: type[BaseModel], at: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """Each model a result model holds, with where (`runs[]`, `runs[].pull_requests[]`), itself first."""
    yield at, model
    for name, info in model.model_fields.items():
        inner, lists = _unwrapped(info.annotation)
        if isinstance(inner, type) and issubclass(inner, BaseModel) and inner is not model:
            yield from _models_in(inner, _joined(at, name + "[]" * lists))


def _unwrapped(annotation: Any) -> tuple[Any, int]:
    """The type a field holds, without `| None` and `Annotated`, and how many lists deep (`list[X] | None`: X, 1)."""
    lists = 0
    while True:
        origin, args = get_origin(annotation), get_args(annotation)
        options = [arg for arg in args if arg is not type(None)]
        if origin is list:
            lists += 1
            annotation = args[0]
        elif origin is Annotated or (origin in (Union, UnionType) and len(options) == 1):
            annotation = options[0] if origin is not Annotated else args[0]
        else:
            return annotation, lists


# Fields the service sends that the OpenAPI does not declare (codegen-api-facts.md, section 6): its OAuth token
# status is declared as any JSON, and is read as a list of the connections `api.models.OAuthToken` describes.
BEYOND_OPENAPI: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType({
    "get_oauth_token_status": tuple(f"[].{name}" for name in OAuthToken.model_fields),
    # A pull request's state and whether it was merged, as Codegen's CLI reads them, when the service sends them.
    **{operation: tuple(f"{at}github_pull_requests[].{name}" for name in PR_FIELDS_SHOWN)
       for operation, at in (("get_agent_run", ""), ("create_agent_run", ""), ("resume_agent_run", ""),
                             ("list_agent_runs", "items[]."))},
})

# Arguments that name what a tool acts on, rather than a value it stores.
TARGETS: Final = frozenset({"agent_run_id", "pr_id", "pr_url", "number", "repo_id", "sandbox_id", "provider"})

# Per tool that writes, each value it lets a user write (every argument but TARGETS) and where it is read back.
WRITTEN: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType({
    "create_agent_run": {
        "prompt": "not returned by the service (get_agent_run says so)",
        "repo_id": "not returned by the service; get_agent_run's pull request URLs name the repository",
        "model": "not returned by the service (get_agent_run says so)",
        "agent_type": "not returned by the service (get_agent_run says so)",
        "metadata": "get_agent_run and list_agent_runs (metadata), which also finds runs by it",
        "images": "not returned by the service (get_agent_run says so)",
    },
    "resume_agent_run": {
        "prompt": "not returned with the run; get_agent_run_logs shows follow-ups as USER_MESSAGE entries",
        "model": "not returned by the service (get_agent_run says so)",
    },
    "edit_pull_request": {"state": "not returned by the service (get_agent_run says so); the edit's own result "
                                   "gives the state the service reports"},
    "update_check_suite_settings": dict.fromkeys(
        ("check_retry_count", "ignored_checks", "check_retry_counts", "custom_prompts", "high_priority_apps"),
        "get_check_suite_settings"),
    "generate_setup_commands": {"prompt": "not returned by the service; the run's result (get_agent_run) holds the "
                                          "commands"},
    "set_webhook": {"url": "get_webhook", "enabled": "get_webhook",
                    "secret": "never returned by the service; get_webhook's has_secret says whether one is set"},
    "test_webhook": {"url": "not stored: the test's own result is the answer"},
})


@dataclass(frozen=True, slots=True)
class Unreported:
    """Something people ask about that the service never reports, and the tool whose description (or one of its
    arguments' descriptions) says so in these words, so that a model says "not reported" rather than guess."""

    about: str
    said: str
    tool: str


NOT_REPORTED: Final = (
    Unreported("a run", "who started a run, its prompt, images, model, agent type, repository (see its pull "
                        "requests' URLs), cost, resume or end time", "get_agent_run"),
    Unreported("a run", "the plan's run quota", "create_agent_run"),
    Unreported("a pull request", "does not report a pull request's state (draft, merged) unless sent",
               "get_agent_run"),
    Unreported("a pull request", "which one opened it is not reported", "list_agent_runs"),
    Unreported("a pull request", "whether its checks are banned", "ban_checks"),
    Unreported("a repository", "no repository's pull requests (runs list those they made) or default branch",
               "list_repositories"),
    Unreported("a sandbox", "no tool lists sandboxes", "analyze_sandbox_logs"),
    Unreported("a webhook", "past deliveries", "get_webhook"),
)
