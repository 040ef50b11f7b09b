"""Claims on storage namespaces: what makes two racing creations of overlapping repositories fail.

Checking a new repository's namespace against a listing of the live ones and then writing its
record is two steps, so two creations (on two graveler replicas, or two threads of one) could
both pass the check before either record exists, and GC would later sweep one repository's
objects from the other's listing. KV has no transactions, so each creation instead claims its
namespace with ``set_if(.., None)`` in the ``graveler`` partition *before* it looks for
anyone else's claim, and only then writes anything of the repository:

    ns_claims/<scheme>://<folded part>/<folded part>/.../\\0<unique id>   the record (Repository)

Parts are case-folded (as ``Namespace.overlaps`` compares them) and each ends with ``/``, so
the claims on a namespace and on everything below it share the prefix ``ns_claims/<N>``, and
the claims on exactly an ancestor A are the keys starting ``ns_claims/<A>\\0``. A namespace's
parts never contain ``/`` or NUL (silt/namespaces.py), so the encoding is unambiguous.

**Why two overlapping creations cannot both miss each other.** KV guarantees that once a
write returns, every read that *starts* afterwards sees it (docs/design/kv.md; on Cassandra
the claim is a lightweight transaction and the reads are at quorum). Say creation A's claim
returned no later than B's. B reads the claims only after its own claim returned, so after
A's had: B finds A's claim. So at least one of two overlapping creations sees the other and
refuses (both may). A creation that refuses, or fails later, removes its claim.

A claim found without a live repository record is either a creation in progress or the
leftover of one that crashed (or of a deletion that crashed before removing it). In progress
counts as taken. Older than ``STALE_AFTER_SECONDS`` it is a leftover and is removed: a
creation gives up (without writing its record) once ``CREATION_LIMIT_SECONDS`` have passed
since its claim, far below that, so a claim judged stale never belongs to a creation that
will still succeed.

The unique id in the key lets two repositories hold claims on the same namespace: the
administrators' restore of a dump next to its original (placement.py), after which deleting
either keeps the other's claim. A repository's deletion removes its claim after its record
(and the cleaner of deleted repositories again, in case that failed). Repositories created
before claims existed have none: the listing check in lifecycle.py still finds them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from engine.core.refs import GRAVELER_PARTITION, RefManager
from silt.errors import NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.conditional import delete_current
from silt.kv.store import scan_prefix
from silt.namespaces import Namespace, parse_recorded

CLAIMS = b"ns_claims/"
STALE_AFTER_SECONDS = 3600.0
CREATION_LIMIT_SECONDS = 600.0


def _place(scheme: str, parts: tuple[str, ...]) -> bytes:
    return CLAIMS + f"{scheme}://".encode() + b"".join(part.casefold().encode() + b"/" for part in parts)


def claim_key(namespace: Namespace, unique_id: str) -> bytes:
    return _place(namespace.scheme, namespace.parts) + b"\x00" + unique_id.encode()


def record_claim_key(record: pb.Repository) -> bytes:
    return claim_key(parse_recorded(record.storage_namespace), record.unique_id)


@dataclass(frozen=True)
class Claim:
    key: bytes
    record: pb.Repository  # the claimant's record as it was to be written; creation_date: the claim's time

    @property
    def namespace(self) -> Namespace:
        return parse_recorded(self.record.storage_namespace)


class NamespaceClaims:
    def __init__(self, refs: RefManager, clock: Callable[[], float] = time.time) -> None:
        self._refs = refs
        self._clock = clock

    def claim(self, namespace: Namespace, record: pb.Repository) -> bytes:
        """Write this creation's claim (the key is unique to it, so it does not exist yet)."""
        key = claim_key(namespace, record.unique_id)
        self._refs.kv.set_if(GRAVELER_PARTITION, key, record.SerializeToString(), None)
        return key

    def release(self, key: bytes) -> None:
        """Remove a claim; best effort (a leftover goes stale and is removed by the next creator)."""
        with contextlib.suppress(Exception):
            delete_current(self._refs.kv, GRAVELER_PARTITION, key)

    def overlapping(self, namespace: Namespace, own_key: bytes) -> list[Claim]:
        """Other claims on the namespace, an ancestor of it or a place below it, that still count:
        those of live repositories and of creations in progress. Stale leftovers are removed."""
        found = []
        for claim in self._candidates(namespace):
            if claim.key == own_key:
                continue
            if self._live(claim) or not self._stale(claim):
                found.append(claim)
            else:
                self.release(claim.key)
        return found

    @staticmethod
    def too_late(claimed: float) -> bool:
        """Whether a creation that claimed at ``claimed`` (time.monotonic) must give up rather than
        write its record: well before anyone may judge its claim stale, whatever the clock skew."""
        return time.monotonic() - claimed > CREATION_LIMIT_SECONDS

    def _candidates(self, namespace: Namespace) -> Iterator[Claim]:
        kv = self._refs.kv
        places = [_place(namespace.scheme, namespace.parts[:n]) + b"\x00" for n in range(1, len(namespace.parts))]
        places.append(_place(namespace.scheme, namespace.parts))  # itself and everything below
        for prefix in places:
            for entry in scan_prefix(kv, GRAVELER_PARTITION, prefix):
                record = pb.Repository()
                try:
                    record.ParseFromString(entry.value)
                except DecodeError:
                    record = pb.Repository()  # unreadable: no claim time, so stale, and removed
                yield Claim(entry.key, record)

    def _live(self, claim: Claim) -> bool:
        if not claim.record.name:
            return False
        try:
            current = self._refs.get_repository(claim.record.name).record
        except NotFound:
            return False
        return current.unique_id == claim.record.unique_id

    def _stale(self, claim: Claim) -> bool:
        claimed_at = claim.record.creation_date.seconds + claim.record.creation_date.nanos / 1e9
        return self._clock() - claimed_at > STALE_AFTER_SECONDS
