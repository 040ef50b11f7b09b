"""Graveler's typed identifiers and the closed sets of kinds it passes around.

The identifiers are all strings on the wire and in the KV store; NewTypes keep a staging
token from being passed where a commit id belongs.
"""

from __future__ import annotations

from typing import Literal, NewType

from engine.core.committed.diff import DifferenceKind
from engine.core.committed.model import MetaRangeId
from silt.commit_metadata import REQUESTED_COMMITTER_KEY

CommitId = NewType("CommitId", str)
StagingToken = NewType("StagingToken", str)

RefKind = Literal["branch", "tag", "commit"]
MergeStrategy = Literal["fail", "source-wins", "dest-wins"]
MERGE_STRATEGIES: tuple[MergeStrategy, ...] = ("fail", "source-wins", "dest-wins")

__all__ = [
    "MERGE_STRATEGIES",
    "REQUESTED_COMMITTER_KEY",
    "CommitId",
    "DifferenceKind",
    "MergeStrategy",
    "MetaRangeId",
    "RefKind",
    "StagingToken",
]


# Keys a caller cannot set: an old commit's may still hold them (silt/commit_metadata.py).
RESERVED_METADATA_KEYS = frozenset({REQUESTED_COMMITTER_KEY})
