"""lakeFS's stageObject, uploadObjectPreflight, getUnderlyingProperties and createSymlinkFile
through lakefs-sdk, on a stack whose local blockstore imports from a landing directory: an entry
staged at an address reads back as those bytes, only addresses under an import prefix are
taken, and symlink manifests list the physical addresses of each directory's objects."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from pathlib import Path
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ApiException

from edge.api.routes.symlinks import MAX_SYMLINK_FILES
from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import model_pb2 as pb
from tests.e2e.api.conftest import Api, error_message


def _repo(client: lakefs_sdk.ApiClient) -> str:
    name = f"s-{secrets.token_hex(5)}"
    creation = lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
    lakefs_sdk.RepositoriesApi(client).create_repository(creation)
    return name


def _landed(landing: Path, content: bytes) -> tuple[str, str]:
    """A file in the landing directory: (its address, its MD5)."""
    path = landing / uuid.uuid4().hex / "part-0.csv"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    return f"local://{path}", hashlib.md5(content).hexdigest()


def _staging(address: str, checksum: str, size: int, **more: Any) -> lakefs_sdk.ObjectStageCreation:
    return lakefs_sdk.ObjectStageCreation(physical_address=address, checksum=checksum, size_bytes=size, **more)


def test_stage_an_object_in_place_and_read_it_back(import_api: Api, import_landing: Path) -> None:
    client = import_api.sdk()
    repo = _repo(client)
    content = b"id,name\n1,a\n"
    address, md5 = _landed(import_landing, content)
    internal = lakefs_sdk.InternalApi(client)
    staged = internal.stage_object(
        repo,
        "main",
        "tables/t/part-0.csv",
        _staging(address, md5, len(content), mtime=1_700_000_000, metadata={"team": "data"}, content_type="text/csv"),
    )
    assert staged.path == "tables/t/part-0.csv" and staged.physical_address == address
    assert staged.checksum == md5 and staged.size_bytes == len(content) and staged.mtime == 1_700_000_000
    objects = lakefs_sdk.ObjectsApi(client)
    assert bytes(objects.get_object(repo, "main", "tables/t/part-0.csv")) == content
    stat = objects.stat_object(repo, "main", "tables/t/part-0.csv")
    assert stat.metadata == {"team": "data"} and stat.content_type == "text/csv"
    # Over S3 too, and nothing was copied: the entry names the landing file.
    body = import_api.stack.client().get_object(Bucket=repo, Key="main/tables/t/part-0.csv")["Body"].read()
    assert body == content and stat.physical_address == address


def test_stage_object_refuses_addresses_outside_the_import_prefixes(import_api: Api, import_landing: Path) -> None:
    client = import_api.sdk()
    repo, other = _repo(client), _repo(client)
    objects = lakefs_sdk.ObjectsApi(client)
    _put(import_api, other, "secret.csv", b"theirs")
    theirs = objects.stat_object(other, "main", "secret.csv")
    md5 = hashlib.md5(b"theirs").hexdigest()
    path = f"/repositories/{repo}/branches/main/objects?path=x.csv"
    cases = {
        "another repository's bytes": theirs.physical_address,
        "its own namespace": f"local://{repo}/data/anything",
        "outside every prefix": "local:///etc/passwd",
        "a path escaping a prefix": f"local://{import_landing}/../etc/passwd",
        "not an address": "no-scheme",
    }
    for what, address in cases.items():
        body = {"physical_address": address, "checksum": md5, "size_bytes": 6}
        response = import_api.request(
            "PUT",
            path,
            headers={**_admin(import_api), "Content-Type": "application/json"},
            body=_json(body),
        )
        assert error_message(response, 400), what
    with pytest.raises(ApiException) as refused:
        objects.stat_object(repo, "main", "x.csv")
    assert refused.value.status == 404


def test_stage_object_checks_the_object_it_names(import_api: Api, import_landing: Path) -> None:
    client = import_api.sdk()
    repo = _repo(client)
    address, md5 = _landed(import_landing, b"12345")
    internal = lakefs_sdk.InternalApi(client)
    for staging, needle in (
        (_staging(address, md5, 4), "size_bytes"),
        (_staging(address, "0" * 32, 5), "checksum"),
        (_staging(address + ".missing", md5, 5), "no object"),
        (_staging(address, md5, 5, mtime=-1), "mtime"),
    ):
        with pytest.raises(ApiException) as refused:
            internal.stage_object(repo, "main", "p.csv", staging)
        assert refused.value.status == 400 and needle in (refused.value.body or ""), refused.value.body
    with pytest.raises(ApiException) as no_branch:
        internal.stage_object(repo, "nope", "p.csv", _staging(address, md5, 5))
    assert no_branch.value.status == 404


def test_writers_may_stage_readers_may_not(import_api: Api, import_landing: Path) -> None:
    client = import_api.sdk()
    repo = _repo(client)
    address, md5 = _landed(import_landing, b"r")
    internal = lakefs_sdk.InternalApi(client)
    internal.upload_object_preflight(repo, "main", "any/path.csv")  # 204: the admin may write
    reader = lakefs_sdk.InternalApi(import_api.sdk(import_api.stack.reader))
    with pytest.raises(ApiException) as preflight:
        reader.upload_object_preflight(repo, "main", "any/path.csv")
    assert preflight.value.status == 403
    with pytest.raises(ApiException) as staged:
        reader.stage_object(repo, "main", "p.csv", _staging(address, md5, 1))
    assert staged.value.status == 403
    with pytest.raises(ApiException) as symlink:
        reader.create_symlink_file(repo, "main")
    assert symlink.value.status == 403
    missing_path = import_api.request("GET", f"/repositories/{repo}/branches/main/objects/stage_allowed")
    assert error_message(missing_path, 400)


def test_underlying_properties_of_a_local_object_have_no_storage_class(import_api: Api) -> None:
    client = import_api.sdk()
    repo = _repo(client)
    _put(import_api, repo, "a.txt", b"a")
    reader = lakefs_sdk.ObjectsApi(import_api.sdk(import_api.stack.reader))
    properties = reader.get_underlying_properties(repo, "main", "a.txt")
    assert properties.storage_class is None
    raw = import_api.request("GET", f"/repositories/{repo}/refs/main/objects/underlyingProperties?path=a.txt")
    assert raw.status == 200 and raw.data == b'{"storage_class":null}'
    with pytest.raises(ApiException) as missing:
        reader.get_underlying_properties(repo, "main", "nope.txt")
    assert missing.value.status == 404


def test_symlink_files_list_each_directorys_physical_addresses(import_api: Api) -> None:
    client = import_api.sdk()
    repo = _repo(client)
    objects = lakefs_sdk.ObjectsApi(client)
    keys = ["t/p=1/a.csv", "t/p=1/b.csv", "t/p=2/c.csv", "t/top.csv", "other/x.csv"]
    for key in keys:
        _put(import_api, repo, key, key.encode())
    uri = lakefs_sdk.InternalApi(client).create_symlink_file(repo, "main", location="t/")
    assert uri.location == f"local://{repo}/_silt/symlinks"
    config = import_api.stack.stack.config
    assert config is not None
    root = Path(config.blockstore.local.path) / repo / "_silt" / "symlinks" / repo / "main"
    written = {str(p.parent.relative_to(root)): p.read_text().split("\n") for p in root.rglob("symlink.txt")}
    addresses = {key: objects.stat_object(repo, "main", key).physical_address for key in keys}
    assert written == {
        "t/p=1": [addresses["t/p=1/a.csv"], addresses["t/p=1/b.csv"]],
        "t/p=2": [addresses["t/p=2/c.csv"]],
        "t": [addresses["t/top.csv"]],
    }
    # What the manifests name are the objects' bytes.
    for key in ("t/p=1/a.csv", "t/top.csv"):
        assert addresses[key].startswith(f"local://{repo}/")
        relative = addresses[key].removeprefix("local://")
        assert (Path(config.blockstore.local.path) / relative).read_bytes() == key.encode()
    with pytest.raises(ApiException) as missing:
        lakefs_sdk.InternalApi(client).create_symlink_file(repo, "no-such-ref")
    assert missing.value.status == 404


def _put(api: Api, repo: str, key: str, data: bytes) -> None:
    api.stack.client().put_object(Bucket=repo, Key=f"main/{key}", Body=data)


def _admin(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    return urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")


def _json(body: dict[str, object]) -> bytes:
    return json.dumps(body).encode()


def test_symlink_files_are_bounded_per_call(import_api: Api) -> None:
    """More directories than one call writes files for (MAX_SYMLINK_FILES): 400 naming the bound,
    and no file written; a narrower location within the bounds is served."""
    client = import_api.sdk()
    repo = _repo(client)
    staged = [
        gapi.StagedEntry(
            key=f"t/p={i:04d}/part-0.csv", entry=pb.Entry(physical_address=f"data/{i}", size=1, etag="0" * 32)
        )
        for i in range(MAX_SYMLINK_FILES + 1)
    ]
    for start in range(0, len(staged), 256):
        request = gapi.StageEntriesRequest(repository=repo, branch="main", entries=staged[start : start + 256])
        import_api.stack.graveler.StageEntries(request, timeout=60)
    internal = lakefs_sdk.InternalApi(client)
    with pytest.raises(ApiException) as refused:
        internal.create_symlink_file(repo, "main", location="t/")
    message = json.loads(refused.value.body)["message"]
    assert refused.value.status == 400 and f"more than {MAX_SYMLINK_FILES} directories" in message
    config = import_api.stack.stack.config
    assert config is not None
    assert not (Path(config.blockstore.local.path) / repo / "_silt" / "symlinks").exists()
    assert internal.create_symlink_file(repo, "main", location="t/p=0001/").location == f"local://{repo}/_silt/symlinks"
