"""The shipper's saved list of a repository's staging tokens: one KV key per token.

A token's partition may hold journal rows after every branch record stopped naming it (sealed
and dropped by a commit; a stale writer's row landing after the drop), so the shipper keeps
each token it learned of until a round found it empty and it has been out of use for the grace
period. The list is kept in a partition of the shipper's own, ``<repository partition>-journal-ship``,
one key ``tokens/<token>`` per token whose value is the time (Unix seconds, ASCII) the token was
last known to be in use (named by a branch record or a shipped row, or holding rows):

* no limit on its length, and nothing read whole: a round pages through it with the store's
  scan, so the shipper's memory does not grow with it, and no token is ever dropped to make
  room;
* saving a token is a compare-and-set of its own key merged with what is stored (the later time
  wins), so two overlapping shippers never undo each other's saves; a token already saved
  within REFRESH_SECONDS is not written again (a round re-saves every token a branch names);
* forgetting one is a delete conditional on the value it judged stale, so a save that came in
  between keeps it;
* the partition is not the repository's: deleting a repository removes the repository
  partition, and the shipper still finds there every token whose rows it must drop with it
  (silt/journal/ship_deleted.py).

Earlier versions kept the list as one JSON value, ``journal_ship/tokens`` in the repository
partition, at most 10,000 tokens; a round moves such a list here before it reads the list.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from silt.errors import NotFound, PredicateFailed, Unavailable
from silt.kv.conditional import delete_current
from silt.kv.store import Store, scan_prefix

log = logging.getLogger(__name__)

TOKENS_PARTITION_SUFFIX = b"-journal-ship"
TOKEN_PREFIX = b"tokens/"
# Where earlier versions kept the whole list, as JSON, in the repository partition.
LEGACY_TOKENS_KEY = b"journal_ship/tokens"
# A token no branch names and with no rows left is still scanned this long.
TOKEN_GRACE_SECONDS = 3600.0
# A token in use is saved again at most this often; a token is forgotten only once the grace
# period and this have passed since its saved time, so it is never forgotten sooner than the
# grace period after it was last in use.
REFRESH_SECONDS = 300.0
# Compare-and-set attempts on one token's key: only overlapping shippers contend for it.
SAVE_TRIES = 20


def tokens_partition(repository_partition: bytes) -> bytes:
    return repository_partition + TOKENS_PARTITION_SUFFIX


@dataclass(frozen=True)
class SavedToken:
    token: str
    seen: float  # when it was last known to be in use; 0.0 if the stored time is unreadable

    @property
    def partition(self) -> bytes:
        """The token's own partition, where its staged values and their journal rows are."""
        return self.token.encode("utf-8", "surrogateescape")


def _key(token: str) -> bytes:
    return TOKEN_PREFIX + token.encode("utf-8", "surrogateescape")


def _encode(seen: float) -> bytes:
    return repr(float(seen)).encode("ascii")


def _parse(stored: bytes) -> float | None:
    try:
        return float(stored.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


class ShippedTokens:
    """The saved token list of one repository (its partition `repository_partition`)."""

    def __init__(self, kv: Store, repository_partition: bytes) -> None:
        self._kv = kv  # raw: the shipper's keys are not journaled
        self._repository_partition = repository_partition
        self.partition = tokens_partition(repository_partition)

    def save(self, token: str, when: float) -> None:
        """Record that token was in use at `when` (a stored later time stays)."""
        key = _key(token)
        for _ in range(SAVE_TRIES):
            try:
                current = self._kv.get(self.partition, key)
            except NotFound:
                current = None
            if current is not None:
                seen = _parse(current.value)
                if seen is not None and seen >= when - REFRESH_SECONDS:
                    return  # saved recently enough (an unreadable time is written again)
                when = max(when, seen or 0.0)
            try:
                self._kv.set_if(self.partition, key, _encode(when), None if current is None else current.predicate)
            except PredicateFailed:
                continue  # another shipper saved or forgot it meanwhile: read it again
            return
        raise Unavailable(f"the saved token {token!r} of {self.partition!r} kept changing under {SAVE_TRIES} tries")

    def entries(self) -> Iterator[SavedToken]:
        """Every saved token, in key order, read page by page as the caller goes."""
        for entry in scan_prefix(self._kv, self.partition, TOKEN_PREFIX):
            token = entry.key[len(TOKEN_PREFIX) :].decode("utf-8", "surrogateescape")
            yield SavedToken(token, _parse(entry.value) or 0.0)

    def forget_if_unused(self, token: str, now: float, before_forget: Callable[[], object] | None = None) -> bool:
        """Delete token from the list if it has been out of use long enough (the caller found its
        partition empty); whether it is gone. Conditional on the time judged: a save that came
        in between keeps it. before_forget runs first, once the grace has passed: what may
        be done to the partition only when no stale writer can reach it any more."""
        key = _key(token)
        try:
            current = self._kv.get(self.partition, key)
        except NotFound:
            return True
        seen = _parse(current.value)
        if seen is None or now - seen < TOKEN_GRACE_SECONDS + REFRESH_SECONDS:
            return False
        if before_forget is not None:
            before_forget()
        try:
            self._kv.apply(self.partition, [], [key], condition=(key, current.predicate))
        except PredicateFailed:
            return False
        return True

    def forget(self, token: str) -> None:
        """Delete token from the list whatever its time (its repository is gone). By
        compare-and-set, as the key is written: on Cassandra a plain delete is not ordered
        against a racing save's Paxos ballot and could be shadowed by it (docs/design/kv.md)."""
        delete_current(self._kv, self.partition, _key(token))

    def adopt_legacy_list(self) -> None:
        """Move a list an earlier version saved as one JSON value into this one: every token
        first, then the old value, conditionally (a crash in between moves it again)."""
        try:
            current = self._kv.get(self._repository_partition, LEGACY_TOKENS_KEY)
        except NotFound:
            return
        try:
            loaded = json.loads(current.value)
            tokens = {str(token): float(seen) for token, seen in loaded.items()}
        except (ValueError, AttributeError, TypeError):
            # Its tokens are found again through branch records and unshipped rows only.
            log.warning("unreadable shipped-token list in %r; dropped", self._repository_partition)
            tokens = {}
        for token, seen in tokens.items():
            self.save(token, seen)
        # Conditional: an older shipper that saved it again meanwhile keeps it, for the next round.
        with contextlib.suppress(PredicateFailed):
            self._kv.apply(
                self._repository_partition, [], [LEGACY_TOKENS_KEY], condition=(LEGACY_TOKENS_KEY, current.predicate)
            )
