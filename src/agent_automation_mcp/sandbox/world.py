"""The sandbox's world as it stands, and how it changes: reads scoped to an organisation, the clock that moves
runs on, and the transitions the service's operations make (start, resume, open a pull request, ban, unban).

`entities` says what it is made of, `seed` how it begins, `ids` which ids it begins with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ids
from .config import SandboxConfig
from .entities import LogSandbox, OAuthToken, Organization, PullRequest, Repository, User, Webhook
from .lifecycle import (
    LONG_TRACE_STEP,
    MOVING,
    Run,
    TimeStyle,
    advance,
    end_now,
    fill_long_trace,
    format_time,
    plan_segment,
    stop,
)


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
    next_run_id: int = ids.FIRST_NEW_RUN_ID
    next_pr_id: int = ids.FIRST_NEW_PR_ID

    # -- named facts (see `ids`) ---------------------------------------------------------------------------

    read_only_pr_id = ids.READ_ONLY_PR_ID
    merged_pr_id = ids.MERGED_PR_ID
    writable_repo_id = ids.WRITABLE_REPO_ID
    read_only_repo_id = ids.READ_ONLY_REPO_ID
    run_with_pr_id = ids.RUN_WITH_PR_ID
    long_run_id = ids.LONG_RUN_ID
    sandbox_with_logs = ids.SANDBOX_WITH_LOGS
    sandbox_without_logs = ids.SANDBOX_WITHOUT_LOGS

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
        run = self.new_run(org_id=org_id, user_id=user_id, repo_id=repo_id, prompt=prompt,
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
                        pull_request: PullRequest | None = None, idle_seconds: float = 0.0,
                        goes_on: bool = True) -> Run:
        """A run with `log_entries` entries already written (benchmarks, demos), the last `idle_seconds` ago; one in a
        status that moves (ACTIVE, EVALUATION...) goes on with the clock unless `goes_on` is false: then it is stuck.

        With `pull_request`, the run is one more agent working on that existing pull request (and its repository).
        """
        start_wall = wall - idle_seconds - LONG_TRACE_STEP * log_entries
        if pull_request is not None:
            repo_id = pull_request.repo_id
        run = self.new_run(org_id=org_id, user_id=user_id, repo_id=repo_id, prompt=prompt, source_type=source_type,
                            wall=start_wall)
        repo = self.repos.get(repo_id) if repo_id is not None else None
        if pull_request is not None:
            pull_request.run_ids.append(run.id)
            run.pull_request_ids.append(pull_request.id)
        elif with_pull_request and repo is not None:
            self.add_pull_request(self.next_pr_id, repo, title=f"Codegen: {prompt[:50]}", created_at=run.created_at,
                                  run=run)
            self.next_pr_id += 1
        fill_long_trace(run, seed=self.config.seed, count=log_entries, outcome=status, start_wall=start_wall,
                        quirks=self.config.quirks, repo_full_name=repo.full_name if repo else None)
        if status in MOVING:
            if goes_on:
                self._plan(run, now, wall)
            run.status = status
        return run

    def end_run(self, run: Run, status: str) -> None:
        """End the run now in `status`, or pause it (`PAUSED`), as the service ends runs (a control: `control.py`)."""
        end_now(run, status)

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
            pr = self.add_pull_request(pr_id, self.repos[run.repo_id], title=title, created_at=entry["created_at"],
                                       run=run, number=number)
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

    def new_run(self, *, org_id: int, user_id: int, repo_id: int | None, prompt: str, source_type: str,
                wall: float, metadata: dict[str, Any] | None = None, model: str | None = None,
                run_id: int | None = None) -> Run:
        if run_id is None:
            run_id, self.next_run_id = self.next_run_id, self.next_run_id + 1
        style: TimeStyle = "space" if run_id % 2 else "iso"
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

    def add_pull_request(self, pr_id: int, repo: Repository, *, title: str, created_at: str, run: Run | None,
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
