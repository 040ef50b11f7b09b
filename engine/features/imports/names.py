"""Names below an import's source that Silt can address: checked for every imported object."""

from __future__ import annotations

from urllib.parse import unquote

from engine.core.physical_addresses import METADATA_TREE, is_metadata_tree


def plain_name(name: str) -> bool:
    """Plain ASCII with nothing that could need a closer look: nearly every name, decided fast."""
    return (
        name.isascii()
        and not ("//" in name or "\\" in name or "\x00" in name or "%" in name or "silt" in name.lower())
        and not (name.startswith("/") or name.endswith("/") or name.startswith("./") or name.startswith("../"))
        and "/./" not in name
        and "/../" not in name
        and not name.endswith(("/.", "/.."))
        and name not in ("", ".", "..")
    )


def name_problem(name: str) -> str | None:
    """Why Silt cannot address a name below an import's source; None when it can."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8"
    segments = name.split("/")
    if any(part in ("", ".", "..") or "\x00" in part or "\\" in part for part in segments):
        return "its name has an empty, '.' or '..' path segment, a NUL or a backslash, which Silt cannot address"
    forms = [segments]
    if "%" in name:
        forms.append(unquote(name, errors="surrogateescape").split("/"))
    if any(is_metadata_tree(part) for form in forms for part in form):
        return f"it lies in a {METADATA_TREE}/ tree (another repository's metadata), which is never an object"
    return None
