"""lakeFS's GC file formats (engine/features/gc_lakefs.py): which staged addresses are the
namespace's, and the commits file as lakeFS's reader takes it."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from engine.core.deadline import Deadline
from engine.features.gc_lakefs import namespace_relative, write_commits_csv
from silt.block.local import LocalAdapter
from silt.graveler.v1 import model_pb2 as pb


@pytest.mark.parametrize(
    ("address", "relative"),
    [
        ("data/abc", "data/abc"),
        ("local://repo/data/abc", "data/abc"),
        ("local://repo/", None),  # the namespace itself names no object
        ("local://repo-evil/data/abc", None),  # a neighbour sharing the prefix is not inside
        ("s3://elsewhere/imported.csv", None),  # imported: never collected, as lakeFS leaves it out
        ("", None),
    ],
)
def test_addresses_relative_to_the_namespace(address: str, relative: str | None) -> None:
    assert namespace_relative(address, "local://repo") == relative
    assert namespace_relative(address, "local://repo/") == relative


def test_commits_file_is_lakefs_csv(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path)
    commits = [pb.Commit(id="c1", metarange_id="m1"), pb.Commit(id="c2", metarange_id="m2")]
    write_commits_csv(adapter, "local://repo", "run/commits.csv", commits, {"c2"}, Deadline(), "test")
    text = (tmp_path / "repo" / "run" / "commits.csv").read_text()
    assert text.splitlines()[0] == "commit_id,expired,metarange_id"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows == [
        {"commit_id": "c1", "expired": "false", "metarange_id": "m1"},
        {"commit_id": "c2", "expired": "true", "metarange_id": "m2"},
    ]
