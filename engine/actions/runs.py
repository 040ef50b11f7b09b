"""Action runs: repository metadata in the repository's partition, newest first.

Key schema (partition ``<repo>-<unique id>``): ``actions/runs/<run id>`` -> ActionRun, with its
hook runs and their (bounded) outputs. A run id is the time it started counted down from the
end of time (16 hex digits) and 8 random hex digits, so a prefix scan lists the newest run
first, as lakeFS lists them, without a counter every run would contend on. A run is written
once, with set_if on its fresh key, when it ends; so it is journaled, shipped and rebuilt with
the repository's other metadata, and deleted with the repository.

Listing by branch or commit filters the scan and examines a bounded number of runs per call
(a short page says where to go on), as pull request listings do.
"""

from __future__ import annotations

import secrets
import time

from engine.core.deadline import Deadline
from engine.core.filtered_page import filtered_page
from engine.core.refs import RepoHandle
from silt.errors import InvalidArgument, NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store
from silt.paging import page_size

RUNS = b"actions/runs/"
_END_OF_TIME = (1 << 64) - 1
RUN_ID_LENGTH = 24
# Per hook, the log's head is kept; the record's total stays within what a KV value should be.
MAX_HOOK_OUTPUT_BYTES = 32 * 1024
MAX_RUN_OUTPUT_BYTES = 1024 * 1024
MAX_LIST_EXAMINED = 10_000
TRUNCATED = "\n[... output truncated ...]\n"


def new_run_id() -> str:
    return f"{_END_OF_TIME - time.time_ns():016x}{secrets.token_hex(4)}"


def check_run_id(run_id: str) -> bytes:
    if len(run_id) != RUN_ID_LENGTH or any(c not in "0123456789abcdef" for c in run_id):
        raise InvalidArgument(f"invalid run id {run_id[:64]!r}")
    return run_id.encode()


def bounded_output(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: max(0, limit - len(TRUNCATED))].decode(errors="ignore") + TRUNCATED


class RunStore:
    def __init__(self, kv: Store) -> None:
        self._kv = kv

    def save(self, repo: RepoHandle, run: pb.ActionRun) -> None:
        check_run_id(run.run_id)
        budget = max(1024, MAX_RUN_OUTPUT_BYTES // max(1, len(run.hooks)))
        for hook in run.hooks:
            hook.output = bounded_output(hook.output, min(MAX_HOOK_OUTPUT_BYTES, budget))
        self._kv.set_if(repo.partition, RUNS + run.run_id.encode(), run.SerializeToString(), None)

    def set_commit(self, repo: RepoHandle, run_id: str, commit_id: str, deadline: Deadline) -> None:
        """Name the commit a pre-event run let through, once the operation made it (as lakeFS)."""
        key = RUNS + check_run_id(run_id)
        for _ in range(5):
            try:
                got = self._kv.get(repo.partition, key)
            except NotFound:
                return
            run = pb.ActionRun()
            run.ParseFromString(got.value)
            run.commit_id = commit_id
            try:
                self._kv.set_if(repo.partition, key, run.SerializeToString(), got.predicate)
                return
            except PredicateFailed:
                deadline.check("naming the commit of an action run")

    def get(self, repo: RepoHandle, run_id: str) -> pb.ActionRun:
        try:
            got = self._kv.get(repo.partition, RUNS + check_run_id(run_id))
        except (NotFound, InvalidArgument):  # no run has a malformed id: lakeFS answers 404 too
            raise NotFound(f"action run {run_id!r} not found in repository {repo.name!r}") from None
        run = pb.ActionRun()
        run.ParseFromString(got.value)
        return run

    def list_page(
        self, repo: RepoHandle, branch: str, commit_id: str, after: str, amount: int, deadline: Deadline
    ) -> tuple[list[pb.ActionRun], bool, str]:
        """Newest first, hooks' outputs left out. (page, has_more, next_after)."""
        start = RUNS + (check_run_id(after) + b"\x00" if after else b"")
        page, more, next_after = filtered_page(
            self._kv,
            repo.partition,
            RUNS,
            start,
            page_size(amount),
            MAX_LIST_EXAMINED,
            deadline,
            "listing action runs",
            pb.ActionRun.FromString,
            lambda run: str(run.run_id),
            lambda run: (not branch or run.branch == branch) and (not commit_id or run.commit_id == commit_id),
        )
        for run in page:
            for hook in run.hooks:
                hook.ClearField("output")
        return page, more, next_after
