"""The import's write-behind: puts run on one thread, at most `depth` wait, and `finish` returns
only once every one is stored, raising the first failure (so no metarange names a lost range)."""

from __future__ import annotations

import io
import threading
from typing import Any, BinaryIO

import pytest

from engine.features.imports.write_behind import WriteBehind
from silt.block.adapter import PutResult


class SlowAdapter:
    scheme = "local"

    def __init__(self, fail_on: str | None = None) -> None:
        self.stored: dict[str, bytes] = {}
        self.release = threading.Event()
        self.fail_on = fail_on

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        self.release.wait(10)
        if key == self.fail_on:
            raise OSError(f"disk full writing {key}")
        data = stream.read()
        self.stored[key] = data
        return PutResult(len(data), "etag")

    def stat(self, namespace: str, key: str) -> Any:
        return ("stat", key)


def test_puts_wait_behind_at_most_depth_and_finish_stores_them_all() -> None:
    adapter = SlowAdapter()
    writer = WriteBehind(adapter, depth=2)  # type: ignore[arg-type]
    for n in range(2):
        writer.put("ns", f"k{n}", io.BytesIO(b"x" * n))
    # A third put must wait: two are queued or running, the depth.
    third = threading.Thread(target=writer.put, args=("ns", "k2", io.BytesIO(b"xx")))
    third.start()
    third.join(0.3)
    assert third.is_alive() and adapter.stored == {}
    adapter.release.set()
    third.join(10)
    writer.finish()
    assert adapter.stored == {f"k{n}": b"x" * n for n in range(3)}
    assert writer.stat("ns", "k1") == ("stat", "k1")  # everything else is the adapter's own


def test_finish_raises_the_first_failure() -> None:
    adapter = SlowAdapter(fail_on="k1")
    adapter.release.set()
    writer = WriteBehind(adapter)  # type: ignore[arg-type]
    for n in range(3):
        writer.put("ns", f"k{n}", io.BytesIO(b"data"))
    with pytest.raises(OSError, match="disk full writing k1"):
        writer.finish()
