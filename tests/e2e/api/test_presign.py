"""Presigned URLs and the staging API, as lakeFS's clients use them: lakefs-sdk's `presign=true`
on stat and get, getPhysicalAddress → PUT to the URL → linkPhysicalAddress, read back through the
API and the S3 gateway; on the local blockstore (URLs the edge signs and serves) and on S3
(moto_server's own presigned URLs). Plain urllib3 fetches the URLs: no credentials."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import lakefs
import lakefs_sdk
import pytest
import urllib3
from lakefs.client import Client
from lakefs.exceptions import ObjectExistsException
from lakefs_sdk.exceptions import ApiException
from lakefs_spec import LakeFSFileSystem

from edge.api.objects.edge_urls import EdgeUrls
from edge.api.objects.signing import edge_signing_key, purpose_key
from silt.config import Config
from silt.launcher import SERVICE_KEYS_FILE
from tests.e2e.api.conftest import Api, error_message
from tests.e2e.conftest import S3_DATA, S3_LANDING
from tests.support.moto import moto_client

HTTP = urllib3.PoolManager(retries=False, timeout=30)


@dataclass
class Store:
    kind: str
    api: Api
    repo: str
    moto: str = ""

    @property
    def namespace(self) -> str:
        return f"local://{self.repo}" if self.kind == "local" else f"s3://{S3_DATA}/{self.repo}"

    def sdk(self) -> lakefs_sdk.ApiClient:
        return self.api.sdk()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest) -> Store:
    kind = request.param
    api: Api = request.getfixturevalue("api" if kind == "local" else "s3_api")
    made = Store(kind, api, f"ps-{secrets.token_hex(5)}")
    if kind == "s3":
        made.moto = request.getfixturevalue("moto_server")
    creation = lakefs_sdk.RepositoryCreation(name=made.repo, storage_namespace=made.namespace)
    lakefs_sdk.RepositoriesApi(made.sdk()).create_repository(creation)
    return made


def _upload(store: Store, path: str, data: bytes) -> None:
    admin = store.api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
    headers["Content-Type"] = "application/octet-stream"
    response = store.api.request(
        "POST", f"/repositories/{store.repo}/branches/main/objects?path={path}", body=data, headers=headers
    )
    assert response.status == 201, response.data


def _check_url_origin(store: Store, url: str) -> None:
    """A local URL is this server's own; an S3 one is the store's."""
    expected = store.api.stack.endpoint if store.kind == "local" else store.moto
    assert url.startswith(expected + "/"), url


def test_config_says_presign_is_supported(api: Api) -> None:
    storage = lakefs_sdk.ConfigApi(api.sdk()).get_config().storage_config
    assert storage is not None
    assert storage.pre_sign_support is True and storage.pre_sign_support_ui is True
    assert storage.pre_sign_multipart_upload is True  # test_presign_multipart.py


def test_stat_and_get_with_presign(store: Store) -> None:
    data = secrets.token_bytes(300_000)  # past the size read in one piece: streamed
    _upload(store, "dir/blob.bin", data)
    objects = lakefs_sdk.ObjectsApi(store.sdk())
    before = int(time.time())
    stat = objects.stat_object(store.repo, "main", "dir/blob.bin", presign=True)
    _check_url_origin(store, stat.physical_address)
    assert stat.physical_address_expiry is not None and before + 890 <= stat.physical_address_expiry <= before + 910
    assert stat.checksum == hashlib.md5(data).hexdigest() and stat.size_bytes == len(data)
    fetched = HTTP.request("GET", stat.physical_address)
    assert fetched.status == 200 and fetched.data == data
    assert "blob.bin" in fetched.headers["Content-Disposition"]
    ranged = HTTP.request("GET", stat.physical_address, headers={"Range": "bytes=100-199"})
    assert ranged.status == 206 and ranged.data == data[100:200]
    assert ranged.headers["Content-Range"] == f"bytes 100-199/{len(data)}"
    # Without presign the address is the store's own URI, as before.
    assert objects.stat_object(store.repo, "main", "dir/blob.bin").physical_address.startswith(store.namespace + "/")

    # getObject answers a redirect to such a URL; lakefs-sdk follows it, its Range too.
    redirect = store.api.request("GET", f"/repositories/{store.repo}/refs/main/objects?path=dir/blob.bin&presign=true")
    assert redirect.status == 302 and redirect.data == b""
    _check_url_origin(store, redirect.headers["Location"])
    assert objects.get_object(store.repo, "main", "dir/blob.bin", presign=True) == data
    assert objects.get_object(store.repo, "main", "dir/blob.bin", presign=True, range="bytes=-10") == data[-10:]

    listed = objects.list_objects(store.repo, "main", prefix="dir/", presign=True).results
    assert [row.path for row in listed] == ["dir/blob.bin"]
    _check_url_origin(store, listed[0].physical_address)
    assert HTTP.request("GET", listed[0].physical_address).data == data


def _link(store: Store, path: str, body: dict[str, Any], **headers: str) -> urllib3.BaseHTTPResponse:
    admin = store.api.stack.admin
    sent = urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
    sent.update({"Content-Type": "application/json", **headers})
    target = f"/repositories/{store.repo}/branches/main/staging/backing?path={path}"
    return store.api.request("PUT", target, body=json.dumps(body).encode(), headers=sent)


def test_staging_flow_with_a_presigned_upload(store: Store) -> None:
    staging = lakefs_sdk.StagingApi(store.sdk())
    location = staging.get_physical_address(store.repo, "main", "up/table.csv", presign=True)
    assert (location.physical_address or "").startswith(store.namespace + "/data/")
    assert location.presigned_url is not None and location.presigned_url_expiry is not None
    _check_url_origin(store, location.presigned_url)
    data = b"id,name\n1,ada\n" * 50_000
    put = HTTP.request("PUT", location.presigned_url, body=data, headers={"Content-Type": "text/csv"})
    assert put.status == 200, put.data
    etag = put.headers["ETag"].strip('"')
    assert etag == hashlib.md5(data).hexdigest()

    metadata = lakefs_sdk.StagingMetadata(
        staging=location, checksum=etag, size_bytes=len(data), user_metadata={"owner": "ada"}, content_type="text/csv"
    )
    linked = staging.link_physical_address(store.repo, "main", "up/table.csv", metadata)
    assert (linked.path, linked.physical_address, linked.checksum) == ("up/table.csv", location.physical_address, etag)
    assert linked.size_bytes == len(data) and linked.metadata == {"owner": "ada"}

    objects = lakefs_sdk.ObjectsApi(store.sdk())
    assert objects.get_object(store.repo, "main", "up/table.csv") == data
    stat = objects.stat_object(store.repo, "main", "up/table.csv")
    assert (stat.content_type, stat.metadata, stat.physical_address) == (
        "text/csv",
        {"owner": "ada"},
        linked.physical_address,
    )
    s3 = store.api.stack.client()
    answer = s3.get_object(Bucket=store.repo, Key="main/up/table.csv")
    assert answer["Body"].read() == data and answer["Metadata"] == {"owner": "ada"}
    assert answer["ETag"].strip('"') == etag and answer["ContentType"] == "text/csv"

    # Linked again under If-None-Match: * the path exists: 412, as lakeFS answers.
    again = _link(store, "up/table.csv", metadata.to_dict(), **{"If-None-Match": "*"})
    assert "exists" in error_message(again, 412)
    lakefs_sdk.BranchesApi(store.sdk()).get_branch(store.repo, "main")  # the repository is intact
    commit = lakefs_sdk.CommitsApi(store.sdk()).commit(store.repo, "main", lakefs_sdk.CommitCreation(message="linked"))
    assert objects.get_object(store.repo, commit.id, "up/table.csv") == data


def test_a_second_put_to_the_upload_url_never_changes_what_a_commit_serves(store: Store) -> None:
    staging = lakefs_sdk.StagingApi(store.sdk())
    objects = lakefs_sdk.ObjectsApi(store.sdk())
    location = staging.get_physical_address(store.repo, "main", "t/reviewed.csv", presign=True)
    assert location.presigned_url is not None
    _check_url_origin(store, location.presigned_url)
    data, other = b"id,amount\n1,10\n" * 1000, b"id,amount\n1,99\n" * 1000
    put = HTTP.request("PUT", location.presigned_url, body=data)
    assert put.status == 200, put.data
    metadata = lakefs_sdk.StagingMetadata(
        staging=location, checksum=put.headers["ETag"].strip('"'), size_bytes=len(data)
    )
    staging.link_physical_address(store.repo, "main", "t/reviewed.csv", metadata)
    commit = lakefs_sdk.CommitsApi(store.sdk()).commit(
        store.repo, "main", lakefs_sdk.CommitCreation(message="reviewed")
    )

    again = HTTP.request("PUT", location.presigned_url, body=other)
    if store.kind == "local":
        assert again.status == 412  # the edge's own URLs write once
    else:
        assert again.status == 200  # the store's URL is valid until it expires; reads are pinned instead
    s3 = store.api.stack.client()
    for ref in ("main", commit.id):
        try:
            assert objects.get_object(store.repo, ref, "t/reviewed.csv") == data
        except ApiException as exc:
            assert store.kind == "s3" and exc.status == 410, exc
            assert "since it was linked" in (exc.body or "")
        try:
            assert s3.get_object(Bucket=store.repo, Key=f"{ref}/t/reviewed.csv")["Body"].read() == data
        except s3.exceptions.NoSuchKey:
            assert store.kind == "s3"
        url = objects.stat_object(store.repo, ref, "t/reviewed.csv", presign=True).physical_address
        assert url.startswith(store.api.stack.endpoint + "/"), url
        got = HTTP.request("GET", url)
        assert got.data != other
        assert got.status == 200 and got.data == data if store.kind == "local" else got.status == 410, got.data


def test_links_that_are_refused(store: Store) -> None:
    staging = lakefs_sdk.StagingApi(store.sdk())
    location = staging.get_physical_address(store.repo, "main", "a.bin", presign=True)
    assert location.presigned_url is not None
    data = b"0123456789"
    assert HTTP.request("PUT", location.presigned_url, body=data).status == 200
    good = {
        "staging": {"physical_address": location.physical_address},
        "checksum": hashlib.md5(data).hexdigest(),
        "size_bytes": 10,
    }

    # Handed out for a.bin, not for b.bin.
    assert "link address invalid" in error_message(_link(store, "b.bin", good), 400)
    # An address of the namespace that was never handed out (another object's bytes, say).
    forged = {**good, "staging": {"physical_address": store.namespace + "/data/0123456789abcdef0123456789abcdef"}}
    assert "not signed" in error_message(_link(store, "a.bin", forged), 400)
    # Outside the namespace, and under no allowed import prefix.
    outside = "local://elsewhere/x.bin" if store.kind == "local" else f"s3://{S3_DATA}-other/x.bin"
    elsewhere = {**good, "staging": {"physical_address": outside}}
    assert "outside the repository's storage namespace" in error_message(_link(store, "a.bin", elsewhere), 400)
    # Size and checksum must be the object's.
    assert "bytes" in error_message(_link(store, "a.bin", {**good, "size_bytes": 11}), 400)
    assert "differs from the ETag" in error_message(_link(store, "a.bin", {**good, "checksum": "0" * 32}), 400)
    assert "checksum is required" in error_message(_link(store, "a.bin", {**good, "checksum": '""'}), 400)
    # An address handed out but never uploaded to.
    empty = staging.get_physical_address(store.repo, "main", "c.bin")
    unwritten = {**good, "staging": {"physical_address": empty.physical_address}}
    assert "upload it before linking" in error_message(_link(store, "c.bin", unwritten), 400)
    assert error_message(_link(store, "a.bin", good, **{"If-None-Match": "abc"}), 501)
    missing_branch = store.api.request(
        "GET", f"/repositories/{store.repo}/branches/nope/staging/backing?path=x", headers=None
    )
    assert error_message(missing_branch, 404)
    # None of it staged anything; the good link still works.
    with pytest.raises(ApiException) as absent:
        lakefs_sdk.ObjectsApi(store.sdk()).stat_object(store.repo, "main", "b.bin")
    assert absent.value.status == 404
    assert _link(store, "a.bin", good).status == 200


def test_a_reader_cannot_ask_for_an_upload_address(api: Api, repo: str) -> None:
    reader = api.sdk(api.stack.reader)
    with pytest.raises(ApiException) as refused:
        lakefs_sdk.StagingApi(reader).get_physical_address(repo, "main", "x", presign=True)
    assert refused.value.status == 403


def _server_urls(api: Api, clock: Any) -> EdgeUrls:
    """URLs signed with the server's own key (derived from svc-api's secret, which the test stack
    keeps in its data directory): to make a URL that is genuine but expired."""
    keys = json.loads((api.stack.stack.data_dir / SERVICE_KEYS_FILE).read_text())["api"]
    credentials = {"access_key_id": keys["access_key_id"], "secret_access_key": keys["secret_access_key"]}
    config = Config.model_validate({"api": {"credentials": credentials}})
    return EdgeUrls(purpose_key(edge_signing_key(config), "presigned-url"), clock)


def test_local_urls_refuse_tampering_expiry_and_other_methods(api: Api, repo: str) -> None:
    data = b"the bytes"
    objects = lakefs_sdk.ObjectsApi(api.sdk())
    _upload(Store("local", api, repo), "f.txt", data)
    url = objects.stat_object(repo, "main", "f.txt", presign=True).physical_address
    assert HTTP.request("GET", url).data == data
    assert HTTP.request("HEAD", url).headers["Content-Length"] == str(len(data))
    parts = urlsplit(url)
    signature = dict(pair.split("=", 1) for pair in parts.query.split("&"))["X-Silt-Signature"]
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    tampered = [
        url.replace(signature, flipped),
        url.replace("X-Silt-Method=GET", "X-Silt-Method=PUT"),
        url.replace("X-Silt-Expires=", "X-Silt-Expires=1"),
        url.replace("/data/", "/data/x"),
        url + "&X-Silt-Filename=evil.html",
        url.split("?")[0],
    ]
    for bad in tampered:
        refused = HTTP.request("GET", bad)
        assert refused.status == 403, bad
    assert error_message(HTTP.request("PUT", url, body=b"x"), 403)  # a GET URL does not write
    assert HTTP.request("DELETE", url).status == 405

    address = f"local://{repo}/" + parts.path.split(f"/{repo}/", 1)[1]
    expired = _server_urls(api, lambda: time.time() - 120).sign(api.stack.endpoint, address, "GET", 60)
    assert "expired" in error_message(HTTP.request("GET", expired.url), 403)
    fresh = _server_urls(api, time.time).sign(api.stack.endpoint, address, "GET", 60)
    assert HTTP.request("GET", fresh.url).data == data  # the same key, in time: served


def test_local_presigned_put_rules(api: Api, repo: str) -> None:
    staging = lakefs_sdk.StagingApi(api.sdk())
    location = staging.get_physical_address(repo, "main", "p.bin", presign=True)
    url = location.presigned_url
    assert url is not None
    # Content-Length is required (a chunked body has none).
    chunked = HTTP.request("PUT", url, body=iter([b"ab", b"cd"]), chunked=True)
    assert error_message(chunked, 411)
    assert HTTP.request("PUT", url, body=b"first").status == 200
    # Written once: the URL cannot replace what may already be linked into a commit.
    assert "already uploaded" in error_message(HTTP.request("PUT", url, body=b"second"), 412)
    assert error_message(HTTP.request("GET", url), 403)  # a PUT URL does not read
    read = staging.get_physical_address(repo, "main", "p.bin")
    assert read.presigned_url is None


def test_link_an_object_under_an_allowed_import_prefix(s3_api: Api, moto_server: str) -> None:
    """On S3 an address outside the namespace is linked when it lies under an allowed import
    prefix and the object is there; the entry then points at it, no byte copied."""
    repo = f"ps-{secrets.token_hex(5)}"
    store = Store("s3", s3_api, repo, moto_server)
    lakefs_sdk.RepositoriesApi(store.sdk()).create_repository(
        lakefs_sdk.RepositoryCreation(name=repo, storage_namespace=store.namespace)
    )
    data = b"landed elsewhere"
    landing_key = f"exports/{repo}/part-0.csv"
    etag = moto_client(moto_server).put_object(Bucket=S3_LANDING, Key=landing_key, Body=data)["ETag"].strip('"')
    address = f"s3://{S3_LANDING}/{landing_key}"
    body = {"staging": {"physical_address": address}, "checksum": etag, "size_bytes": len(data)}
    linked = _link(store, "landed.csv", body)
    assert linked.status == 200, linked.data
    assert json.loads(linked.data)["physical_address"] == address
    objects = lakefs_sdk.ObjectsApi(store.sdk())
    assert objects.get_object(repo, "main", "landed.csv") == data
    assert objects.stat_object(repo, "main", "landed.csv").physical_address == address
    assert s3_api.stack.client().get_object(Bucket=repo, Key="main/landed.csv")["Body"].read() == data
    # Its presigned URL is the edge's, not the store's: reads check the source is as linked.
    url = objects.stat_object(repo, "main", "landed.csv", presign=True).physical_address
    assert url.startswith(f"{s3_api.stack.endpoint}/_silt/presigned/s3/{S3_LANDING}/exports/"), url
    assert HTTP.request("GET", url).data == data
    assert HTTP.request("GET", url, headers={"Range": "bytes=7-"}).data == data[7:]
    moto_client(moto_server).put_object(Bucket=S3_LANDING, Key=landing_key, Body=b"changed at the source")
    assert address in error_message(HTTP.request("GET", url), 410)
    with pytest.raises(ApiException) as gone:
        objects.get_object(repo, "main", "landed.csv", presign=True)
    assert gone.value.status == 410
    # Under the prefix, but not there: refused before anything is staged.
    missing = {**body, "staging": {"physical_address": f"s3://{S3_LANDING}/exports/{repo}/none.csv"}}
    assert "upload it before linking" in error_message(_link(store, "none.csv", missing), 400)


def test_lakefs_client_with_and_without_presign(store: Store) -> None:
    admin = store.api.stack.admin
    clt = Client(
        host=store.api.stack.endpoint,
        username=admin.access_key_id,
        password=admin.secret_access_key.get_secret_value(),
    )
    main = lakefs.Repository(store.repo, client=clt).branch("main")
    data = b"".join(f"{i:06d},row\n".encode() for i in range(40_000))
    written = main.object("hl/pre.csv").upload(
        data, mode="wb", pre_sign=True, content_type="text/csv", metadata={"k": "v"}
    )
    stat = written.stat(pre_sign=True)
    # A linked upload is read through the edge's own URL on every store: it checks the bytes are
    # still those linked (the store's PUT URL stays usable until it expires).
    assert stat.physical_address.startswith(store.api.stack.endpoint + "/_silt/presigned/"), stat.physical_address
    assert stat.size_bytes == len(data) and stat.metadata == {"k": "v"} and stat.content_type == "text/csv"
    with written.reader("rb", pre_sign=True) as reader:
        assert reader.read() == data
        reader.seek(7 * 1000)
        assert reader.read(10) == data[7000:7010]
    with pytest.raises(ObjectExistsException):
        main.object("hl/pre.csv").upload(b"other", mode="xb", pre_sign=True)
    # The raw path (a chunked POST, metadata in x-lakefs-meta-* headers) still works beside it.
    raw = main.object("hl/raw.csv").upload(data, mode="wb", pre_sign=False, metadata={"k": "raw"})
    with raw.reader("rb", pre_sign=False) as reader:
        assert reader.read() == data
    assert raw.stat().metadata == {"k": "raw"}
    assert raw.stat().physical_address.startswith(store.namespace + "/data/")


def test_lakefs_spec_with_presign(store: Store) -> None:
    admin = store.api.stack.admin
    fs = LakeFSFileSystem(
        host=store.api.stack.endpoint,
        username=admin.access_key_id,
        password=admin.secret_access_key.get_secret_value(),
        pre_sign=True,
    )
    data = secrets.token_bytes(700_000)
    fs.pipe(f"lakefs://{store.repo}/main/spec/blob.bin", data)
    assert fs.cat(f"lakefs://{store.repo}/main/spec/blob.bin") == data
    with fs.open(f"lakefs://{store.repo}/main/spec/blob.bin", "rb") as f:
        f.seek(500_000)
        assert f.read(100) == data[500_000:500_100]
    info = fs.info(f"lakefs://{store.repo}/main/spec/blob.bin")
    assert info["size"] == len(data) and info["checksum"] == hashlib.md5(data).hexdigest()


def test_the_manual_staging_example_runs(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/clients/lakefs.md's staging example, as written but for the endpoint and names."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "clients" / "lakefs.md").read_text()
    [code] = [block for block in re.findall(r"```python\n(.*?)```", page, re.S) if "StagingApi" in block]
    name = f"staging-demo-{secrets.token_hex(4)}"
    lakefs_sdk.RepositoriesApi(api.sdk()).create_repository(
        lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
    )
    code = code.replace("http://127.0.0.1:8000", api.stack.endpoint).replace("staging-demo", name)
    admin = api.stack.admin
    exec(code, {"KEY_ID": admin.access_key_id, "SECRET": admin.secret_access_key.get_secret_value()})
    assert capsys.readouterr().out.strip() == "raw/day1.csv"
    assert lakefs_sdk.ObjectsApi(api.sdk()).get_object(name, "main", "raw/day1.csv") == b"id,name\n1,ada\n"
