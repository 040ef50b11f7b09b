"""The graveler API end to end over gRPC, on every KV driver."""

from __future__ import annotations

import uuid

import grpc
import pytest

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.graveler.conftest import GravelerEnv


def code_of(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()  # type: ignore[operator]
    return err.value.code()


# --- repositories ----------------------------------------------------------------------------


def test_repository_lifecycle(env: GravelerEnv) -> None:
    repo = env.new_repo(default_branch="trunk")
    info = env.stub.GetRepository(api.GetRepositoryRequest(name=repo))
    assert info.default_branch == "trunk"
    assert info.storage_namespace == f"local://{repo}"
    branches = env.stub.ListBranches(api.ListBranchesRequest(repository=repo)).branches
    assert [b.name for b in branches] == ["trunk"]
    log = env.stub.Log(api.LogRequest(repository=repo, ref="trunk")).commits
    assert [c.message for c in log] == ["Repository created"]

    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    assert code_of(lambda: env.stub.GetRepository(api.GetRepositoryRequest(name=repo))) == grpc.StatusCode.NOT_FOUND


def test_recreated_repository_never_sees_old_data(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "old-file")
    env.commit(repo, "main")
    env.put(repo, "main", "staged-file")
    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    env.stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}-2"))
    assert env.list_all(repo, "main") == []


def test_list_repositories_paginates_in_name_order(env: GravelerEnv) -> None:
    tag = uuid.uuid4().hex[:8]
    names = [f"list-{tag}-{c}" for c in "edcba"]
    for name in names:
        env.stub.CreateRepository(api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}"))
    seen: list[str] = []
    after = f"list-{tag}-"
    while True:
        page = env.stub.ListRepositories(api.ListRepositoriesRequest(after=after, amount=2))
        mine = [r.name for r in page.repositories if r.name.startswith(f"list-{tag}-")]
        seen.extend(mine)
        if not page.has_more or len(mine) < len(page.repositories):
            break
        after = page.repositories[-1].name
    assert seen == sorted(names)


@pytest.mark.parametrize(
    "name", ["ab", "Upper", "-start", "end-", "has_underscore", "two..dots", "dot.-hyphen", "192.168.0.1", "a" * 64, ""]
)
def test_invalid_repository_names(env: GravelerEnv, name: str) -> None:
    request = api.CreateRepositoryRequest(name=name, storage_namespace="local://x")
    assert code_of(lambda: env.stub.CreateRepository(request)) == grpc.StatusCode.INVALID_ARGUMENT


def test_duplicate_repository(env: GravelerEnv) -> None:
    repo = env.new_repo()
    request = api.CreateRepositoryRequest(name=repo, storage_namespace="local://other")
    assert code_of(lambda: env.stub.CreateRepository(request)) == grpc.StatusCode.ALREADY_EXISTS


# --- branches, staging, commits ----------------------------------------------------------------


def test_stage_read_commit_and_time_travel(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "data/a.csv", "v1")
    assert env.etag(repo, "main", "data/a.csv") == "v1"
    # Staged data is invisible to the committed-only view until committed.
    assert code_of(lambda: env.etag(repo, "main@", "data/a.csv")) == grpc.StatusCode.NOT_FOUND
    first = env.commit(repo, "main", "first", metadata={"job": "ingest"})
    assert first.metadata["job"] == "ingest"
    assert first.generation == 2
    assert env.etag(repo, "main@", "data/a.csv") == "v1"

    env.put(repo, "main", "data/a.csv", "v2")
    second = env.commit(repo, "main", "second")
    assert second.parents == [first.id]
    assert env.etag(repo, "main", "data/a.csv") == "v2"
    assert env.etag(repo, first.id, "data/a.csv") == "v1"  # time travel by commit id
    assert env.etag(repo, first.id[:10], "data/a.csv") == "v1"  # ... or a unique prefix
    assert env.etag(repo, "main~1", "data/a.csv") == "v1"
    assert env.etag(repo, "main^1", "data/a.csv") == "v1"
    log = env.stub.Log(api.LogRequest(repository=repo, ref="main")).commits
    assert [c.message for c in log] == ["second", "first", "Repository created"]


def test_tombstones_hide_committed_values(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "keep")
    env.put(repo, "main", "drop")
    first = env.commit(repo, "main")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="drop"))
    assert env.list_all(repo, "main") == ["keep"]
    assert code_of(lambda: env.etag(repo, "main", "drop")) == grpc.StatusCode.NOT_FOUND
    assert env.list_all(repo, "main@") == ["drop", "keep"]
    env.commit(repo, "main")
    assert env.list_all(repo, "main") == ["keep"]
    assert env.list_all(repo, first.id) == ["drop", "keep"]
    # Deleting what does not exist says so.
    request = api.DeleteEntryRequest(repository=repo, branch="main", key="drop")
    assert code_of(lambda: env.stub.DeleteEntry(request)) == grpc.StatusCode.NOT_FOUND


def test_branches_are_isolated(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "shared", "base")
    env.commit(repo, "main")
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    env.put(repo, "feature", "shared", "feature-version")
    env.put(repo, "feature", "only-feature")
    env.put(repo, "main", "only-main")
    assert env.etag(repo, "main", "shared") == "base"
    assert env.etag(repo, "feature", "shared") == "feature-version"
    assert env.list_all(repo, "main") == ["only-main", "shared"]
    assert env.list_all(repo, "feature") == ["only-feature", "shared"]
    env.commit(repo, "feature")
    assert env.list_all(repo, "main@") == ["shared"]


def test_branch_from_tag_commit_and_expression(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "a", "1")
    c1 = env.commit(repo, "main")
    env.put(repo, "main", "a", "2")
    env.commit(repo, "main")
    env.stub.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref=c1.id))
    for name, source in [("from-tag", "v1"), ("from-commit", c1.id[:8]), ("from-expr", "main~1")]:
        branch = env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name=name, source_ref=source))
        assert branch.commit_id == c1.id
        assert env.etag(repo, name, "a") == "1"
    tags = env.stub.ListTags(api.ListTagsRequest(repository=repo)).tags
    assert [(t.id, t.commit_id) for t in tags] == [("v1", c1.id)]
    env.stub.DeleteTag(api.DeleteTagRequest(repository=repo, id="v1"))
    assert code_of(lambda: env.stub.GetTag(api.GetTagRequest(repository=repo, id="v1"))) == grpc.StatusCode.NOT_FOUND


def test_branch_errors(env: GravelerEnv) -> None:
    repo = env.new_repo()
    create = api.CreateBranchRequest(repository=repo, name="main", source_ref="main")
    assert code_of(lambda: env.stub.CreateBranch(create)) == grpc.StatusCode.ALREADY_EXISTS
    for bad in ["a..b", "with space", "tilde~", "x.lock", "-dash", "a/b", "bad@"]:
        request = api.CreateBranchRequest(repository=repo, name=bad, source_ref="main")
        assert code_of(lambda request=request: env.stub.CreateBranch(request)) == grpc.StatusCode.INVALID_ARGUMENT
    missing = api.CreateBranchRequest(repository=repo, name="x", source_ref="nope")
    assert code_of(lambda: env.stub.CreateBranch(missing)) == grpc.StatusCode.NOT_FOUND
    delete_default = api.DeleteBranchRequest(repository=repo, name="main")
    assert code_of(lambda: env.stub.DeleteBranch(delete_default)) == grpc.StatusCode.FAILED_PRECONDITION


def test_deleted_branch_is_gone(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="tmp", source_ref="main"))
    env.put(repo, "tmp", "x")
    env.stub.DeleteBranch(api.DeleteBranchRequest(repository=repo, name="tmp"))
    get = api.GetBranchRequest(repository=repo, name="tmp")
    assert code_of(lambda: env.stub.GetBranch(get)) == grpc.StatusCode.NOT_FOUND
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="tmp", source_ref="main"))
    assert env.list_all(repo, "tmp") == []


def test_empty_commit_is_refused_unless_allowed(env: GravelerEnv) -> None:
    repo = env.new_repo()
    assert code_of(lambda: env.commit(repo, "main")) == grpc.StatusCode.FAILED_PRECONDITION
    entry = env.put(repo, "main", "a")
    env.commit(repo, "main")
    # Re-staging the identical entry is not a change (entry identity).
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="a", entry=entry))
    assert code_of(lambda: env.commit(repo, "main")) == grpc.StatusCode.FAILED_PRECONDITION
    empty = env.commit(repo, "main", "marker", allow_empty=True)
    assert empty.message == "marker"


def test_commits_on_tags_and_commits_are_refused(env: GravelerEnv) -> None:
    repo = env.new_repo()
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    entry = pb.Entry(physical_address="data/k")
    request = api.StageEntryRequest(repository=repo, branch=head, key="k", entry=entry)
    assert code_of(lambda: env.stub.StageEntry(request)) == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("key", ["", "x" * 1025])
def test_invalid_keys(env: GravelerEnv, key: str) -> None:
    repo = env.new_repo()
    request = api.StageEntryRequest(repository=repo, branch="main", key=key)
    assert code_of(lambda: env.stub.StageEntry(request)) == grpc.StatusCode.INVALID_ARGUMENT


def test_log_pagination(env: GravelerEnv) -> None:
    repo = env.new_repo()
    for i in range(5):
        env.put(repo, "main", f"k{i}")
        env.commit(repo, "main", f"c{i}")
    messages: list[str] = []
    after = ""
    while True:
        page = env.stub.Log(api.LogRequest(repository=repo, ref="main", after=after, amount=2))
        messages.extend(c.message for c in page.commits)
        if not page.has_more:
            break
        after = page.commits[-1].id
    assert messages == ["c4", "c3", "c2", "c1", "c0", "Repository created"]


def test_resolve_ref(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "a")
    commit = env.commit(repo, "main")
    resolved = env.stub.ResolveRef(api.ResolveRefRequest(repository=repo, ref="main"))
    assert resolved.type == api.ResolveRefResponse.REF_TYPE_BRANCH
    assert resolved.branch == "main"
    assert resolved.commit_id == commit.id
    committed_only = env.stub.ResolveRef(api.ResolveRefRequest(repository=repo, ref="main@"))
    assert committed_only.branch == ""
    by_prefix = env.stub.ResolveRef(api.ResolveRefRequest(repository=repo, ref=commit.id[:6]))
    assert by_prefix.type == api.ResolveRefResponse.REF_TYPE_COMMIT
    assert by_prefix.commit_id == commit.id
    for bad, code in [
        ("main~5", grpc.StatusCode.NOT_FOUND),
        ("main^2", grpc.StatusCode.NOT_FOUND),
        ("ma@in", grpc.StatusCode.INVALID_ARGUMENT),
        ("main~x", grpc.StatusCode.INVALID_ARGUMENT),
    ]:
        request = api.ResolveRefRequest(repository=repo, ref=bad)
        assert code_of(lambda request=request: env.stub.ResolveRef(request)) == code, bad


def test_unknown_repository_is_not_found(env: GravelerEnv) -> None:
    request = api.StatEntryRequest(repository="no-such-repo", ref="main", key="k")
    assert code_of(lambda: env.stub.StatEntry(request)) == grpc.StatusCode.NOT_FOUND
