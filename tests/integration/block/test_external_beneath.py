"""Local imports read only below their importable directory, even when a directory is swapped for
a symbolic link while a read or a walk is under way: the file is opened from the directory's
descriptor, never by path after a check by path (silt/block/beneath.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.features.imports.listing import walk_local
from engine.features.imports.locations import COMMON_PREFIX, Source
from silt.block import beneath
from silt.block.external import ExternalFiles, SourceVersion
from silt.errors import InvalidArgument, NotFound

SECRET = b"outside the importable directory"


@pytest.fixture(params=["openat2", "per-component"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Both ways of opening below a directory: openat2, and the walk used where it is missing."""
    if request.param == "per-component":
        monkeypatch.setattr(beneath._openat2, "_usable", False)
    yield request.param


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "data.csv").write_bytes(SECRET)
    landing = tmp_path / "landing"
    (landing / "d").mkdir(parents=True)
    (landing / "d" / "data.csv").write_bytes(b"inside")
    return landing


def _swap_for_link(directory: Path, target: Path) -> None:
    shutil.rmtree(directory)
    directory.symlink_to(target, target_is_directory=True)


def test_a_directory_swapped_for_a_link_after_the_check_is_not_followed(
    landing: Path, resolution: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = ExternalFiles([f"local://{landing}"])
    checked = ExternalFiles.check_links

    def check_then_swap(self: ExternalFiles, path: str, root: str) -> None:
        # The check by name sees a plain directory; the swap lands between it and the open.
        checked(self, path, root)
        _swap_for_link(landing / "d", landing.parent / "outside")

    monkeypatch.setattr(ExternalFiles, "check_links", check_then_swap)
    address = f"local://{landing}/d/data.csv"
    with pytest.raises(InvalidArgument, match="symbolic link"):
        fd, _ = files.open_file(address)
        os.close(fd)
    with pytest.raises(InvalidArgument, match="symbolic link"):
        files.open(address, SourceVersion(len(SECRET), "", 0), None).close()


def test_reads_below_the_directory_still_work(landing: Path, resolution: str) -> None:
    files = ExternalFiles([f"local://{landing}"])
    with files.open(f"local://{landing}/d/data.csv", SourceVersion(6, "", 0), None) as stream:
        assert stream.read() == b"inside"
    with pytest.raises(NotFound):
        files.open_file(f"local://{landing}/d/missing.csv")
    with pytest.raises(NotFound):
        files.open_file(f"local://{landing}/d/data.csv/below-a-file")


def test_a_directory_swapped_for_a_link_during_a_walk_fails_the_walk(landing: Path, resolution: str) -> None:
    (landing / "a.csv").write_bytes(b"first")
    files = ExternalFiles([f"local://{landing}"])
    source = Source(COMMON_PREFIX, f"local://{landing}/", "", "local", "", str(landing), f"{landing}/")
    walk = walk_local(files, source)
    first = next(walk)
    assert first.name == f"{landing}/a.csv"
    # The walk listed "d" as a directory; it is a link to elsewhere by the time the walk goes in.
    _swap_for_link(landing / "d", landing.parent / "outside")
    with pytest.raises(InvalidArgument, match="replaced by a symbolic link"):
        rest = list(walk)
        assert not rest, "the walk went through the link"


def test_a_walk_lists_the_tree_below_the_directory(landing: Path, resolution: str) -> None:
    (landing / "d" / "e").mkdir()
    (landing / "d" / "e" / "f.csv").write_bytes(b"deep")
    (landing / "d" / "link").symlink_to(landing.parent / "outside", target_is_directory=True)
    files = ExternalFiles([f"local://{landing}"])
    source = Source(COMMON_PREFIX, f"local://{landing}/d/", "", "local", "", f"{landing}/d", f"{landing}/d/")
    names = [found.name for found in walk_local(files, source)]
    assert names == [f"{landing}/d/data.csv", f"{landing}/d/e/f.csv"]
