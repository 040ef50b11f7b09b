"""devtools/shade_jars.py: class files and service files relocated, everything else left out."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from devtools.shade_jars import SHADED_PREFIX, ShadeError, empty_interface, relocate_class, shade


def utf8_constants(data: bytes) -> list[str]:
    """The class file's Utf8 constants (the only kind empty_interface writes besides Class)."""
    count = struct.unpack_from(">H", data, 8)[0]
    at, found = 10, []
    for _ in range(count - 1):
        tag = data[at]
        if tag == 1:
            length = struct.unpack_from(">H", data, at + 1)[0]
            found.append(data[at + 3 : at + 3 + length].decode())
            at += 3 + length
        else:
            at += 3
    return found


def test_a_class_names_the_relocated_package_and_keeps_the_rest() -> None:
    original = empty_interface("org/apache/hc/core5/http/Method")
    relocated = relocate_class(original, [(b"org/apache/hc/", (SHADED_PREFIX + "org/apache/hc/").encode())])
    assert utf8_constants(relocated) == [SHADED_PREFIX + "org/apache/hc/core5/http/Method", "java/lang/Object"]
    # The bytes after the constant pool (flags, this and super classes) are untouched.
    assert relocated.endswith(original[-14:])


def test_what_is_not_a_class_file_is_refused() -> None:
    with pytest.raises(ShadeError):
        relocate_class(b"PK\x03\x04", [])


def test_a_jar_keeps_only_the_relocated_packages(tmp_path: Path) -> None:
    source = tmp_path / "in.jar"
    with zipfile.ZipFile(source, "w") as jar:
        jar.writestr("org/apache/hc/A.class", empty_interface("org/apache/hc/A"))
        jar.writestr("org/other/B.class", empty_interface("org/other/B"))
        jar.writestr("META-INF/services/org.apache.hc.Spi", "org.apache.hc.Impl\n")
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    out = tmp_path / "out.jar"
    shade(out, ["org.apache.hc"], [source], interfaces=("x.y.Z",))
    with zipfile.ZipFile(out) as jar:
        names = sorted(jar.namelist())
        service = jar.read(f"META-INF/services/{SHADED_PREFIX.replace('/', '.')}org.apache.hc.Spi").decode()
    assert names == sorted(
        [
            f"{SHADED_PREFIX}org/apache/hc/A.class",
            f"META-INF/services/{SHADED_PREFIX.replace('/', '.')}org.apache.hc.Spi",
            "x/y/Z.class",
        ]
    )
    assert service == f"{SHADED_PREFIX.replace('/', '.')}org.apache.hc.Impl\n"
