"""A repository's metadata: free-form string labels on its record (lakeFS's repository metadata).

They live in the repository record itself (partition `graveler`, key `repos/<name>`), so they
go with the repository: deleted with it, absent from a re-created one. Every change is one
set_if on that record, re-read and redone on a lost race (BranchUpdater.retry), so concurrent
writers of different keys both land. Every call on a repository reads the record, so the
labels are bounded: few, short keys and values.

Not in refs dumps (as lakeFS: a dump carries commits, branches and tags).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.core.deadline import Deadline
from engine.core.refs.manager import GRAVELER_PARTITION, REPOS
from engine.core.updater import BranchUpdater
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

MAX_KEYS = 100
MAX_KEY_BYTES = 256
MAX_VALUE_BYTES = 4096
MAX_TOTAL_BYTES = 64 * 1024


def _check(metadata: Mapping[str, str]) -> None:
    if len(metadata) > MAX_KEYS:
        raise InvalidArgument(f"a repository holds at most {MAX_KEYS} metadata keys")
    total = 0
    for key, value in metadata.items():
        size = len(key.encode()) + len(value.encode())
        if not key or len(key.encode()) > MAX_KEY_BYTES:
            raise InvalidArgument(f"metadata keys are 1..{MAX_KEY_BYTES} bytes; {key[:64]!r} is not")
        if len(value.encode()) > MAX_VALUE_BYTES:
            raise InvalidArgument(f"the value of metadata key {key[:64]!r} is longer than {MAX_VALUE_BYTES} bytes")
        total += size
    if total > MAX_TOTAL_BYTES:
        raise InvalidArgument(f"a repository's metadata is at most {MAX_TOTAL_BYTES} bytes")


class RepositoryMetadata:
    def __init__(self, kv: Store, updater: BranchUpdater) -> None:
        self._kv = kv
        self._updater = updater

    def update(
        self, name: str, set_keys: Mapping[str, str], delete_keys: Sequence[str], deadline: Deadline
    ) -> pb.Repository:
        """Delete delete_keys, then set set_keys, atomically; the updated record."""
        if not name:
            raise InvalidArgument("repository name must not be empty")
        if len(delete_keys) > MAX_KEYS:
            raise InvalidArgument(f"at most {MAX_KEYS} metadata keys can be deleted at once")
        _check(set_keys)
        key = REPOS + name.encode()

        def attempt(_: int) -> pb.Repository:
            try:
                got = self._kv.get(GRAVELER_PARTITION, key)
            except NotFound:
                raise NotFound(f"repository {name!r} not found", what="repository") from None
            record = pb.Repository()
            record.ParseFromString(got.value)
            for gone in delete_keys:
                record.metadata.pop(gone, None)
            record.metadata.update(set_keys)
            _check(record.metadata)
            self._kv.set_if(GRAVELER_PARTITION, key, record.SerializeToString(), got.predicate)
            return record

        return self._updater.retry(attempt, f"updating the metadata of repository {name!r}", deadline)
