"""Graveler's reader flow for a process beside graveler: the edge answers HEAD, GET and LIST
from the KV store and the committed ranges itself, without a call to graveler for each.

It is the engine's own reader (Entries.read: a consistent view of the ref, read again while a
branch changes under it; docs/design/lockfree-staging.md) over a KV store opened for reading
only, so what it answers is what graveler would: every cache it keeps is of immutable data
(commits, ranges, metaranges) or re-checked against a fresh read of the branch record, as
graveler's replicas already require of each other. Writes and ref changes still go through
graveler. The methods take and answer graveler's own request and response messages, so that an
edge serves a read either way with the same code around it.

The edge composes it (edge/app.py); the gateway and the REST API see only the EntryReads
protocol of edge/core/client.py.
"""

from __future__ import annotations

import time

from engine.core.committed.manager import CommittedManager
from engine.core.committed.store import NotInMemory
from engine.core.compaction import CompactedState, NoObserver
from engine.core.deadline import Clock, Deadline
from engine.core.entries import Entries
from engine.core.list_answer import list_response
from engine.core.parts import CoreParts
from engine.core.refs import RefManager
from engine.core.refs.expr import parse as parse_ref
from engine.core.staging import StagingStore
from engine.core.updater import BranchUpdater, RetryPolicy
from engine.core.validation import validate_key
from engine.features.neutral_keys import recorded_entry
from silt.config import Config, DatabaseConfig
from silt.errors import Aborted
from silt.graveler.v1 import graveler_pb2 as api
from silt.kv.store import Store

# A read may start from a branch record this young; it is always re-checked against a fresh one.
BRANCH_CACHE_SECONDS = 0.05


class ReadWouldWait(Exception):
    """A read asked not to wait (StatEntry's wait=False) met something that may take long: a
    branch changing under it (the next attempt backs off first), a committed range not decoded in
    memory, or an ancestor to walk to. Its caller runs it again where it may wait."""


class ReadEngine:
    """StatEntry, ListEntries and GetNeutralEntry as graveler answers them, in this process."""

    def __init__(
        self,
        kv: Store,
        committed: CommittedManager,
        branch_cache_seconds: float = BRANCH_CACHE_SECONDS,
        clock: Clock = time.monotonic,
    ) -> None:
        self._clock = clock
        self._kv = kv
        self.refs = RefManager(kv, branch_cache_seconds, clock)
        staging = StagingStore(kv)
        updater = BranchUpdater(self.refs, RetryPolicy())
        compacted = CompactedState(self.refs, staging, committed)
        self.entries = Entries(CoreParts(self.refs, staging, committed, updater, compacted), NoObserver())
        # The same reader for a caller that must not wait (StatEntry's wait=False): one attempt, a
        # race given up (Aborted) rather than backed off and tried again, and committed records
        # from the decoded ranges in memory alone (NotInMemory rather than a file read and decoded).
        once = BranchUpdater(self.refs, RetryPolicy(max_attempts=1))
        self._entries_once = Entries(
            CoreParts(self.refs, staging, committed, once, compacted), NoObserver(), committed_in_memory_only=True
        )

    def StatEntry(self, request: api.StatEntryRequest, *, timeout: float, wait: bool = True) -> api.EntryInfo:
        """The entry at request's ref and key. wait=False, for a caller that must not block for
        long (an event loop): ReadWouldWait rather than anything that may take long, which is
        sleeping between attempts after a race, reading and decoding a committed range not in
        memory, and walking a commit's ancestors (`~N`, `^N`: one KV read per generation)."""
        validate_key(request.key)
        if not wait and parse_ref(request.ref).modifiers:
            raise ReadWouldWait(f"{request.ref!r} names an ancestor: resolving it walks the history")
        deadline = Deadline.after(timeout, self._clock)
        repo = self.refs.repository(request.repository, deadline)
        if wait:
            return api.EntryInfo(key=request.key, entry=self.entries.stat(repo, request.ref, request.key, deadline))
        try:
            entry = self._entries_once.stat(repo, request.ref, request.key, deadline)
        except Aborted:
            raise ReadWouldWait(f"{request.ref}/{request.key}: the branch changed during the read") from None
        except NotInMemory as exc:
            raise ReadWouldWait(str(exc)) from None
        return api.EntryInfo(key=request.key, entry=entry)

    def ListEntries(self, request: api.ListEntriesRequest, *, timeout: float) -> api.ListEntriesResponse:
        deadline = Deadline.after(timeout, self._clock)
        repo = self.refs.repository(request.repository, deadline)
        page = self.entries.list_stored(
            repo, request.ref, request.prefix, request.delimiter, request.after, request.amount, deadline
        )
        return list_response(page)

    def GetNeutralEntry(self, request: api.GetNeutralEntryRequest, *, timeout: float) -> api.EntryInfo:
        deadline = Deadline.after(timeout, self._clock)
        repo = self.refs.repository(request.repository, deadline)
        return api.EntryInfo(key=request.key, entry=recorded_entry(self._kv, repo, request.key))

    def close(self) -> None:
        self._kv.close()


def reads_database(config: Config) -> DatabaseConfig | None:
    """Graveler's KV as an edge reads it, or None where another process cannot (the `mem` driver
    lives in graveler's memory). On Cassandra: graveler's keyspace (gateways.s3.graveler_keyspace, by
    default the edge's own) with the edge's own login, which holds SELECT there and nothing more in a
    deployment with a login per service; the schema is graveler's."""
    database = config.database
    if database.type == "mem":
        return None
    if database.type == "cassandra":
        keyspace = config.gateways.s3.graveler_keyspace or database.cassandra.keyspace
        cassandra = database.cassandra.model_copy(update={"keyspace": keyspace, "create_schema": False})
        return database.model_copy(update={"cassandra": cassandra})
    return database
