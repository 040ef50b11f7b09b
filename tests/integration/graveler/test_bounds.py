"""No single small request makes graveler do unbounded work: hostile merge globs, negative page
sizes and logs over long histories, through the real gRPC API."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.core import commit_graph
from engine.core.committed import globs
from engine.core.committed.merge import MAX_REPORTED_CONFLICTS
from engine.core.deadline import Deadline
from silt.errors import DeadlineExceeded
from silt.graveler.v1 import graveler_pb2 as api
from silt.kv import Store
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of
from tests.integration.graveler.test_branching import branch, merge

HOSTILE_GLOB = "*a*a*a*a*a*a*a*b"  # exponential for a backtracking matcher over a key of a's
LONG_KEY = "a" * 1024  # the longest key graveler accepts


def conflicting(env: GravelerEnv, key: str) -> str:
    """A repository where branch feature and main both changed `key` since they forked."""
    repo = env.new_repo("bounds")
    env.put(repo, "main", key, "base")
    env.commit(repo, "main", "base")
    branch(env, repo, "feature")
    env.put(repo, "feature", key, "feature")
    env.commit(repo, "feature", "on feature")
    env.put(repo, "main", key, "main")
    env.commit(repo, "main", "on main")
    return repo


def rules(*patterns: str) -> list[api.PathStrategy]:
    return [api.PathStrategy(pattern=p, strategy=api.MERGE_STRATEGY_SOURCE_WINS) for p in patterns]


def merge_by(env: GravelerEnv, repo: str, path_strategies: list[api.PathStrategy]) -> api.MergeResponse:
    request = api.MergeRequest(
        repository=repo, source_ref="feature", destination_branch="main", path_strategies=path_strategies
    )
    return env.stub.Merge(request, timeout=10)


# --- merge path globs ------------------------------------------------------------------------


def test_a_hostile_glob_over_a_long_conflicting_key_is_answered_at_once(env: GravelerEnv) -> None:
    repo = conflicting(env, LONG_KEY)
    started = time.monotonic()
    result = merge_by(env, repo, rules(HOSTILE_GLOB))
    assert time.monotonic() - started < 1.0
    assert [c.key for c in result.conflicts] == [LONG_KEY]  # the glob matched nothing: default fail

    # The same shape of glob, matching: the rule decides, as fast.
    started = time.monotonic()
    result = merge_by(env, repo, rules(HOSTILE_GLOB[:-1] + "a"))
    assert time.monotonic() - started < 1.0
    assert result.HasField("commit") and env.etag(repo, "main", LONG_KEY) == "feature"


@pytest.mark.parametrize(
    ("patterns", "words"),
    [
        (["x" * (globs.MAX_PATTERN_BYTES + 1)], "bytes"),
        (["*x" * (globs.MAX_PATTERN_WILDCARDS + 1)], "wildcards"),
        (["k/*"] * (globs.MAX_PATH_RULES + 1), "path strategies"),
        ([""], "empty"),
        # Each within its own caps; together more than one automaton may hold.
        (["*a" * 16 + "x" * 990] * 5, "together"),
    ],
)
def test_merge_globs_are_capped(env: GravelerEnv, patterns: list[str], words: str) -> None:
    repo = conflicting(env, "k/x")
    with pytest.raises(grpc.RpcError) as err:
        merge_by(env, repo, rules(*patterns))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in (err.value.details() or "")
    # The caps themselves are allowed.
    allowed = rules("x" * globs.MAX_PATTERN_BYTES, "*x" * globs.MAX_PATTERN_WILDCARDS, *["k/*"] * 98)
    assert merge_by(env, repo, allowed).HasField("commit")


def many_conflicts(env: GravelerEnv, count: int) -> str:
    """A repository where feature and main both changed `count` long keys since they forked."""
    repo = env.new_repo("conflicts")
    keys = [f"{index:04d}/" + "a" * 1000 for index in range(count)]
    for side, content in (("main", "main"), ("feature", "feature"), ("main", "main again")):
        if side == "feature":
            branch(env, repo, "feature")
        for key in keys:
            env.put(repo, side, key, content)
        env.commit(repo, side, content)
    return repo


def test_a_failed_merge_examines_and_answers_a_bounded_number_of_conflicts(env: GravelerEnv) -> None:
    repo = many_conflicts(env, MAX_REPORTED_CONFLICTS + 50)
    # The costliest rules a merge may bring, none matching: every conflict fails.
    hostile = [("a" * 30 + "*") * 31 + "b" + str(index) for index in range(globs.MAX_RULES_BYTES // 1024)]
    started = time.monotonic()
    result = merge_by(env, repo, rules(*hostile))
    assert time.monotonic() - started < 5.0
    # Before: all 150 conflicts listed, each tried against every rule.
    assert len(result.conflicts) == MAX_REPORTED_CONFLICTS and result.conflicts_truncated
    assert [c.key[:4] for c in result.conflicts] == [f"{index:04d}" for index in range(MAX_REPORTED_CONFLICTS)]
    assert not result.HasField("commit")

    # Fewer conflicts than the cap: all of them, not truncated.
    small = many_conflicts(env, 3)
    result = merge_by(env, small, rules("nothing/**"))
    assert len(result.conflicts) == 3 and not result.conflicts_truncated


# --- page sizes ----------------------------------------------------------------------------------


def test_a_negative_amount_is_refused_everywhere(env: GravelerEnv) -> None:
    repo = env.new_repo("amount")
    for i in range(5):
        env.put(repo, "main", f"k{i}")
    env.commit(repo, "main")
    env.put(repo, "main", "staged")
    calls: dict[str, Callable[[], Any]] = {
        "ListEntries": lambda: env.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref="main", amount=-1)),
        "Diff": lambda: env.stub.Diff(api.DiffRequest(repository=repo, left_ref="main~1", right_ref="main", amount=-1)),
        "DiffBranch": lambda: env.stub.DiffBranch(api.DiffBranchRequest(repository=repo, branch="main", amount=-1)),
        "Log": lambda: env.stub.Log(api.LogRequest(repository=repo, ref="main", amount=-1)),
        "Log limit": lambda: env.stub.Log(api.LogRequest(repository=repo, ref="main", limit=-1)),
        "ListBranches": lambda: env.stub.ListBranches(api.ListBranchesRequest(repository=repo, amount=-1)),
        "ListTags": lambda: env.stub.ListTags(api.ListTagsRequest(repository=repo, amount=-1)),
        "ListRepositories": lambda: env.stub.ListRepositories(api.ListRepositoriesRequest(amount=-1)),
    }
    codes = {name: code_of(call) for name, call in calls.items()}
    assert codes == dict.fromkeys(calls, grpc.StatusCode.INVALID_ARGUMENT)


# --- logs ---------------------------------------------------------------------------------------


def linear_history(env: GravelerEnv, commits: int, target: str = "target", every: int = 10) -> str:
    """A repository whose main has `commits` commits; every `every`-th one changes target."""
    repo = env.new_repo("log")
    for i in range(commits):
        env.put(repo, "main", target if i % every == 0 else f"other/{i}", f"v{i}")
        env.commit(repo, "main", f"c{i}")
    return repo


def log_pages(env: GravelerEnv, **request: Any) -> Iterator[api.LogResponse]:
    after = ""
    for _ in range(10_000):
        page = env.stub.Log(api.LogRequest(after=after, **request))
        yield page
        if not page.has_more:
            return
        assert page.next_after
        after = page.next_after
    raise AssertionError("the log never ended")


def messages(env: GravelerEnv, **request: Any) -> list[str]:
    return [c.message for page in log_pages(env, **request) for c in page.commits]


def test_a_filtered_log_stops_when_its_client_gives_up(env: GravelerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = linear_history(env, 40)
    compared = []
    touches = env.graveler._touches
    log = env.graveler.log
    walk_ended = threading.Event()

    def slow_touches(*args: Any) -> bool:
        compared.append(1)
        time.sleep(0.05)  # the scenario: a slow comparison, so the deadline passes mid-walk
        return touches(*args)

    def watched_log(*args: Any, **kwargs: Any) -> Any:
        try:
            return log(*args, **kwargs)
        finally:
            walk_ended.set()

    monkeypatch.setattr(env.graveler, "_touches", slow_touches)
    monkeypatch.setattr(env.graveler, "log", watched_log)
    request = api.LogRequest(repository=repo, ref="main", objects=["never-written"])
    with pytest.raises(grpc.RpcError) as err:
        env.stub.Log(request, timeout=0.3)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The server's walk goes on after the client's error: once it has ended, count what it
    # compared (a walk that ignored the deadline would have compared all 40 commits by then).
    assert walk_ended.wait(30), "the walk never ended"
    assert len(compared) <= 15


def test_a_log_checks_its_deadline_at_every_commit(env: GravelerEnv) -> None:
    repo = linear_history(env, 30)
    ticks = iter(range(1_000_000))
    deadline = Deadline(expires_at=10, clock=lambda: float(next(ticks)))
    with pytest.raises(DeadlineExceeded):
        env.graveler.log(repo, "main", objects=["never-written"], deadline=deadline)
    with pytest.raises(DeadlineExceeded):
        env.graveler.log(repo, "main", amount=1000, deadline=Deadline(expires_at=10, clock=lambda: float(next(ticks))))


def test_a_log_examines_a_bounded_number_of_commits_per_call(env: GravelerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = linear_history(env, 45)
    expected = ["c40", "c30", "c20", "c10", "c0"]
    assert messages(env, repository=repo, ref="main", objects=["target"]) == expected

    compared = []
    touches = env.graveler._touches

    def counted(*args: Any) -> bool:
        compared.append(1)
        return touches(*args)

    monkeypatch.setattr(env.graveler, "_touches", counted)
    monkeypatch.setattr(commit_graph, "MAX_LOG_DIFFS", 4)
    pages = list(log_pages(env, repository=repo, ref="main", objects=["target"]))
    assert [c.message for page in pages for c in page.commits] == expected
    assert len(pages) >= 45 // 4 and any(not page.commits for page in pages)  # short pages, even empty ones
    assert len(compared) == 46  # each commit compared once, over all the pages

    # Reading commits is capped too (here while only skipping to a page's last commit).
    monkeypatch.setattr(commit_graph, "MAX_LOG_STEPS", 7)
    assert messages(env, repository=repo, ref="main", amount=3) == [f"c{i}" for i in range(44, -1, -1)] + [
        "Repository created"
    ]
    first = env.stub.Log(api.LogRequest(repository=repo, ref="main", amount=30))
    assert len(first.commits) == 7 and first.has_more


def dag_history(env: GravelerEnv) -> str:
    """main with merges of several branches, forked at different points."""
    repo = env.new_repo("dag")
    for i in range(3):
        env.put(repo, "main", f"m{i}", f"m{i}")
        env.commit(repo, "main", f"main {i}")
    for b in range(4):
        name = f"b{b}"
        branch(env, repo, name)
        for i in range(b + 1):
            env.put(repo, name, f"{name}/{i}", "x")
            env.commit(repo, name, f"{name} {i}")
        env.put(repo, "main", f"after-{name}", "x")
        env.commit(repo, "main", f"main after fork of {name}")
    for b in (2, 0, 3, 1):
        merge(env, repo, f"b{b}", "main", message=f"merge b{b}")
    return repo


# Per store: the store, a repository dag_history built on it, and the data root of its objects.
_BUILT_DAGS: dict[int, tuple[Store, str, Path]] = {}


def shared_dag_history(env: GravelerEnv, store: Store) -> str:
    """dag_history's repository, built once per store and read by every test that only reads
    it (its logs): on the Cassandra leg's one store, one build instead of one per test. A later
    test's graveler gets a copy of its objects under its own data root."""
    built = _BUILT_DAGS.get(id(store))
    if built is None or built[0] is not store:
        repo = dag_history(env)
        _BUILT_DAGS[id(store)] = (store, repo, env.data_root)
        return repo
    _, repo, data_root = built
    if data_root != env.data_root and (data_root / repo).exists():
        shutil.copytree(data_root / repo, env.data_root / repo, dirs_exist_ok=True)
    return repo


def log_ids(env: GravelerEnv, **request: Any) -> list[str]:
    return [c.id for page in log_pages(env, **request) for c in page.commits]


@pytest.mark.parametrize("first_parent", [False, True])
@pytest.mark.parametrize(("amount", "steps"), [(1, 10_000), (2, 3), (1, 1), (3, 5)])
def test_log_pages_of_a_merged_history_resume_exactly(
    env: GravelerEnv, store: Store, monkeypatch: pytest.MonkeyPatch, first_parent: bool, amount: int, steps: int
) -> None:
    repo = shared_dag_history(env, store)
    request = api.LogRequest(repository=repo, ref="main", amount=1000, first_parent=first_parent)
    whole = [c.id for c in env.stub.Log(request).commits]
    assert len(set(whole)) == len(whole) > 10
    monkeypatch.setattr(commit_graph, "MAX_LOG_STEPS", steps)
    assert log_ids(env, repository=repo, ref="main", amount=amount, first_parent=first_parent) == whole
    # `limit` counts across pages.
    assert log_ids(env, repository=repo, ref="main", amount=amount, first_parent=first_parent, limit=5) == whole[:5]


def test_a_history_too_wide_to_name_in_a_cursor_is_refused(
    env: GravelerEnv, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = shared_dag_history(env, store)
    whole = [c.id for c in env.stub.Log(api.LogRequest(repository=repo, ref="main", amount=1000)).commits]
    monkeypatch.setattr(commit_graph, "MAX_CURSOR_FRONTIER", 1)
    with pytest.raises(grpc.RpcError) as err:
        log_ids(env, repository=repo, ref="main", amount=1)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # Whole histories in one page, and first-parent walks (one line), still page.
    assert [c.id for c in env.stub.Log(api.LogRequest(repository=repo, ref="main", amount=1000)).commits] == whole
    assert len(log_ids(env, repository=repo, ref="main", amount=1, first_parent=True)) > 5


def test_a_page_can_resume_after_a_commit_id_as_before(
    env: GravelerEnv, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = shared_dag_history(env, store)
    whole = [c.id for c in env.stub.Log(api.LogRequest(repository=repo, ref="main", amount=1000)).commits]
    monkeypatch.setattr(commit_graph, "MAX_LOG_STEPS", 4)
    page = env.stub.Log(api.LogRequest(repository=repo, ref="main", after=whole[9], amount=2))
    # Re-walking to the commit takes more than one call's steps: an empty page and a cursor.
    assert not page.commits and page.has_more
    rest: list[str] = []
    after = whole[9]
    while True:
        page = env.stub.Log(api.LogRequest(repository=repo, ref="main", after=after, amount=2))
        rest += [c.id for c in page.commits]
        if not page.has_more:
            break
        after = page.next_after
    assert rest == whole[10:]


def test_log_cursors_and_filters_are_checked(env: GravelerEnv) -> None:
    repo = linear_history(env, 3)
    malformed = ("log1.x.y.z", "log1.0..", "log1.0.." + ",".join(["a" * 64] * 1001), "log1.-1..", "main")
    for after in malformed:
        request = api.LogRequest(repository=repo, ref="main", after=after)
        assert code_of(lambda request=request: env.stub.Log(request)) == grpc.StatusCode.INVALID_ARGUMENT, after
    unknown = api.LogRequest(repository=repo, ref="main", after="log1.0.." + "a" * 64)
    assert code_of(lambda: env.stub.Log(unknown)) == grpc.StatusCode.NOT_FOUND
    too_many = api.LogRequest(repository=repo, ref="main", prefixes=[f"p{i}/" for i in range(101)])
    assert code_of(lambda: env.stub.Log(too_many)) == grpc.StatusCode.INVALID_ARGUMENT
    too_long = api.LogRequest(repository=repo, ref="main", prefixes=["p" * 1025])
    assert code_of(lambda: env.stub.Log(too_long)) == grpc.StatusCode.INVALID_ARGUMENT
