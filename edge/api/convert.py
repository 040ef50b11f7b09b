"""Graveler's messages as the lakefs-sdk models the contract names."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import Commit, Diff, Ref, Repository

from silt.commit_metadata import REQUESTED_COMMITTER_KEY
from silt.graveler.v1 import graveler_pb2 as api

_DIFF_TYPES = {
    api.DIFF_TYPE_ADDED: "added",
    api.DIFF_TYPE_REMOVED: "removed",
    api.DIFF_TYPE_CHANGED: "changed",
    api.DIFF_TYPE_PREFIX_CHANGED: "prefix_changed",
}


def seconds(when: Timestamp) -> int:
    return int(when.seconds)


def repository(info: api.RepositoryInfo) -> Repository:
    return Repository(
        id=info.name,
        creation_date=seconds(info.creation_date),
        default_branch=info.default_branch,
        storage_namespace=info.storage_namespace,
        # lakeFS answers "" for the single (default) storage; clients compare it to "".
        storage_id="",
        read_only=False,
    )


def commit(info: api.CommitInfo, trusted_committer: str) -> Commit:
    """trusted_committer: the API's own service user. A commit is by the user the API acted for;
    an old one the API made is by its service user and names that user in metadata instead."""
    metadata = dict(info.metadata)
    committer = info.committer
    if committer == trusted_committer and REQUESTED_COMMITTER_KEY in metadata:
        committer = metadata.pop(REQUESTED_COMMITTER_KEY)
    return Commit(
        id=info.id,
        parents=list(info.parents),
        committer=committer,
        message=info.message,
        creation_date=seconds(info.creation_date),
        meta_range_id=info.metarange_id,
        metadata=metadata,
        generation=int(info.generation),
        version=1,
    )


def ref(name: str, commit_id: str) -> Ref:
    return Ref(id=name, commit_id=commit_id)


def diff(item: api.DiffItem, uncommitted: bool = False) -> Diff:
    """A diff row. Between refs a removed object has the size it had; among a branch's
    uncommitted changes it is a deletion marker, of size 0 as lakeFS reports it."""
    prefix = item.type == api.DIFF_TYPE_PREFIX_CHANGED
    size = None
    side = item.left if item.type == api.DIFF_TYPE_REMOVED else item.right
    if uncommitted and item.type == api.DIFF_TYPE_REMOVED:
        size = 0
    elif not prefix and side.ByteSize():
        size = int(side.size)
    return Diff(
        type=_DIFF_TYPES.get(item.type, "changed"),
        path=item.key,
        path_type="common_prefix" if prefix else "object",
        size_bytes=size,
    )
