"""What a KV mutation is part of: the call or background task making it.

Graveler sets a JournalContext around each gRPC call (and around background work done for a
repository); JournaledStore reads it to fill the record of every write made inside it.
Writes made outside any context are not journaled.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SYSTEM_CLIENT = "system"


@dataclass
class JournalContext:
    event_type: str
    client_id: str
    repository: str = ""
    # The repository's own partition; filled when graveler resolves the repository.
    repository_partition: str = ""


_current: contextvars.ContextVar[JournalContext | None] = contextvars.ContextVar("silt_journal_context", default=None)


def current_context() -> JournalContext | None:
    return _current.get()


@contextmanager
def journal_context(event_type: str, client_id: str, repository: str = "") -> Iterator[JournalContext]:
    """Journal the writes made inside as event_type by client_id on repository."""
    context = JournalContext(event_type, client_id, repository)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def note_repository_partition(repository: str, partition: bytes) -> None:
    """Record the partition of the repository the current context is about, once resolved."""
    context = _current.get()
    if context is not None and context.repository == repository and not context.repository_partition:
        context.repository_partition = partition.decode()


@contextmanager
def background_context(event_type: str, repository: str) -> Iterator[JournalContext]:
    """The current context if a call set one, otherwise work done by Silt itself ("system")."""
    context = _current.get()
    if context is not None:
        yield context
        return
    with journal_context(event_type, SYSTEM_CLIENT, repository) as context:
        yield context
