"""How rebuild writes each key back: plainly only the families graveler writes plainly
(docs/design/kv.md, "One key, one kind of write"); every other key, a new family's too, by
compare-and-set, since a plain write there could hide graveler's next compare-and-set."""

from __future__ import annotations

import pytest

from engine.features.imports.records import check_import_id
from silt.journal.envelope import wrap
from silt.journal.rebuild import _compare_and_set, _stamp_of
from silt.journal.record import record_key


@pytest.mark.parametrize(
    "key",
    [
        check_import_id("imp1"),
        b"repos/r",
        b"ns_claims/x",
        b"branches/main",
        b"tags/v1",
        b"pulls/1",
        b"pull_comments/1/2",
        b"actions/runs/1",
        b"gc/rules",
        b"settings/branch_protection",
        b"guard/k",
        b"history-retention",
        b"journal_ship/lease",
        b"a-family-added-later/x",
    ],
)
def test_keys_graveler_changes_by_compare_and_set_are_rebuilt_by_compare_and_set(key: bytes) -> None:
    assert _compare_and_set(key)


@pytest.mark.parametrize(
    "key", [b"commits/abc", b"to_delete/repo-1", b"history-hours/main/2026112618", b"last-access-runs/r1"]
)
def test_plainly_written_families_are_rebuilt_plainly(key: bytes) -> None:
    assert not _compare_and_set(key)


def test_a_journal_rows_stamp_is_read_from_its_key() -> None:
    """A journal row's value has no envelope: its stamp is in its key."""
    assert _stamp_of(record_key(123_456, "writer", 7), b"\x08\x01") == 123_456
    assert _stamp_of(b"key/k", wrap(99, b"v")) == 99
