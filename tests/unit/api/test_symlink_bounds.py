"""What one createSymlinkFile call holds and writes is bounded (edge/api/routes/symlinks.py)."""

from __future__ import annotations

import pytest

from edge.api.errors import ApiError
from edge.api.routes import symlinks
from edge.api.routes.symlinks import Manifests


def _refusal(manifests: Manifests, key: str, address: str) -> ApiError:
    with pytest.raises(ApiError) as refused:
        manifests.add(key, address)
    return refused.value


def test_objects_beyond_the_bound_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(symlinks, "MAX_SYMLINK_OBJECTS", 3)
    manifests = Manifests("t/")
    for i in range(3):
        manifests.add(f"t/a/{i}", f"local://ns/data/{i}")
    refused = _refusal(manifests, "t/a/3", "local://ns/data/3")
    assert refused.status == 400 and "more than 3 objects" in refused.message


def test_files_beyond_the_bound_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(symlinks, "MAX_SYMLINK_FILES", 2)
    manifests = Manifests("t/")
    manifests.add("t/a/0", "local://ns/data/0")
    manifests.add("t/b/0", "local://ns/data/1")
    manifests.add("t/b/1", "local://ns/data/2")  # a directory seen: no new file
    refused = _refusal(manifests, "t/c/0", "local://ns/data/3")
    assert refused.status == 400 and "more than 2 directories" in refused.message
    assert manifests.directories == {"t/a": ["local://ns/data/0"], "t/b": ["local://ns/data/1", "local://ns/data/2"]}


def test_output_beyond_the_bound_is_413(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(symlinks, "MAX_SYMLINK_BYTES", 100)
    manifests = Manifests("t/")
    manifests.add("t/a/0", "x" * 49)  # 50 bytes with its newline
    manifests.add("t/a/1", "y" * 49)  # 100: at the bound
    refused = _refusal(manifests, "t/a/2", "z")
    assert refused.status == 413 and "exceed 100 bytes" in refused.message
