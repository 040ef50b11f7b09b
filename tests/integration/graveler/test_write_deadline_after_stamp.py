"""A staging write checks its caller's deadline after it has chosen its timestamp, right before
it writes. Checked before, a graveler paused between the check and the stamp (SIGSTOP, a long
GC) would write, once resumed, with a stamp fresher than a DELETE acknowledged meanwhile through
the other replica, and the PUT whose caller was told DEADLINE_EXCEEDED would shadow it.

The pause is made deterministic: the caller's deadline passes the moment the write's timestamp
is taken (the clock's wall reading), as if the graveler had stopped right before it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.deadline import Deadline
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import DeadlineExceeded, NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.clock import HybridLogicalClock, wall_micros
from silt.journal.store import JournaledStore
from silt.kv.store import Store
from tests.integration.journal.workload import InCalls


class PausedAtTheStamp:
    """A wall clock that, once armed, ends the caller's wait as it is read."""

    def __init__(self) -> None:
        self.armed = False
        self.waiting = True

    def wall(self) -> int:
        if self.armed:
            self.waiting = False
        return wall_micros()

    def deadline(self) -> Deadline:
        return Deadline(is_active=lambda: self.waiting)


@pytest.fixture
def paused(store: Store, tmp_path: Path) -> Iterator[tuple[Graveler, str, PausedAtTheStamp]]:
    pause = PausedAtTheStamp()
    graveler = open_graveler(JournaledStore(store, HybridLogicalClock(pause.wall)), LocalAdapter(tmp_path / "data"))
    repo = f"stamp-{uuid.uuid4().hex[:10]}"
    InCalls(graveler, repo).lifecycle.create_repository(repo, f"local://{repo}", "main", False)
    try:
        yield graveler, repo, pause
    finally:
        graveler.close()


def entry() -> pb.Entry:
    return pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", size=1, etag="e")


def test_a_write_whose_deadline_passes_as_it_is_stamped_is_not_made(
    paused: tuple[Graveler, str, PausedAtTheStamp],
) -> None:
    """A blind write takes a fresh stamp from the clock. (A conditional write takes none: it is
    stamped one past what it judged, so a pause before its write leaves it older than anything
    written since, tests/integration/journal/test_staged_write_order.py.)"""
    condition = None
    graveler, repo, pause = paused
    handle = graveler.refs.repository(repo)
    pause.armed = True
    with pytest.raises(DeadlineExceeded):
        graveler.entries.stage(handle, "main", "k", entry(), pause.deadline(), condition)
    pause.armed = False
    with pytest.raises(NotFound):
        graveler.entries.stat(handle, "main", "k", Deadline())


def test_entries_whose_deadline_passes_as_they_are_stamped_are_not_made(
    paused: tuple[Graveler, str, PausedAtTheStamp],
) -> None:
    graveler, repo, pause = paused
    handle = graveler.refs.repository(repo)
    pause.armed = True
    with pytest.raises(DeadlineExceeded):
        graveler.entries.stage_many(handle, "main", [("a", entry())], Deadline(), [pause.deadline()])
    pause.armed = False
    with pytest.raises(NotFound):
        graveler.entries.stat(handle, "main", "a", Deadline())
