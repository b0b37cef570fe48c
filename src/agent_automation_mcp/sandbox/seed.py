"""How the sandbox's world begins: the demo organisation (rich), the other visible ones (small) and one forbidden
one, with the same ids for every seed (see `ids`) and content drawn from the seed.

Each seeded row is a named record; the order of the rows is part of the seed (a random draw per row).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from . import ids
from .config import SandboxConfig
from .entities import LogSandbox, OAuthToken, Organization, Repository, User, Webhook
from .lifecycle import MOVING, Run, advance, end_now, fill_long_trace, format_time, plan_segment, stop
from .world import World

SEED_EPOCH: Final = datetime(2025, 6, 21, 11, 20, 4, 338398, tzinfo=UTC).timestamp()


@dataclass(frozen=True, slots=True)
class SeedMember:
    login: str
    full_name: str
    role: str


@dataclass(frozen=True, slots=True)
class SeedRepo:
    name: str
    language: str | None
    writable: bool = True  # whether the tokens' users may write to it
    archived: bool = False
    visibility: str = "PRIVATE"
    setup_status: str = "COMPLETED"


@dataclass(frozen=True, slots=True)
class SeedRun:
    """A run finished before the sandbox started; ids are suffixes within the organisation's block."""

    run: int
    repo: int | None  # None: a run on no repository
    source_type: str
    # How it ended (any status the service gives: `api.statuses`), PAUSED (waiting for a resume), or ACTIVE: stuck,
    # its last step long ago and no end coming.
    outcome: str
    pr: int | None = None  # the pull request it opened
    pr_state: str = "open"
    merged: bool = False
    ban: Literal["url", "parent_run"] | None = None  # how its pull request's checks are banned
    by_member: int = 0  # 0: the organisation's first token user; n: its n-th member from the end
    long_trace: bool = False  # `large_run_log_entries` entries instead of a short plan


@dataclass(frozen=True, slots=True)
class SeedProvider:
    name: str
    tokens: int  # OAuth tokens each token user holds for it
    scopes: tuple[str, ...]


MEMBERS: Final = (SeedMember("mona", "Mona Lisa", "MANAGER"), SeedMember("hubot", "Hubot Robot", "MEMBER"),
                  SeedMember("octocat", "The Octocat", "MEMBER"),
                  SeedMember("sandbox-dev", "Sandbox Developer", "MEMBER"), SeedMember("ci-bot", "CI Bot", "MEMBER"),
                  SeedMember("reviewer", "Rita Reviewer", "MEMBER"))
REPOS: Final = (
    SeedRepo("web-app", "Python"),
    SeedRepo("api-service", "Go"),
    SeedRepo("infra", "HCL", writable=False),
    SeedRepo("docs", None, archived=True, visibility="PUBLIC"),
    SeedRepo("mobile", "Kotlin", setup_status="NOT_STARTED"),
)
SMALL_ORG_REPOS: Final = 2  # the other organisations get the first two
RUNS: Final = (
    SeedRun(401, 201, "API", "COMPLETE", pr=301),
    SeedRun(402, 201, "GITHUB", "COMPLETE", pr=302, ban="url", by_member=1),
    SeedRun(403, 202, "API", "COMPLETE", pr=303, ban="parent_run"),
    SeedRun(404, 203, "API", "ERROR", pr=305),
    SeedRun(405, None, "SLACK", "COMPLETE", by_member=2),
    SeedRun(406, 201, "API", "COMPLETE", pr=304, pr_state="closed", merged=True),
    SeedRun(407, 202, "LINEAR", "COMPLETE", pr=306, pr_state="draft"),
    SeedRun(408, 202, "API", "STOPPED", by_member=3),
    SeedRun(409, None, "API", "COMPLETE", long_trace=True),
    SeedRun(410, 201, "API", "TIMEOUT"),
    SeedRun(411, 202, "GITHUB_CHECK_SUITE", "MAX_ITERATIONS_REACHED", by_member=1),
    SeedRun(412, None, "SLACK", "OUT_OF_TOKENS", by_member=2),
    SeedRun(413, 201, "API", "PAUSED"),
    SeedRun(414, 202, "API", "ACTIVE"),
)
WENT_THE_WHOLE_WAY: Final = ("COMPLETE", "ERROR")  # seeded runs that reached their last step; the others end early
# A day's runs (`SandboxConfig.recent_runs`): spread evenly over the hours before the sandbox starts, each ending as
# drawn (weights), those of the last hour still going, for hours more. Each took RECENT_RUN_SECONDS.
RECENT_HOURS: Final = 24
RECENT_GOING_SECONDS: Final = 3600
RECENT_RUN_SECONDS: Final = 900.0
RECENT_ENDINGS: Final = {"COMPLETE": 70, "ERROR": 8, "TIMEOUT": 4, "MAX_ITERATIONS_REACHED": 3, "OUT_OF_TOKENS": 2,
                         "STOPPED": 7, "PAUSED": 6}
RECENT_SOURCES: Final = {"API": 60, "SLACK": 15, "GITHUB": 10, "LINEAR": 8, "GITHUB_CHECK_SUITE": 7}
SMALL_ORG_RUNS: Final = 1  # the other organisations get the first one
PROMPTS: Final = ("Fix the flaky login test", "Add pagination to the users endpoint", "Upgrade the CI runners",
                  "Explain the deploy failure", "Write docs for the config file", "Rename the settings module",
                  "Refactor the billing client", "Tidy up the Dockerfile")
PROVIDERS: Final = (SeedProvider("github", 2, ("repo", "read:org")), SeedProvider("linear", 1, ("read", "write")),
                    SeedProvider("slack", 1, ("chat:write",)))
ORGANIZATION_RULES: Final = ("Always run the test suite before opening a pull request.",
                             "Keep pull requests under 400 changed lines.")


def build_world(config: SandboxConfig) -> World:
    """Seed a world: the demo organisation (rich), the other visible ones (small) and one forbidden one."""
    world = World(config)
    rng = random.Random(f"{config.seed}:world")
    token_user_ids = []
    for index, token in enumerate(config.tokens):
        if token in config.token_owners:  # another token of a user seeded already
            world.token_users[token] = world.token_users[config.token_owners[token]]
            continue
        user = User(ids.token_user_id(index), "sandbox-demo" if index == 0 else f"sandbox-user-{index}",
                    "Sandbox Demo" if index == 0 else f"Sandbox User {index}", role="ADMIN" if index == 0 else "MEMBER",
                    custom_prompt="Prefer small pull requests." if index == 0 else None)
        world.users[user.id] = user
        world.token_users[token] = user.id
        token_user_ids.append(user.id)
    org_ids = [*config.visible_org_ids, config.forbidden_org_id]
    for k, org_id in enumerate(org_ids):
        accessible = org_id != config.forbidden_org_id
        owners = [token for token in config.tokens if token not in config.token_owners]
        in_org = [user_id for token, user_id in zip(owners, token_user_ids, strict=True)
                  if org_id in config.orgs_of(token)]
        members = _seed_members(world, k, len(MEMBERS) if k == 0 else 2)
        org = Organization(org_id, "Sandbox Org" if k == 0 else f"Sandbox Org {k + 1}", in_org + members, accessible,
                           organization_rules=rng.choice(ORGANIZATION_RULES))
        world.orgs[org_id] = org
        world.webhooks[org_id] = Webhook()
        _seed_repos(world, k, org_id, in_org, REPOS if k == 0 else REPOS[:SMALL_ORG_REPOS])
        _seed_runs(world, rng, k, org_id, in_org[0] if in_org else members[0],
                   RUNS if k == 0 else RUNS[:SMALL_ORG_RUNS])
        if k == 0:
            _seed_recent_runs(world, org_id, config.recent_runs)
        base = k * ids.BLOCK
        world.sandboxes[base + ids.SANDBOX_WITH_LOGS] = LogSandbox(base + ids.SANDBOX_WITH_LOGS, org_id, has_logs=True)
        world.sandboxes[base + ids.SANDBOX_WITHOUT_LOGS] = LogSandbox(base + ids.SANDBOX_WITHOUT_LOGS, org_id,
                                                                      has_logs=False)
        if in_org:
            _seed_oauth_tokens(world, org_id, in_org)
    return world


def _seed_members(world: World, k: int, count: int) -> list[int]:
    user_ids = []
    for j, member in enumerate(MEMBERS[:count]):
        user = User(k * ids.BLOCK + ids.FIRST_MEMBER_SUFFIX + j, member.login if k == 0 else f"{member.login}-{k}",
                    member.full_name, role=member.role)
        world.users[user.id] = user
        user_ids.append(user.id)
    return user_ids


def _seed_repos(world: World, k: int, org_id: int, writers: list[int], repos: tuple[SeedRepo, ...]) -> None:
    owner = "sandbox-org" if k == 0 else f"sandbox-org-{k + 1}"
    for j, spec in enumerate(repos):
        repo = Repository(k * ids.BLOCK + ids.FIRST_REPO_SUFFIX + j, org_id, spec.name, owner, spec.language,
                          set(writers) if spec.writable else set(),
                          description=f"The {spec.name} repository" if j % 2 == 0 else None,
                          visibility=spec.visibility, archived=spec.archived, setup_status=spec.setup_status)
        world.repos[repo.id] = repo


def _seed_runs(world: World, rng: random.Random, k: int, org_id: int, owner_id: int,
               runs: tuple[SeedRun, ...]) -> None:
    """Finished runs from before the sandbox started, with pull requests in every state and both kinds of ban."""
    base = k * ids.BLOCK
    members = world.orgs[org_id].member_ids
    for index, spec in enumerate(runs):
        wall = SEED_EPOCH + 3600 * (k * 24 + index) + rng.uniform(0, 600)
        repo_id = base + spec.repo if spec.repo is not None else None
        run = world.new_run(org_id=org_id, user_id=members[-spec.by_member] if spec.by_member else owner_id,
                            repo_id=repo_id, prompt=rng.choice(PROMPTS), source_type=spec.source_type, wall=wall,
                            run_id=base + spec.run)
        repo = world.repos.get(repo_id) if repo_id is not None else None
        if spec.long_trace:
            fill_long_trace(run, seed=world.config.seed, count=world.config.large_run_log_entries,
                            outcome=spec.outcome, start_wall=wall, quirks=world.config.quirks,
                            repo_full_name=repo.full_name if repo else None)
            continue
        whole = spec.outcome in WENT_THE_WHOLE_WAY
        plan_segment(run, seed=world.config.seed, start=0.0, start_wall=wall, duration=600.0,
                     quirks=world.config.quirks, repo_full_name=repo.full_name if repo else None,
                     outcome=spec.outcome if whole else "COMPLETE")
        if not whole:
            _cut_short(world, run, spec.outcome)
            continue
        if spec.pr is not None and repo is not None:
            pr = world.add_pull_request(base + spec.pr, repo, title=f"Codegen: {run.prompt}",
                                        created_at=run.created_at, run=run, state=spec.pr_state, merged=spec.merged)
            pr.url_ban = spec.ban == "url"
            pr.parent_run_ban = run.id if spec.ban == "parent_run" else None
        advance(run, math.inf, world.open_pull_request)


def _seed_recent_runs(world: World, org_id: int, count: int) -> None:
    """`count` runs over the RECENT_HOURS before now, oldest first (so ids and times agree, newest first), on the
    organisation's repositories that are not archived or on none, from several sources, by its members."""
    rng = random.Random(f"{world.config.seed}:recent")
    now, wall = time.monotonic(), time.time()
    slot = RECENT_HOURS * 3600 / max(count, 1)
    repos: list[Repository | None] = [repo for repo in world.org_repos(org_id) if not repo.archived]
    members = world.orgs[org_id].member_ids
    for index in range(count):
        age = slot * (count - 1 - index + rng.uniform(0.05, 0.95))
        repo = rng.choice([*repos, None])
        run = world.new_run(org_id=org_id, user_id=rng.choice(members), repo_id=repo.id if repo else None,
                            prompt=rng.choice(PROMPTS), wall=wall - age,
                            source_type=rng.choices(list(RECENT_SOURCES), list(RECENT_SOURCES.values()))[0])
        outcome = rng.choices(list(RECENT_ENDINGS), list(RECENT_ENDINGS.values()))[0]
        going = age < RECENT_GOING_SECONDS
        whole = going or outcome in WENT_THE_WHOLE_WAY
        plan_segment(run, seed=world.config.seed, start=now - age, start_wall=wall - age,
                     duration=age + 3 * RECENT_GOING_SECONDS if going else RECENT_RUN_SECONDS,
                     quirks=world.config.quirks, repo_full_name=repo.full_name if repo else None,
                     outcome=outcome if outcome in WENT_THE_WHOLE_WAY else "COMPLETE")
        if not whole:
            _cut_short(world, run, outcome)
        else:
            advance(run, now if going else math.inf, world.open_pull_request)


def _cut_short(world: World, run: Run, outcome: str) -> None:
    """A run that went part of its way, ending before its pull-request step: stopped, out of a limit, paused, or
    (ACTIVE) stuck there."""
    while len(run.pending) > 6:
        run.pending.pop()
    run.ends_at = None  # it never reaches the end it planned
    advance(run, math.inf, world.open_pull_request)
    if outcome == "STOPPED":
        stop(run, "Stopped by the user.")
    elif outcome in MOVING:  # its last step was long ago, and nothing more comes
        run.status, run.ends_at = outcome, None
    else:
        end_now(run, outcome)


def _seed_oauth_tokens(world: World, org_id: int, user_ids: list[int]) -> None:
    for user_id in user_ids:
        for provider in PROVIDERS:
            for _ in range(provider.tokens):
                token_id = len(world.oauth_tokens) + 1
                created_at = format_time(SEED_EPOCH - 86_400 * token_id, "iso")
                world.oauth_tokens.append(OAuthToken(token_id, user_id, org_id, provider.name, True, created_at,
                                                     list(provider.scopes)))
