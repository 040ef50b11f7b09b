"""What an import reads and where it puts it: locations checked once, when the import starts.

A location is lakeFS's ImportLocation: a source ``path`` of ``type`` ``common_prefix`` (every
object under it) or ``object`` (exactly that object), and a ``destination`` on the branch.

* ``s3://bucket/prefix`` on the S3 blockstore, inside one of ``graveler.allowed_import_prefixes``
  (the operator names what Silt's credentials may be pointed at; a prefix must lie under an
  allowed one whole, so that its listing cannot reach past it). As lakeFS does, a prefix that
  does not end in ``/`` lists every key starting with it, and keys keep the part after the
  prefix's last ``/`` (``s3://b/data/2024`` puts ``data/2024-01/x`` at ``<dest>/2024-01/x``).
* ``gs://bucket/prefix`` on the gs blockstore and ``https://<account>.blob.core.windows.net/<container>/prefix``
  on the azure blockstore, the same way. Which blockstore serves a scheme is silt/block/registry.py's
  table, and every store's source is listed through its block adapter.
* ``local:///absolute/dir`` on the local blockstore with ``blockstore.local.import_enabled``, at or
  under one of ``blockstore.local.allowed_external_prefixes``: a directory (``common_prefix``) or a
  file (``object``).

The destination of a ``common_prefix`` is a key prefix (a ``/`` is added unless it is empty or
ends with one); of an ``object``, the exact key. Whatever the import finds replaces the branch's
content there: every key under each ``common_prefix`` destination and each ``object`` key
exactly (the Region of committed/replace.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from engine.core.committed.replace import Region
from engine.core.validation import validate_key, validate_prefix
from engine.features.imports.names import name_problem
from silt.block.external import LOCAL_EXTERNAL, ExternalFiles
from silt.block.registry import STORES, BlockStore, scheme_of, store_for_uri
from silt.errors import InvalidArgument
from silt.namespaces import parse_namespace

COMMON_PREFIX: Final = "common_prefix"
OBJECT: Final = "object"
Kind = Literal["common_prefix", "object"]

# One import names at most this many locations, of which this many prefixes: each prefix is a
# listing held open (a page of keys in memory) while the import merges them into key order.
MAX_LOCATIONS = 1000
MAX_PREFIX_LOCATIONS = 100
MAX_PATH_BYTES = 2048


@dataclass(frozen=True)
class Source:
    """One checked location."""

    kind: Kind
    path: str  # as given
    destination: str  # a key (object) or a prefix ending in "/" or empty (common_prefix)
    scheme: Literal["store", "local"]  # store: an object store's source, listed through the block adapter
    bucket: str  # store: the namespace of its bucket or container (s3://b, gs://b, https://a.blob.../c)
    key: str  # store: the listing prefix or the object's key; local: the absolute path
    trim: str  # what is cut off a listed key (store) or path (local) to place it under destination

    def destination_of(self, name: str) -> str:
        """Where a listed key (store) or file path (local) goes on the branch."""
        if self.kind == OBJECT:
            return self.destination
        return self.destination + name[len(self.trim) :]

    def address_of(self, name: str) -> str:
        if self.scheme == "store":
            return f"{self.bucket}/{name}"
        return "local://" + name


@dataclass(frozen=True)
class ImportRules:
    """What an installation lets imports read."""

    blockstore: str  # blockstore.type
    store_prefixes: tuple[str, ...]  # graveler.allowed_import_prefixes of the blockstore's own kind
    local: ExternalFiles  # the local blockstore's importable directories (none unless enabled)


# The URI schemes of each object store's sources (the registry's, without the local disk's: its
# sources are directories ExternalFiles allows, never import prefixes).
STORE_SCHEMES = {store.type: store.schemes for store in STORES if store.type != "local"}


def _store_source(kind: Kind, path: str, destination: str, rules: ImportRules, store: BlockStore) -> Source:
    if store.type != rules.blockstore:
        raise InvalidArgument(f"import path {path!r}: {scheme_of(path)}:// sources need the {store.type} blockstore")
    root, key = store.split(path)
    try:
        parse_namespace(root)
    except InvalidArgument as exc:
        raise InvalidArgument(f"import path {path!r}: {exc}") from None
    if kind == OBJECT and (not key or key.endswith("/")):
        raise InvalidArgument(f"import path {path!r}: an object path names one key (not a prefix)")
    allowed = [p.rstrip("/") + "/" for p in rules.store_prefixes]
    if not any(path.startswith(p) and (kind == COMMON_PREFIX or len(path) > len(p)) for p in allowed):
        shown = ", ".join(rules.store_prefixes) or "none"
        raise InvalidArgument(
            f"import path {path!r} is not under an allowed import prefix (graveler.allowed_import_prefixes: {shown})"
        )
    trim = key[: key.rfind("/") + 1]
    return Source(kind, path, destination, "store", root, key, trim)


def _local_source(kind: Kind, path: str, destination: str, rules: ImportRules) -> Source:
    if rules.blockstore != "local":
        raise InvalidArgument(f"import path {path!r}: local:// sources need the local blockstore")
    if not path.startswith(LOCAL_EXTERNAL):
        raise InvalidArgument(f"import path {path!r}: local sources are local:// and an absolute path")
    absolute = path[len("local://") :]
    if kind == COMMON_PREFIX:
        absolute = absolute.rstrip("/") or "/"
        root = absolute if absolute in rules.local.roots else rules.local.root_of(absolute)
        rules.local.check_links(absolute + "/-", root)
        if not os.path.isdir(absolute) or os.path.islink(absolute):
            raise InvalidArgument(f"import path {path!r} is not a directory (import a file as an object)")
        return Source(kind, path, destination, "local", "", absolute, absolute + "/")
    rules.local.check_links(absolute, rules.local.root_of(absolute))
    return Source(kind, path, destination, "local", "", absolute, "")


def check_sources(
    locations: Sequence[tuple[Kind, str, str]], rules: ImportRules, namespace: str
) -> tuple[list[Source], Region]:
    """The sources of (kind, path, destination) locations, and the region they replace on the branch."""
    if len(locations) > MAX_LOCATIONS:
        raise InvalidArgument(f"an import names at most {MAX_LOCATIONS} locations, got {len(locations)}")
    if sum(1 for kind, _, _ in locations if kind == COMMON_PREFIX) > MAX_PREFIX_LOCATIONS:
        raise InvalidArgument(f"an import names at most {MAX_PREFIX_LOCATIONS} common_prefix locations")
    sources: list[Source] = []
    prefixes: list[bytes] = []
    keys: set[bytes] = set()
    own = namespace.rstrip("/") + "/"
    for kind, path, destination in locations:
        if kind not in (COMMON_PREFIX, OBJECT):
            raise InvalidArgument(f"import location type must be {COMMON_PREFIX} or {OBJECT}, got {kind!r}")
        if not path or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise InvalidArgument(f"import path must be 1 to {MAX_PATH_BYTES} bytes")
        if any(ord(c) < 0x20 or c in "\\\x7f" for c in path):
            raise InvalidArgument(f"import path {path!r} holds a control character or a backslash")
        if path.startswith(own) or own.startswith(path):
            raise InvalidArgument(f"import path {path!r} overlaps the repository's storage namespace {namespace!r}")
        if kind == OBJECT:
            keys.add(validate_key(destination))
        else:
            if destination and not destination.endswith("/"):
                destination += "/"
            prefixes.append(validate_prefix(destination))
        store = store_for_uri(path, "import path")
        if store.type == "local":
            source = _local_source(kind, path, destination, rules)
        else:
            source = _store_source(kind, path, destination, rules, store)
        # What every imported name starts with is checked once, here; listing.py checks the rest.
        problem = name_problem((source.trim if kind == COMMON_PREFIX else source.key).strip("/"))
        if problem and (kind == OBJECT or source.trim.strip("/")):
            raise InvalidArgument(f"import path {path!r}: {problem}")
        sources.append(source)
    return sources, Region(tuple(prefixes), frozenset(keys))
