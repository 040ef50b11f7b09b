"""Where an edge writes a repository's new bytes, and which repository that is.

A repository's name can be reused: deleted, then created again with another storage namespace.
The edge remembers a repository's namespace for a few seconds, so it may write bytes in a
deleted repository's namespace. It therefore remembers the repository's identity with it
(graveler's RepositoryInfo.unique_id, created with the repository) and names that identity in
every write that stages those bytes (StageEntryRequest.repository_id): graveler refuses the
write when the repository of that name is another one by then, and the edge deletes the bytes
(docs/design/kv.md, "Repository identity").
"""

from __future__ import annotations

from dataclasses import dataclass

from silt.graveler.v1 import graveler_pb2 as api


@dataclass(frozen=True)
class RepositoryPlace:
    """A repository's storage namespace and its identity, as looked up together."""

    namespace: str
    repository_id: str

    @classmethod
    def of(cls, info: api.RepositoryInfo) -> RepositoryPlace:
        return cls(info.storage_namespace, info.unique_id)
