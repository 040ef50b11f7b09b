"""Resolving a branch update whose outcome the store could not tell (engine/core/updater.py,
set_branch_if) and the walk that finds a moved-to commit in a head's history (history.descends_from).
The flows on a whole graveler: tests/integration/graveler/test_unknown_outcomes.py."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import pytest

from engine.core.commit_graph import descends_from
from engine.core.deadline import Deadline
from engine.core.refs import BranchRecord, RefManager, RepoHandle
from engine.core.updater import REDO, UNKNOWN_SENDS, UNKNOWN_WALK, BranchUpdater, Raced, set_branch_if
from silt.errors import OutcomeUnknown, PredicateFailed, ResendRefused
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore
from silt.kv.store import AllOf, Condition, Predicate, Timestamp

# --- the walk -------------------------------------------------------------------------------------


class Graph:
    def __init__(self) -> None:
        self.commits: dict[str, pb.Commit] = {}
        self.read: list[str] = []

    def add(self, commit_id: str, *parents: str) -> pb.Commit:
        generation = 1 + max((self.commits[p].generation for p in parents), default=0)
        commit = pb.Commit(id=commit_id, parents=list(parents), generation=generation)
        self.commits[commit_id] = commit
        return commit

    def get(self, commit_id: str) -> pb.Commit:
        self.read.append(commit_id)
        return self.commits[commit_id]


def test_the_head_itself_and_its_ancestors_are_found_others_not() -> None:
    graph = Graph()
    root = graph.add("root")
    ours = graph.add("ours", "root")
    graph.add("theirs", "ours")
    sibling = graph.add("sibling", "root")
    assert descends_from(graph.get, "ours", ours, 10) is True
    assert descends_from(graph.get, "theirs", ours, 10) is True
    assert descends_from(graph.get, "theirs", root, 10) is True
    assert descends_from(graph.get, "theirs", sibling, 10) is False


def test_every_parent_of_a_merge_is_followed() -> None:
    graph = Graph()
    graph.add("root")
    graph.add("main1", "root")
    ours = graph.add("ours", "root")  # merged in as the second parent
    graph.add("merge", "main1", "ours")
    graph.add("after", "merge")
    assert descends_from(graph.get, "after", ours, 10) is True


def test_the_walk_does_not_go_below_the_commits_generation() -> None:
    graph = Graph()
    previous = graph.add("c0")
    for n in range(1, 200):
        previous = graph.add(f"c{n}", previous.id)
    other = pb.Commit(id="elsewhere", generation=195)  # in no history: a move that did not apply
    assert descends_from(graph.get, "c199", other, UNKNOWN_WALK) is False
    assert len(graph.read) == 7  # c199 (generation 200) down to c193, the first below 195


def test_past_the_bound_it_cannot_tell() -> None:
    graph = Graph()
    first = graph.add("c0")
    previous = first
    for n in range(1, 50):
        previous = graph.add(f"c{n}", previous.id)
    assert descends_from(graph.get, "c49", first, 10) is None
    assert len(graph.read) == 10
    assert descends_from(graph.get, "c49", first, 100) is True


# --- set_branch_if --------------------------------------------------------------------------------


class Doubtful(MemStore):
    """A MemStore whose set_ifs and conditional applies follow a script: "applied" (apply, then OutcomeUnknown), "lost"
    (OutcomeUnknown, nothing written), "refused" (ResendRefused, nothing written), "applied-refused" (apply, then
    ResendRefused: what a store answers when the key reads as before by the time it checks), "ok" (as
    MemStore); the script's end is "ok"."""

    def __init__(self) -> None:
        super().__init__()
        self.script: list[str] = []
        self.between: Callable[[], None] | None = None

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        self._scripted(lambda: super(Doubtful, self).set_if(partition, key, value, predicate))

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        # A branch update that drops tokens is a conditional apply (with its drop records).
        write = lambda: super(Doubtful, self).apply(partition, puts, deletes, condition, timestamp)  # noqa: E731
        if condition is None:
            write()
        else:
            self._scripted(write)

    def _scripted(self, write: Callable[[], None]) -> None:
        step = self.script.pop(0) if self.script else "ok"
        if step == "ok":
            write()
            return
        if step in ("applied", "applied-refused"):
            write()
        if self.between is not None:
            between, self.between = self.between, None
            between()
        if step in ("refused", "applied-refused"):
            raise ResendRefused("test: a resend refused, the key as before")
        raise OutcomeUnknown("test: outcome unknown")


REPO = RepoHandle(pb.Repository(name="r", unique_id="u"))


def setup() -> tuple[Doubtful, RefManager, BranchRecord]:
    store = Doubtful()
    refs = RefManager(store)
    refs.create_branch(REPO, pb.Branch(name="main", commit_id="c1", staging_token="t1"))
    return store, refs, refs.get_branch(REPO, "main")


def changed(current: BranchRecord, token: str) -> pb.Branch:
    updated = pb.Branch()
    updated.CopyFrom(current.branch)
    updated.staging_token = token
    return updated


def mine(token: str) -> Callable[[BranchRecord], bool | None]:
    return lambda record: record.branch.staging_token == token


def test_without_a_hook_the_unknown_outcome_is_passed_on() -> None:
    store, refs, current = setup()
    store.script = ["applied"]
    with pytest.raises(OutcomeUnknown):
        set_branch_if(refs, REPO, current, changed(current, "t2"), "test", None)


def test_applied_is_success_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    store, refs, current = setup()
    store.script = ["applied"]
    with caplog.at_level(logging.WARNING, logger="engine.core.updater"):
        set_branch_if(refs, REPO, current, changed(current, "t2"), "test", mine("t2"))
    assert refs.get_branch(REPO, "main").branch.staging_token == "t2"
    assert [r.getMessage() for r in caplog.records] == [
        "test: test: outcome unknown; the branch shows it applied; done"
    ]
    assert caplog.records[0].exc_info is None


def test_unchanged_is_sent_again() -> None:
    store, refs, current = setup()
    store.script = ["lost"]
    set_branch_if(refs, REPO, current, changed(current, "t2"), "test", mine("t2"))
    assert refs.get_branch(REPO, "main").branch.staging_token == "t2"


def test_unchanged_every_time_gives_up_after_a_bounded_number_of_sends() -> None:
    store, refs, current = setup()
    store.script = ["lost"] * 10
    with pytest.raises(OutcomeUnknown):
        set_branch_if(refs, REPO, current, changed(current, "t2"), "test", mine("t2"))
    assert len(store.script) == 10 - UNKNOWN_SENDS


def other_writer(refs: RefManager, token: str) -> Callable[[], None]:
    def run() -> None:
        now = refs.get_branch(REPO, "main")
        refs.set_branch_if(REPO, changed(now, token), now.predicate)

    return run


def test_changed_by_another_writer_and_not_applied_is_a_lost_race() -> None:
    store, refs, current = setup()
    store.script = ["lost"]
    store.between = other_writer(refs, "theirs")
    with pytest.raises(Raced):
        set_branch_if(refs, REPO, current, changed(current, "t2"), "test", mine("t2"))


def test_a_hook_that_cannot_tell_passes_the_unknown_outcome_on() -> None:
    store, refs, current = setup()
    store.script = ["applied"]
    store.between = other_writer(refs, "theirs")
    with pytest.raises(OutcomeUnknown, match="test: outcome unknown"):
        set_branch_if(refs, REPO, current, changed(current, "t2"), "test", lambda record: None)


def test_a_resend_refused_because_the_first_send_landed_after_all_is_applied() -> None:
    # The first send is read back unchanged (still pending, say), lands meanwhile, and the resend
    # finds the record changed: the hook then sees it in.
    store, refs, current = setup()
    updated = changed(current, "t2")

    def lands_late() -> None:
        refs.set_branch_if(REPO, updated, current.predicate)

    calls = {"reads": 0}
    original = refs.get_branch

    def get_branch(repo: RepoHandle, name: str) -> BranchRecord:
        calls["reads"] += 1
        found = original(repo, name)
        if calls["reads"] == 1:
            lands_late()  # after this read: it looked unchanged
        return found

    refs.get_branch = get_branch  # type: ignore[method-assign]
    store.script = ["lost"]
    set_branch_if(refs, REPO, current, updated, "test", mine("t2"))
    assert original(REPO, "main").branch.staging_token == "t2"


def test_update_with_redo_makes_the_change_again_on_the_record_as_it_is_now() -> None:
    store, refs, _ = setup()
    store.script = ["applied"]
    store.between = other_writer(refs, "theirs")
    made: list[str] = []

    def seal(current: BranchRecord) -> pb.Branch:
        made.append(current.branch.staging_token)
        return changed(current, f"sealed-{len(made)}")

    _, updated = BranchUpdater(refs).update(REPO, "main", seal, "sealing", Deadline(), REDO)
    assert made == ["t1", "theirs"]
    assert updated.staging_token == "sealed-2"
    assert refs.get_branch(REPO, "main").branch.staging_token == "sealed-2"


def test_update_without_a_hook_passes_the_unknown_outcome_on() -> None:
    store, refs, _ = setup()
    store.script = ["applied"]
    with pytest.raises(OutcomeUnknown):
        BranchUpdater(refs).update(REPO, "main", lambda current: changed(current, "t2"), "x", Deadline())


def test_a_predicate_failure_is_still_a_predicate_failure() -> None:
    _, refs, current = setup()
    other_writer(refs, "theirs")()
    with pytest.raises(PredicateFailed):
        set_branch_if(refs, REPO, current, changed(current, "t2"), "test", mine("t2"))
