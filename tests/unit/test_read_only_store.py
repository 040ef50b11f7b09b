"""The edge holds graveler's KV through ReadOnlyStore: it reads everything and writes nothing."""

from __future__ import annotations

import pytest

from edge.app import SharedReads
from silt.config import Config
from silt.errors import PermissionDenied
from silt.kv.mem import MemStore
from silt.kv.read_only import ReadOnlyStore


def test_reads_pass_through_and_every_write_is_refused() -> None:
    inner = MemStore()
    inner.set(b"p", b"a", b"1")
    inner.set(b"p", b"b", b"2")
    store = ReadOnlyStore(inner)
    assert store.get(b"p", b"a").value == b"1"
    assert [(e.key, e.value) for e in store.scan(b"p")] == [(b"a", b"1"), (b"b", b"2")]
    assert [list(chunk) for chunk in store.scan_chunks(b"p", b"b")] == [[(b"b", b"2")]]
    predicate = inner.get(b"p", b"a").predicate
    for write in (
        lambda: store.set(b"p", b"a", b"x"),
        lambda: store.set_if(b"p", b"a", b"x", predicate),
        lambda: store.set_if(b"p", b"c", b"x", None),
        lambda: store.delete(b"p", b"a"),
        lambda: store.apply(b"p", [(b"c", b"x")], [b"a"]),
    ):
        with pytest.raises(PermissionDenied):
            write()
    assert [(e.key, e.value) for e in inner.scan(b"p")] == [(b"a", b"1"), (b"b", b"2")]


def test_the_edges_front_ends_share_one_reader_and_the_last_to_stop_closes_it(tmp_path: object) -> None:
    config = Config.model_validate({"database": {"type": "local", "local": {"path": f"{tmp_path}/kv.db"}}})
    shared = SharedReads(config)
    gateway, api = shared.open(), shared.open()
    assert gateway is shared and api is shared
    engine = shared._engine
    assert engine is not None
    gateway.close()
    assert shared._engine is engine  # the API still reads through it
    api.close()
    assert shared._engine is None
    # With the mem driver nothing outside graveler's process can read its KV: reads are calls.
    assert SharedReads(Config.model_validate({"database": {"type": "mem"}})).open() is None
