"""lakeFS's generated SDK (lakefs-sdk) driving a whole scenario against the REST API, as its users
write it: objects, branches, commits, diff, merge, log, tags, revert, reset, pull requests, IAM.
Every answer is parsed by the SDK's strict models, so a wrong field or status fails here too."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from pathlib import Path

import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api
from tests.support.wait import wait_until


def _upload(client: lakefs_sdk.ApiClient, tmp: Path, repo: str, branch: str, path: str, data: bytes) -> None:
    # The SDK sends `content` as multipart/form-data read from a file path.
    local = tmp / secrets.token_hex(4)
    local.write_bytes(data)
    stats = lakefs_sdk.ObjectsApi(client).upload_object(repo, branch, path, content=str(local))
    assert stats.path == path and stats.size_bytes == len(data)
    assert stats.checksum == hashlib.md5(data).hexdigest()


def _read(client: lakefs_sdk.ApiClient, repo: str, ref: str, path: str) -> bytes:
    return bytes(lakefs_sdk.ObjectsApi(client).get_object(repo, ref, path))


def _refused_within(call: Callable[[], object], seconds: float) -> int:
    def status() -> int | None:
        try:
            call()
        except ApiException as refused:
            return int(refused.status)
        return None

    return wait_until(status, seconds, "a refusal", interval=0.1)


def test_objects_upload_stat_read_and_list_with_paging(client: lakefs_sdk.ApiClient, repo: str, tmp_path: Path) -> None:
    objects = lakefs_sdk.ObjectsApi(client)
    _upload(client, tmp_path, repo, "main", "single.bin", b"\x00one object\xff")
    many = {f"many/{i:03d}.txt": f"row {i}\n".encode() for i in range(25)}
    for path, data in many.items():
        _upload(client, tmp_path, repo, "main", path, data)

    stat = objects.stat_object(repo, "main", "single.bin")
    assert (stat.path, stat.path_type, stat.size_bytes) == ("single.bin", "object", 12)
    assert stat.checksum == hashlib.md5(b"\x00one object\xff").hexdigest()
    assert stat.mtime > 0 and stat.physical_address
    assert _read(client, repo, "main", "single.bin") == b"\x00one object\xff"
    part = objects.get_object_with_http_info(repo, "main", "single.bin", range="bytes=1-3")
    assert part.status_code == 206 and part.data is not None and bytes(part.data) == b"one"
    headers = {name.lower(): value for name, value in (part.headers or {}).items()}
    assert headers["content-range"] == "bytes 1-3/12"

    listed: list[str] = []
    after = ""
    pages = 0
    while True:
        page = objects.list_objects(repo, "main", prefix="many/", after=after, amount=10)
        listed += [row.path for row in page.results]
        pages += 1
        if not page.pagination.has_more:
            break
        after = page.pagination.next_offset
    assert listed == sorted(many) and pages == 3
    tree = objects.list_objects(repo, "main", delimiter="/")
    assert [(row.path, row.path_type) for row in tree.results] == [
        ("many/", "common_prefix"),
        ("single.bin", "object"),
    ]

    with pytest.raises(ApiException) as missing:
        objects.stat_object(repo, "main", "no/such/object")
    assert missing.value.status == 404
    other = tmp_path / "other"
    other.write_bytes(b"must not replace")
    with pytest.raises(ApiException) as exists:
        objects.upload_object(repo, "main", "single.bin", if_none_match="*", content=str(other))
    assert exists.value.status == 412
    assert _read(client, repo, "main", "single.bin") == b"\x00one object\xff"


def test_branch_commit_diff_merge_and_log_by_path(client: lakefs_sdk.ApiClient, repo: str, tmp_path: Path) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    commits = lakefs_sdk.CommitsApi(client)
    refs = lakefs_sdk.RefsApi(client)
    _upload(client, tmp_path, repo, "main", "tables/a.csv", b"a,1\n")
    base = commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="add a", metadata={"k": "v"}))
    assert base.message == "add a" and base.metadata == {"k": "v"}
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    _upload(client, tmp_path, repo, "dev", "tables/b.csv", b"b,2\n")
    _upload(client, tmp_path, repo, "dev", "tables/a.csv", b"a,1\na,2\n")
    on_dev = commits.commit(repo, "dev", lakefs_sdk.CommitCreation(message="change a, add b"))

    diff = refs.diff_refs(repo, "main", "dev")
    assert [(d.type, d.path) for d in diff.results] == [("changed", "tables/a.csv"), ("added", "tables/b.csv")]

    merged = refs.merge_into_branch(repo, "dev", "main", merge=lakefs_sdk.Merge(message="dev into main"))
    merge_commit = commits.get_commit(repo, merged.reference)
    assert merge_commit.message == "dev into main"
    assert merge_commit.parents == [base.id, on_dev.id]
    assert _read(client, repo, "main", "tables/a.csv") == b"a,1\na,2\n"

    # The log filtered by a path names only the commits that changed it.
    touching_b = refs.log_commits(repo, "main", objects=["tables/b.csv"])
    assert [c.id for c in touching_b.results] == [merged.reference, on_dev.id]
    touching_a = refs.log_commits(repo, "main", objects=["tables/a.csv"], first_parent=True)
    assert [c.id for c in touching_a.results] == [merged.reference, base.id]


def test_merge_conflict_then_strategy(client: lakefs_sdk.ApiClient, repo: str, tmp_path: Path) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    commits = lakefs_sdk.CommitsApi(client)
    refs = lakefs_sdk.RefsApi(client)
    _upload(client, tmp_path, repo, "main", "conf.json", b'{"v": 0}')
    commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="v0"))
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="feature", source="main"))
    _upload(client, tmp_path, repo, "main", "conf.json", b'{"v": "main"}')
    commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="main's v"))
    _upload(client, tmp_path, repo, "feature", "conf.json", b'{"v": "feature"}')
    commits.commit(repo, "feature", lakefs_sdk.CommitCreation(message="feature's v"))
    head = branches.get_branch(repo, "main").commit_id

    with pytest.raises(ApiException) as conflict:
        refs.merge_into_branch(repo, "feature", "main", merge=lakefs_sdk.Merge(message="conflicting"))
    assert conflict.value.status == 409
    assert branches.get_branch(repo, "main").commit_id == head

    merged = refs.merge_into_branch(repo, "feature", "main", merge=lakefs_sdk.Merge(strategy="source-wins"))
    assert _read(client, repo, "main", "conf.json") == b'{"v": "feature"}'
    assert commits.get_commit(repo, "main").id == merged.reference

    with pytest.raises(ApiException) as nothing:
        refs.merge_into_branch(repo, "feature", "main", merge=lakefs_sdk.Merge())
    assert nothing.value.status == 400 and "no changes" in str(nothing.value.body)


def test_tags_revert_and_reset(client: lakefs_sdk.ApiClient, repo: str, tmp_path: Path) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    commits = lakefs_sdk.CommitsApi(client)
    tags = lakefs_sdk.TagsApi(client)
    _upload(client, tmp_path, repo, "main", "data.txt", b"first")
    first = commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="first"))
    created = tags.create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    assert created == lakefs_sdk.Ref(id="v1", commit_id=first.id)
    with pytest.raises(ApiException) as again:
        tags.create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    assert again.value.status == 409 and "tag already exists" in str(again.value.body)

    _upload(client, tmp_path, repo, "main", "data.txt", b"second")
    second = commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="second"))
    tags.create_tag(repo, lakefs_sdk.TagCreation(id="v2", ref=second.id))
    assert [t.id for t in tags.list_tags(repo).results] == ["v1", "v2"]
    assert _read(client, repo, "v1", "data.txt") == b"first"
    assert commits.get_commit(repo, "v2").id == second.id

    branches.revert_branch(repo, "main", lakefs_sdk.RevertCreation(ref=second.id, parent_number=0))
    reverted = commits.get_commit(repo, "main")
    assert reverted.parents == [second.id] and reverted.message.startswith("Revert")
    assert _read(client, repo, "main", "data.txt") == b"first"

    _upload(client, tmp_path, repo, "main", "scratch/x", b"uncommitted")
    assert [d.path for d in branches.diff_branch(repo, "main").results] == ["scratch/x"]
    branches.reset_branch(repo, "main", lakefs_sdk.ResetCreation(type="reset"))
    assert branches.diff_branch(repo, "main").results == []
    with pytest.raises(ApiException) as gone:
        lakefs_sdk.ObjectsApi(client).stat_object(repo, "main", "scratch/x")
    assert gone.value.status == 404

    tags.delete_tag(repo, "v1")
    with pytest.raises(ApiException) as deleted:
        tags.get_tag(repo, "v1")
    assert deleted.value.status == 404


def test_pull_request_create_then_merge(client: lakefs_sdk.ApiClient, repo: str, tmp_path: Path) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    commits = lakefs_sdk.CommitsApi(client)
    pulls = lakefs_sdk.PullsApi(client)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="fix", source="main"))
    _upload(client, tmp_path, repo, "fix", "fixed.txt", b"fixed")
    commits.commit(repo, "fix", lakefs_sdk.CommitCreation(message="the fix"))

    creation = lakefs_sdk.PullRequestCreation(
        title="Fix it", description="one file", source_branch="fix", destination_branch="main"
    )
    pr_id = pulls.create_pull_request(repo, creation).id
    pr = pulls.get_pull_request(repo, pr_id)
    assert (pr.status, pr.title, pr.source_branch, pr.destination_branch) == ("open", "Fix it", "fix", "main")
    assert [p.id for p in pulls.list_pull_requests(repo, status="open").results] == [pr_id]

    merged = pulls.merge_pull_request(repo, pr_id)
    assert commits.get_commit(repo, "main").id == merged.reference
    assert _read(client, repo, "main", "fixed.txt") == b"fixed"
    done = pulls.get_pull_request(repo, pr_id)
    assert done.status == "merged" and done.merged_commit_id == merged.reference
    assert pulls.list_pull_requests(repo, status="open").results == []


def test_iam_user_group_policy_credentials(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    auth = lakefs_sdk.AuthApi(client)
    suffix = secrets.token_hex(3)
    user, group, policy = f"ana-{suffix}", f"readers-{suffix}", f"own-{suffix}"
    assert auth.create_user(lakefs_sdk.UserCreation(id=user)).id == user
    assert auth.create_group(lakefs_sdk.GroupCreation(id=group)).id == group
    # Silt's own action names are accepted where lakeFS's are (a read of this repository only).
    statement = lakefs_sdk.Statement(effect="allow", resource=repo, action=["ReadRepo"])
    assert auth.create_policy(lakefs_sdk.Policy(id=policy, statement=[statement])).id == policy
    assert auth.get_policy(policy).statement == [statement]
    auth.attach_policy_to_group(group, policy)
    auth.attach_policy_to_user(user, "RepoReadAll")
    auth.add_group_membership(group, user)
    assert [u.id for u in auth.list_group_members(group).results] == [user]
    assert [p.id for p in auth.list_group_policies(group).results] == [policy]
    assert [g.id for g in auth.list_user_groups(user).results] == [group]
    assert [p.id for p in auth.list_user_policies(user).results] == ["RepoReadAll"]
    auth.detach_policy_from_user(user, "RepoReadAll")
    assert [p.id for p in auth.list_user_policies(user, effective=True).results] == [policy]

    issued = auth.create_credentials(user)
    assert issued.secret_access_key and issued.access_key_id
    assert [c.access_key_id for c in auth.list_user_credentials(user).results] == [issued.access_key_id]
    as_user = api.sdk(Credentials(issued.access_key_id, SecretStr(issued.secret_access_key)))
    assert lakefs_sdk.AuthApi(as_user).get_current_user().user.id == user
    assert lakefs_sdk.BranchesApi(as_user).get_branch(repo, "main").id == "main"
    with pytest.raises(ApiException) as refused:
        lakefs_sdk.BranchesApi(as_user).create_branch(repo, lakefs_sdk.BranchCreation(name="nope", source="main"))
    assert refused.value.status == 403
    with pytest.raises(ApiException) as not_admin:
        lakefs_sdk.AuthApi(as_user).list_users()
    assert not_admin.value.status == 403

    auth.delete_credentials(user, issued.access_key_id)
    assert auth.list_user_credentials(user).results == []
    # The API remembers a verified key for auth.cache_ttl_seconds (1 s here): refused after that.
    assert _refused_within(lambda: lakefs_sdk.AuthApi(as_user).get_current_user(), seconds=15) == 401
    auth.detach_policy_from_group(group, policy)
    auth.delete_group_membership(group, user)
    assert auth.list_group_members(group).results == []
    auth.delete_user(user)
    auth.delete_group(group)
    auth.delete_policy(policy)
    with pytest.raises(ApiException) as no_user:
        auth.get_user(user)
    assert no_user.value.status == 404
