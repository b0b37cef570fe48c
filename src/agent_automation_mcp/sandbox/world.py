"""The sandbox's data: organisations, users, repositories with per-user write permission, pull requests, runs,
integrations, models, OAuth tokens and webhooks, seeded the same way for the same seed.

Ids are fixed and laid out in blocks of 1000 per organisation (index k = 0 for the demo organisation):
users k*1000+111.., repositories k*1000+201.., pull requests k*1000+301.., runs k*1000+401.., log sandboxes
k*1000+601... The tokens' users are 101, 102, ... and belong to every visible organisation. New runs get ids from
10001 and new pull requests from 20001. The seed changes the content (texts, outcomes), never the ids.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .config import SandboxConfig
from .lifecycle import LONG_TRACE_STEP, Run, advance, fill_long_trace, format_time, plan_segment, stop

SEED_EPOCH = datetime(2025, 6, 21, 11, 20, 4, 338398, tzinfo=UTC).timestamp()
FIRST_NEW_RUN_ID = 10_001
FIRST_NEW_PR_ID = 20_001
_BLOCK = 1000

# Facts of the demo organisation that tests and demos may rely on (the same for every seed).
DEMO_USER_ID = 101  # the first token's user; further tokens are 102, 103, ...
WRITABLE_REPO_ID = 201  # the tokens' users may write to 201, 202, 204 (archived) and 205
READ_ONLY_REPO_ID = 203  # ... but not to 203
ARCHIVED_REPO_ID = 204
RUN_WITH_PR_ID, PR_ID = 401, 301  # COMPLETE, open pull request on 201
URL_BANNED_RUN_ID, URL_BANNED_PR_ID = 402, 302
PARENT_RUN_BANNED_RUN_ID, PARENT_RUN_BANNED_PR_ID = 403, 303
ERROR_RUN_ID, READ_ONLY_PR_ID = 404, 305  # the pull request is on the read-only repository
RUN_WITHOUT_PR_ID = 405
MERGED_RUN_ID, MERGED_PR_ID = 406, 304
DRAFT_RUN_ID, DRAFT_PR_ID = 407, 306
STOPPED_RUN_ID = 408
LONG_RUN_ID = 409  # `large_run_log_entries` entries
SANDBOX_WITH_LOGS, SANDBOX_WITHOUT_LOGS = 601, 602
AVAILABLE_CHECKS = ("build", "lint", "unit-tests", "e2e", "security-scan")


@dataclass
class Organization:
    id: int
    name: str
    member_ids: list[int]
    accessible: bool
    enable_pr_creation: bool = True
    enable_rules_detection: bool = True
    organization_rules: str | None = None


@dataclass
class User:
    id: int
    github_username: str
    full_name: str
    role: str = "MEMBER"
    custom_prompt: str | None = None

    @property
    def github_user_id(self) -> str:
        return str(9_000_000 + self.id)


@dataclass
class CheckSuiteSettings:
    check_retry_count: int = 3
    ignored_checks: list[str] = field(default_factory=list)
    check_retry_counts: dict[str, int] = field(default_factory=dict)
    custom_prompts: dict[str, str] = field(default_factory=dict)
    high_priority_apps: list[str] = field(default_factory=list)


@dataclass
class Repository:
    id: int
    organization_id: int
    name: str
    owner: str
    language: str | None
    writer_ids: set[int]
    description: str | None = None
    visibility: str = "PRIVATE"
    archived: bool = False
    setup_status: str = "COMPLETED"
    check_suite: CheckSuiteSettings = field(default_factory=CheckSuiteSettings)
    next_pr_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class PullRequest:
    id: int
    repo_id: int
    number: int
    title: str
    url: str
    head_branch_name: str
    created_at: str
    state: str = "open"  # open | closed | draft | ready_for_review
    merged: bool = False
    url_ban: bool = False  # a ban flag set on the pull request's URL
    parent_run_ban: int | None = None  # a ban set through a parent agent run (its id)
    run_ids: list[int] = field(default_factory=list)

    @property
    def banned(self) -> bool:
        return self.url_ban or self.parent_run_ban is not None


@dataclass
class OAuthToken:
    id: int
    user_id: int
    organization_id: int
    provider: str
    is_active: bool
    created_at: str
    scopes: list[str]


@dataclass
class LogSandbox:
    """A sandbox (execution environment) whose logs `analyze_sandbox_logs` reads; not an agent run."""

    id: int
    organization_id: int
    has_logs: bool


@dataclass
class Webhook:
    url: str | None = None
    secret: str | None = None
    enabled: bool = False


@dataclass
class World:
    config: SandboxConfig
    orgs: dict[int, Organization] = field(default_factory=dict)
    users: dict[int, User] = field(default_factory=dict)
    token_users: dict[str, int] = field(default_factory=dict)
    repos: dict[int, Repository] = field(default_factory=dict)
    prs: dict[int, PullRequest] = field(default_factory=dict)
    runs: dict[int, Run] = field(default_factory=dict)
    oauth_tokens: list[OAuthToken] = field(default_factory=list)
    sandboxes: dict[int, LogSandbox] = field(default_factory=dict)
    webhooks: dict[int, Webhook] = field(default_factory=dict)
    created_runs: dict[int, int] = field(default_factory=dict)  # org id -> runs created through the API
    next_run_id: int = FIRST_NEW_RUN_ID
    next_pr_id: int = FIRST_NEW_PR_ID

    # -- named facts (see the constants above) ----------------------------------------------------------------

    read_only_pr_id = READ_ONLY_PR_ID
    merged_pr_id = MERGED_PR_ID
    writable_repo_id = WRITABLE_REPO_ID
    read_only_repo_id = READ_ONLY_REPO_ID
    run_with_pr_id = RUN_WITH_PR_ID
    long_run_id = LONG_RUN_ID
    sandbox_with_logs = SANDBOX_WITH_LOGS
    sandbox_without_logs = SANDBOX_WITHOUT_LOGS

    # -- reads ---------------------------------------------------------------------------------------------

    def user_for_token(self, token: str) -> User | None:
        user_id = self.token_users.get(token)
        return self.users[user_id] if user_id is not None else None

    def can_access(self, user: User, org_id: int) -> bool:
        org = self.orgs.get(org_id)
        return org is not None and org.accessible and user.id in org.member_ids

    def org_repos(self, org_id: int) -> list[Repository]:
        return [repo for repo in self.repos.values() if repo.organization_id == org_id]

    def repo_in_org(self, org_id: int, repo_id: int) -> Repository | None:
        repo = self.repos.get(repo_id)
        return repo if repo is not None and repo.organization_id == org_id else None

    def run_in_org(self, org_id: int, run_id: int) -> Run | None:
        run = self.runs.get(run_id)
        return run if run is not None and run.organization_id == org_id else None

    def pr_in_org(self, org_id: int, pr_id: int) -> PullRequest | None:
        pr = self.prs.get(pr_id)
        return pr if pr is not None and self.repos[pr.repo_id].organization_id == org_id else None

    # -- the clock -----------------------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        for run in self.runs.values():
            if run.pending or run.active:
                advance(run, now, self.open_pull_request)

    # -- transitions ---------------------------------------------------------------------------------------

    def start_run(self, *, org_id: int, user_id: int, repo_id: int | None, prompt: str, source_type: str,
                  now: float, wall: float, metadata: dict[str, Any] | None = None, model: str | None = None) -> Run:
        run = self._new_run(org_id=org_id, user_id=user_id, repo_id=repo_id, prompt=prompt,
                            source_type=source_type, wall=wall, metadata=metadata, model=model)
        if repo_id is not None:
            repo = self.repos[repo_id]
            run.reserved_pull_request = (self.next_pr_id, repo.next_pr_number)
            self.next_pr_id, repo.next_pr_number = self.next_pr_id + 1, repo.next_pr_number + 1
        self._plan(run, now, wall)
        advance(run, now, self.open_pull_request)
        return run

    def resume_run(self, run: Run, prompt: str, now: float, wall: float) -> None:
        self._plan(run, now, wall, user_text=prompt)
        advance(run, now, self.open_pull_request)

    def add_fixture_run(self, *, org_id: int, user_id: int, repo_id: int | None, prompt: str, source_type: str,
                        status: str, log_entries: int, with_pull_request: bool, now: float, wall: float,
                        pull_request: PullRequest | None = None) -> Run:
        """A run with `log_entries` entries already written (benchmarks, demos); ACTIVE ones go on with the clock.

        With `pull_request`, the run is one more agent working on that existing pull request (and its repository).
        """
        start_wall = wall - LONG_TRACE_STEP * log_entries
        if pull_request is not None:
            repo_id = pull_request.repo_id
        run = self._new_run(org_id=org_id, user_id=user_id, repo_id=repo_id, prompt=prompt, source_type=source_type,
                            wall=start_wall)
        repo = self.repos.get(repo_id) if repo_id is not None else None
        if pull_request is not None:
            pull_request.run_ids.append(run.id)
            run.pull_request_ids.append(pull_request.id)
        elif with_pull_request and repo is not None:
            self._add_pr(self.next_pr_id, repo, title=f"Codegen: {prompt[:50]}", created_at=run.created_at, run=run)
            self.next_pr_id += 1
        fill_long_trace(run, seed=self.config.seed, count=log_entries, outcome=status, start_wall=start_wall,
                        quirks=self.config.quirks, repo_full_name=repo.full_name if repo else None)
        if status == "ACTIVE":
            self._plan(run, now, wall)
        return run

    def open_pull_request(self, run: Run, entry: dict[str, Any]) -> None:
        """The run reached its pull-request step: open one on its repository (once per run)."""
        if run.repo_id is None:
            return
        observation = entry["observation"] if isinstance(entry.get("observation"), dict) else {}
        if run.pull_request_ids:
            pr = self.prs[run.pull_request_ids[0]]
        else:
            title = str(observation.get("title") or f"Codegen: {run.prompt[:50]}")
            pr_id, number = run.reserved_pull_request or (self.next_pr_id, None)
            if run.reserved_pull_request is None:
                self.next_pr_id += 1
            pr = self._add_pr(pr_id, self.repos[run.repo_id], title=title, created_at=entry["created_at"], run=run,
                              number=number)
        entry["observation"] = {**observation, "pr_number": pr.number, "pr_url": pr.url}

    def ban(self, run: Run) -> tuple[PullRequest | None, list[int]]:
        """Flag the run's pull request (by its URL and through this run) and stop every agent working on it."""
        pr = self.prs[run.pull_request_ids[0]] if run.pull_request_ids else None
        if pr is None:
            return None, self._stop([run], "Stopped: checks were banned for this agent run.")
        pr.url_ban, pr.parent_run_ban = True, run.id
        agents = [self.runs[run_id] for run_id in pr.run_ids]
        return pr, self._stop(agents, f"Stopped: checks were banned for pull request #{pr.number}.")

    def unban(self, run: Run) -> PullRequest | None:
        """Remove both kinds of ban from the run's pull request."""
        pr = self.prs[run.pull_request_ids[0]] if run.pull_request_ids else None
        if pr is not None:
            pr.url_ban, pr.parent_run_ban = False, None
        return pr

    # -- building ------------------------------------------------------------------------------------------

    def _new_run(self, *, org_id: int, user_id: int, repo_id: int | None, prompt: str, source_type: str,
                 wall: float, metadata: dict[str, Any] | None = None, model: str | None = None,
                 run_id: int | None = None) -> Run:
        if run_id is None:
            run_id, self.next_run_id = self.next_run_id, self.next_run_id + 1
        style = "space" if run_id % 2 else "iso"
        run = Run(run_id, org_id, user_id, repo_id, prompt, source_type, format_time(wall, style), style,
                  metadata=metadata, model=model)
        self.runs[run_id] = run
        return run

    def _plan(self, run: Run, now: float, wall: float, *, user_text: str | None = None,
              outcome: str | None = None) -> None:
        repo = self.repos.get(run.repo_id) if run.repo_id is not None else None
        plan_segment(run, seed=self.config.seed, start=now, start_wall=wall, duration=self.config.run_seconds,
                     quirks=self.config.quirks, repo_full_name=repo.full_name if repo else None,
                     error_fraction=self.config.run_error_fraction, outcome=outcome, user_text=user_text)

    def _add_pr(self, pr_id: int, repo: Repository, *, title: str, created_at: str, run: Run | None,
                state: str = "open", merged: bool = False, number: int | None = None) -> PullRequest:
        if number is None:
            number, repo.next_pr_number = repo.next_pr_number, repo.next_pr_number + 1
        branch = f"codegen-bot/run-{run.id}" if run else f"feature/{number}"
        pr = PullRequest(pr_id, repo.id, number, title, f"https://github.com/{repo.full_name}/pull/{number}", branch,
                         created_at, state=state, merged=merged)
        self.prs[pr_id] = pr
        if run is not None:
            pr.run_ids.append(run.id)
            run.pull_request_ids.append(pr_id)
        return pr

    def _stop(self, runs: list[Run], reason: str) -> list[int]:
        stopped = []
        for run in runs:
            if run.active:
                stop(run, reason)
                stopped.append(run.id)
        return stopped


_MEMBERS = (("mona", "Mona Lisa", "MANAGER"), ("hubot", "Hubot Robot", "MEMBER"), ("octocat", "The Octocat", "MEMBER"),
            ("sandbox-dev", "Sandbox Developer", "MEMBER"), ("ci-bot", "CI Bot", "MEMBER"),
            ("reviewer", "Rita Reviewer", "MEMBER"))
_PROVIDERS = (("github", 2, ["repo", "read:org"]), ("linear", 1, ["read", "write"]), ("slack", 1, ["chat:write"]))


def build_world(config: SandboxConfig) -> World:
    """Seed a world: the demo organisation (rich), the other visible ones (small) and one forbidden one."""
    world = World(config)
    rng = random.Random(f"{config.seed}:world")
    token_user_ids = []
    for index, token in enumerate(config.tokens):
        user = User(101 + index, "sandbox-demo" if index == 0 else f"sandbox-user-{index}",
                    "Sandbox Demo" if index == 0 else f"Sandbox User {index}", role="ADMIN" if index == 0 else "MEMBER",
                    custom_prompt="Prefer small pull requests." if index == 0 else None)
        world.users[user.id] = user
        world.token_users[token] = user.id
        token_user_ids.append(user.id)
    org_ids = [*config.visible_org_ids, config.forbidden_org_id]
    for k, org_id in enumerate(org_ids):
        accessible = org_id != config.forbidden_org_id
        in_org = [user_id for token, user_id in zip(config.tokens, token_user_ids, strict=True)
                  if org_id in config.orgs_of(token)]
        members = _seed_members(world, k, 6 if k == 0 else 2)
        org = Organization(org_id, "Sandbox Org" if k == 0 else f"Sandbox Org {k + 1}", in_org + members, accessible,
                           organization_rules=rng.choice(("Always run the test suite before opening a pull request.",
                                                          "Keep pull requests under 400 changed lines.")))
        world.orgs[org_id] = org
        world.webhooks[org_id] = Webhook()
        _seed_repos(world, k, org_id, in_org, rich=k == 0)
        _seed_runs(world, rng, k, org_id, in_org[0] if in_org else members[0], rich=k == 0)
        world.sandboxes[k * _BLOCK + 601] = LogSandbox(k * _BLOCK + 601, org_id, has_logs=True)
        world.sandboxes[k * _BLOCK + 602] = LogSandbox(k * _BLOCK + 602, org_id, has_logs=False)
        if in_org:
            _seed_oauth_tokens(world, org_id, in_org)
    return world


def _seed_members(world: World, k: int, count: int) -> list[int]:
    ids = []
    for j, (login, name, role) in enumerate(_MEMBERS[:count]):
        user = User(k * _BLOCK + 111 + j, login if k == 0 else f"{login}-{k}", name, role=role)
        world.users[user.id] = user
        ids.append(user.id)
    return ids


def _seed_repos(world: World, k: int, org_id: int, writers: list[int], *, rich: bool) -> None:
    owner = "sandbox-org" if k == 0 else f"sandbox-org-{k + 1}"
    specs: list[tuple[str, str | None, dict[str, Any]]] = [
        ("web-app", "Python", {}),
        ("api-service", "Go", {}),
        ("infra", "HCL", {"read_only": True}),
        ("docs", None, {"archived": True, "visibility": "PUBLIC"}),
        ("mobile", "Kotlin", {"setup_status": "NOT_STARTED"}),
    ]
    for j, (name, language, extra) in enumerate(specs if rich else specs[:2]):
        repo = Repository(k * _BLOCK + 201 + j, org_id, name, owner, language,
                          set() if extra.get("read_only") else set(writers),
                          description=f"The {name} repository" if j % 2 == 0 else None,
                          visibility=extra.get("visibility", "PRIVATE"), archived=extra.get("archived", False),
                          setup_status=extra.get("setup_status", "COMPLETED"))
        world.repos[repo.id] = repo


def _seed_runs(world: World, rng: random.Random, k: int, org_id: int, owner_id: int, *, rich: bool) -> None:
    """Finished runs from before the sandbox started, with pull requests in every state and both kinds of ban."""
    base = k * _BLOCK
    members = world.orgs[org_id].member_ids
    # run suffix, repo suffix (None: no repo), source, outcome, pr suffix, pr state, merged, ban, owner
    specs: list[tuple[int, int | None, str, str, int | None, str, bool, str | None, int]] = [
        (401, 201, "API", "COMPLETE", 301, "open", False, None, owner_id),
    ]
    if rich:
        specs += [
            (402, 201, "GITHUB", "COMPLETE", 302, "open", False, "url", members[-1]),
            (403, 202, "API", "COMPLETE", 303, "open", False, "parent_run", owner_id),
            (404, 203, "API", "ERROR", 305, "open", False, None, owner_id),
            (405, None, "SLACK", "COMPLETE", None, "", False, None, members[-2]),
            (406, 201, "API", "COMPLETE", 304, "closed", True, None, owner_id),
            (407, 202, "LINEAR", "COMPLETE", 306, "draft", False, None, owner_id),
            (408, 202, "API", "STOPPED", None, "", False, None, members[-3]),
            (409, None, "API", "COMPLETE", None, "", False, None, owner_id),
        ]
    prompts = ("Fix the flaky login test", "Add pagination to the users endpoint", "Upgrade the CI runners",
               "Explain the deploy failure", "Write docs for the config file", "Rename the settings module",
               "Refactor the billing client", "Tidy up the Dockerfile")
    for index, (suffix, repo_suffix, source, outcome, pr_suffix, state, merged, ban, user_id) in enumerate(specs):
        wall = SEED_EPOCH + 3600 * (k * 24 + index) + rng.uniform(0, 600)
        repo_id = base + repo_suffix if repo_suffix is not None else None
        run = world._new_run(org_id=org_id, user_id=user_id, repo_id=repo_id, prompt=rng.choice(prompts),
                             source_type=source, wall=wall, run_id=base + suffix)
        repo = world.repos.get(repo_id) if repo_id is not None else None
        if suffix == 409:
            fill_long_trace(run, seed=world.config.seed, count=world.config.large_run_log_entries,
                            outcome="COMPLETE", start_wall=wall, quirks=world.config.quirks,
                            repo_full_name=repo.full_name if repo else None)
            continue
        plan_segment(run, seed=world.config.seed, start=0.0, start_wall=wall, duration=600.0,
                     quirks=world.config.quirks, repo_full_name=repo.full_name if repo else None,
                     outcome="ERROR" if outcome == "ERROR" else "COMPLETE")
        if outcome == "STOPPED":
            while len(run.pending) > 6:  # stopped early, before its pull-request step
                run.pending.pop()
            advance(run, math.inf, world.open_pull_request)
            stop(run, "Stopped by the user.")
            continue
        if pr_suffix is not None and repo is not None:
            pr = world._add_pr(base + pr_suffix, repo, title=f"Codegen: {run.prompt}", created_at=run.created_at,
                               run=run, state=state, merged=merged)
            pr.url_ban = ban == "url"
            pr.parent_run_ban = run.id if ban == "parent_run" else None
        advance(run, math.inf, world.open_pull_request)


def _seed_oauth_tokens(world: World, org_id: int, user_ids: list[int]) -> None:
    for user_id in user_ids:
        for provider, count, scopes in _PROVIDERS:
            for _ in range(count):
                token_id = len(world.oauth_tokens) + 1
                created_at = format_time(SEED_EPOCH - 86_400 * token_id, "iso")
                world.oauth_tokens.append(OAuthToken(token_id, user_id, org_id, provider, True, created_at,
                                                     list(scopes)))
