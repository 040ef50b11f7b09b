"""Unconditional writes for keys that are otherwise written by compare-and-set.

On Cassandra ``set_if`` is a lightweight transaction (Paxos) and ``set`` / ``delete`` are plain
writes. Mixing the two on one key is unsafe there: the plain write's timestamp and the Paxos
ballot are not ordered with each other, so either may silently lose, and a plain write does not
go through the Paxos round that the next compare-and-set reads from. A key family that needs
``set_if`` anywhere is therefore written *only* by conditional operations
(docs/design/kv.md, "Consistency on Cassandra: statements"). These helpers give such a key the
meaning of a blind ``set`` or ``delete`` — whatever the current value, replace or remove it —
as a compare-and-set on the value just read, read again when another writer got in between.
"""

from __future__ import annotations

from silt.errors import Aborted, NotFound, PredicateFailed
from silt.kv.store import Predicate, Store

# A blind write loses its compare-and-set only to a writer that got in between its read and
# its write; that many in a row means the key is being rewritten continuously.
ATTEMPTS = 20


def _current(store: Store, partition: bytes, key: bytes) -> Predicate | None:
    try:
        return store.get(partition, key).predicate
    except NotFound:
        return None


def replace(store: Store, partition: bytes, key: bytes, value: bytes, attempts: int = ATTEMPTS) -> None:
    """Store value under key whatever is there now (a ``set``), by compare-and-set.

    Aborted if other writers changed the key between every read and write of attempts tries.
    """
    for _ in range(attempts):
        try:
            store.set_if(partition, key, value, _current(store, partition, key))
        except PredicateFailed:
            continue
        return
    raise Aborted(f"KV key {key[:64]!r} kept changing under {attempts} tries to replace it; try again")


def delete_current(store: Store, partition: bytes, key: bytes, attempts: int = ATTEMPTS) -> bool:
    """Delete key whatever its value (a ``delete``), by compare-and-set; whether it existed.

    The delete is conditional on the value read (``apply`` with a condition: on Cassandra a
    ``DELETE ... IF value = ?``, one Paxos round like ``set_if``). Aborted as for replace.
    """
    for _ in range(attempts):
        predicate = _current(store, partition, key)
        if predicate is None:
            return False
        try:
            store.apply(partition, [], [key], condition=(key, predicate))
        except PredicateFailed:
            continue
        return True
    raise Aborted(f"KV key {key[:64]!r} kept changing under {attempts} tries to delete it; try again")
