"""The jobs' path through the block adapter (for stores Hadoop cannot reach here: Azure, GCS),
exercised on the local adapter by forcing the "adapter" kind of namespace root: Parquet
datasets written and read through it, the GC listing through it, and whole runs through it
doing exactly what the Hadoop path does."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import jobs.gc.job
import jobs.retention.last_access
from engine.core.committed.boundaries import METARANGE_INDEX_PREFIX
from jobs.gc.adapter_parquet import dataset_files, read_dataset, write_dataset
from jobs.gc.job import REPORT_SCHEMA, GCOptions, run_gc
from jobs.gc.listing import list_objects
from jobs.gc.location import NamespaceRoot, adapter_root, namespace_root
from jobs.retention.last_access import LastAccessOptions, run_last_access
from silt.block.local import LocalAdapter
from silt.config import BlockstoreConfig, LocalBlockstoreConfig
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.gc.conftest import GCEnv
from tests.integration.gc.test_last_access import RULE, put_aged, record, with_rule


def _local(tmp_path: Path) -> tuple[BlockstoreConfig, LocalAdapter]:
    blockstore = BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path=str(tmp_path / "data")))
    return blockstore, LocalAdapter(tmp_path / "data")


def forced_adapter_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the jobs reach every namespace through the block adapter (after the usual checks)."""

    def forced(namespace: str, blockstore: BlockstoreConfig) -> NamespaceRoot:
        namespace_root(namespace, blockstore)
        return adapter_root(namespace, blockstore)

    for module in (jobs.gc.job, jobs.retention.last_access):
        monkeypatch.setattr(module, "namespace_root", forced)


def test_namespace_kinds(tmp_path: Path) -> None:
    blockstore, _ = _local(tmp_path)
    assert namespace_root("local://repo", blockstore).kind == "local"
    for namespace, store in [
        ("https://acct.blob.core.windows.net/container/repo", "azure"),
        ("http://127.0.0.1:10000/devstoreaccount1/container/repo", "azure"),
        ("gs://bucket/repo", "gs"),
    ]:
        root = namespace_root(namespace, BlockstoreConfig(type=store))  # type: ignore[arg-type]
        assert root.through_adapter and root.namespace == namespace and root.blockstore is not None
        with pytest.raises(InvalidArgument, match=f"needs the {store} blockstore"):
            namespace_root(namespace, blockstore)
    with pytest.raises(InvalidArgument, match="needs the s3 blockstore"):
        namespace_root("s3://bucket/repo", BlockstoreConfig(type="gs"))


def test_dataset_round_trip_and_overwrite(spark: Any, tmp_path: Path) -> None:
    blockstore, _ = _local(tmp_path)
    root = adapter_root("local://datasets", blockstore)
    frame = spark.range(0, 2000, numPartitions=4).select(
        F.col("id"),
        F.concat(F.lit("name-"), F.col("id").cast("string")).alias("name"),
        F.col("id").cast("string").cast("binary").alias("payload"),
        F.array(F.struct(F.col("id").alias("n"), F.lit("x").alias("tag"))).alias("items"),
    )
    schema = frame.schema
    files = write_dataset(frame, root, "out/report", max_records_per_file=300)
    # 500 rows per partition: files of 300 and 200 rows, named by partition and number.
    assert [(f.key.rsplit("/", 1)[1], f.rows) for f in files] == [
        (f"part-{p:05d}-c{c:03d}.parquet", rows) for p in range(4) for c, rows in enumerate((300, 200))
    ]
    assert dataset_files(root, "out/report") == [f.key for f in files]  # _SUCCESS is no data file
    back = read_dataset(spark, root, "out/report", schema)
    assert sorted(back.collect()) == sorted(frame.collect())
    # Spark's own reader reads the same dataset: the files are plain Parquet.
    assert spark.read.parquet(f"file:{tmp_path}/data/datasets/out/report").count() == 2000

    named = read_dataset(spark, root, "out/report", "id bigint, file string", file_name_column="file")
    by_file = {row.file: row["count"] for row in named.groupBy("file").count().collect()}
    assert by_file == {f.key.rsplit("/", 1)[1]: f.rows for f in files}

    # A sibling whose name starts with the dataset's is another dataset: never read nor deleted.
    write_dataset(frame.limit(5), root, "out/report-checked")
    smaller = frame.where(F.col("id") < 10).repartition(1)
    again = write_dataset(smaller, root, "out/report")
    assert [f.key for f in again] == ["out/report/part-00000-c000.parquet"]
    assert dataset_files(root, "out/report") == ["out/report/part-00000-c000.parquet"]
    assert sorted(read_dataset(spark, root, "out/report", schema).collect()) == sorted(smaller.collect())
    assert read_dataset(spark, root, "out/report-checked", schema).count() == 5

    # An empty frame writes no file, but a dataset that is there (and reads as empty).
    write_dataset(frame.where(F.col("id") < 0), root, "out/empty")
    assert dataset_files(root, "out/empty") == []
    assert read_dataset(spark, root, "out/empty", schema).count() == 0
    with pytest.raises(NotFound):
        read_dataset(spark, root, "out/missing", schema)
    assert read_dataset(spark, root, "out/missing", schema, missing_ok=True).count() == 0


def test_single_object_dataset(spark: Any, tmp_path: Path) -> None:
    """Graveler's exports are one object each (``_silt/gc/<run>/staged.parquet``)."""
    blockstore, adapter = _local(tmp_path)
    root = adapter_root("local://exports", blockstore)
    buffer = io.BytesIO()
    table = pa.table({"physical_address": ["data/a", "data/b"], "key": [b"a", b"b"]})
    pq.write_table(table, buffer, row_group_size=1)
    data = buffer.getvalue()
    adapter.put("local://exports", "_silt/gc/run/staged.parquet", io.BytesIO(data), len(data))
    adapter.put("local://exports", "_silt/gc/run/staged.parquet-other", io.BytesIO(b"x"), 1)
    frame = read_dataset(spark, root, "_silt/gc/run/staged.parquet", "physical_address string")
    assert sorted(row.physical_address for row in frame.collect()) == ["data/a", "data/b"]


def _rows(frame: Any) -> dict[str, tuple[int, int]]:
    rows = frame.collect()
    found = {row.key: (row.size, row.mtime_micros) for row in rows}
    assert len(found) == len(rows)  # no key listed twice
    return found


def test_adapter_listing_matches_the_local_walk(spark: Any, tmp_path: Path) -> None:
    blockstore, adapter = _local(tmp_path)
    namespace = "local://listed/prefix"
    keys = [f"data/{i:02x}{'0' * 30}" for i in range(0, 256, 7)]
    # Exactly on range bounds, beyond the last one, nested, outside data/, unicode, metadata.
    keys += ["data/00", "data/08", "data/f8", "data/ff/deeper", "data/é", "a/b/c", "zzz", "dat", "data0"]
    keys += ["_silt/ranges/r1", "_silt/gc/run/report/part-00000-c000.parquet", "x/_silt/kept"]
    for number, key in enumerate(keys):
        adapter.put(namespace, key, io.BytesIO(b"x" * number), number)
    local = _rows(list_objects(spark, namespace_root(namespace, blockstore), blockstore, 3))
    through = _rows(list_objects(spark, adapter_root(namespace, blockstore), blockstore, 3))
    assert sorted(through) == sorted(local) == sorted(k for k in keys if not k.startswith("_silt/"))
    for key, (size, mtime) in local.items():
        assert through[key][0] == size
        assert abs(through[key][1] - mtime) <= 1  # the adapter's datetime rounds to the microsecond


def _files(env: GCEnv, repo: str) -> set[str]:
    """The objects of the repository's namespace, but Silt's own."""
    return {item.key for item in env.adapter.list_objects(f"local://{repo}") if not item.key.startswith("_silt/")}


def _range_boundary_indexes(env: GCEnv, repo: str) -> set[str]:
    listed = env.adapter.list_objects(f"local://{repo}", prefix=METARANGE_INDEX_PREFIX)
    return {item.key for item in listed if not item.key.rsplit("/", 1)[-1].startswith(".")}


def _scenario(env: GCEnv) -> str:
    """Garbage of both reasons, beside what must stay (the scenario of test_gc_run)."""
    repo = env.new_repo(default_days=0)
    env.put(repo, "main", "a", b"a1")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="1"))
    tagged = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    env.stub.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref=tagged))
    env.put(repo, "main", "b", b"b1")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="2"))
    for key in ("a", "b", "e/f"):
        env.put(repo, "main", key, key.encode() + b"2")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="3"))
    env.put(repo, "main", "c", b"c1")
    env.put(repo, "main", "d", b"d1")
    env.put(repo, "main", "d", b"d2")
    for i in range(3):
        env.upload(repo, f"never staged {i}".encode())
    env.upload(repo, b"written after the cutoff", backdate=False)
    return repo


def test_gc_through_the_adapter_deletes_what_the_hadoop_path_marks(
    spark: Any, gc_env: GCEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = gc_env
    repo = _scenario(env)
    hadoop = run_gc(
        spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=600, unsafe_short_grace=True, dry_run=True)
    )
    hadoop_report = {tuple(row) for row in spark.read.parquet(hadoop.report_location).collect()}
    assert hadoop.objects == {"expired-commit": 1, "unreferenced": 4}

    forced_adapter_roots(monkeypatch)
    before = _files(env, repo)
    indexes = _range_boundary_indexes(env, repo)
    assert len(indexes) >= 3  # one beside each commit's metarange
    real = run_gc(spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=600, unsafe_short_grace=True))
    assert (real.objects, real.bytes) == (hadoop.objects, hadoop.bytes)
    root = adapter_root(f"local://{repo}", env.blockstore)
    report_path = f"_silt/gc/{real.run_id}/report"
    assert {tuple(row) for row in read_dataset(spark, root, report_path, REPORT_SCHEMA).collect()} == hadoop_report
    marked = {address for address, _, _ in hadoop_report}
    assert real.deleted == len(marked) and real.spared == 0
    assert before - _files(env, repo) == marked  # exactly those, nothing else
    # The checked copy of the report is there, beside the report, through the adapter too.
    assert any("report-checked-" in key for key in (item.key for item in env.adapter.list_objects(root.namespace)))

    again = run_gc(spark, env.stub, repo, env.blockstore, GCOptions(sweep_only=real.run_id))
    assert again.objects == real.objects and before - _files(env, repo) == marked
    # Metaranges outlive their commits' expiry, and so do their indexes (Spark never reads them).
    assert _range_boundary_indexes(env, repo) == indexes
    with pytest.raises(InvalidArgument, match="no report of GC run"):
        run_gc(spark, env.stub, repo, env.blockstore, GCOptions(sweep_only="20200101T000000Z-00000000"))


def test_last_access_through_the_adapter(spark: Any, gc_env: GCEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env = gc_env
    repo = with_rule(env, RULE)
    put_aged(env, repo, "logs/untouched", b"u", age_days=60)
    put_aged(env, repo, "logs/read-lately", b"r1", age_days=60)
    record(env, repo, "logs/read-lately", ev.READ, age_days=2)
    put_aged(env, repo, "logs/young", b"y", age_days=10)

    def run(**options: Any) -> Any:
        return run_last_access(spark, env.stub, repo, "main", env.blockstore, LastAccessOptions(**options))

    expected = run(dry_run=True)  # the Hadoop path
    forced_adapter_roots(monkeypatch)
    dry = run(dry_run=True)
    assert dry.paths == expected.paths == ["logs/untouched"]
    assert dry.rules == expected.rules
    real = run()
    assert real.rules[0].expired == 1 and real.rules[0].spared == 0
