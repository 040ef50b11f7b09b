"""Every kind of graveler mutation, made through a real graveler gRPC server, leaves its journal
records in the partition it changed, named by event type and caller (docs/design/journal.md)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.core.refs import GRAVELER_PARTITION
from engine.graveler import Graveler
from engine.open import open_graveler
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.record import JOURNAL_PREFIX, decode_record
from silt.journal.store import JournaledStore, raw_store
from silt.journal.v1.journal_pb2 import Change, Record
from silt.kv import Store
from silt.kv.store import scan_prefix
from silt.rpc import interceptor as auth

USER_KEY = "x-test-user"


class CallerFromMetadata(grpc.ServerInterceptor):
    """Stands in for the auth service: the caller is who the test says it is. It sets the
    principal exactly where AuthInterceptor does, so graveler reads it the same way."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        user = dict(details.invocation_metadata).get(USER_KEY, "anonymous")
        behavior = handler.unary_unary

        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            token = auth._principal.set(auth.Principal(user_id=str(user), access_key_id="AKTEST"))
            try:
                return behavior(request, context)
            finally:
                auth._principal.reset(token)

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


class Journaled:
    def __init__(self, stub: api_grpc.GravelerServiceStub, graveler: Graveler) -> None:
        self.stub = stub
        self.graveler = graveler
        self.kv = graveler.refs.kv

    def as_user(self, user: str) -> Any:
        stub = self.stub

        class Caller:
            def __getattr__(self, method: str) -> Callable[[Any], Any]:
                return lambda request: getattr(stub, method)(request, metadata=[(USER_KEY, user)])

        return Caller()

    def partitions(self, repo: str) -> list[bytes]:
        handle = self.graveler.refs.get_repository(repo)
        found = [handle.partition]
        for branch in self.graveler.refs.list_branches(handle):
            found += [t.encode() for t in [branch.staging_token, *branch.sealed_tokens]]
        return found

    def records(self, repo: str, partitions: list[bytes] | None = None) -> list[Record]:
        """The repository's records in partitions (default: all of its own and `graveler`)."""
        raw = raw_store(self.kv)
        if partitions is None:
            partitions = [*self.partitions(repo), GRAVELER_PARTITION]
        found = [
            decode_record(e.value) for partition in partitions for e in scan_prefix(raw, partition, JOURNAL_PREFIX)
        ]
        # The `graveler` partition is every repository's: keep this one's records.
        return [r for r in found if r.repository == repo]

    def events(self, repo: str, partitions: list[bytes] | None = None) -> list[tuple[str, str, str]]:
        """(event type, caller, kind of the first key changed) of each record."""
        return [(r.event_type, r.client_id, r.changes[0].kind) for r in self.records(repo, partitions)]


@pytest.fixture
def journaled(store: Store, tmp_path: Path) -> Iterator[Journaled]:
    graveler = open_graveler(store, LocalAdapter(tmp_path / "data"))
    server, port = start(graveler, "127.0.0.1:0", [CallerFromMetadata()])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Journaled(api_grpc.GravelerServiceStub(channel), graveler)
    finally:
        channel.close()
        server.stop(None)
        graveler.close()


def entry(content: str) -> pb.Entry:
    return pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", size=len(content), etag=content)


def new_repo(j: Journaled, user: str = "alice") -> str:
    name = f"jr-{uuid.uuid4().hex[:12]}"
    j.as_user(user).CreateRepository(
        api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}", default_branch="main")
    )
    return name


def test_graveler_kv_is_journaled(journaled: Journaled) -> None:
    assert isinstance(journaled.kv, JournaledStore)


def test_repository_creation_is_journaled_in_both_partitions(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    records = journaled.records(repo)
    assert {r.event_type for r in records} == {"create_repository"}
    assert {r.client_id for r in records} == {"alice"}
    kinds = {c.kind for r in records for c in r.changes}
    assert {"repository", "ns_claim", "branch", "commit"} <= kinds
    partition = journaled.graveler.refs.get_repository(repo).partition.decode()
    assert {r.repository_partition for r in records} == {partition}
    # Each record lives in the partition of the rows it changed.
    for record in records:
        assert len({c.partition for c in record.changes}) == 1


def test_staging_writes_and_deletes_are_journaled_in_the_token_partition(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    bob = journaled.as_user("bob")
    bob.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="a", entry=entry("1")))
    bob.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="a"))
    handle = journaled.graveler.refs.get_repository(repo)
    token = journaled.graveler.refs.get_branch(handle, "main").branch.staging_token.encode()
    assert journaled.events(repo, [token]) == [("object_write", "bob", "staged"), ("object_delete", "bob", "staged")]
    written, deleted = journaled.records(repo, [token])
    assert written.changes[0].key == b"key/a" and written.changes[0].partition == token
    assert deleted.logical_timestamp > written.logical_timestamp


def test_conditional_staging_write_refused_leaves_no_record(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    bob = journaled.as_user("bob")
    request = api.StageEntryRequest(
        repository=repo, branch="main", key="a", entry=entry("1"), if_absent=True, fresh_address=True
    )
    bob.StageEntry(request)
    bob.StageEntry(request)  # the same write again finds its own entry: done, nothing written
    with pytest.raises(grpc.RpcError) as refused:
        request.entry.CopyFrom(entry("2"))  # another write
        bob.StageEntry(request)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    handle = journaled.graveler.refs.get_repository(repo)
    token = journaled.graveler.refs.get_branch(handle, "main").branch.staging_token.encode()
    # The write that succeeded: its guard's compare-and-set and the value; the refusal: nothing.
    assert sorted(journaled.events(repo, [token])) == [
        ("object_write", "bob", "staged"),
        ("object_write", "bob", "staging_guard"),
    ]


def ref_events(j: Journaled, repo: str) -> list[tuple[str, str, str]]:
    """Events recorded in the repository partition (refs, commits, tags, pulls, settings)."""
    return j.events(repo, [j.graveler.refs.get_repository(repo).partition])


def test_every_kind_of_ref_mutation_is_journaled_with_its_event_type(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    carol = journaled.as_user("carol")
    carol.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="a", entry=entry("1")))
    first = carol.Commit(api.CommitRequest(repository=repo, branch="main", message="one"))
    carol.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"))
    carol.StageEntry(api.StageEntryRequest(repository=repo, branch="dev", key="b", entry=entry("2")))
    dev_commit = carol.Commit(api.CommitRequest(repository=repo, branch="dev", message="two"))
    carol.Merge(api.MergeRequest(repository=repo, source_ref="dev", destination_branch="main"))
    carol.Revert(api.RevertRequest(repository=repo, branch="main", ref=dev_commit.id, parent_number=0))
    carol.CherryPick(api.CherryPickRequest(repository=repo, branch="main", ref=dev_commit.id))
    carol.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="c", entry=entry("3")))
    carol.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", all=True))
    carol.ResetBranch(api.ResetBranchRequest(repository=repo, branch="dev", hard_ref=first.id))
    carol.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref=first.id))
    carol.DeleteTag(api.DeleteTagRequest(repository=repo, id="v1"))
    carol.DeleteBranch(api.DeleteBranchRequest(repository=repo, name="dev"))
    carol.SetGCRules(api.SetGCRulesRequest(repository=repo, rules=pb.GCRules(default_retention_days=7)))
    carol.DeleteGCRules(api.DeleteGCRulesRequest(repository=repo))
    carol.SetBranchProtection(
        api.SetBranchProtectionRequest(repository=repo, rules=[pb.BranchProtectionRule(pattern="prod*")])
    )
    carol.UpdateRepositoryMetadata(api.UpdateRepositoryMetadataRequest(repository=repo, set={"team": "data"}))

    events = set(ref_events(journaled, repo))
    expected = {
        ("commit", "carol", "commit"),
        ("commit", "carol", "branch"),
        ("create_branch", "carol", "branch"),
        ("merge", "carol", "commit"),
        ("merge", "carol", "branch"),
        ("revert", "carol", "branch"),
        ("cherry_pick", "carol", "branch"),
        ("reset", "carol", "branch"),
        ("create_tag", "carol", "tag"),
        ("delete_tag", "carol", "tag"),
        ("delete_branch", "carol", "branch"),
        ("set_gc_rules", "carol", "gc_rules"),
        ("delete_gc_rules", "carol", "gc_rules"),
        ("set_branch_protection", "carol", "settings"),
    }
    assert expected <= events, expected - events
    graveler_events = {
        (r.event_type, r.client_id, r.changes[0].kind) for r in journaled.records(repo, [GRAVELER_PARTITION])
    }
    assert ("update_repository_metadata", "carol", "repository") in graveler_events
    deleted_tag = [r for r in journaled.records(repo) if r.event_type == "delete_tag"]
    assert [(c.op, c.key) for r in deleted_tag for c in r.changes] == [(Change.DELETE, b"tags/v1")]


def test_pull_requests_comments_and_reviews_are_journaled(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    alice, bob = journaled.as_user("alice"), journaled.as_user("bob")
    alice.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    alice.StageEntry(api.StageEntryRequest(repository=repo, branch="feature", key="f", entry=entry("f")))
    alice.Commit(api.CommitRequest(repository=repo, branch="feature", message="feature"))
    pull = alice.CreatePullRequest(
        api.CreatePullRequestRequest(repository=repo, title="t", source_branch="feature", destination_branch="main")
    ).pull_request
    bob.AddPullRequestComment(api.AddPullRequestCommentRequest(repository=repo, id=pull.id, body="looks good"))
    bob.SubmitPullRequestReview(
        api.SubmitPullRequestReviewRequest(repository=repo, id=pull.id, verdict=pb.REVIEW_VERDICT_APPROVE)
    )
    alice.UpdatePullRequest(api.UpdatePullRequestRequest(repository=repo, id=pull.id, title="better title"))
    alice.MergePullRequest(api.MergePullRequestRequest(repository=repo, id=pull.id))
    events = set(ref_events(journaled, repo))
    expected = {
        ("create_pull_request", "alice", "pull"),
        ("add_pull_request_comment", "bob", "pull_comment"),
        ("submit_pull_request_review", "bob", "pull"),
        ("update_pull_request", "alice", "pull"),
        ("merge_pull_request", "alice", "pull"),
    }
    assert expected <= events, expected - events


def test_compaction_by_the_compactor_is_journaled_as_system(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    for i in range(3):
        journaled.as_user("dave").StageEntry(
            api.StageEntryRequest(repository=repo, branch="main", key=f"k{i}", entry=entry(str(i)))
        )
    journaled.graveler.compact(repo, "main")  # as the compactor service calls it, outside any RPC
    assert ("compaction", "system", "branch") in set(ref_events(journaled, repo))


def test_a_lost_branch_race_leaves_no_record(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    carol = journaled.as_user("carol")
    carol.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"))
    with pytest.raises(grpc.RpcError) as refused:
        carol.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"))
    assert refused.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert [e for e in ref_events(journaled, repo) if e[0] == "create_branch"] == [("create_branch", "carol", "branch")]


def test_concurrent_commits_and_writes_journal_each_acknowledged_mutation_once(journaled: Journaled) -> None:
    repo = new_repo(journaled)
    writers, per_writer = 4, 15
    erin = journaled.as_user("erin")
    stop = threading.Event()
    commits: list[str] = []

    def write(n: int) -> None:
        for i in range(per_writer):
            erin.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=f"w{n}/{i}", entry=entry("x")))

    def commit() -> None:
        while not stop.is_set():
            try:
                commits.append(erin.Commit(api.CommitRequest(repository=repo, branch="main", message="c")).id)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION  # nothing to commit yet

    committer = threading.Thread(target=commit)
    committer.start()
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    stop.set()
    committer.join(timeout=120)
    erin.Commit(api.CommitRequest(repository=repo, branch="main", message="last", allow_empty=True))
    journaled.graveler.cleaner.flush(timeout=60)
    # Committed tokens were dropped whole (values and journal rows); what is left, together
    # with the commits, accounts for every write: each commit's record names its commit id.
    commit_records = [r for r in journaled.records(repo) if r.event_type == "commit"]
    committed_ids = {c.key.removeprefix(b"commits/").decode() for r in commit_records for c in r.changes}
    assert set(commits) <= committed_ids
    branch_moves = [r for r in commit_records if r.changes[0].kind == "branch"]
    stamps = [r.logical_timestamp for r in branch_moves]
    assert len(set(stamps)) == len(stamps)
    listed = journaled.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref="main", amount=1000))
    assert len(listed.items) == writers * per_writer
