"""Drop records: `cleanup/<token>` in a repository's partition, one per staging token whose
staged values are to be deleted, from the branch update that made the token unreachable until
the cleaner has deleted them (engine/core/cleanup.py; docs/design/kv.md).

A record is written in the same KV batch as that update (a conditional apply on the branch
record, one partition): it exists exactly when the update applied, so a graveler killed before
its cleaner got to the drop leaves the record to the next one (Cleaner.resume), and an update
that lost its compare-and-set leaves none. Like every key a compare-and-set writes, a record is
deleted by compare-and-set only (silt/kv/conditional.py).

Records are unjournaled, as the drops themselves are (docs/design/journal.md): replay reaches a
branch record that no longer names the token, and rebuild writes no staged values to drop.

Versions before this one kept the records in graveler's shared partition (LEGACY_PARTITION),
written and deleted plainly; the cleaner still finishes and deletes those.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.core.model import StagingToken
from silt.journal.store import JournaledStore
from silt.kv.store import Condition, Store

PENDING_PREFIX = b"cleanup/"
# Where earlier versions recorded every repository's drops: read until none is left there.
LEGACY_PARTITION = b"graveler"


def record_key(token: str) -> bytes:
    return PENDING_PREFIX + token.encode()


def token_of(key: bytes) -> StagingToken:
    return StagingToken(key[len(PENDING_PREFIX) :].decode())


def record_rows(tokens: Iterable[str]) -> list[tuple[bytes, bytes]]:
    """The rows recording the drop of tokens (each once)."""
    return [(record_key(token), b"") for token in dict.fromkeys(tokens)]


def apply_recording(
    kv: Store,
    partition: bytes,
    puts: Sequence[tuple[bytes, bytes]],
    deletes: Sequence[bytes],
    condition: Condition,
    dropping: Iterable[str],
) -> None:
    """kv.apply of puts and deletes on condition, with the drop records of dropping in the same
    batch: all of it or none (PredicateFailed, OutcomeUnknown as apply raises them)."""
    rows = record_rows(dropping)
    if isinstance(kv, JournaledStore):
        kv.apply(partition, puts, deletes, condition, unjournaled=rows)
    else:
        kv.apply(partition, [*puts, *rows], deletes, condition)
