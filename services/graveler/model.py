"""Graveler's typed identifiers and the closed sets of kinds it passes around.

The identifiers are all strings on the wire and in the KV store; NewTypes keep a staging
token from being passed where a commit id belongs.
"""

from __future__ import annotations

from typing import Literal, NewType

from services.graveler.committed.diff import DifferenceKind
from services.graveler.committed.model import MetaRangeId

CommitId = NewType("CommitId", str)
StagingToken = NewType("StagingToken", str)

RefKind = Literal["branch", "tag", "commit"]
MergeStrategy = Literal["fail", "source-wins", "dest-wins"]
MERGE_STRATEGIES: tuple[MergeStrategy, ...] = ("fail", "source-wins", "dest-wins")

__all__ = ["MERGE_STRATEGIES", "CommitId", "DifferenceKind", "MergeStrategy", "MetaRangeId", "RefKind", "StagingToken"]


# A committer name a caller asked for that is not the authenticated caller, kept in a commit's
# metadata under this key (services/graveler/servicer.py); only graveler writes it.
REQUESTED_COMMITTER_KEY = "silt.requested-committer"
RESERVED_METADATA_KEYS = frozenset({REQUESTED_COMMITTER_KEY})
