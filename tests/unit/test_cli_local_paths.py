"""`silt local`'s path safety: an object name never writes outside the checkout, and a scan of the
checkout never follows a symlink or reports its own `.lakefs_ref.yaml`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli.local_index import REF_FILE, local_path, scan
from silt.client_base import ClientError


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/.", "a\\..\\x", ""])
def test_names_that_would_leave_the_checkout_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ClientError, match="refusing unsafe path"):
        local_path(tmp_path, name)


def test_a_symlinked_directory_on_the_way_out_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "checkout", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "data").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ClientError, match="symlink"):
        local_path(root, "data/x.csv")
    (root / "link.csv").symlink_to(outside / "x.csv")
    with pytest.raises(ClientError, match="symlink"):
        local_path(root, "link.csv")
    assert local_path(root, "tables/a/x.csv") == root / "tables" / "a" / "x.csv"


def test_a_scan_follows_no_symlink_and_skips_the_ref_file(tmp_path: Path) -> None:
    root, outside = tmp_path / "checkout", tmp_path / "outside"
    (root / "tables").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("not ours")
    (root / "tables" / "a.csv").write_text("1,2\n")
    (root / REF_FILE).write_text("src: lakefs://r/main/\nat_head: abc\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "secret-link.txt").symlink_to(outside / "secret.txt")
    files = scan(root)
    assert sorted(files) == ["tables/a.csv"]
    assert (
        files["tables/a.csv"].size == 4 and files["tables/a.csv"].mtime_ns == os.stat(root / "tables/a.csv").st_mtime_ns
    )
