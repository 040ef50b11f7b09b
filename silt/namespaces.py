"""Storage namespaces as Silt compares them: parsed, canonical, under an allowed root, overlapping or not.

A storage namespace is ``scheme://first[/more...]``: the bucket (``s3``, ``gs``), the top
directory under the local adapter's root (``local``), or an Azure account's host and container
(``https://<account>.blob.core.windows.net/<container>``; an emulator's ``http://host:port/<account>/<container>``),
then an optional prefix. Everything that decides
where a repository may keep its bytes compares parsed components, never raw strings, so that
spellings a block adapter treats as the same place (``LOCAL://x``, ``local://x/``) compare as
the same place, and spellings that could walk elsewhere (``..``, ``.``, ``//``, backslashes,
control characters) are refused outright instead of being normalised.

An allowed root (``graveler.allowed_namespace_roots``) has the same shape, may be a whole
store (``local://``, ``s3://``) and is a place for many repositories: a namespace must lie
strictly below one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from silt.errors import InvalidArgument

# A namespace is joined with keys of up to 1,024 bytes into physical addresses of at most 2,048.
MAX_NAMESPACE_BYTES = 512
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]{0,15}$")
# S3's bucket rules: lowercase only, so that no case spelling can name another bucket.
_S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# Google Cloud Storage's (names with dots may be longer, up to 222; kept to S3's length here).
_GS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
# An Azure Blob Storage host (an account's, or an emulator's host:port) and container name.
_AZURE_HOST = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?(:[0-9]{1,5})?$")
_AZURE_CONTAINER = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")
# The local adapter keeps its own files under names with this prefix (silt/block/rules.py).
_RESERVED_PREFIX = ".silt-"


@dataclass(frozen=True)
class Namespace:
    """A parsed namespace or root: lowercase scheme and the path components after ``://``."""

    scheme: str
    parts: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.scheme}://{'/'.join(self.parts)}"

    def child(self, name: str) -> Namespace:
        return Namespace(self.scheme, (*self.parts, name))

    def contains(self, other: Namespace) -> bool:
        """True if other lies strictly below this root (component by component, case-sensitively)."""
        n = len(self.parts)
        return other.scheme == self.scheme and len(other.parts) > n and other.parts[:n] == self.parts

    def overlaps(self, other: Namespace) -> bool:
        """True if one is the other or lies below it. Compared without case: some stores (a local
        disk on macOS or Windows) fold it, and a false overlap only refuses a creation."""
        if other.scheme != self.scheme:
            return False
        mine, theirs = _folded(self.parts), _folded(other.parts)
        n = min(len(mine), len(theirs))
        return mine[:n] == theirs[:n]

    def same_place(self, other: Namespace) -> bool:
        return other.scheme == self.scheme and _folded(other.parts) == _folded(self.parts)


def _folded(parts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p.casefold() for p in parts)


def _component_problem(component: str) -> str | None:
    if not component:
        return "an empty path component (a leading, trailing or doubled '/')"
    if component in (".", ".."):
        return f"the relative path component {component!r}"
    if any(ord(c) < 0x20 or c == "\x7f" for c in component):
        return "a control character"
    if "\\" in component:
        return "a backslash"
    if component.startswith(_RESERVED_PREFIX):
        return f"a component starting with {_RESERVED_PREFIX!r} (reserved)"
    return None


def _parse(uri: str, what: str, root: bool) -> Namespace:
    if not isinstance(uri, str) or not uri:
        raise InvalidArgument(f"{what} must not be empty")
    try:
        size = len(uri.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} is not valid UTF-8 text") from None
    if size > MAX_NAMESPACE_BYTES:
        raise InvalidArgument(f"{what} is longer than {MAX_NAMESPACE_BYTES} bytes")
    scheme, sep, rest = uri.partition("://")
    scheme = scheme.lower()
    shape = "scheme:// or scheme://bucket[/prefix]" if root else "scheme://bucket[/prefix]"
    if not sep or not _SCHEME.match(scheme):
        raise InvalidArgument(f"invalid {what} {uri!r}: expected {shape}")
    # "s3://bucket/prefix/" is a common way to spell a prefix: one trailing slash is accepted.
    rest = rest.removesuffix("/")
    if scheme == "local" and not root:
        # The local store has no authority part, so "local:///x" (file-URL spelling, and what
        # lakeFS clients make of the prefix "local://" plus "/" plus a name) names "local://x".
        # One slash only: "local:////x" still has an empty component and is refused.
        rest = rest.removeprefix("/")
    parts = tuple(rest.split("/")) if rest else ()
    if not parts and not root:
        raise InvalidArgument(f"invalid {what} {uri!r}: expected {shape}")
    for part in parts:
        problem = _component_problem(part)
        if problem:
            raise InvalidArgument(f"invalid {what} {uri!r}: it contains {problem}")
    if scheme == "s3" and parts and not _S3_BUCKET.match(parts[0]):
        raise InvalidArgument(f"invalid {what} {uri!r}: {parts[0]!r} is not a valid S3 bucket name")
    if scheme == "gs" and parts and not _GS_BUCKET.match(parts[0]):
        raise InvalidArgument(f"invalid {what} {uri!r}: {parts[0]!r} is not a valid Google Cloud Storage bucket name")
    if scheme in ("http", "https"):
        _check_azure(uri, what, parts, root)
    return Namespace(scheme, parts)


def _root_length(scheme: str, parts: Sequence[str]) -> int:
    """How many leading components name the bucket or container: one, but an Azure host and its
    container (an emulator's host, account and container)."""
    if scheme not in ("http", "https") or not parts:
        return 1
    host = parts[0]
    emulated = ":" in host or host.replace(".", "").isdigit() or host == "localhost"
    return 3 if emulated else 2


def split_store_uri(uri: str) -> tuple[str, str]:
    """(the URI of its bucket or container, the key below it) of an object's full URI:
    ``gs://b/x/y`` is ("gs://b", "x/y"); ``https://a.blob.core.windows.net/c/x`` is
    ("https://a.blob.core.windows.net/c", "x"). Not validated: callers parse what they use."""
    scheme, _, rest = uri.partition("://")
    parts = rest.split("/")
    n = _root_length(scheme.lower(), parts)
    return f"{scheme}://{'/'.join(parts[:n])}", "/".join(parts[n:])


def _check_azure(uri: str, what: str, parts: tuple[str, ...], root: bool) -> None:
    """An Azure namespace names a host and a container (an emulator's host, an account and a
    container); a root may stop at the host."""
    if not parts:
        return
    host = parts[0]
    if not _AZURE_HOST.match(host):
        raise InvalidArgument(f"invalid {what} {uri!r}: {host!r} is not a lowercase host name")
    # An emulator's endpoint has a port or is an address: the account comes first in the path.
    container_at = _root_length("https", parts) - 1
    if len(parts) <= container_at:
        if root:
            return
        raise InvalidArgument(
            f"invalid {what} {uri!r}: expected https://<account>.blob.core.windows.net/<container>[/<prefix>]"
        )
    if not _AZURE_CONTAINER.match(parts[container_at]):
        raise InvalidArgument(f"invalid {what} {uri!r}: {parts[container_at]!r} is not a valid Azure container name")
    # Azure trims a trailing dot from a name's path segments: ".../repo." would share ".../repo"'s blobs.
    dotted = next((part for part in parts[container_at + 1 :] if part.endswith(".")), None)
    if dotted is not None:
        raise InvalidArgument(f"invalid {what} {uri!r}: {dotted!r} ends with a dot, which Azure drops")


def parse_namespace(uri: str) -> Namespace:
    """A repository's storage namespace, or InvalidArgument."""
    return _parse(uri, "storage namespace", root=False)


def parse_root(uri: str) -> Namespace:
    """An allowed namespace root (``local://``, ``s3://bucket/prefix/``), or InvalidArgument."""
    return _parse(uri, "namespace root", root=True)


def parse_recorded(uri: str) -> Namespace:
    """The namespace of an existing repository record, for overlap checks only.

    Records written before the rules above were enforced may not parse; they are then read
    as loosely as any adapter might, since erring towards an overlap only refuses an action.
    """
    try:
        return parse_namespace(uri)
    except InvalidArgument:
        scheme, _, rest = uri.partition("://")
        return Namespace(scheme.lower(), tuple(p for p in rest.split("/") if p not in ("", ".")))


def parse_roots(uris: Iterable[str]) -> tuple[Namespace, ...]:
    return tuple(parse_root(uri) for uri in uris)


def within_roots(namespace: Namespace, roots: Sequence[Namespace]) -> bool:
    return any(root.contains(namespace) for root in roots)


def describe_roots(roots: Sequence[Namespace]) -> str:
    return ", ".join(f"{root}/" if root.parts else str(root) for root in roots) or "none"
