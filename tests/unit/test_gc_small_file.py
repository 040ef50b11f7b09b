"""jobs/gc/location.py `write_small_file` on S3: the bytes through the session's Hadoop file
system, published only by a write that succeeded. A fake of the few JVM objects it touches
stands in for Spark (the S3 run itself: tests/integration/gc/test_gc_s3.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from jobs.gc.location import NamespaceRoot, write_small_file
from silt.config import BlockstoreConfig
from silt.errors import InvalidArgument

ROOT = NamespaceRoot("s3://bucket/repos/r", "s3a://bucket/repos/r", "bucket", "s3")


class FakeStream:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.written: list[bytes] = []
        self.events: list[str] = []

    def write(self, data: bytes) -> None:
        if self.fail:
            raise OSError("connection reset")
        self.written.append(data)

    def close(self) -> None:
        self.events.append("close")

    def abort(self) -> None:
        self.events.append("abort")


def fake_spark(stream: FakeStream, created: list[tuple[str, bool]]) -> Any:
    class Path:
        def __init__(self, uri: str) -> None:
            self.uri = uri

        def getFileSystem(self, _configuration: object) -> Any:
            def create(path: Path, overwrite: bool) -> FakeStream:
                created.append((path.uri, overwrite))
                return stream

            return SimpleNamespace(create=create)

    hadoop = SimpleNamespace(
        org=SimpleNamespace(apache=SimpleNamespace(hadoop=SimpleNamespace(fs=SimpleNamespace(Path=Path))))
    )
    jsc = SimpleNamespace(hadoopConfiguration=lambda: object())
    return SimpleNamespace(sparkContext=SimpleNamespace(_jvm=hadoop, _jsc=jsc))


def test_the_summary_goes_to_its_key_under_the_namespace_and_is_published() -> None:
    stream, created = FakeStream(fail=False), list[tuple[str, bool]]()
    write_small_file(fake_spark(stream, created), ROOT, BlockstoreConfig(type="s3"), "_silt/gc/run/summary.json", b"{}")
    assert created == [("s3a://bucket/repos/r/_silt/gc/run/summary.json", True)]
    assert stream.written == [b"{}"] and stream.events == ["close"]


def test_a_failed_write_is_aborted_not_published() -> None:
    stream, created = FakeStream(fail=True), list[tuple[str, bool]]()
    with pytest.raises(OSError, match="connection reset"):
        write_small_file(
            fake_spark(stream, created), ROOT, BlockstoreConfig(type="s3"), "_silt/gc/run/summary.json", b"{}"
        )
    assert stream.events == ["abort"]  # never closed: S3A uploads on close


@pytest.mark.parametrize("key", ["../other/summary.json", "_silt/gc//summary.json", "/summary.json", ""])
def test_a_key_that_could_leave_the_namespace_is_refused_before_anything_is_written(key: str) -> None:
    stream, created = FakeStream(fail=False), list[tuple[str, bool]]()
    with pytest.raises(InvalidArgument):
        write_small_file(fake_spark(stream, created), ROOT, BlockstoreConfig(type="s3"), key, b"{}")
    assert created == []
