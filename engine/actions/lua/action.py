"""The `action` global of a Lua hook, built from the webhook event payload.

lakeFS hands a Lua hook a table of its own shape, not the webhook's: every field is present
(an empty string when the event has none), and the commit's fields sit under `commit`
(`action.commit.message`, `action.commit.metadata`, ...). A webhook payload lacks a few of
them; the caller may add them to the payload under these keys, all optional:

- ``run_id``, ``pre_run_id``, ``storage_namespace``: as lakeFS names them;
- ``commit_meta_range_id``, ``commit_creation_date`` (RFC 3339), ``commit_version`` (an int),
  ``commit_parents`` (a list of commit IDs): the commit's fields, named like the webhook's
  ``commit_message``.

Beyond lakeFS, ``action.commit.committer`` carries the payload's ``committer``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# What lakeFS shows for a record without a commit: Go's zero time.
_NO_DATE = "0001-01-01T00:00:00Z"

_TEXT_FIELDS = (
    "action_name",
    "hook_id",
    "run_id",
    "pre_run_id",
    "event_type",
    "commit_id",
    "branch_id",
    "source_ref",
    "tag_id",
    "merge_source",
    "repository_id",
    "storage_namespace",
)


def lua_action(event: Mapping[str, Any]) -> dict[str, Any]:
    """The table lakeFS's Lua hooks see as `action`, as plain Python values."""

    def text(key: str) -> str:
        value = event.get(key)
        return "" if value is None else str(value)

    metadata = event.get("commit_metadata") or {}
    action: dict[str, Any] = {key: text(key) for key in _TEXT_FIELDS}
    action["commit"] = {
        "message": text("commit_message"),
        "committer": text("committer"),
        "meta_range_id": text("commit_meta_range_id"),
        "creation_date": text("commit_creation_date") or _NO_DATE,
        "version": int(event.get("commit_version") or 0),
        "metadata": {str(key): str(value) for key, value in metadata.items()},
        "parents": [str(parent) for parent in event.get("commit_parents") or ()],
    }
    return action
