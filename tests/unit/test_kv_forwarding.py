"""Store.apply checks an apply once, for the driver and any wrappers over it (ForwardingStore
passes the checked batch on); the wrappers keep the Store's semantics."""

from __future__ import annotations

from typing import Any

import pytest

import silt.kv.store as kv_store
from silt.errors import InvalidArgument, NotFound, PermissionDenied
from silt.kv.forwarding import ForwardingStore
from silt.kv.mem import MemStore
from silt.kv.read_only import ReadOnlyStore
from silt.kv.store import CheckedBatch, Store, check_apply
from silt.telemetry.kv import InstrumentedStore


def test_a_chain_of_wrappers_over_a_driver_checks_an_apply_once(monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[bytes] = []

    def counting(*args: object) -> CheckedBatch:
        batch = check_apply(*args)  # type: ignore[arg-type]
        checks.append(batch.partition)
        return batch

    monkeypatch.setattr(kv_store, "check_apply", counting)
    driver = MemStore()
    store = ForwardingStore(InstrumentedStore(driver, "mem", tracer=None, with_metrics=True))
    partition: Any = bytearray(b"p")  # callers may pass bytearrays
    row: Any = (bytearray(b"k"), bytearray(b"v"))
    store.apply(partition, [row], condition=(b"k", None))
    assert checks == [b"p"]
    stored = driver.get(b"p", b"k")
    assert stored.value == b"v" and type(stored.value) is bytes  # the checked batch's bytes
    with pytest.raises(InvalidArgument):
        store.apply(b"p", [(b"k", b"v")], [b"k"])  # a key twice


def test_the_read_only_store_refuses_any_apply_before_looking_at_it() -> None:
    store = ReadOnlyStore(MemStore())
    with pytest.raises(PermissionDenied):
        store.apply(b"", [])  # invalid, and still a refused write rather than InvalidArgument
    with pytest.raises(PermissionDenied):
        store.apply_checked(check_apply(b"p", [(b"k", b"v")], (), None, None))


def test_a_store_without_apply_checked_cannot_be_made() -> None:
    """apply_checked is what a driver writes an apply with: a store lacking it is refused when it
    is made, not when it first writes."""

    class NoApply(Store):
        def get(self, partition: bytes, key: bytes) -> Any:
            raise NotFound("nothing")

    with pytest.raises(TypeError, match="apply_checked"):
        NoApply()  # type: ignore[abstract]


def test_a_wrapper_over_a_store_with_its_own_apply_goes_through_that_apply() -> None:
    """A store that does its work in apply (as tests' fault-injecting stores do) is not gone
    round by a wrapper passing the checked batch straight to apply_checked."""
    applied: list[bytes] = []

    class Recording(MemStore):
        def apply(
            self, partition: bytes, puts: Any, deletes: Any = (), condition: Any = None, timestamp: Any = None
        ) -> None:
            applied.append(bytes(partition))
            super().apply(partition, puts, deletes, condition, timestamp)

    inner = Recording()
    ForwardingStore(inner).apply(b"p", [(b"k", b"v")])
    InstrumentedStore(inner, "mem", tracer=None, with_metrics=True).apply(b"q", [(b"k", b"v")])
    assert applied == [b"p", b"q"]
    assert inner.get(b"q", b"k").value == b"v"
