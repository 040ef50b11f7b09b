"""The committed layer of graveler: immutable, content-addressed ranges and metaranges."""

from services.graveler.committed.cache import CommittedCache, DiskCache, MemoryCache
from services.graveler.committed.chunking import ChunkingPolicy
from services.graveler.committed.diff import Difference
from services.graveler.committed.manager import CommittedManager
from services.graveler.committed.merge import (
    Conflict,
    MergeResult,
    Resolution,
    Resolver,
    by_pattern,
    dest_wins,
    fail,
    source_wins,
)
from services.graveler.committed.model import ApplyResult, Change, ChangeBatch, MetaRangeId, RangeId, RangeInfo, Record
from services.graveler.committed.store import CommittedStats

__all__ = [
    "ApplyResult",
    "Change",
    "ChangeBatch",
    "ChunkingPolicy",
    "CommittedCache",
    "CommittedManager",
    "CommittedStats",
    "Conflict",
    "Difference",
    "DiskCache",
    "MemoryCache",
    "MergeResult",
    "MetaRangeId",
    "RangeId",
    "RangeInfo",
    "Record",
    "Resolution",
    "Resolver",
    "by_pattern",
    "dest_wins",
    "fail",
    "source_wins",
]
