"""Pull request checks: actions on the `pull-request` event, run in the background, whose
results sit on the pull request and can be required by branch protection.

An action file at the pull request's destination head with `on: pull-request:` (its `branches`
globs match the destination, as GitHub's `pull_request.branches` do; the scripts it names are
read at that same commit) defines one check per hook, named `<action name>/<hook id>`. Checks
run when the pull request is opened or reopened, when its source branch gets a commit (a push:
commit, merge, revert or cherry-pick into it), and when a reviewer asks to re-run one. Each
request for a run stamps the checks it will run PENDING with a fresh request id on the pull
request record; the run then marks them RUNNING and finally PASSED or FAILED, each step a set_if
on the record that only lands while that request id is still the check's, so a result of an
older run never overwrites a newer one.

A check is of the source head commit it ran on. A merge counts a required check only if it
passed on the exact head commit the merge claims (engine/features/pulls.py), so a push after
a passing run leaves the merge blocked until the re-run passes.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Iterable

from engine.actions.files import InvalidActionFile
from engine.actions.manager import Actions
from engine.actions.runs import new_run_id
from engine.core.deadline import NO_DEADLINE, Deadline
from engine.core.hooks import PULL_REQUEST, EventUser, HookRecord
from engine.core.refs import RefManager, RepoHandle
from engine.core.refs.manager import now
from engine.features.pulls import OPEN, PULLS, PullRequests
from silt.errors import InvalidArgument, NotFound, SiltError
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import background_context
from silt.kv.store import scan_prefix

_log = logging.getLogger(__name__)

PENDING = pb.CHECK_STATUS_PENDING
RUNNING = pb.CHECK_STATUS_RUNNING
PASSED = pb.CHECK_STATUS_PASSED
FAILED = pb.CHECK_STATUS_FAILED
MAX_CHECKS = 100
MAX_PULLS_EXAMINED = 10_000  # pull requests a push looks through for those from its branch
# A check name for the whole run: an action file that cannot be read fails it.
ACTIONS_CHECK = "actions"


def check_name(action: str, hook_id: str) -> str:
    return f"{action}/{hook_id}"


class Checks:
    def __init__(self, refs: RefManager, actions: Actions, pulls: PullRequests) -> None:
        self._refs = refs
        self._actions = actions
        self._pulls = pulls
        self._lock = threading.Lock()
        self._queued: set[tuple[bytes, str]] = set()  # (partition, branch) pushes waiting to look

    # --- asking for runs -----------------------------------------------------------------

    def opened(self, repo: RepoHandle, pull: pb.PullRequest) -> None:
        self._request(repo, pull.id, "opened", None)

    def pushed(self, repo: RepoHandle, branch: str) -> None:
        """The branch got a commit: re-run the checks of the open pull requests from it."""
        if not branch or not self._actions.options.enabled:
            return
        key = (repo.partition, branch)
        with self._lock:
            if key in self._queued:  # a burst of commits looks for the branch's pull requests once
                return
            self._queued.add(key)

        def job() -> None:
            with self._lock:
                self._queued.discard(key)
            with background_context("actions", repo.name):
                for pull_id in self._open_from(repo, branch):
                    self._request(repo, pull_id, "updated", None)

        if not self._actions.bookkeeping.submit(repo.name, job):
            with self._lock:
                self._queued.discard(key)

    def rerun(self, repo: RepoHandle, pull_id: str, name: str, deadline: Deadline) -> pb.PullRequest:
        pull = self._pulls.get(repo, pull_id)
        if pull.status != OPEN:
            raise InvalidArgument(f"pull request {pull_id!r} is not open: its checks do not run")
        if not any(c.name == name for c in pull.checks):
            raise NotFound(f"pull request {pull_id!r} has no check {name!r}")
        return self._request(repo, pull_id, "rerun", name, deadline) or pull

    def _open_from(self, repo: RepoHandle, branch: str) -> Iterable[str]:
        for examined, entry in enumerate(scan_prefix(self._refs.kv, repo.partition, PULLS)):
            if examined >= MAX_PULLS_EXAMINED:
                return
            pull = pb.PullRequest()
            pull.ParseFromString(entry.value)
            if pull.status == OPEN and pull.source_branch == branch:
                yield pull.id

    def _request(
        self, repo: RepoHandle, pull_id: str, why: str, only: str | None, deadline: Deadline = NO_DEADLINE
    ) -> pb.PullRequest | None:
        """Stamp the checks to run PENDING under a new request id, and queue the run."""
        request_id = secrets.token_hex(8)
        try:
            pull = self._pulls.get(repo, pull_id)
            head = str(self._refs.resolve(repo, pull.source_branch).commit_id)
            names = self._names(repo, pull, head, deadline)
        except SiltError as exc:
            _log.info("no checks for pull request %s of %r: %s", pull_id, repo.name, exc)
            return None
        if only is not None:
            names = [n for n in names if n == only] or [only]

        def stamp(pull: pb.PullRequest) -> None:
            kept = [c for c in pull.checks if c.name in names or only is not None]
            by_name = {c.name: c for c in kept}
            for name in names:
                check = by_name.get(name) or pb.PullRequestCheck(name=name)
                check.status = PENDING
                check.commit_id = head
                check.request_id = request_id
                for cleared in ("run_id", "hook_run_id", "started", "ended", "error"):
                    check.ClearField(cleared)
                by_name[name] = check
            del pull.checks[:]
            pull.checks.extend(sorted(by_name.values(), key=lambda c: c.name)[:MAX_CHECKS])

        if not names and not pull.checks:
            return pull
        updated = self._pulls.set_checks(repo, pull_id, stamp, deadline)
        if names and not self._actions.background.submit(
            repo.name, lambda: self._run(repo, pull_id, request_id, why, only)
        ):
            failed = pb.PullRequestCheck(
                status=FAILED, commit_id=head, ended=now(), error="not run: the repository has too many runs queued"
            )
            return self._mark(repo, pull_id, request_id, {n: _named(failed, n) for n in names}, deadline)
        return updated

    def _names(self, repo: RepoHandle, pull: pb.PullRequest, head: str, deadline: Deadline) -> list[str]:
        record = self._record(repo, pull, head, "")
        try:
            actions = self._actions.matching(repo, record, deadline)
        except InvalidActionFile:
            return [ACTIONS_CHECK]
        return [check_name(a.name, h.id) for a in actions for h in a.hooks]

    def _record(self, repo: RepoHandle, pull: pb.PullRequest, head: str, why: str) -> HookRecord:
        """The event of a check of head. Its actions are the destination's (its head commit now):
        checks read from the source would let the pull request's author rewrite the very checks
        a protection rule requires (GitHub's pull_request_target makes the same choice). Its
        hooks read as the pull request's author, whoever asked for the run: what a check shows
        in its output is what the author could read. A check runs in the background, for no
        request, so the author's address is unknown (a policy conditioned on one holds nothing)."""
        destination = str(self._refs.resolve(repo, pull.destination_branch).commit_id)
        return HookRecord(
            PULL_REQUEST,
            repo.name,
            head,
            branch_id=pull.destination_branch,
            commit_id=head,
            merge_source=pull.source_branch,
            pull_request_id=pull.id,
            pull_request_action=why,
            actions_ref=destination,
            immutable=True,
            user=EventUser(pull.author) if pull.author else None,
        )

    # --- running -------------------------------------------------------------------------

    def _mark(
        self,
        repo: RepoHandle,
        pull_id: str,
        request_id: str,
        update: dict[str, pb.PullRequestCheck],
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.PullRequest:
        def change(pull: pb.PullRequest) -> None:
            for check in pull.checks:
                if check.request_id == request_id and check.name in update:
                    request = check.request_id
                    check.CopyFrom(update[check.name])
                    check.request_id = request

        return self._pulls.set_checks(repo, pull_id, change, deadline)

    def _run(self, repo: RepoHandle, pull_id: str, request_id: str, why: str, only: str | None) -> None:
        with background_context("actions", repo.name):
            try:
                self._checked(repo, pull_id, request_id, why, only)
            except Exception as exc:  # whatever failed, the checks must not stay RUNNING
                _log.warning("checks of pull request %s of %r failed: %s", pull_id, repo.name, exc)
                failed = pb.PullRequestCheck(status=FAILED, ended=now(), error=f"the check could not run: {exc}"[:1024])
                with contextlib.suppress(SiltError):
                    pull = self._pulls.get(repo, pull_id)
                    names = [c.name for c in pull.checks if c.request_id == request_id]
                    self._mark(repo, pull_id, request_id, {n: _named(failed, n) for n in names})

    def _checked(self, repo: RepoHandle, pull_id: str, request_id: str, why: str, only: str | None) -> None:
        pull = self._pulls.get(repo, pull_id)
        mine = {c.name: c for c in pull.checks if c.request_id == request_id}
        if not mine or pull.status != OPEN:
            return
        head = next(iter(mine.values())).commit_id
        record = self._record(repo, pull, head, why)
        started = now()
        self._mark(
            repo,
            pull_id,
            request_id,
            {n: pb.PullRequestCheck(name=n, status=RUNNING, commit_id=head, started=started) for n in mine},
        )
        try:
            actions = self._actions.matching(repo, record, NO_DEADLINE)
        except InvalidActionFile as exc:
            failed = pb.PullRequestCheck(
                status=FAILED, commit_id=head, started=started, ended=now(), error=str(exc)[:1024]
            )
            self._mark(repo, pull_id, request_id, {n: _named(failed, n) for n in mine})
            return
        if only is not None:
            actions = [a for a in actions if any(check_name(a.name, h.id) == only for h in a.hooks)]
        ends_at = time.monotonic() + self._actions.options.run_timeout_seconds
        outcome = self._actions.run(repo, record, actions, new_run_id(), ends_at, NO_DEADLINE)
        results: dict[str, pb.PullRequestCheck] = {}
        for hook in outcome.run.hooks:
            name = check_name(hook.action, hook.hook_id)
            if name not in mine:
                continue
            results[name] = pb.PullRequestCheck(
                name=name,
                status=FAILED if hook.failed or hook.skipped else PASSED,
                commit_id=head,
                run_id=outcome.run.run_id,
                hook_run_id=hook.hook_run_id,
                started=hook.start_time if hook.HasField("start_time") else started,
                ended=hook.end_time if hook.HasField("end_time") else now(),
                error=(hook.error or ("skipped: an earlier hook of its action failed" if hook.skipped else ""))[:1024],
            )
        for name in mine:
            if name not in results:  # the action is gone from the source head
                results[name] = pb.PullRequestCheck(
                    name=name,
                    status=FAILED,
                    commit_id=head,
                    started=started,
                    ended=now(),
                    error="no such check at the source's head",
                )
        self._mark(repo, pull_id, request_id, results)


def _named(check: pb.PullRequestCheck, name: str) -> pb.PullRequestCheck:
    copy = pb.PullRequestCheck()
    copy.CopyFrom(check)
    copy.name = name
    return copy
