"""A lease: one KV record that lets one holder at a time do a repository's exclusive work (a
refs restore), and that its holder's death cannot leave behind.

The record (JSON: holder, until) is taken with set_if: absent, or expired (its `until` past by
the taker's clock). While held, a thread renews it every third of its term, each time by set_if
over the record as the holder last wrote it; release deletes it on the same condition. A holder
that dies stops renewing, and the lease is free LEASE_SECONDS later at most. A holder paused for
longer than the term may find its lease taken over: its renewals then fail and it says so
(lost), never writing over the new holder's record.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable

from silt.errors import Aborted, AlreadyExists, NotFound, PredicateFailed, SiltError
from silt.kv import Store
from silt.kv.store import Predicate

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0
_ATTEMPTS = 5


class Lease:
    """A held lease (Lease.take); release() gives it back. A context manager that releases."""

    def __init__(
        self, kv: Store, partition: bytes, key: bytes, seconds: float, clock: Callable[[], float], what: str
    ) -> None:
        self._kv, self._partition, self._key = kv, partition, key
        self._seconds, self._clock, self._what = seconds, clock, what
        self._holder = secrets.token_hex(8)
        self._predicate: Predicate | None = None
        self._done = threading.Event()
        self._guard = threading.Lock()
        self._until = 0.0  # when the record last written expires, by this holder's clock
        self.lost = False

    @classmethod
    def take(
        cls,
        kv: Store,
        partition: bytes,
        key: bytes,
        what: str,
        seconds: float = LEASE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> Lease:
        """The lease, held and renewed from now on; AlreadyExists while another holder's has not
        expired (what: the work it guards, for the message)."""
        lease = cls(kv, partition, key, seconds, clock, what)
        lease._acquire()
        threading.Thread(target=lease._renew, name="lease-renewal", daemon=True).start()
        return lease

    def _record(self) -> bytes:
        return json.dumps({"holder": self._holder, "until": self._clock() + self._seconds}).encode()

    def check_held(self) -> None:
        """Aborted once the lease is lost to another holder, or its term passed unrenewed (a
        holder paused past it may be taken over any moment): what the guarded work checks
        between its writes, so that it stops rather than write alongside the next holder."""
        if self.lost or self._clock() >= self._until:
            raise Aborted(
                f"{self._what} lost its lease (paused past its {self._seconds:g} s term, or taken over) "
                "and stopped: what it wrote so far stays; delete the repository and restore again"
            )

    def _acquire(self) -> None:
        for _ in range(_ATTEMPTS):
            try:
                current = self._kv.get(self._partition, self._key)
            except NotFound:
                current = None
            if current is not None and _until(current.value) > self._clock():
                raise AlreadyExists(f"{self._what} is already running: wait for it to end")
            try:
                record = self._record()
                self._kv.set_if(self._partition, self._key, record, None if current is None else current.predicate)
            except PredicateFailed:
                continue  # taken (or renewed) between the read and the write: read again
            self._until = _until(record)
            self._predicate = self._kv.get(self._partition, self._key).predicate
            return
        raise AlreadyExists(f"{self._what} is already running: wait for it to end")

    def _renew(self) -> None:
        while not self._done.wait(self._seconds / 3):
            with self._guard:
                if self._done.is_set() or self.lost:
                    return
                try:
                    record = self._record()
                    self._kv.set_if(self._partition, self._key, record, self._predicate)
                    self._until = _until(record)
                    self._predicate = self._kv.get(self._partition, self._key).predicate
                except PredicateFailed:
                    self.lost = True
                    log.warning("lost the lease of %s to another holder", self._what)
                    return
                except SiltError:  # KV away for a moment: the next renewal tries again
                    log.debug("could not renew the lease of %s", self._what, exc_info=True)

    def release(self) -> None:
        with self._guard:
            self._done.set()
            if self.lost or self._predicate is None:
                return
            try:
                self._kv.apply(self._partition, [], [self._key], condition=(self._key, self._predicate))
            except (NotFound, PredicateFailed):
                pass  # taken over meanwhile: the new holder's
            except SiltError:  # KV away: the lease expires by itself
                log.warning("could not release the lease of %s; it expires", self._what, exc_info=True)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _until(value: bytes) -> float:
    """When a stored lease expires; an unreadable one is expired."""
    try:
        return float(json.loads(value).get("until", 0))
    except (ValueError, AttributeError, TypeError):
        return 0.0
