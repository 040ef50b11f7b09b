"""The committed layer of graveler: immutable, content-addressed ranges and metaranges."""

from engine.core.committed.cache import CommittedCache, DiskCache, MemoryCache
from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.diff import Difference
from engine.core.committed.manager import CommittedManager
from engine.core.committed.merge import (
    Conflict,
    MergeResult,
    Resolution,
    Resolver,
    by_pattern,
    dest_wins,
    fail,
    source_wins,
)
from engine.core.committed.model import ApplyResult, Change, ChangeBatch, MetaRangeId, RangeId, RangeInfo, Record
from engine.core.committed.store import CommittedStats

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
