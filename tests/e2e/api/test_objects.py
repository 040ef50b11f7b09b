"""The objects endpoints through lakefs-sdk's ObjectsApi and lakeFS's high-level client, and the
same objects over S3: one layout, whichever door the bytes came in by."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile

import lakefs
import lakefs_sdk
import pytest
import urllib3
from lakefs.client import Client
from lakefs_sdk.exceptions import ApiException, NotFoundException

from silt.errors import PROTECTED_BRANCH
from silt.graveler.v1 import graveler_pb2 as api_pb
from tests.e2e.api.conftest import Api


@pytest.fixture
def objects(client: lakefs_sdk.ApiClient) -> lakefs_sdk.ObjectsApi:
    return lakefs_sdk.ObjectsApi(client)


def put(objects: lakefs_sdk.ObjectsApi, repo: str, branch: str, path: str, data: bytes) -> lakefs_sdk.ObjectStats:
    """upload_object as the SDK takes it: `content` names a file, sent as multipart/form-data."""
    with tempfile.NamedTemporaryFile() as file:
        file.write(data)
        file.flush()
        return objects.upload_object(repo, branch, path, content=file.name)


def test_upload_stat_and_read_back(objects: lakefs_sdk.ObjectsApi, repo: str) -> None:
    data = secrets.token_bytes(3000)
    stats = put(objects, repo, "main", "dir/a.bin", data)
    assert stats.path == "dir/a.bin" and stats.path_type == "object"
    assert stats.size_bytes == 3000 and stats.checksum == hashlib.md5(data).hexdigest()
    assert stats.physical_address.startswith(f"local://{repo}/data/")
    assert objects.get_object(repo, "main", "dir/a.bin") == data
    stat = objects.stat_object(repo, "main", "dir/a.bin")
    assert stat.checksum == stats.checksum and stat.physical_address == stats.physical_address
    assert isinstance(stat.mtime, int) and stat.mtime > 1_700_000_000
    assert stat.metadata == {}


def test_ranges(objects: lakefs_sdk.ObjectsApi, repo: str) -> None:
    data = bytes(range(256)) * 4
    put(objects, repo, "main", "r.bin", data)
    response = objects.get_object_with_http_info(repo, "main", "r.bin", range="bytes=10-19")
    assert response.status_code == 206 and response.data == data[10:20]
    assert response.headers is not None and response.headers["Content-Range"] == "bytes 10-19/1024"
    assert objects.get_object(repo, "main", "r.bin", range="bytes=-4") == data[-4:]
    assert objects.get_object(repo, "main", "r.bin", range="bytes=1000-") == data[1000:]
    with pytest.raises(ApiException) as refused:
        objects.get_object(repo, "main", "r.bin", range="bytes=1024-2000")
    assert refused.value.status == 416
    assert refused.value.headers["Content-Range"] == "bytes */1024"


def test_list_pages_with_small_amounts(objects: lakefs_sdk.ObjectsApi, repo: str) -> None:
    paths = sorted([f"p/{i:02d}" for i in range(7)] + ["q/x", "q/y", "top"])
    for path in paths:
        put(objects, repo, "main", path, path.encode())
    seen: list[str] = []
    after = ""
    pages = 0
    while True:
        page = objects.list_objects(repo, "main", amount=3, after=after)
        seen += [row.path for row in page.results]
        pages += 1
        assert page.pagination.results == len(page.results) <= 3
        if not page.pagination.has_more:
            assert page.pagination.next_offset == ""
            break
        after = page.pagination.next_offset
        assert after == page.results[-1].path
    assert seen == paths and pages == 4
    grouped = objects.list_objects(repo, "main", delimiter="/", amount=1000)
    assert [(r.path, r.path_type) for r in grouped.results] == [
        ("p/", "common_prefix"),
        ("q/", "common_prefix"),
        ("top", "object"),
    ]
    prefix = grouped.results[0]
    assert prefix.checksum == "" and prefix.physical_address == "" and prefix.mtime == 0
    # Paging over common prefixes: `after` a prefix continues past everything under it.
    first = objects.list_objects(repo, "main", delimiter="/", amount=1)
    assert [r.path for r in first.results] == ["p/"] and first.pagination.next_offset == "p/"
    second = objects.list_objects(repo, "main", delimiter="/", amount=1, after="p/")
    assert [r.path for r in second.results] == ["q/"]
    under = objects.list_objects(repo, "main", prefix="p/0", after="p/04")
    assert [r.path for r in under.results] == ["p/05", "p/06"]


def test_user_metadata_and_content_type(api: Api, objects: lakefs_sdk.ObjectsApi, repo: str) -> None:
    headers = {"X-Lakefs-Meta-Owner_Team": "Data", "Content-Type": "text/csv"}
    api.request(
        "POST",
        f"/repositories/{repo}/branches/main/objects?path=t.csv",
        body=b"a,b\n",
        headers={**_admin_headers(api), **headers},
    )
    stat = objects.stat_object(repo, "main", "t.csv")
    assert stat.metadata == {"owner_team": "Data"} and stat.content_type == "text/csv"
    assert objects.stat_object(repo, "main", "t.csv", user_metadata=False).metadata == {}
    listed = objects.list_objects(repo, "main", user_metadata=False).results[0]
    assert listed.metadata is None and listed.content_type == "text/csv"
    update = lakefs_sdk.UpdateObjectUserMetadata(set={"Stage": "raw", "k_2": "v"})
    objects.update_object_user_metadata(repo, "main", "t.csv", update)
    assert objects.stat_object(repo, "main", "t.csv").metadata == {"Stage": "raw", "k_2": "v"}
    with pytest.raises(NotFoundException):
        objects.update_object_user_metadata(repo, "main", "missing", update)
    head = api.request("HEAD", f"/repositories/{repo}/refs/main/objects?path=t.csv")
    assert head.status == 200 and head.headers["Content-Type"] == "text/csv"
    # Over S3 the same metadata is x-amz-meta-*.
    s3 = api.stack.client().head_object(Bucket=repo, Key="main/t.csv")
    assert s3["Metadata"] == {"stage": "raw", "k_2": "v"} and s3["ContentType"] == "text/csv"


def test_copy_delete_and_bulk_delete(objects: lakefs_sdk.ObjectsApi, repo: str) -> None:
    put(objects, repo, "main", "src", b"hello")
    copied = objects.copy_object(repo, "main", "dst", lakefs_sdk.ObjectCopyCreation(src_path="src"))
    assert copied.path == "dst" and copied.checksum == hashlib.md5(b"hello").hexdigest()
    objects.delete_object(repo, "main", "src")
    assert objects.get_object(repo, "main", "dst") == b"hello"  # the copy outlives its source
    with pytest.raises(NotFoundException):
        objects.stat_object(repo, "main", "src")
    objects.delete_object(repo, "main", "never-there")  # deleting a missing object succeeds
    for i in range(3):
        put(objects, repo, "main", f"bulk/{i}", b"x")
    result = objects.delete_objects(
        repo, "main", lakefs_sdk.PathList(paths=["bulk/0", "bulk/1", "missing", "x" * 1100])
    )
    assert [(e.path, e.status_code) for e in result.errors] == [("x" * 1100, 400)]
    assert [r.path for r in objects.list_objects(repo, "main", prefix="bulk/").results] == ["bulk/2"]
    with pytest.raises(ApiException) as too_many:
        objects.delete_objects(repo, "main", lakefs_sdk.PathList(paths=[f"k{i}" for i in range(1001)]))
    assert too_many.value.status == 400


def test_copy_from_another_ref(client: lakefs_sdk.ApiClient, objects: lakefs_sdk.ObjectsApi, repo: str) -> None:
    put(objects, repo, "main", "f", b"v1")
    lakefs_sdk.CommitsApi(client).commit(repo, "main", lakefs_sdk.CommitCreation(message="one"))
    put(objects, repo, "main", "f", b"v2")
    creation = lakefs_sdk.ObjectCopyCreation(src_path="f", src_ref="main@")
    objects.copy_object(repo, "main", "old-f", creation)
    assert objects.get_object(repo, "main", "old-f") == b"v1"
    with pytest.raises(NotFoundException):
        objects.copy_object(repo, "main", "x", lakefs_sdk.ObjectCopyCreation(src_path="nope"))


def test_read_at_a_commit_and_unknown_refs(
    client: lakefs_sdk.ApiClient, objects: lakefs_sdk.ObjectsApi, repo: str
) -> None:
    put(objects, repo, "main", "f", b"committed")
    commit = lakefs_sdk.CommitsApi(client).commit(repo, "main", lakefs_sdk.CommitCreation(message="c"))
    put(objects, repo, "main", "f", b"staged")
    assert objects.get_object(repo, commit.id, "f") == b"committed"
    assert objects.get_object(repo, "main", "f") == b"staged"
    with pytest.raises(NotFoundException):
        objects.get_object(repo, "no-such-branch", "f")
    with pytest.raises(NotFoundException):
        objects.list_objects(repo, "no-such-branch")
    with pytest.raises(NotFoundException):
        objects.stat_object("no-such-repo", "main", "f")
    with pytest.raises(NotFoundException):
        put(objects, repo, "no-such-branch", "f", b"x")


def test_api_and_s3_read_each_others_objects(api: Api, objects: lakefs_sdk.ObjectsApi, repo: str) -> None:
    s3 = api.stack.client()
    data = secrets.token_bytes(300_000)  # past the small-body path: streamed both ways
    put(objects, repo, "main", "via-api", data)
    got = s3.get_object(Bucket=repo, Key="main/via-api")
    assert got["Body"].read() == data and got["ETag"].strip('"') == hashlib.md5(data).hexdigest()
    s3.put_object(Bucket=repo, Key="main/via-s3", Body=data, ContentType="image/png", Metadata={"a_b": "c"})
    assert objects.get_object(repo, "main", "via-s3") == data
    stat = objects.stat_object(repo, "main", "via-s3")
    assert stat.content_type == "image/png" and stat.metadata == {"a_b": "c"}
    assert stat.checksum == hashlib.md5(data).hexdigest()


def test_reader_may_read_not_write(api: Api, repo: str, objects: lakefs_sdk.ObjectsApi) -> None:
    put(objects, repo, "main", "f", b"data")
    reader = lakefs_sdk.ObjectsApi(api.sdk(api.stack.reader))
    assert reader.get_object(repo, "main", "f") == b"data"
    assert [r.path for r in reader.list_objects(repo, "main").results] == ["f"]
    for write in (
        lambda: put(reader, repo, "main", "g", b"x"),
        lambda: reader.delete_object(repo, "main", "f"),
        lambda: reader.delete_objects(repo, "main", lakefs_sdk.PathList(paths=["f"])),
        lambda: reader.copy_object(repo, "main", "h", lakefs_sdk.ObjectCopyCreation(src_path="f")),
        lambda: reader.update_object_user_metadata(
            repo, "main", "f", lakefs_sdk.UpdateObjectUserMetadata(set={"a": "b"})
        ),
    ):
        with pytest.raises(ApiException) as refused:
            write()
        assert refused.value.status == 403
    assert [r.path for r in objects.list_objects(repo, "main").results] == ["f"]


def test_protected_branch_refuses_uploads(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    # The rule is set over gRPC: the REST route for it is another area's.
    rule = api_pb.SetBranchProtectionRequest(repository=repo)
    added = rule.rules.add()
    added.pattern = "main"
    added.block_direct_writes = True
    api.stack.graveler.SetBranchProtection(rule)
    with pytest.raises(ApiException) as refused:
        put(lakefs_sdk.ObjectsApi(client), repo, "main", "f", b"x")
    # lakeFS's text exactly: lakectl and scripts compare the whole message.
    assert refused.value.status == 403
    # Next to it, typed, the branch and the rule that refused (the web UI names and links it).
    assert json.loads(refused.value.body or "{}") == {
        "message": PROTECTED_BRANCH,
        "branch_protection": {"branch": "main", "rules": ["main"]},
    }
    namespace = api.stack.stack.data_dir / "data" / repo / "data"
    assert not namespace.exists() or not [p for p in namespace.iterdir() if not p.name.startswith(".")]


def test_the_high_level_client(api: Api, repo: str) -> None:
    admin = api.stack.admin
    client = Client(
        host=api.stack.endpoint, username=admin.access_key_id, password=admin.secret_access_key.get_secret_value()
    )
    branch = lakefs.repository(repo, client=client).branch("main")
    # upload: a raw, chunked POST with x-lakefs-meta-* headers; reader(): ranged GETs.
    obj = branch.object("hl/data.txt").upload(
        data=b"line one\nline two\n", metadata={"src": "hl"}, content_type="text/plain"
    )
    with obj.reader(mode="r") as reader:
        assert reader.read() == "line one\nline two\n"
    with obj.reader() as raw:  # ranged reads past the end, seeks from the end (the 416 tells the size)
        assert raw.read(100) == b"line one\nline two\n"
        assert raw.read(1) == b""
        raw.seek(5)
        assert raw.read(3) == b"one"
        raw.seek(-4, os.SEEK_END)
        assert raw.read() == b"two\n"
    stat = obj.stat()
    assert stat.metadata == {"src": "hl"} and stat.content_type == "text/plain" and stat.size_bytes == 18
    assert obj.exists()  # HEAD
    assert [o.path for o in branch.objects(prefix="hl/")] == ["hl/data.txt"]
    with pytest.raises(lakefs.exceptions.ObjectExistsException):
        branch.object("hl/data.txt").upload(data=b"again", mode="xb")
    obj.delete()
    assert not obj.exists()


def _admin_headers(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    return urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
