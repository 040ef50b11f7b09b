"""The REST API's records in the shapes `silt --json` has always printed (graveler's field
names: a repository's `name`, an entry's `size` and `etag`, times in RFC 3339), so that scripts
written against the CLI keep working whichever transport answered. Empty fields are left out,
as they were."""

from __future__ import annotations

from typing import Any

from cli.common import iso_time


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v not in (None, "", [], {}, 0, False)}


def repository(r: dict[str, Any]) -> dict[str, Any]:
    return _compact(
        {
            "name": r.get("id"),
            "storage_namespace": r.get("storage_namespace"),
            "default_branch": r.get("default_branch"),
            "creation_date": iso_time(r.get("creation_date")),
        }
    )


def branch(ref: dict[str, Any]) -> dict[str, Any]:
    return _compact({"name": ref.get("id"), "commit_id": ref.get("commit_id")})


def tag(ref: dict[str, Any]) -> dict[str, Any]:
    return _compact({"id": ref.get("id"), "commit_id": ref.get("commit_id")})


def commit(c: dict[str, Any]) -> dict[str, Any]:
    return _compact(
        {
            "id": c.get("id"),
            "committer": c.get("committer"),
            "message": c.get("message"),
            "metarange_id": c.get("meta_range_id"),
            "creation_date": iso_time(c.get("creation_date")),
            "parents": c.get("parents"),
            "metadata": c.get("metadata"),
            "generation": c.get("generation"),
        }
    )


def relative_address(address: str, namespace: str) -> str:
    """An object's address as graveler keeps it: relative to the repository's storage namespace
    when it is inside it (the REST API answers it absolute, as lakeFS's does), else as it is."""
    root = namespace.rstrip("/") + "/"
    return address[len(root) :] if namespace and address.startswith(root) else address


def entry(stats: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    """An object's record; its address relative to namespace (the repository's) when inside it."""
    return _compact(
        {
            "physical_address": relative_address(str(stats.get("physical_address") or ""), namespace),
            "size": stats.get("size_bytes"),
            "etag": stats.get("checksum"),
            "last_modified": iso_time(stats.get("mtime")),
            "content_type": stats.get("content_type"),
            "metadata": stats.get("metadata"),
        }
    )
