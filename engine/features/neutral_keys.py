"""Ref-neutral keys: a key's entry as first written, recorded per repository, read by key alone.

Iceberg writes absolute paths into its metadata and manifests, and every file it writes has a
name of its own (a UUID in it), written once. A path naming a branch (`s3://repo/b1/db/t/...`)
reads through that branch's current state, so deleting the branch, or the key on it, breaks
every table that kept the path (a merged table on main, a branch forked from main). The S3
gateway's `@<branch>/<key>` form names the file instead: a write through it stages the key on
the branch as any write does and records key -> entry here; a read through it reads the record,
whatever any ref holds now (docs/design/kv.md, "Ref-neutral keys"; docs/clients/s3.md).

Partition `<repository>-<unique id>`, key `neutral/<object key>`, value NeutralEntry. Rules:

* **Create-only.** A record is created with set_if(absent). A second write of the key with
  another ETag is refused (ConditionFailed): a recorded file never changes. One with the same
  ETag (a retry whose answer was lost, or the same file written on another branch) is taken as
  the recorded entry, so every branch that stages the key stages the recorded bytes.
* **Recorded before staged.** The record is written first, then the entry is staged. The record
  names bytes at a physical address of their own (the edge's fresh address, never reused), in the
  repository's namespace: no other content can ever be written there, so a crash between the
  two leaves a record of bytes nothing stages, which garbage collection removes in time (reads
  then answer NotFound). The other order would let two writers of different content both stage
  before one of them lost the record.
* **Bytes gone, record replaced.** The one change a record takes: an identical write (same
  ETag) over a record whose bytes no longer exist (collected, or deleted by an edge whose
  staging failed after the record was made) replaces the record with its own entry, with a
  compare-and-set on the record as read. Nothing could read the old bytes any more.
* **Not a GC root.** Garbage collection marks from commits and staging only; a record keeps
  nothing alive, and a read of a record whose bytes were collected is NotFound.
* **Journaled** like every graveler write (kind `neutral`), so `silt admin rebuild` restores the
  records; written and deleted only by compare-and-set (docs/design/kv.md, "One key, one kind of
  write"). Deleted with the repository. Not in refs dumps.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.physical_addresses import validate_physical_address
from engine.core.refs import RepoHandle
from engine.core.validation import validate_entry_size, validate_key
from silt.block.adapter import BlockAdapter
from silt.errors import Aborted, ConditionFailed, InvalidArgument, NotFound, OutcomeUnknown, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

NEUTRAL_PREFIX = b"neutral/"
# Entries one RecordNeutralEntries call takes.
MAX_RECORD_ENTRIES = 256
# Lost races on one record before giving up (each is another writer's create or replacement).
_MAX_RACES = 8


def neutral_key(key: str) -> bytes:
    return NEUTRAL_PREFIX + key.encode()


@dataclass(frozen=True)
class Recorded:
    """The entry a key names (this write's, or the first identical one's), and whether this
    call created or replaced the record."""

    entry: pb.Entry
    created: bool


def _etag(entry: pb.Entry) -> str:
    return entry.etag.strip('"')


def check_recordable(repo: RepoHandle, key: str, entry: pb.Entry) -> None:
    """InvalidArgument unless entry may be recorded for key: bytes inside the repository's
    storage namespace (as every staged entry's are checked: never Silt's own `_silt/` tree), with
    an ETag, the entry no larger than staging takes."""
    validate_key(key)
    validate_entry_size(entry.ByteSize())
    address = entry.physical_address
    if not address or "://" in address:
        # A full URI is an imported or linked object outside the namespace: it may change or
        # vanish under the record, and its address would be handed to readers of the key.
        raise InvalidArgument(f"a ref-neutral key names bytes in the repository's storage namespace, not {address!r}")
    validate_physical_address(address, repo.namespace)
    if not _etag(entry):
        raise InvalidArgument("a ref-neutral entry needs its ETag")


def recorded_entry(kv: Store, repo: RepoHandle, key: str) -> pb.Entry:
    """The entry recorded for key in repo, read from kv (graveler's, or an edge's read-only view
    of it: a record is written once, so any read after its write sees it); NotFound
    (what=object) if none is."""
    validate_key(key)
    try:
        data = kv.get(repo.partition, neutral_key(key)).value
    except NotFound:
        raise NotFound(f"no ref-neutral key {key!r}", what="object") from None
    return _decode(data).entry


class NeutralKeys:
    def __init__(self, kv: Store, adapter: BlockAdapter) -> None:
        self._kv = kv
        self._adapter = adapter

    def get(self, repo: RepoHandle, key: str) -> pb.Entry:
        """The entry recorded for key; NotFound (what=object) if none is."""
        return recorded_entry(self._kv, repo, key)

    def record(self, repo: RepoHandle, branch: str, key: str, entry: pb.Entry) -> Recorded:
        """Record key -> entry unless key is recorded already: then the recorded entry if it has
        entry's ETag (this entry if the recorded bytes are gone), ConditionFailed if not."""
        check_recordable(repo, key, entry)
        row_key = neutral_key(key)
        row = pb.NeutralEntry(entry=entry, branch=branch)
        row.recorded.CopyFrom(_now())
        value = row.SerializeToString()
        for _ in range(_MAX_RACES):
            try:
                self._kv.set_if(repo.partition, row_key, value, None)
                return Recorded(entry, True)
            except (PredicateFailed, OutcomeUnknown):
                # An outcome the store could not tell (another writer's record read back) is
                # settled by the record as it is now: this entry's fresh address is no one
                # else's, so a record naming it is this write's.
                pass
            try:
                got = self._kv.get(repo.partition, row_key)
            except NotFound:
                continue  # never deleted but with the repository: try the create again
            current = _decode(got.value).entry
            if current.physical_address == entry.physical_address:
                return Recorded(current, True)
            if _etag(current) != _etag(entry) or current.size != entry.size:
                raise ConditionFailed(
                    f"{key!r} was written once already through a ref-neutral address, with other content"
                    f" (ETag {_etag(current)}); its content never changes",
                    key=key,
                )
            if current.physical_address == entry.physical_address or self._bytes_exist(repo, current):
                return Recorded(current, False)
            try:
                self._kv.set_if(repo.partition, row_key, value, got.predicate)
                return Recorded(entry, True)
            except (PredicateFailed, OutcomeUnknown):
                continue  # read again: a record naming this entry's address is this write's
        raise Aborted(f"recording the ref-neutral key {key!r} lost {_MAX_RACES} races; retry")

    def _bytes_exist(self, repo: RepoHandle, entry: pb.Entry) -> bool:
        try:
            self._adapter.stat(repo.namespace, entry.physical_address)
        except NotFound:
            return False
        return True


def _decode(data: bytes) -> pb.NeutralEntry:
    row = pb.NeutralEntry()
    row.ParseFromString(data)
    return row


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp
