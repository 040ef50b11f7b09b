"""A GC run's export in lakeFS's formats (engine/features/gc_lakefs.py), over graveler's gRPC:
the commits CSV against the repository's commits and its rules, the uncommitted addresses
against what is staged, and the background export's status read through another graveler."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import grpc
import pyarrow.parquet as pq
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.features.background_tasks import STALE_SECONDS
from engine.graveler import GravelerOptions
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.gc.conftest import GCEnv, served_gc_env


def _commit(env: GCEnv, repo: str, branch: str, key: str) -> str:
    env.put(repo, branch, key, key.encode())
    return str(env.stub.Commit(api.CommitRequest(repository=repo, branch=branch, message=key)).id)


def _history(env: GCEnv, repo: str) -> set[str]:
    """Every commit reachable from main and keep."""
    found: set[str] = set()
    for ref in ("main", "keep"):
        found |= {c.id for c in env.stub.Log(api.LogRequest(repository=repo, ref=ref, amount=1000)).commits}
    return found


def _commits_csv(env: GCEnv, repo: str, key: str) -> tuple[list[str], dict[str, tuple[str, str]]]:
    text = env.read(repo, key).decode()
    header = text.splitlines()[0].split(",")
    rows = {row["commit_id"]: (row["expired"], row["metarange_id"]) for row in csv.DictReader(io.StringIO(text))}
    return header, rows


def _repo_with_history(env: GCEnv) -> tuple[str, str, str, str]:
    """main: c1, c2, c3; keep: branched at c1, then k1. Rules: 0 days by default, 10 on keep.
    So c2 alone expires: c1 (and what precedes it) is young on keep's side."""
    repo = env.new_repo(default_days=0)
    env.stub.SetGCRules(
        api.SetGCRulesRequest(
            repository=repo, rules=pb.GCRules(default_retention_days=0, branch_retention_days={"keep": 10})
        )
    )
    c1 = _commit(env, repo, "main", "a")
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="keep", source_ref=c1))
    c2 = _commit(env, repo, "main", "b")
    _commit(env, repo, "main", "c")
    _commit(env, repo, "keep", "k")
    return repo, c1, c2, "keep"


def test_commits_csv_lists_every_commit_with_its_expiry(gc_env: GCEnv) -> None:
    env = gc_env
    repo, c1, c2, _ = _repo_with_history(env)
    run = env.stub.PrepareGC(api.PrepareGCRequest(repository=repo, lakefs_formats=True))
    assert run.lakefs_commits_location == run.location + "commits.csv"
    header, rows = _commits_csv(env, repo, run.lakefs_commits_location)
    assert header == ["commit_id", "expired", "metarange_id"]
    assert set(rows) == _history(env, repo)
    assert {c for c, (expired, _) in rows.items() if expired == "true"} == {c2}
    assert rows[c1][0] == "false"
    # The same facts as Silt's own Parquet export of the run.
    silt = pq.read_table(env.path(repo, run.commits_location)).to_pylist()
    assert {r["commit_id"]: (str(r["expired"]).lower(), r["metarange_id"]) for r in silt} == rows


def test_silt_runs_write_no_lakefs_file_unless_asked(gc_env: GCEnv) -> None:
    repo = gc_env.new_repo(default_days=0)
    run = gc_env.stub.PrepareGC(api.PrepareGCRequest(repository=repo))
    assert run.lakefs_commits_location == ""
    assert not gc_env.exists(repo, run.location + "commits.csv")


def test_uncommitted_addresses_in_lakefs_format(gc_env: GCEnv) -> None:
    env = gc_env
    repo = env.new_repo(default_days=None)  # no rules needed, as in lakeFS
    empty = env.stub.PrepareGCUncommitted(api.PrepareGCUncommittedRequest(repository=repo))
    assert empty.location == "" and empty.staged_entries == 0 and empty.run_id
    committed = env.put(repo, "main", "committed", b"1")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="1"))
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"))
    on_main = env.put(repo, "main", "x", b"x")
    on_dev = env.put(repo, "dev", "y", b"y")
    # An address written as a full URI of the namespace is listed relative to it, as lakeFS lists it.
    full = env.upload(repo, b"z")
    entry = pb.Entry(physical_address=f"local://{repo}/{full}", size=1, etag="e")
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="dev", key="z", entry=entry))
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="committed"))  # a tombstone

    run = env.stub.PrepareGCUncommitted(api.PrepareGCUncommittedRequest(repository=repo))
    assert run.location == f"_silt/gc/{run.run_id}/uncommitted/"
    # The local store keeps a hidden etag file beside each object; Spark skips hidden files.
    files = sorted(p.name for p in Path(env.path(repo, run.location)).iterdir() if not p.name.startswith("."))
    assert files == ["staged.parquet"]
    table = pq.read_table(env.path(repo, run.location + "staged.parquet"))
    assert table.column_names == ["physical_address", "creation_date"]
    assert sorted(table.column("physical_address").to_pylist()) == sorted([on_main, on_dev, full])
    assert committed not in table.column("physical_address").to_pylist()
    assert run.staged_entries == 3


def test_background_export_is_answered_by_another_graveler(tmp_path: Path, gc_env: GCEnv) -> None:
    """Two gravelers on one KV and one store: the task started on one is read on the other."""
    env = gc_env
    repo, _, c2, _ = _repo_with_history(env)
    started = env.stub.StartPrepareGC(api.StartPrepareGCRequest(repository=repo))
    assert len(started.task_id) == 20 and not started.completed
    # gc_env's KV is tmp_path/kv.db (the same tmp_path): the second graveler opens that file.
    with served_gc_env(tmp_path, env.blockstore, GravelerOptions()) as other:
        deadline = time.monotonic() + 30
        status = other.stub.GetPrepareGCTask(api.GetPrepareGCTaskRequest(repository=repo, task_id=started.task_id))
        while not status.completed and time.monotonic() < deadline:
            time.sleep(0.2)
            status = other.stub.GetPrepareGCTask(api.GetPrepareGCTaskRequest(repository=repo, task_id=started.task_id))
        assert status.completed and not status.error, status
        result = status.result
        assert result.lakefs_commits_location == result.location + "commits.csv"
        _, rows = _commits_csv(env, repo, result.lakefs_commits_location)
        assert {c for c, (expired, _) in rows.items() if expired == "true"} == {c2}
        for unknown in ("0" * 20, "not-a-task", "../../x"):
            with pytest.raises(grpc.RpcError) as missing:
                other.stub.GetPrepareGCTask(api.GetPrepareGCTaskRequest(repository=repo, task_id=unknown))
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_task_no_graveler_beats_reads_as_failed(gc_env: GCEnv) -> None:
    """The graveler running a task stopped: after STALE_SECONDS its record says so."""
    repo = gc_env.new_repo(default_days=0)
    handle = gc_env.graveler.refs.repository(repo)
    old = Timestamp()
    old.FromSeconds(int(time.time() - STALE_SECONDS - 5))
    task = pb.GCPrepareTask(id="a" * 20, created=old, update_time=old)
    gc_env.store.set_if(handle.partition, b"gc/tasks/" + task.id.encode(), task.SerializeToString(), None)
    status = gc_env.stub.GetPrepareGCTask(api.GetPrepareGCTaskRequest(repository=repo, task_id=task.id))
    assert status.completed and "stopped" in status.error and not status.HasField("result")


def test_uncommitted_includes_what_a_compaction_folded(gc_env: GCEnv) -> None:
    """Compacted but uncommitted entries live only in the compacted metarange: still uncommitted."""
    env = gc_env
    repo = env.new_repo(default_days=None)
    committed = env.put(repo, "main", "a", b"a1")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="1"))
    compacted = env.put(repo, "main", "b", b"b1")
    replaced = env.put(repo, "main", "a", b"a2")
    env.graveler.compact(repo, "main")
    branch = env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch
    assert branch.compacted_metarange_id and not branch.sealed_tokens
    staged = env.put(repo, "main", "c", b"c1")

    run = env.stub.PrepareGCUncommitted(api.PrepareGCUncommittedRequest(repository=repo))
    listed = pq.read_table(env.path(repo, run.location + "staged.parquet")).column("physical_address").to_pylist()
    assert sorted(listed) == sorted([compacted, replaced, staged])
    assert committed not in listed
