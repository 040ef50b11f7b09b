"""Refs dump and restore (lakeFS's dumpRefs / restoreRefs and the dumpSubmit / restoreSubmit
tasks), hard reset and commit records, through lakefs-sdk against the real stack: a repository with branches,
tags and a merge, dumped and restored into a new bare repository on its namespace, reads back
the same heads, tags and logs; refusals answer lakeFS's statuses and texts."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from engine.features.leases import Lease
from engine.features.lifecycle import RESTORE_LEASE, commit_id_of
from silt.config import load_config
from silt.errors import NotFound
from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.store import open_graveler_store
from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api, json_post
from tests.e2e.api.conftest import error_message as _message

NOT_BARE = "can only restore into a bare repository"
_ADMIN: list[Credentials] = []


@pytest.fixture(scope="module", autouse=True)
def admin(api: Api) -> Credentials:
    _ADMIN[:] = [api.stack.admin]
    return api.stack.admin


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


def _commit(client: lakefs_sdk.ApiClient, repo: str, branch: str, message: str) -> str:
    commit = lakefs_sdk.CommitsApi(client).commit(repo, branch, lakefs_sdk.CommitCreation(message=message))
    return str(commit.id)


@pytest.fixture
def history(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> str:
    """main, dev and feature with commits on each, a merge of dev into main, and two tags."""
    branches = lakefs_sdk.BranchesApi(client)
    s3.put_object(Bucket=repo, Key="main/a.txt", Body=b"a")
    _commit(client, repo, "main", "a")
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    s3.put_object(Bucket=repo, Key="dev/b.txt", Body=b"b")
    first_dev = _commit(client, repo, "dev", "b on dev")
    s3.put_object(Bucket=repo, Key="main/c.txt", Body=b"c")
    _commit(client, repo, "main", "c on main")
    lakefs_sdk.RefsApi(client).merge_into_branch(repo, "dev", "main", lakefs_sdk.Merge(message="dev into main"))
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="feature", source="dev"))
    s3.put_object(Bucket=repo, Key="feature/d.txt", Body=b"d")
    _commit(client, repo, "feature", "d on feature")
    tags = lakefs_sdk.TagsApi(client)
    tags.create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    tags.create_tag(repo, lakefs_sdk.TagCreation(id="v0", ref=first_dev))
    return repo


def _state(client: lakefs_sdk.ApiClient, repo: str) -> dict[str, Any]:
    """Branch heads, tags, and each branch's log commit by commit."""
    heads = {b.id: b.commit_id for b in lakefs_sdk.BranchesApi(client).list_branches(repo, amount=1000).results}
    tags = {t.id: t.commit_id for t in lakefs_sdk.TagsApi(client).list_tags(repo, amount=1000).results}
    logs = {
        name: [c.to_dict() for c in lakefs_sdk.RefsApi(client).log_commits(repo, name, amount=1000).results]
        for name in heads
    }
    return {"heads": heads, "tags": tags, "logs": logs}


def _put(api: Api, path: str, body: Any) -> Any:
    return api.request("PUT", path, body=json.dumps(body).encode(), headers=_json())


def _bare_beside(client: lakefs_sdk.ApiClient, repo: str) -> str:
    """A new bare repository on repo's storage namespace, where repo's dumps are."""
    name = f"restored-{secrets.token_hex(4)}"
    creation = lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{repo}")
    lakefs_sdk.RepositoriesApi(client).create_repository(creation, bare=True)
    return name


def _wait(status: Any, repo: str, task_id: str) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = status(repo, task_id)
        if answer.done:
            return answer
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} not done in time")


def test_dump_and_restore_sync(client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    before = _state(client, history)
    internal = lakefs_sdk.InternalApi(client)
    dump = internal.dump_refs(history)
    # One Silt dump, named by its manifest in all three of lakeFS's fields.
    assert dump.commits_meta_range_id == dump.tags_meta_range_id == dump.branches_meta_range_id
    assert dump.commits_meta_range_id.startswith("_silt/refs/")
    target = _bare_beside(client, history)
    assert lakefs_sdk.BranchesApi(client).list_branches(target).results == []
    internal.restore_refs(target, lakefs_sdk.RefsRestore(**dump.to_dict()))
    after = _state(client, target)
    assert after == before
    assert len(after["logs"]["main"]) == 5  # the first commit, a, b on dev, c, the merge
    assert any(len(c["parents"]) == 2 for c in after["logs"]["main"])
    assert s3.get_object(Bucket=target, Key="feature/d.txt")["Body"].read() == b"d"


def test_dump_and_restore_tasks(client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    before = _state(client, history)
    repositories = lakefs_sdk.RepositoriesApi(client)
    started = repositories.dump_submit(history)
    dumped = _wait(repositories.dump_status, history, started.id)
    assert dumped.id == started.id and dumped.error is None
    assert dumped.refs is not None and dumped.refs.commits_meta_range_id.startswith("_silt/refs/")
    target = _bare_beside(client, history)
    restore = lakefs_sdk.RefsRestore(**dumped.refs.to_dict())
    task = repositories.restore_submit(target, restore)
    restored = _wait(repositories.restore_status, target, task.id)
    assert restored.error is None
    assert _state(client, target) == before
    assert s3.get_object(Bucket=target, Key="main/b.txt")["Body"].read() == b"b"
    # A second restore into the repository, now with branches, is refused at submit.
    with pytest.raises(ApiException) as refused:
        repositories.restore_submit(target, restore)
    assert refused.value.status == 400 and json.loads(refused.value.body)["message"] == NOT_BARE


def test_restore_refuses_a_repository_with_refs(api: Api, client: lakefs_sdk.ApiClient, history: str) -> None:
    dump = lakefs_sdk.InternalApi(client).dump_refs(history).to_dict()
    answer = api.request(
        "PUT", f"/repositories/{history}/refs/restore", body=json.dumps(dump).encode(), headers=_json()
    )
    assert _message(answer, 400) == NOT_BARE
    unchanged = _state(client, history)
    assert set(unchanged["heads"]) == {"main", "dev", "feature"}


def test_restore_bad_bodies(api: Api, client: lakefs_sdk.ApiClient, history: str) -> None:
    dump = lakefs_sdk.InternalApi(client).dump_refs(history).to_dict()
    target = _bare_beside(client, history)
    mixed = {**dump, "tags_meta_range_id": "_silt/refs/0/manifest.json"}
    answer = api.request(
        "PUT", f"/repositories/{target}/refs/restore", body=json.dumps(mixed).encode(), headers=_json()
    )
    assert "must all name the same dump" in _message(answer, 400)
    elsewhere = {k: "somewhere/else" for k in dump}
    answer = json_post(api, f"/repositories/{target}/restore", elsewhere)
    assert "invalid dump location" in _message(answer, 400)
    missing = {k: "_silt/refs/00/manifest.json" for k in dump}
    answer = api.request(
        "PUT", f"/repositories/{target}/refs/restore", body=json.dumps(missing).encode(), headers=_json()
    )
    assert _message(answer, 404)
    assert lakefs_sdk.BranchesApi(client).list_branches(target).results == []


def test_unknown_task_ids(api: Api, client: lakefs_sdk.ApiClient, history: str) -> None:
    repositories = lakefs_sdk.RepositoriesApi(client)
    dump = repositories.dump_submit(history)
    _wait(repositories.dump_status, history, dump.id)
    for path, task_id in (
        ("dump", "0123456789abcdef0123"),
        ("dump", "not-an-id"),
        ("restore", dump.id),  # a dump's id is no restore task
    ):
        answer = api.request("GET", f"/repositories/{history}/{path}?task_id={task_id}")
        assert _message(answer, 404)
    assert api.request("GET", f"/repositories/{history}/dump").status == 400
    assert _message(api.request("GET", "/repositories/no-such-repo/dump?task_id=00"), 404)


def test_hard_reset(api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    target = lakefs_sdk.RefsApi(client).log_commits(history, "main", amount=3).results[2].id
    s3.put_object(Bucket=history, Key="main/staged.txt", Body=b"s")
    lakefs_sdk.ExperimentalApi(client).hard_reset_branch(history, "main", target)
    assert branches.get_branch(history, "main").commit_id == target
    assert branches.diff_branch(history, "main").results == []
    with pytest.raises(ApiException) as gone:
        lakefs_sdk.ObjectsApi(client).stat_object(history, "main", "staged.txt")
    assert gone.value.status == 404
    # To a tag, and to a ref that does not exist.
    lakefs_sdk.ExperimentalApi(client).hard_reset_branch(history, "dev", "v1", force=True)
    assert branches.get_branch(history, "dev").commit_id == lakefs_sdk.TagsApi(client).get_tag(history, "v1").commit_id
    answer = api.request("PUT", f"/repositories/{history}/branches/main/hard_reset?ref=no-such-ref")
    assert _message(answer, 404)
    assert branches.get_branch(history, "main").commit_id == target
    assert api.request("PUT", f"/repositories/{history}/branches/main/hard_reset").status == 400


def test_hard_reset_of_a_protected_branch(api: Api, client: lakefs_sdk.ApiClient, history: str) -> None:
    head = lakefs_sdk.BranchesApi(client).get_branch(history, "main").commit_id
    rules = json.dumps([{"pattern": "main"}]).encode()
    assert api.request("PUT", f"/repositories/{history}/settings/branch_protection", body=rules, headers=_json()).status
    for force in ("false", "true"):
        answer = api.request("PUT", f"/repositories/{history}/branches/main/hard_reset?ref=dev&force={force}")
        assert "protected branch" in _message(answer, 403)
    assert lakefs_sdk.BranchesApi(client).get_branch(history, "main").commit_id == head


# --- authorization ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def creator(api: Api) -> Iterator[Credentials]:
    """A user who may create, read and write every repository, and administer none."""
    suffix = secrets.token_hex(3)
    user, policy = f"creator-{suffix}", f"create-write-{suffix}"
    statement = [{"effect": "allow", "resource": "*", "action": ["CreateRepo", "ReadRepo", "WriteRepo"]}]
    assert json_post(api, "/auth/policies", {"id": policy, "statement": statement}).status == 201
    assert json_post(api, "/auth/users", {"id": user}).status == 201
    assert api.request("PUT", f"/auth/users/{user}/policies/{policy}").status == 201
    issued = json.loads(json_post(api, f"/auth/users/{user}/credentials", {}).data)
    yield Credentials(issued["access_key_id"], SecretStr(issued["secret_access_key"]))
    api.request("DELETE", f"/auth/users/{user}")
    api.request("DELETE", f"/auth/policies/{policy}")


def _json(credentials: Credentials | None = None) -> dict[str, str]:
    """Headers of a JSON request signed as credentials (the admin by default)."""
    creds = credentials or _ADMIN[0]
    headers: dict[str, str] = urllib3.make_headers(
        basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}"
    )
    return {**headers, "Content-Type": "application/json"}


def test_writers_may_not_dump_or_restore(
    api: Api, client: lakefs_sdk.ApiClient, creator: Credentials, history: str
) -> None:
    dump = lakefs_sdk.InternalApi(client).dump_refs(history).to_dict()
    body = json.dumps(dump).encode()
    sdk = api.sdk(creator)
    with pytest.raises(ApiException) as refused:
        lakefs_sdk.InternalApi(sdk).dump_refs(history)
    assert refused.value.status == 403
    with pytest.raises(ApiException) as refused:
        lakefs_sdk.RepositoriesApi(sdk).dump_submit(history)
    assert refused.value.status == 403
    task = lakefs_sdk.RepositoriesApi(client).dump_submit(history)
    answer = api.request("GET", f"/repositories/{history}/dump?task_id={task.id}", headers=_json(creator))
    assert _message(answer, 403)
    # Its own new bare repository elsewhere: still no restore without RestoreRefs.
    own = f"own-{secrets.token_hex(4)}"
    created = api.request(
        "POST",
        "/repositories?bare=true",
        body=json.dumps({"name": own, "storage_namespace": f"local://{own}"}).encode(),
        headers=_json(creator),
    )
    assert created.status == 201, created.data
    for method, path in (("PUT", "/refs/restore"), ("POST", "/restore")):
        answer = api.request(method, f"/repositories/{own}{path}", body=body, headers=_json(creator))
        assert _message(answer, 403)
    # A bare repository on exactly another's namespace is where that one is restored: it needs
    # the caller's own RestoreRefs there, whatever the REST API's service user holds.
    beside = api.request(
        "POST",
        "/repositories?bare=true",
        body=json.dumps({"name": f"beside-{secrets.token_hex(4)}", "storage_namespace": f"local://{history}"}).encode(),
        headers=_json(creator),
    )
    assert "only who may restore that repository's refs" in _message(beside, 403)
    # Hard reset is writing (lakeFS's fs:RevertBranch): allowed.
    reset = api.request("PUT", f"/repositories/{history}/branches/feature/hard_reset?ref=main", headers=_json(creator))
    assert reset.status == 204, reset.data


# --- commit records -----------------------------------------------------------------------------


def _record(parent: lakefs_sdk.Commit, **changes: Any) -> dict[str, Any]:
    """A commit record over parent's metarange, with its id computed as Silt computes it."""
    fields = {
        "version": 1,
        "committer": "restore-tool",
        "message": "recorded",
        "metarange_id": parent.meta_range_id,
        "creation_date": 1_700_000_000,
        "parents": [parent.id],
        "metadata": {"origin": "elsewhere"},
        "generation": (parent.generation or 0) + 1,
        **changes,
    }
    stamp = Timestamp(seconds=fields["creation_date"])
    commit = pb.Commit(**{**fields, "creation_date": stamp})
    return {"commit_id": commit_id_of(commit), **fields}


def test_create_commit_record(api: Api, client: lakefs_sdk.ApiClient, creator: Credentials, history: str) -> None:
    commits = lakefs_sdk.CommitsApi(client)
    head = commits.get_commit(history, "main")
    record = _record(head)
    lakefs_sdk.InternalApi(client).create_commit_record(history, lakefs_sdk.CommitRecordCreation(**record))
    stored = commits.get_commit(history, record["commit_id"])
    assert (stored.message, stored.parents, stored.meta_range_id, stored.creation_date, stored.metadata) == (
        "recorded",
        [head.id],
        head.meta_range_id,
        1_700_000_000,
        {"origin": "elsewhere"},
    )
    # Usable as any commit: a branch from it reads its parent's data.
    lakefs_sdk.BranchesApi(client).create_branch(
        history, lakefs_sdk.BranchCreation(name="recorded", source=record["commit_id"])
    )
    assert lakefs_sdk.RefsApi(client).diff_refs(history, "main", "recorded").results == []

    path = f"/repositories/{history}/commits"
    assert "already exists" in _message(json_post(api, path, record), 409)
    forged = {**_record(head), "message": "changed after hashing"}
    assert "commit id" in _message(json_post(api, path, forged), 400)
    assert _message(json_post(api, path, _record(head, generation=head.generation)), 400)
    assert _message(json_post(api, path, _record(head, parents=["ab" * 32])), 404)
    assert _message(json_post(api, path, _record(head, metarange_id="cd" * 32)), 404)
    assert _message(json_post(api, path, _record(head, metarange_id="../x")), 400)
    # Any committer, any parents: an administrator's (RestoreRefs), not a writer's.
    assert _message(json_post(api, path, _record(head, message="by a writer"), creds=creator), 403)


def _graveler_store(api: Api) -> Any:
    return open_graveler_store(load_config(api.stack.stack.config_path))


def _partition(api: Api, repo: str) -> bytes:
    info = api.stack.graveler.GetRepository(gapi.GetRepositoryRequest(name=repo))
    return f"{repo}-{info.unique_id}".encode()


def test_one_restore_at_a_time_and_a_dead_restores_lease_expires(
    api: Api, client: lakefs_sdk.ApiClient, history: str
) -> None:
    dump = lakefs_sdk.InternalApi(client).dump_refs(history).to_dict()
    target = _bare_beside(client, history)
    partition = _partition(api, target)
    store = _graveler_store(api)
    try:
        # A restore into target running elsewhere (another graveler) holds its lease: both ways
        # of restoring are refused with lakeFS's 409 JSON, and nothing is restored.
        running = Lease.take(store, partition, RESTORE_LEASE, "a restore elsewhere")
        try:
            message = _message(_put(api, f"/repositories/{target}/refs/restore", dump), 409)
            assert "already running" in message
            assert "already running" in _message(json_post(api, f"/repositories/{target}/restore", dump), 409)
            assert lakefs_sdk.BranchesApi(client).list_branches(target).results == []
        finally:
            running.release()
        # A restore whose graveler died leaves a lease no one renews: once its term is past, it
        # is no lock, and the next restore runs (and leaves no lease behind).
        dead = json.dumps({"holder": "a graveler that died", "until": time.time() - 1}).encode()
        store.set_if(partition, RESTORE_LEASE, dead, None)
        task = lakefs_sdk.RepositoriesApi(client).restore_submit(target, lakefs_sdk.RefsRestore(**dump))
        assert _wait(lakefs_sdk.RepositoriesApi(client).restore_status, target, task.id).error is None
        assert _state(client, target) == _state(client, history)
        with pytest.raises(NotFound):
            store.get(partition, RESTORE_LEASE)
    finally:
        store.close()
