"""The mark phase reads each committed entry's physical address from its bytes in Spark SQL, and
through the protobuf decoder for an entry that does not start with it: both give what the
decoder gives, for every length and spelling of an address, in one read of the entries; and
the report over both kinds of entry is exactly the garbage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from jobs.gc.job import REPORT_SCHEMA
from jobs.gc.mark import EXPIRED, UNREFERENCED, garbage, unprotected, with_addresses
from silt.graveler.v1 import model_pb2 as pb


def _entry(address: str) -> bytes:
    return pb.Entry(physical_address=address, size=len(address), etag="e" * 32).SerializeToString()


ADDRESSES = [
    "a",
    "data/" + "0" * 32,
    "x" * 127,  # the longest one-byte length
    "y" * 128,  # the shortest two-byte length
    "z" * 300,
    "data/dätä/ünïcode/日本",
    "s3://other-bucket/imported/key with spaces",
    "w" * 20_000,  # a three-byte length: read by the decoder
]


def test_addresses_read_from_the_bytes_match_the_decoder(spark: Any) -> None:
    rows = [(str(index), _entry(address)) for index, address in enumerate(ADDRESSES)]
    # Field 1 after another field, and field 1 absent: both are valid encodings the bytes do
    # not start with, read by the decoder.
    rows.append(("reordered", pb.Entry(etag="first").SerializeToString() + _entry("data/after-etag")))
    rows.append(("no-address", pb.Entry(size=7, etag="none").SerializeToString()))
    frame = spark.createDataFrame(rows, "id string, value binary")
    found = {row.id: row.address for row in with_addresses(frame, "value", "address").collect()}
    expected = {row_id: pb.Entry.FromString(value).physical_address for row_id, value in rows}
    assert found == expected
    assert found["reordered"] == "data/after-etag"
    assert found["no-address"] == ""


def test_the_entries_are_read_once(spark: Any, tmp_path: Path) -> None:
    # Both kinds of entry in one input: still one scan of it, and one trip through the decoder.
    rows = [(str(index), _entry(address)) for index, address in enumerate(ADDRESSES)]
    rows.append(("reordered", pb.Entry(etag="first").SerializeToString() + _entry("data/after-etag")))
    spark.createDataFrame(rows, "id string, value binary").write.parquet(str(tmp_path / "ranges"))
    addressed = with_addresses(spark.read.parquet(str(tmp_path / "ranges")), "value", "address")
    # The address read twice, as the mark reads it (relative_to): the decoder still runs once.
    used = addressed.select("id", F.when(F.col("address") != "", F.col("address")).otherwise(F.col("address")))
    plan = used._jdf.queryExecution().executedPlan().toString()
    assert plan.count("FileScan parquet") == 1, plan
    assert plan.count("ArrowEvalPython") == 1, plan
    expected = {row_id: pb.Entry.FromString(value).physical_address for row_id, value in rows}
    assert {row.id: row.address for row in addressed.collect()} == expected


def test_garbage_of_both_kinds_of_entries(spark: Any) -> None:
    """The mark's report over entries read in SQL and by the decoder in one run: exactly the
    objects no kept range and no staged entry names, each with its reason."""

    def reordered(address: str) -> bytes:
        return pb.Entry(etag="first").SerializeToString() + _entry(address)

    ranges = [
        ("kept", _entry("data/kept")),
        ("kept", reordered("data/kept-reordered")),
        ("kept", _entry("data/in-both")),
        ("old", reordered("data/in-both")),
        ("old", _entry("data/expired")),
        ("old", reordered("data/expired-reordered")),
        ("old", _entry("data/expired-but-staged")),
        ("old", _entry("data/expired-but-new")),
        ("old", _entry("data/expired-not-listed")),
    ]
    ranges_frame = spark.createDataFrame(ranges, "range_id string, value binary")
    entries = with_addresses(ranges_frame, "value", "address").select("range_id", "address")
    expired_ranges = spark.createDataFrame([("old",)], "range_id string")
    staged = spark.createDataFrame([("data/expired-but-staged",), ("data/staged-only",)], "address string")
    cutoff = 1_000
    listed = [
        "data/kept",
        "data/kept-reordered",
        "data/in-both",
        "data/expired",
        "data/expired-reordered",
        "data/expired-but-staged",
        "data/staged-only",
        "data/orphan",
    ]
    listing_rows = [(key, len(key), cutoff - 1) for key in listed]
    listing_rows += [("data/expired-but-new", 1, cutoff), ("data/orphan-but-new", 1, cutoff + 5)]
    listing = spark.createDataFrame(listing_rows, "key string, size bigint, mtime_micros bigint")

    report = garbage(entries, expired_ranges, staged, listing, cutoff).collect()

    assert sorted((row.address, row.size, row.reason) for row in report) == [
        ("data/expired", len("data/expired"), EXPIRED),
        ("data/expired-reordered", len("data/expired-reordered"), EXPIRED),
        ("data/orphan", len("data/orphan"), UNREFERENCED),
    ]


def test_addresses_sharing_a_key_only_spare_objects(spark: Any, monkeypatch: Any) -> None:
    """The mark joins addresses on a 64-bit hash. Collisions are forced here by keying on the
    address's length: an object whose key a kept address shares is spared (never reported, as a
    kept object never is), one whose key only expired addresses share is labeled expired-commit
    and reported, and only keys nothing names are reported unreferenced."""
    monkeypatch.setattr("jobs.gc.mark.address_key", F.length)
    ranges = [
        ("kept", _entry("data/kept-1")),  # length 11
        ("old", _entry("data/old-22")),  # length 11 too: the key is kept by the range above
        ("old", _entry("data/expired-333")),  # length 16
    ]
    entries = with_addresses(spark.createDataFrame(ranges, "range_id string, value binary"), "value", "address")
    expired_ranges = spark.createDataFrame([("old",)], "range_id string")
    staged = spark.createDataFrame([], "address string")
    cutoff = 1_000
    listed = [
        "data/kept-1",
        "data/old-22",  # expired, but spared: its key is a kept address's
        "data/orph-3",  # unreferenced, spared the same way
        "data/expired-333",
        "data/orphan-4444",  # unreferenced, labeled expired-commit: its key is an expired address's
        "data/unreferenced",  # length 17: nothing shares its key
    ]
    listing = spark.createDataFrame(
        [(key, len(key), cutoff - 1) for key in listed], "key string, size bigint, mtime_micros bigint"
    )

    report = garbage(entries.select("range_id", "address"), expired_ranges, staged, listing, cutoff).collect()

    assert sorted((row.address, row.reason) for row in report) == [
        ("data/expired-333", EXPIRED),
        ("data/orphan-4444", EXPIRED),
        ("data/unreferenced", UNREFERENCED),
    ]


def test_the_recheck_lets_through_only_addresses_no_protected_one_shares_a_key_with(spark: Any) -> None:
    report = spark.createDataFrame(
        [("data/a", 1, EXPIRED), ("data/b", 2, UNREFERENCED), ("data/c", 3, EXPIRED)], REPORT_SCHEMA
    )
    protected = spark.createDataFrame([("data/b",), ("data/elsewhere",)], "address string")

    assert sorted(unprotected(report, protected).collect()) == [("data/a", 1, EXPIRED), ("data/c", 3, EXPIRED)]


def test_addresses_sharing_a_key_only_spare_objects_in_the_recheck(spark: Any, monkeypatch: Any) -> None:
    """The re-check joins on the mark's key too. With collisions forced (the key is the length),
    a reported object whose key a protected address shares is kept though nothing protects its
    own address; only the one whose key no protected address has is let through."""
    monkeypatch.setattr("jobs.gc.mark.address_key", F.length)
    report = spark.createDataFrame(
        [
            ("data/kept-1", 0, EXPIRED),  # length 11: protected itself
            ("data/near-2", 0, EXPIRED),  # length 11 too: spared by the key it shares
            ("data/staged-33", 0, UNREFERENCED),  # length 14: the key of another staged address
            ("data/deleted-444", 0, UNREFERENCED),  # length 16: no protected address has it
        ],
        REPORT_SCHEMA,
    )
    protected = spark.createDataFrame([("data/kept-1",), ("data/staged-99",)], "address string")

    checked = unprotected(report, protected).collect()

    assert [row.address for row in checked] == ["data/deleted-444"]
