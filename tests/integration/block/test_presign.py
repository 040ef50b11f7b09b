"""Block adapters' presigned URLs and create-only writes: S3's URLs are the store's own (moto_server
serves them to a plain HTTP client); the local disk has none (the edge signs its own), and its
`put_if_absent` lets exactly one writer create an object."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest
import urllib3

from silt.block.adapter import PartInfo
from silt.block.local import LocalAdapter
from silt.block.s3 import S3Adapter
from silt.errors import AlreadyExists, InvalidArgument
from tests.support.moto import s3_blockstore_config

HTTP = urllib3.PoolManager(retries=False, timeout=30)


@pytest.mark.s3
def test_s3_presigned_urls_read_and_write_one_object(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    namespace = f"s3://{s3_bucket}/ns"
    s3_adapter.put(namespace, "data/a", io.BytesIO(b"hello presigned"))
    before = int(time.time())
    url = s3_adapter.presign(namespace, "data/a", "GET", 300, filename="a.txt")
    assert before + 300 <= url.expires <= before + 302
    assert f"/{s3_bucket}/ns/data/a?" in url.url and "X-Amz-Signature=" in url.url and "X-Amz-Expires=300" in url.url
    got = HTTP.request("GET", url.url)
    assert got.status == 200 and got.data == b"hello presigned"
    assert 'filename="a.txt"' in got.headers["Content-Disposition"]

    put = s3_adapter.presign(namespace, "data/b", "PUT", 300)
    assert "x-amz-checksum" not in put.url.lower()  # nothing a plain HTTP client would have to send
    stored = HTTP.request("PUT", put.url, body=b"uploaded")
    assert stored.status == 200, stored.data
    with s3_adapter.get(namespace, "data/b") as reader:
        assert reader.read() == b"uploaded"
    with pytest.raises(InvalidArgument):
        s3_adapter.presign(namespace, "data/a", "GET", 8 * 24 * 3600)
    with pytest.raises(InvalidArgument):
        s3_adapter.presign(namespace, "../a", "GET", 60)


@pytest.mark.s3
def test_s3_presigned_part_urls_upload_parts_a_complete_joins(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    namespace = f"s3://{s3_bucket}/ns"
    upload_id = s3_adapter.create_multipart_upload(namespace, "data/mp")
    first, last = b"a" * (5 * 1024 * 1024), b"the end"
    etags = []
    for number, data in enumerate((first, last), 1):
        url = s3_adapter.presign_part(namespace, "data/mp", upload_id, number, 300)
        assert f"partNumber={number}" in url.url and "X-Amz-Signature=" in url.url
        stored = HTTP.request("PUT", url.url, body=data)
        assert stored.status == 200, stored.data
        etags.append(PartInfo(number, stored.headers["ETag"].strip('"')))
    joined = s3_adapter.complete_multipart_upload(namespace, "data/mp", upload_id, etags)
    assert joined.size == len(first) + len(last) and joined.etag.endswith("-2")
    with s3_adapter.get(namespace, "data/mp") as reader:
        assert reader.read() == first + last
    with pytest.raises(InvalidArgument):
        s3_adapter.presign_part(namespace, "data/mp", upload_id, 10001, 60)
    with pytest.raises(InvalidArgument):
        s3_adapter.presign_part(namespace, "data/mp", upload_id, 1, 8 * 24 * 3600)


def test_s3_presigned_urls_name_the_configured_endpoint() -> None:
    config = s3_blockstore_config("http://127.0.0.1:9").model_copy(
        update={"pre_signed_endpoint": "https://store.example.com"}
    )
    url = S3Adapter(config).presign("s3://bucket/ns", "data/a", "GET", 60).url
    assert url.startswith("https://store.example.com/bucket/ns/data/a?")
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url


def test_local_store_has_no_urls_and_creates_once(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    assert adapter.presign("local://ns", "data/a", "GET", 60) is None
    assert adapter.presign_part("local://ns", "data/a", "some-upload", 1, 60) is None
    first = adapter.put_if_absent("local://ns", "data/a", io.BytesIO(b"first"), 5)
    assert first.size == 5
    with pytest.raises(AlreadyExists):
        adapter.put_if_absent("local://ns", "data/a", io.BytesIO(b"second"))
    with adapter.get("local://ns", "data/a") as reader:
        assert reader.read() == b"first"
    assert adapter.stat("local://ns", "data/a").etag == first.etag
    assert [p.name for p in (tmp_path / "blocks" / "ns" / "data").iterdir() if ".silt-tmp" in p.name] == []

    # Writers racing for one key: exactly one creates it, and its bytes are what is there.
    winners: list[bytes] = []
    start = threading.Barrier(8)

    def race(n: int) -> None:
        body = bytes([n]) * 200_000
        start.wait()
        try:
            adapter.put_if_absent("local://ns", "data/race", io.BytesIO(body))
        except AlreadyExists:
            return
        winners.append(body)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1
    with adapter.get("local://ns", "data/race") as reader:
        assert reader.read() == winners[0]
