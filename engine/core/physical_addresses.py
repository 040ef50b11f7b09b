"""Where an entry's bytes may live: inside its repository's storage namespace, or an allowed import prefix.

An entry's physical address is read back with Silt's own block-store credentials, so an address
outside the repository would let a writer of one repository read any object those credentials
reach (another repository's data, or any bucket). For the same reason no address may name
anything in a namespace's ``_silt/`` tree: ranges, metaranges, journal batches, dumps and GC
runs would otherwise be readable, and overwritable, as an object.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from urllib.parse import unquote

from silt.errors import InvalidArgument

MAX_ADDRESS_BYTES = 2048
METADATA_TREE = "_silt"
# Each round of percent-decoding at least shortens the text, so a handful covers every nesting
# an adapter or proxy could plausibly undo, while bounding the work per address.
_MAX_DECODE_ROUNDS = 4
# A control character or a backslash, which no adapter treats as an ordinary name character:
# found by the regex engine, as every staged entry's address is checked on the write path.
_FORBIDDEN_CHARACTER = re.compile(r"[\x00-\x1f\\\x7f]")


def _decodings(path: str) -> list[str]:
    """path and what percent-decoding it (repeatedly) makes of it: a store, proxy or tool that
    decodes once more than we do must not reach a place the raw text hides."""
    forms = [path]
    for _ in range(_MAX_DECODE_ROUNDS):
        decoded = unquote(forms[-1], errors="surrogateescape")
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    return forms


def is_metadata_tree(segment: str) -> bool:
    # Folded like the stores that fold names would: case-insensitive file systems, compatibility
    # forms of Unicode (a fullwidth "_silt"), and Windows dropping trailing dots and spaces.
    if segment.isascii():  # NFKC leaves ASCII as it is, and casefolds it as lower() does
        return segment.lower().rstrip(". ") == METADATA_TREE
    folded = unicodedata.normalize("NFKC", segment).casefold().rstrip(". ")
    return folded == METADATA_TREE


def _refuse_metadata_tree(address: str, path: str) -> None:
    """Refuse an address any of whose path segments, in any decoding, is a ``_silt`` tree.

    Anywhere in the path, not only first below this repository's namespace: an allowed
    import prefix may hold another namespace (another repository's, or another installation's).
    """
    for form in _decodings(path):
        segments = form.split("/")
        if not all(part not in ("", ".", "..") for part in segments) or _FORBIDDEN_CHARACTER.search(form):
            raise InvalidArgument(
                f"physical address {address!r} decodes to an empty, '.' or '..' path segment, "
                "a control character or a backslash"
            )
        if any(is_metadata_tree(part) for part in segments):
            raise InvalidArgument(
                f"physical address {address!r} names Silt's own metadata ({METADATA_TREE}/), which is never an object"
            )


def _segments_ok(path: str) -> bool:
    """No empty, "." or ".." segment: nothing a block adapter could normalise into another place."""
    return all(part not in ("", ".", "..") for part in path.split("/"))


def _split_uri(uri: str) -> tuple[str, str] | None:
    scheme, sep, rest = uri.partition("://")
    if not sep or not scheme:
        return None
    return scheme.lower(), rest


def _within(address: str, prefix: str) -> bool:
    """True if an absolute address lies strictly below prefix (a namespace or import prefix URI)."""
    parsed, base = _split_uri(address), _split_uri(prefix)
    if parsed is None or base is None or parsed[0] != base[0]:
        return False
    root = base[1].rstrip("/")
    # Requiring the separator keeps "local://repoA-evil/x" out of "local://repoA".
    return bool(root) and parsed[1].startswith(root + "/") and len(parsed[1]) > len(root) + 1


def validate_physical_address(address: str, namespace: str, allowed_prefixes: Sequence[str] = ()) -> None:
    """Raise InvalidArgument unless address names a place inside namespace or an allowed prefix."""
    if not address:
        return  # no bytes named at all (metadata-only entries): nothing to escape with
    if len(address.encode("utf-8", "surrogatepass")) > MAX_ADDRESS_BYTES:
        raise InvalidArgument(f"physical address is longer than {MAX_ADDRESS_BYTES} bytes")
    if _FORBIDDEN_CHARACTER.search(address):
        raise InvalidArgument("physical address contains a control character or a backslash")
    if "://" not in address:
        # Relative to the namespace: it must stay below it.
        if address.startswith("/") or ":" in address.split("/", 1)[0] or not _segments_ok(address):
            raise InvalidArgument(
                f"physical address {address!r} is not a plain path inside the repository's storage namespace"
            )
        _refuse_metadata_tree(address, address)
        return
    scheme, rest = address.partition("://")[::2]
    # A local file outside the store (imported from blockstore.local.allowed_external_prefixes) is
    # lakeFS's local:// and an absolute path: its path starts after that one "/".
    path = rest[1:] if scheme.lower() == "local" and rest.startswith("/") else rest
    if not _segments_ok(path):
        raise InvalidArgument(f"physical address {address!r} contains an empty, '.' or '..' path segment")
    # The first segment is the bucket or the local store's root, named by the operator, not a tree.
    _refuse_metadata_tree(address, path.partition("/")[2])
    if _within(address, namespace) or any(_within(address, p) for p in allowed_prefixes):
        return
    raise InvalidArgument(
        f"physical address {address!r} is outside the repository's storage namespace {namespace!r} "
        "and every allowed import prefix"
    )
