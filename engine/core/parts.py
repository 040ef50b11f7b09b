"""The parts of the core that every flow over a branch's layers works on, made once per engine.

Entries, branching and imports each read the refs, the staging store and the committed layer,
move branches through the one BranchUpdater (which owns the retry policy) and consult the same
compacted state; they are handed these parts together rather than five arguments each.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.committed.manager import CommittedManager
from engine.core.compaction import CompactedState
from engine.core.refs import RefManager
from engine.core.staging import StagingStore
from engine.core.updater import BranchUpdater


@dataclass(frozen=True)
class CoreParts:
    refs: RefManager
    staging: StagingStore
    committed: CommittedManager
    updater: BranchUpdater
    state: CompactedState


class OnCore:
    """A flow built on CoreParts: keeps each part under the name the flow's code uses."""

    def __init__(self, core: CoreParts) -> None:
        self._refs = core.refs
        self._staging = core.staging
        self._committed = core.committed
        self._updater = core.updater
        self._state = core.state
