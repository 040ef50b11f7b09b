"""The stored objects: Parquet any reader can open, content-addressed, uploaded once."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.committed import ChunkingPolicy, CommittedCache, CommittedManager, Record
from engine.core.committed.ranges import ROW_GROUP_ROWS
from silt.block.local import LocalAdapter
from tests.unit.committed.conftest import MEM_NAMESPACE, NAMESPACE, SMALL_POLICY
from tests.unit.committed.support import MemoryAdapter, records

# Exactly 5,000 records a range: three row groups each.
FIXED_SIZE = ChunkingPolicy(boundary_modulus=10**9, min_records=5000, max_records=5000)


def test_range_files_are_plain_parquet(tmp_path: Path) -> None:
    written = records(range(12_000))
    manager = CommittedManager(LocalAdapter(tmp_path), CommittedCache(), FIXED_SIZE)
    metarange_id = manager.write_metarange(NAMESPACE, iter(written))
    ranges = manager.ranges(NAMESPACE, metarange_id)
    assert [info.count for info in ranges] == [5000, 5000, 2000]

    position = 0
    for info in ranges:
        path = tmp_path / "repo" / "_silt" / "ranges" / info.id
        parquet = pq.ParquetFile(path)
        assert parquet.schema_arrow.names == ["key", "identity", "value"]
        assert all(field.type == pa.binary() for field in parquet.schema_arrow)
        expected_groups = -(-info.count // ROW_GROUP_ROWS)
        assert parquet.metadata.num_row_groups == expected_groups
        table = pq.read_table(path)
        expected = written[position : position + info.count]
        assert table.column("key").to_pylist() == [record.key for record in expected]
        assert table.column("value").to_pylist() == [record.value for record in expected]
        # Key statistics let readers skip row groups when seeking a key.
        first_group = parquet.metadata.row_group(0).column(0).statistics
        assert (first_group.min, first_group.max) == (expected[0].key, expected[:ROW_GROUP_ROWS][-1].key)
        position += info.count


def test_metarange_file_lists_the_ranges(tmp_path: Path) -> None:
    manager = CommittedManager(LocalAdapter(tmp_path), CommittedCache(), SMALL_POLICY)
    metarange_id = manager.write_metarange(NAMESPACE, iter(records(range(2000))))
    table = pq.read_table(tmp_path / "repo" / "_silt" / "metaranges" / metarange_id)
    assert table.schema.names == ["range_id", "min_key", "max_key", "record_count", "estimated_bytes"]
    assert [table.schema.field(name).type for name in table.schema.names] == [
        pa.string(),
        pa.binary(),
        pa.binary(),
        pa.int64(),
        pa.int64(),
    ]
    rows = [tuple(row.values()) for row in table.to_pylist()]
    assert rows == [tuple(info) for info in manager.ranges(NAMESPACE, metarange_id)]


def test_objects_live_under_the_reserved_prefix_and_are_uploaded_once(memory_adapter: MemoryAdapter) -> None:
    manager = CommittedManager(memory_adapter, CommittedCache(), SMALL_POLICY)
    metarange_id = manager.write_metarange(MEM_NAMESPACE, iter(records(range(500))))
    ranges = manager.ranges(MEM_NAMESPACE, metarange_id)
    assert memory_adapter.keys(MEM_NAMESPACE) == sorted(
        [f"_silt/metaranges/{metarange_id}", f"_silt/metarange-index/{metarange_id}"]
        + [f"_silt/ranges/{info.id}" for info in ranges]
    )
    puts = memory_adapter.puts
    again = CommittedManager(memory_adapter, CommittedCache(), SMALL_POLICY)
    assert again.write_metarange(MEM_NAMESPACE, iter(records(range(500)))) == metarange_id
    assert memory_adapter.puts == puts
    assert again.stats().uploads_skipped == len(ranges) + 1


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def _column(items: list[bytes]) -> bytes:
    return _u64(len(items)) + b"".join(_u64(len(item)) for item in items) + b"".join(items)


def test_ids_hash_the_logical_content() -> None:
    # Ids hash the records in a fixed encoding, never the Parquet bytes: they must not change
    # across pyarrow versions, or new commits would stop sharing ranges with old ones.
    manager = CommittedManager(MemoryAdapter(), CommittedCache(), SMALL_POLICY)
    metarange_id = manager.write_metarange(MEM_NAMESPACE, [Record(b"a", b"ia", b"va"), Record(b"b", b"ib", b"vb")])
    [info] = manager.ranges(MEM_NAMESPACE, metarange_id)
    range_content = b"silt.range.v1" + _column([b"a", b"b"]) + _column([b"ia", b"ib"]) + _column([b"va", b"vb"])
    assert info.id == hashlib.sha256(range_content).hexdigest()
    metarange_content = (
        b"silt.metarange.v1"
        + _column([info.id.encode()])
        + _column([b"a"])
        + _column([b"b"])
        + _u64(1)
        + _u64(2)
        + _u64(1)
        + _u64(info.estimated_bytes)
    )
    assert metarange_id == hashlib.sha256(metarange_content).hexdigest()
    # Pinned, so that a change of the encoding cannot pass unnoticed.
    assert info.id == "d4e731e51dd3109754d08ec75d524658587ef0206d1322341d35e283f98c6cc3"
    assert metarange_id == "0e3f91190eb516d7d09c4c729467c9a2cd371d1258049d644c5fefcf211d15e2"
    assert manager.write_metarange(MEM_NAMESPACE, []) == (
        "4602b09bf0f253cd5331f67d85017ef364ecb9eab9c9e811c66338d34284f1da"
    )


def test_arrays_from_buffers_write_the_bytes_pa_array_writes() -> None:
    """Range and metarange files are built from Arrow buffers, not pa.array: the files must stay
    byte for byte what pa.array's arrays gave (empty values and an empty range included)."""
    import io

    from engine.core.committed.metarange import METARANGE_SCHEMA, encode_metarange
    from engine.core.committed.metarange import ROW_GROUP_ROWS as METARANGE_ROWS
    from engine.core.committed.model import RangeId, RangeInfo
    from engine.core.committed.ranges import RANGE_SCHEMA, encode_range

    def written(columns: list[pa.Array], schema: pa.Schema, **options: object) -> bytes:
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_arrays(columns, schema=schema), sink, compression="snappy", **options)
        return sink.getvalue()

    keys = [f"k{i:05d}".encode() * (i % 4 + 1) for i in range(5000)]
    identities = [hashlib.sha256(key).digest() for key in keys]
    values = [b"v" * (i % 300) for i in range(5000)]  # some empty
    for size in (0, 1, 5000):
        columns = [pa.array(column[:size], pa.binary()) for column in (keys, identities, values)]
        old = written(
            columns, RANGE_SCHEMA, row_group_size=ROW_GROUP_ROWS, use_dictionary=False, write_statistics=["key"]
        )
        assert encode_range(keys[:size], identities[:size], values[:size]) == old
    infos = [RangeInfo(RangeId(f"{i:064x}"), keys[i], keys[i + 1], i * 7, 2**40 + i) for i in range(0, 200, 2)]
    old = written(
        [
            pa.array([info.id for info in infos], pa.string()),
            pa.array([info.min_key for info in infos], pa.binary()),
            pa.array([info.max_key for info in infos], pa.binary()),
            pa.array([info.count for info in infos], pa.int64()),
            pa.array([info.estimated_bytes for info in infos], pa.int64()),
        ],
        METARANGE_SCHEMA,
        row_group_size=METARANGE_ROWS,
        use_dictionary=False,
    )
    assert encode_metarange(infos) == old
