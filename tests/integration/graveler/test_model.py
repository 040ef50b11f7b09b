"""Model-based test: random writes, deletes, commits (whole or of a prefix), branches, merges,
reverts, resets (whole, of a key, of a prefix) and compactions, checked after every step
against plain dictionaries. An edge (edge/core/client.py, over real gRPC) writes objects too,
among them writes whose StageEntry call fails with an answer the edge cannot trust: graveler
applied it and the answer was lost, or it was never applied; the model then allows either
value, and no entry may ever point at bytes the edge deleted. Graveler's background clean-up
is held back and let go at random steps, so that operations meet the state it leaves behind
for a while (a prefix commit's copies in sealed tokens), not only what it leaves once it has
run.

Its size is SILT_MODEL_EXAMPLES sequences of up to SILT_MODEL_STEPS steps (20 of 40 by default)
on the mem and local drivers, SILT_MODEL_CASSANDRA_EXAMPLES on the single Cassandra node (5 by
default, SILT_MODEL_EXAMPLES when only that is set) and SILT_MODEL_CLUSTER_EXAMPLES on the 3-node
Cassandra cluster (2); `make test-model` runs 300 of each. The search of graveler's logic is the
same on every driver, and mem and local search the most: on Cassandra every sequence still
takes the driver's paths (conditional writes, batches, paged scans of staging and of the
branch's tokens after every step), and on the cluster the same paths at its quorum and serial
consistency, with nightly variants searching 30 sequences on the node and 10 on the cluster.
(Hypothesis tries its simplest sequence first; the others are random ones of STEPS steps.)"""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pydantic import SecretStr

from edge.core.client import EdgeClient, MaybeApplied
from edge.core.write_outcome import certainly_not_applied
from engine.reads import ReadEngine
from silt.block.local import LocalAdapter
from silt.config import Config
from silt.errors import NotFound, SiltError
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store
from silt.repository_place import RepositoryPlace
from silt.rpc.signing import Credentials
from tests.integration.graveler.conftest import GravelerEnv, graveler_env
from tests.integration.graveler.test_branching import contents
from tests.support.edge_faults import CallFaults

# A search of operation sequences against a model: seconds per driver.
pytestmark = pytest.mark.slow

ALL_KEYS = ["a", "b/c", "b/d", "e", "f/g/h"]
KEYS = st.sampled_from(ALL_KEYS)
PREFIXES = st.sampled_from(["b/", "f/", "a", "e"])
EXAMPLES = int(os.environ.get("SILT_MODEL_EXAMPLES", "20"))
STEPS = int(os.environ.get("SILT_MODEL_STEPS", "40"))
# Cassandra's legs search less in `make test`: each step is tens of round trips to a JVM (on the
# cluster, Paxos rounds on three), and the search itself is the same as mem's and local's.
# `make test-model` sets them to the full size; the nightly variants search more.
CASSANDRA_EXAMPLES = int(os.environ.get("SILT_MODEL_CASSANDRA_EXAMPLES", os.environ.get("SILT_MODEL_EXAMPLES", "5")))
CLUSTER_EXAMPLES = int(os.environ.get("SILT_MODEL_CLUSTER_EXAMPLES", "2"))
# The nightly variants' sizes in `make test-all`; the rotating slice of `make test` runs them
# smaller (tests/support/rotation.py's ROTATION_ENV): a new search each time, so seven commits'
# slices search as many sequences as one nightly run.
NIGHTLY_CASSANDRA_EXAMPLES = int(os.environ.get("SILT_MODEL_NIGHTLY_CASSANDRA_EXAMPLES", "30"))
NIGHTLY_CLUSTER_EXAMPLES = int(os.environ.get("SILT_MODEL_NIGHTLY_CLUSTER_EXAMPLES", "10"))
Snapshot = dict[str, str]
T = TypeVar("T")


def three_way(base: Snapshot, source: Snapshot, dest: Snapshot) -> Snapshot:
    """Merge with source winning conflicts."""
    merged: Snapshot = {}
    for key in set(base) | set(source) | set(dest):
        b, s, d = base.get(key), source.get(key), dest.get(key)
        value = d if s == b else s
        if value is not None:
            merged[key] = value
    return merged


def listed(env: GravelerEnv, repo: str, ref: str) -> dict[str, pb.Entry]:
    """Every entry of ref, through graveler's ListEntries, page after page."""
    out: dict[str, pb.Entry] = {}
    after = ""
    while True:
        page = env.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, after=after))
        out.update({item.key: item.entry for item in page.items})
        if not page.has_more:
            return out
        after = page.items[-1].key


def direct_contents(reads: ReadEngine, repo: str, ref: str) -> Snapshot:
    out: Snapshot = {}
    after = ""
    while True:
        page = reads.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, after=after), timeout=30)
        out.update({item.key: item.entry.etag for item in page.items})
        if not page.has_more:
            return out
        after = page.items[-1].key


def direct_etag(reads: ReadEngine, repo: str, ref: str, key: str) -> str | None:
    try:
        return reads.StatEntry(api.StatEntryRequest(repository=repo, ref=ref, key=key), timeout=30).entry.etag
    except NotFound as exc:
        assert exc.what == "object", exc
        return None


def check_failed(call: object, code: grpc.StatusCode) -> None:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as exc:
        assert exc.code() == code, exc
        return
    raise AssertionError(f"expected {code}")


class Edge:
    """An edge's writes of new bytes to the model's graveler: the EdgeClient both front ends
    use (its batcher, its rule for deleting bytes graveler did not take), on an event loop of
    its own, with the bytes in the graveler's local object store."""

    def __init__(self, env: GravelerEnv) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="model-edge", daemon=True)
        self.thread.start()
        self.config = Config.model_validate(
            {
                "blockstore": {"type": "local", "local": {"path": str(env.data_root)}},
                "graveler": {"endpoint": f"127.0.0.1:{env.port}"},
                "auth": {"endpoint": "127.0.0.1:1"},
            }
        )
        self.client = self.run(self._open())
        self.bytes = LocalAdapter(env.data_root)

    async def _open(self) -> EdgeClient:
        return EdgeClient(self.config, Credentials("AKIAIOSFODNN7EXAMPLE", SecretStr("secret")), ev.API, "model-edge")

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(60)

    def put(self, repo: str, branch: str, key: str, value: str) -> tuple[str, BaseException | None]:
        """Write value's bytes and stage them as key; the physical address, and the failure."""
        namespace, address = f"local://{repo}", f"edge/{uuid.uuid4().hex}"
        entry = pb.Entry(physical_address=address, size=len(value), etag=value)
        request = api.StageEntryRequest(repository=repo, branch=branch, key=key, entry=entry)
        client = self.client

        async def put() -> BaseException | None:
            await client.write_bytes(namespace, address, io.BytesIO(value.encode()), len(value))
            try:
                await client.stage_new_bytes(request, RepositoryPlace(namespace, ""), time.monotonic() + 30)
            except SiltError as exc:
                return exc
            return None

        return address, self.run(put())

    def stored(self, repo: str, address: str) -> bool:
        try:
            self.bytes.stat(f"local://{repo}", address)
        except Exception:
            return False
        return True

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class GravelerModel(RuleBasedStateMachine):
    env: GravelerEnv
    faults: CallFaults
    edge: Edge

    def __init__(self) -> None:
        super().__init__()
        self.values = itertools.count()
        self.snapshots: dict[str, Snapshot] = {}
        self.parents: dict[str, list[str]] = {}
        self.heads: dict[str, str] = {}
        self.staged: dict[str, dict[str, str | None]] = {}
        self.cleanup_gate: threading.Event | None = None
        # Physical addresses of the bytes the edge wrote: an entry naming one must find them.
        self.edge_addresses: set[str] = set()

    @initialize()
    def create_repository(self) -> None:
        self.repo = f"model-{uuid.uuid4().hex[:12]}"
        self.env.stub.CreateRepository(
            api.CreateRepositoryRequest(name=self.repo, storage_namespace=f"local://{self.repo}")
        )
        head = self.env.stub.GetBranch(api.GetBranchRequest(repository=self.repo, name="main")).commit_id
        self.snapshots[head], self.parents[head] = {}, []
        self.heads["main"], self.staged["main"] = head, {}

    # --- the model -------------------------------------------------------------------------

    def visible(self, branch: str) -> Snapshot:
        view = dict(self.snapshots[self.heads[branch]])
        for key, value in self.staged[branch].items():
            if value is None:
                view.pop(key, None)
            else:
                view[key] = value
        return view

    def dirty(self, branch: str) -> bool:
        return self.visible(branch) != self.snapshots[self.heads[branch]]

    def moved(self, branch: str, commit: api.CommitInfo, snapshot: Snapshot) -> None:
        self.snapshots[commit.id] = snapshot
        self.parents[commit.id] = list(commit.parents)
        self.heads[branch] = commit.id

    def pick(self, data: st.DataObject, label: str) -> str:
        return data.draw(st.sampled_from(sorted(self.heads)), label=label)

    # --- rules ------------------------------------------------------------------------------

    @rule(data=st.data(), key=KEYS)
    def write(self, data: st.DataObject, key: str) -> None:
        branch = self.pick(data, "branch")
        value = f"v{next(self.values)}"
        self.env.put(self.repo, branch, key, value)
        self.staged[branch][key] = value

    @rule(data=st.data(), keys=st.lists(KEYS, min_size=1, max_size=4))
    def write_many(self, data: st.DataObject, keys: list[str]) -> None:
        """StageEntries, as an edge sends its clients' concurrent writes: a key given twice
        takes its last entry."""
        branch = self.pick(data, "branch")
        staged = []
        for key in keys:
            value = f"v{next(self.values)}"
            entry = pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", size=len(value), etag=value)
            staged.append(api.StagedEntry(key=key, entry=entry))
            self.staged[branch][key] = value
        request = api.StageEntriesRequest(repository=self.repo, branch=branch, entries=staged)
        outcomes = self.env.stub.StageEntries(request).outcomes
        assert [o.result for o in outcomes] == [api.StageEntryOutcome.RESULT_STAGED] * len(keys)

    @rule(data=st.data(), key=KEYS)
    def edge_write(self, data: st.DataObject, key: str) -> None:
        branch = self.pick(data, "branch")
        value = f"v{next(self.values)}"
        address, error = self.edge.put(self.repo, branch, key, value)
        assert error is None, error
        self.edge_addresses.add(address)
        self.staged[branch][key] = value

    @rule(data=st.data(), key=KEYS, applied=st.booleans())
    def edge_write_with_an_ambiguous_failure(self, data: st.DataObject, key: str, applied: bool) -> None:
        """The edge's StageEntry fails UNAVAILABLE, saying "connection refused": graveler applied
        it and the answer was lost, or graveler's store refused it before the write. The edge
        cannot tell which: it must treat the write as maybe applied (keep the bytes), and the
        key then holds the new value or the one before."""
        branch = self.pick(data, "branch")
        value = f"v{next(self.values)}"
        before = self.visible(branch).get(key)
        if applied:
            self.faults.lose_answer("StageEntry")
        else:
            self.faults.refuse_unapplied("StageEntry")
        sent_before = self.faults.calls.get("StageEntry", 0)
        try:
            address, error = self.edge.put(self.repo, branch, key, value)
        finally:
            self.faults.clear()
        # Through the READY gate, once: a call that went out is never sent again by the edge.
        assert self.faults.calls.get("StageEntry", 0) == sent_before + 1
        self.edge_addresses.add(address)
        assert isinstance(error, MaybeApplied), error  # UNAVAILABLE once it went out
        assert not certainly_not_applied(error)  # maybe applied, whatever the message says
        assert self.edge.stored(self.repo, address)  # so its bytes stay
        now = contents(self.env, self.repo, branch).get(key)
        assert now in (before, value), (now, before, value)
        assert now == (value if applied else before)
        if applied:
            self.staged[branch][key] = value

    @rule(data=st.data(), key=KEYS)
    def delete(self, data: st.DataObject, key: str) -> None:
        branch = self.pick(data, "branch")
        request = api.DeleteEntryRequest(repository=self.repo, branch=branch, key=key)
        if key in self.visible(branch):
            self.env.stub.DeleteEntry(request)
            self.staged[branch][key] = None
        else:
            check_failed(lambda: self.env.stub.DeleteEntry(request), grpc.StatusCode.NOT_FOUND)

    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        branch = self.pick(data, "branch")
        if not self.dirty(branch):
            check_failed(lambda: self.env.commit(self.repo, branch), grpc.StatusCode.FAILED_PRECONDITION)
        else:
            self.moved(branch, self.env.commit(self.repo, branch), self.visible(branch))
        self.staged[branch] = {}

    @precondition(lambda self: 0 < len(self.heads) < 3)
    @rule(data=st.data())
    def create_branch(self, data: st.DataObject) -> None:
        name = "dev" if "dev" not in self.heads else "exp"
        source = self.pick(data, "source")
        self.env.stub.CreateBranch(api.CreateBranchRequest(repository=self.repo, name=name, source_ref=source))
        self.heads[name], self.staged[name] = self.heads[source], {}

    @precondition(lambda self: len(self.heads) > 1)
    @rule(data=st.data())
    def merge(self, data: st.DataObject) -> None:
        source = self.pick(data, "source")
        dest = data.draw(st.sampled_from(sorted(set(self.heads) - {source})), label="dest")
        request = api.MergeRequest(
            repository=self.repo,
            source_ref=source,
            destination_branch=dest,
            strategy=api.MERGE_STRATEGY_SOURCE_WINS,
        )
        if self.dirty(dest):
            check_failed(lambda: self.env.stub.Merge(request), grpc.StatusCode.FAILED_PRECONDITION)
            # Commit both sides, so that merges happen often and meet conflicting changes.
            for branch in (source, dest):
                if self.dirty(branch):
                    self.moved(branch, self.env.commit(self.repo, branch), self.visible(branch))
                self.staged[branch] = {}
        base = self.env.stub.FindMergeBase(
            api.FindMergeBaseRequest(repository=self.repo, left_ref=self.heads[source], right_ref=self.heads[dest])
        ).commit_id
        if base == self.heads[source]:
            check_failed(lambda: self.env.stub.Merge(request), grpc.StatusCode.FAILED_PRECONDITION)
            return
        result = self.env.stub.Merge(request)
        assert not result.conflicts
        expected = three_way(self.snapshots[base], self.snapshots[self.heads[source]], self.snapshots[self.heads[dest]])
        assert list(result.commit.parents) == [self.heads[dest], self.heads[source]]
        self.moved(dest, result.commit, expected)
        # A merge needs a clean branch: all it had staged changed nothing (a delete of a key its
        # head lacked, a value equal to the head's), and the head move drops the tokens holding
        # those (lockfree-staging.md, "Partial commits"), so they no longer hide what it brings.
        self.staged[dest] = {}

    @rule(data=st.data())
    def revert_head(self, data: st.DataObject) -> None:
        branch = self.pick(data, "branch")
        if len(self.parents[self.heads[branch]]) != 1:
            return
        head = self.heads[branch]
        request = api.RevertRequest(repository=self.repo, branch=branch, ref=head)
        parent_snapshot = self.snapshots[self.parents[head][0]]
        if self.dirty(branch) or parent_snapshot == self.snapshots[head]:
            check_failed(lambda: self.env.stub.Revert(request), grpc.StatusCode.FAILED_PRECONDITION)
            return
        result = self.env.stub.Revert(request)
        assert not result.conflicts
        self.moved(branch, result.commit, dict(parent_snapshot))
        self.staged[branch] = {}  # as after a merge: the clean branch's no-op changes are dropped

    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        branch = self.pick(data, "branch")
        self.env.stub.ResetBranch(api.ResetBranchRequest(repository=self.repo, branch=branch, all=True))
        self.staged[branch] = {}

    @rule(data=st.data(), prefix=PREFIXES, exact=st.booleans())
    def reset_part(self, data: st.DataObject, prefix: str, exact: bool) -> None:
        branch = self.pick(data, "branch")
        target: dict[str, Any] = {"key": prefix} if exact else {"prefix": prefix}
        self.env.stub.ResetBranch(api.ResetBranchRequest(repository=self.repo, branch=branch, **target))
        for key in list(self.staged[branch]):
            if key == prefix or (not exact and key.startswith(prefix)):
                del self.staged[branch][key]

    @rule(data=st.data(), prefix=PREFIXES)
    def commit_prefix(self, data: st.DataObject, prefix: str) -> None:
        branch = self.pick(data, "branch")
        head = self.snapshots[self.heads[branch]]
        visible = self.visible(branch)
        expected = {k: v for k, v in head.items() if not k.startswith(prefix)}
        expected.update({k: v for k, v in visible.items() if k.startswith(prefix)})
        if expected == head:
            check_failed(
                lambda: self.env.commit(self.repo, branch, prefixes=[prefix]), grpc.StatusCode.FAILED_PRECONDITION
            )
            return
        self.moved(branch, self.env.commit(self.repo, branch, prefixes=[prefix]), expected)
        self.staged[branch] = {k: v for k, v in self.staged[branch].items() if not k.startswith(prefix)}

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        # Compaction changes no read: the model stays as it is, the invariant checks that.
        branch = self.pick(data, "branch")
        self.env.graveler.compact(self.repo, branch)

    @precondition(lambda self: self.cleanup_gate is None)
    @rule()
    def hold_cleanup(self) -> None:
        # The cleaner has one worker: a task that waits holds everything submitted after it.
        self.cleanup_gate = threading.Event()
        self.env.graveler.cleaner.submit(self.cleanup_gate.wait, 120)

    @precondition(lambda self: self.cleanup_gate is not None)
    @rule()
    def release_cleanup(self) -> None:
        self.teardown()

    def teardown(self) -> None:
        if self.cleanup_gate is not None:
            self.cleanup_gate.set()
            self.cleanup_gate = None
            self.env.graveler.cleaner.flush(120)

    # --- what must hold after every step ---------------------------------------------------

    @invariant()
    def reads_match_the_model_and_no_entry_points_at_bytes_the_edge_deleted(self) -> None:
        """One listing of each branch's staged and committed views answers both: the keys and
        ETags the model holds, and bytes there for every entry naming an edge's write."""
        if not self.heads:
            return
        for branch in self.heads:
            for ref, expected in ((branch, self.visible(branch)), (f"{branch}@", self.snapshots[self.heads[branch]])):
                entries = listed(self.env, self.repo, ref)
                assert {key: entry.etag for key, entry in entries.items()} == expected, ref
                for key, entry in entries.items():
                    address = entry.physical_address
                    if address in self.edge_addresses:
                        assert self.edge.stored(self.repo, address), (ref, key, address)

    @invariant()
    def the_edges_reads_match_the_model(self) -> None:
        """The reader the edge runs beside graveler (engine/reads.py) sees the same,
        from its own caches and a read-only store: each branch's staged and committed views as
        listings, and the staged view key by key, where staging tokens and tombstones decide."""
        if not self.heads:
            return
        reads = self.env.reads
        assert reads is not None
        for branch in self.heads:
            staged = self.visible(branch)
            assert direct_contents(reads, self.repo, branch) == staged, branch
            assert direct_contents(reads, self.repo, f"{branch}@") == self.snapshots[self.heads[branch]], branch
            for key in ALL_KEYS:
                assert direct_etag(reads, self.repo, branch, key) == staged.get(key), (branch, key)


Modelled = tuple[GravelerEnv, CallFaults, Edge]


def modelled(store: Store, tmp_path: Path) -> Iterator[Modelled]:
    """Graveler with faults that can be armed on its calls, and an edge writing to it."""
    faults = CallFaults()
    for env in graveler_env(store, tmp_path, interceptors=[faults]):
        edge = Edge(env)
        try:
            yield env, faults, edge
        finally:
            edge.close()


@pytest.fixture
def model_env(store: Store, tmp_path: Path) -> Iterator[Modelled]:
    yield from modelled(store, tmp_path)


# A search of 300 sequences on Cassandra takes over ten minutes on a loaded machine.
@pytest.mark.timeout(max(600, max(EXAMPLES, CASSANDRA_EXAMPLES) * STEPS // 4))
def test_graveler_matches_a_dictionary_model(model_env: Modelled, request: pytest.FixtureRequest) -> None:
    search(model_env, CASSANDRA_EXAMPLES if request.node.callspec.params["store"] == "cassandra" else EXAMPLES)


@pytest.fixture
def cassandra_model_env(cassandra_store: Store, tmp_path: Path) -> Iterator[Modelled]:
    yield from modelled(cassandra_store, tmp_path)


@pytest.mark.nightly
@pytest.mark.timeout(max(600, NIGHTLY_CASSANDRA_EXAMPLES * STEPS // 4))
def test_graveler_matches_a_dictionary_model_in_a_longer_search_on_cassandra(cassandra_model_env: Modelled) -> None:
    """The single node's search at six times `make test`'s size (three in the rotation)."""
    search(cassandra_model_env, NIGHTLY_CASSANDRA_EXAMPLES)


@pytest.fixture
def cluster_env(cassandra_cluster_store: Store, tmp_path: Path) -> Iterator[Modelled]:
    yield from modelled(cassandra_cluster_store, tmp_path)


@pytest.mark.timeout(max(600, CLUSTER_EXAMPLES * STEPS // 2))
def test_graveler_matches_a_dictionary_model_on_a_cluster(cluster_env: Modelled) -> None:
    """The same search on the 3-node cluster (RF 3, QUORUM and SERIAL)."""
    search(cluster_env, CLUSTER_EXAMPLES)


@pytest.mark.nightly
@pytest.mark.timeout(max(600, NIGHTLY_CLUSTER_EXAMPLES * STEPS // 2))
def test_graveler_matches_a_dictionary_model_in_a_longer_search_on_a_cluster(cluster_env: Modelled) -> None:
    """The cluster's search at five times `make test`'s size (three in the rotation)."""
    search(cluster_env, NIGHTLY_CLUSTER_EXAMPLES)


def search(modelled: Modelled, examples: int) -> None:
    class Bound(GravelerModel):
        pass

    Bound.env, Bound.faults, Bound.edge = modelled
    run_state_machine_as_test(
        Bound, settings=settings(max_examples=examples, stateful_step_count=STEPS, deadline=None, database=None)
    )
