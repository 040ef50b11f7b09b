"""Which listed objects garbage collection may ever report: what Silt could have written, and
none of its own metadata or reserved names."""

from __future__ import annotations

import pytest

from jobs.gc.listing import is_candidate_key


@pytest.mark.parametrize("key", ["data/0a1b", "data/x/y", "imported-by-hand.csv"])
def test_objects_silt_could_have_written_are_candidates(key: str) -> None:
    assert is_candidate_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "_silt/ranges/abc",  # Silt's own metadata
        "_silt/metarange-index/abc",  # kept as its metarange is: GC never deletes either
        ".silt-uploads/123",  # the adapters' bookkeeping
        "data/.silt-tmp-1",
        "folder/",  # a console's "folder" placeholder: no adapter accepts the key, nor deletes it
        "a//b",
        "a/./b",
        "a/../b",
    ],
)
def test_metadata_reserved_and_unwritable_names_never_are(key: str) -> None:
    assert not is_candidate_key(key)
