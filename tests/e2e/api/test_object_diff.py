"""One object compared between two refs over the wire: CSV rows by key (asked for or detected),
on content and by position, a Parquet file's schema change and rows, a text's lines, an image
or binary's metadata, and a large object compared on a bounded sample that the answer reports."""

from __future__ import annotations

import pyarrow as pa

from edge.api.preview.limits import DIFF_BYTES
from tests.e2e.api.conftest import Api, error_message, json_post
from tests.e2e.api.data_support import auth, branch_off, diff, diff_ok, parquet, upload

CSV_BEFORE = b"id,name,score\n1,ann,10\n2,bob,20\n3,cy,30\n4,dee,40\n"
# bob's score changed, cy removed, eve added, and the rows reordered.
CSV_AFTER = b"id,name,score\n4,dee,40\n2,bob,25\n1,ann,10\n5,eve,50\n"


def test_csv_rows_by_key_and_by_position(api: Api, repo: str) -> None:
    upload(api, repo, "t/people.csv", CSV_BEFORE, "text/csv")
    branch_off(api, repo)
    upload(api, repo, "t/people.csv", CSV_AFTER, "text/csv")

    keyed = diff_ok(api, repo, "t/people.csv", key="id")
    assert keyed["kind"] == "csv" and keyed["key"] == "id" and not keyed["identical"]
    assert keyed["counts"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 2}
    rows = {row["change"]: row for row in keyed["rows"]}
    assert rows["changed"]["left"] == ["2", "bob", "20"] and rows["changed"]["right"] == ["2", "bob", "25"]
    assert rows["changed"]["columns"] == ["score"]
    assert rows["removed"]["left"] == ["3", "cy", "30"] and rows["added"]["right"] == ["5", "eve", "50"]
    assert keyed["schema"]["added"] == keyed["schema"]["removed"] == keyed["schema"]["changed"] == []
    assert keyed["sample"]["left"]["complete"] and keyed["sample"]["right"]["rows"] == 4
    assert keyed["left"]["size_bytes"] == len(CSV_BEFORE) and keyed["right"]["content_type"] == "text/csv"
    assert "physical_address" not in keyed["left"]

    # With no key asked for, the id column is found (named like one, unique on both sides).
    detected = diff_ok(api, repo, "t/people.csv")
    assert detected["key"] == "id" and detected["key_detected"] and detected["match"] == "key"
    assert detected["counts"] == keyed["counts"]

    # On content: ann and dee are equal on both sides; the rest pair in their order.
    by_content = diff_ok(api, repo, "t/people.csv", match="content")
    assert by_content["key"] is None and by_content["match"] == "content"
    assert by_content["counts"] == {"added": 0, "removed": 0, "changed": 2, "unchanged": 2}

    # By position, each row is compared with the row at its place: all four differ.
    placed = diff_ok(api, repo, "t/people.csv", match="position")
    assert placed["key"] is None and placed["match"] == "position"
    assert placed["counts"] == {"added": 0, "removed": 0, "changed": 4, "unchanged": 0}
    assert [row["position"] for row in placed["rows"]] == [0, 1, 2, 3]

    assert "no key column 'nope'" in error_message(diff(api, repo, "t/people.csv", key="nope"), 400)
    upload(api, repo, "t/people.csv", CSV_AFTER + b"5,again,1\n", "text/csv")
    assert "not unique on the right side" in error_message(diff(api, repo, "t/people.csv", key="id"), 400)


def test_parquet_schema_change_and_rows(api: Api, repo: str) -> None:
    before = pa.table({"id": [1, 2, 3], "temp": pa.array([10, 20, 30], pa.int32()), "city": ["a", "b", "c"]})
    after = pa.table({"id": [1, 2, 4], "temp": pa.array([10.0, 21.5, 40.0]), "wind": [1, 2, 3]})
    upload(api, repo, "w.parquet", parquet(before))
    branch_off(api, repo)
    upload(api, repo, "w.parquet", parquet(after))

    answer = diff_ok(api, repo, "w.parquet", key="id")
    assert answer["kind"] == "parquet"
    schema = answer["schema"]
    assert schema["added"] == [{"name": "wind", "type": "BIGINT"}]
    assert schema["removed"] == [{"name": "city", "type": "VARCHAR"}]
    assert schema["changed"] == [{"name": "temp", "left": "INTEGER", "right": "DOUBLE"}]
    # 10 and 10.0 compare as text: "10" vs "10.0", a change of type shows as changed values.
    assert answer["counts"]["added"] == 1 and answer["counts"]["removed"] == 1
    changed = [row for row in answer["rows"] if row["change"] == "changed"]
    assert {tuple(row["right"][:2]) for row in changed} >= {("2", "21.5")}


def test_an_added_object_and_a_missing_one(api: Api, repo: str) -> None:
    upload(api, repo, "other.txt", b"something to commit")
    branch_off(api, repo)
    upload(api, repo, "new.csv", b"k,v\n1,x\n2,y\n", "text/csv")
    answer = diff_ok(api, repo, "new.csv", key="k")
    assert answer["left"] == {"ref": "before", "exists": False}
    assert answer["counts"] == {"added": 2, "removed": 0, "changed": 0, "unchanged": 0}
    assert [row["right"] for row in answer["rows"]] == [["1", "x"], ["2", "y"]]
    error_message(diff(api, repo, "nowhere.csv"), 404)


def test_text_lines(api: Api, repo: str) -> None:
    upload(api, repo, "src/app.py", b"import os\n\n\ndef main():\n    return 1\n", "text/x-python")
    branch_off(api, repo)
    upload(api, repo, "src/app.py", b"import os\nimport sys\n\n\ndef main():\n    return 2\n", "text/x-python")
    answer = diff_ok(api, repo, "src/app.py")
    assert answer["kind"] == "text"
    assert answer["counts"] == {"added": 2, "removed": 1}
    lines = [(line["op"], line["text"]) for hunk in answer["hunks"] for line in hunk["lines"]]
    assert ("+", "import sys") in lines and ("-", "    return 1") in lines and ("+", "    return 2") in lines
    assert (" ", "import os") in lines


def test_image_and_binary_by_metadata_and_identical_objects(api: Api, repo: str) -> None:
    upload(api, repo, "a.bin", b"\x00\x01" * 10, "application/octet-stream")
    upload(api, repo, "same.csv", b"a\n1\n", "text/csv")
    branch_off(api, repo)
    upload(api, repo, "a.bin", b"\x00\x02" * 20, "application/x-thing")
    answer = diff_ok(api, repo, "a.bin")
    assert answer["kind"] == "binary" and "counts" not in answer
    assert answer["left"]["size_bytes"] == 20 and answer["right"]["size_bytes"] == 40
    assert answer["right"]["content_type"] == "application/x-thing"
    assert answer["left"]["checksum"] != answer["right"]["checksum"]
    same = diff_ok(api, repo, "same.csv")
    assert same["identical"] and "rows" not in same


def test_a_large_csv_is_compared_on_a_bounded_sample(api: Api, repo: str) -> None:
    line = b"%08d,abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n"
    rows = DIFF_BYTES // len(line % 0) + 20_000
    body = b"id,text\n" + b"".join(line % i for i in range(rows))
    upload(api, repo, "big.csv", body, "text/csv")
    branch_off(api, repo)
    upload(api, repo, "big.csv", body.replace(b"00000007,a", b"00000007,Z"), "text/csv")
    answer = diff_ok(api, repo, "big.csv", key="id")
    sample = answer["sample"]
    assert sample["limit_bytes"] == DIFF_BYTES
    assert not sample["left"]["complete"] and sample["left"]["bytes_read"] <= DIFF_BYTES
    assert sample["left"]["rows"] < rows
    assert answer["counts"]["changed"] == 1 and answer["counts"]["added"] == answer["counts"]["removed"] == 0


def test_three_dot_compares_the_merge_base_with_the_right_ref(api: Api, repo: str) -> None:
    upload(api, repo, "notes.txt", b"one\n", "text/plain")
    branch_off(api, repo, "feature")
    upload(api, repo, "notes.txt", b"one\nmain's line\n", "text/plain")
    json_post(api, f"/repositories/{repo}/branches/main/commits", {"message": "on main"})
    write = f"/repositories/{repo}/branches/feature/objects?path=notes.txt"
    assert api.request("POST", write, body=b"one\nfeature's line\n", headers=auth(api)).status == 201

    # Two-dot: main against feature, main's own line shows as removed.
    plain = diff_ok(api, repo, "notes.txt", left="main", right="feature")
    assert plain["counts"] == {"added": 1, "removed": 1}
    # Three-dot: only what feature changed since it left main.
    since = diff_ok(api, repo, "notes.txt", left="main", right="feature", type="three_dot")
    assert since["counts"] == {"added": 1, "removed": 0}
    assert since["left"]["ref"] != "main" and len(since["left"]["ref"]) >= 40
