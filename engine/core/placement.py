"""Where a repository's bytes may live: under an allowed root, in a namespace no other repository shares.

Two rules (docs/design/gc.md, "Storage namespaces"):

* a new repository's namespace lies strictly below one of ``graveler.allowed_namespace_roots``;
  without one, it is derived from the first root and the repository's name. Object-store
  credentials reach far more than Silt's data: a namespace the caller may name freely would
  let any repository creator read and write (and have GC sweep) any bucket or directory they
  reach.
* no two live repositories' namespaces overlap (equal, or one below the other). A GC run lists
  everything below its repository's namespace and deletes what that repository does not
  reference, so a repository on another's namespace, or on its parent, would have the other's
  objects and metadata swept. The one exception is a bare repository on exactly the namespace
  of one it restores a dump of, created by someone who may restore refs; GC then refuses to
  run on either until one is gone.

Errors never name the other repository nor its namespace: a caller who may create
repositories learns only that the place is taken.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence

from silt.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from silt.namespaces import Namespace, describe_roots, parse_namespace, parse_recorded, parse_roots, within_roots

# May the caller share the namespace of the named existing repository (an admin restore)?
ShareCheck = Callable[[str], bool]


def nobody(_: str) -> bool:
    return False


OVERLAP_MESSAGE = "the storage namespace overlaps an existing repository's"


class Placement:
    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = parse_roots(roots)

    def _no_roots(self) -> FailedPrecondition:
        return FailedPrecondition(
            "no storage namespace root is allowed (graveler.allowed_namespace_roots): no repository can be created"
        )

    def requested(self, uri: str) -> Namespace:
        """The caller's namespace, canonical, if it lies below an allowed root."""
        if not self.roots:
            raise self._no_roots()
        namespace = parse_namespace(uri)
        if not within_roots(namespace, self.roots):
            raise InvalidArgument(
                f"storage namespace {str(namespace)!r} is outside the allowed namespace roots "
                f"({describe_roots(self.roots)}); leave it empty to have one assigned"
            )
        return namespace

    def derived(self, name: str, taken: Sequence[Namespace]) -> Namespace:
        """The first root plus the repository's name, made unique if that place is taken."""
        if not self.roots:
            raise self._no_roots()
        candidates = [name] + [f"{name}-{uuid.uuid4().hex[:12]}" for _ in range(3)]
        for candidate in candidates:
            namespace = self.roots[0].child(candidate)
            if not any(namespace.overlaps(other) for other in taken):
                return namespace
        # Only a repository on the root itself (or above it) takes every place below it.
        raise FailedPrecondition(f"{OVERLAP_MESSAGE}: no namespace below the first allowed root is free")

    def check_new(
        self, namespace: Namespace, others: Sequence[tuple[str, Namespace]], bare: bool, may_share: ShareCheck
    ) -> None:
        """Refuse a namespace overlapping a live repository's, unless it is an allowed admin restore."""
        shared = [(name, other) for name, other in others if namespace.overlaps(other)]
        if not shared:
            return
        if not (bare and all(namespace.same_place(other) for _, other in shared)):
            raise InvalidArgument(f"{OVERLAP_MESSAGE}; choose another, or leave it empty to have one assigned")
        if not all(may_share(name) for name, _ in shared):
            raise PermissionDenied(
                f"{OVERLAP_MESSAGE}: only who may restore that repository's refs may create "
                "a bare repository on the same namespace"
            )

    def check_collectable(self, namespace: str, others: Sequence[str]) -> None:
        """Garbage collection deletes below namespace: only in a place of its own, below a root."""
        mine = parse_recorded(namespace)
        if any(mine.overlaps(parse_recorded(other)) for other in others):
            raise FailedPrecondition(
                "the repository's storage namespace overlaps another repository's: garbage collection "
                "would delete that repository's objects, so it refuses to run until one of them is deleted"
            )
        if not within_roots(mine, self.roots):
            raise FailedPrecondition(
                "the repository's storage namespace is outside the allowed namespace roots "
                "(graveler.allowed_namespace_roots): garbage collection refuses to delete there"
            )
