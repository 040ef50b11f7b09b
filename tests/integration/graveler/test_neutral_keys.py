"""Ref-neutral keys through graveler's gRPC API, on every KV driver: StageEntry with `neutral`
records a key's entry once (create-only) and stages it; GetNeutralEntry reads the record by key
alone, whatever the branches hold since; RecordNeutralEntries records without staging."""

from __future__ import annotations

import hashlib
import io
import uuid

import grpc
import pytest

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.record import key_kind
from tests.integration.graveler.conftest import GravelerEnv


def _written(env: GravelerEnv, repo: str, content: bytes) -> pb.Entry:
    """An entry for content written at a fresh address of repo's namespace (as an edge writes it)."""
    address = f"data/{uuid.uuid4().hex}"
    env.graveler.committed.adapter.put(f"local://{repo}", address, io.BytesIO(content), len(content))
    return pb.Entry(physical_address=address, size=len(content), etag=hashlib.md5(content).hexdigest())


def _stage(env: GravelerEnv, repo: str, branch: str, key: str, entry: pb.Entry) -> None:
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch=branch, key=key, entry=entry, neutral=True))


def _neutral(env: GravelerEnv, repo: str, key: str) -> pb.Entry:
    return env.stub.GetNeutralEntry(api.GetNeutralEntryRequest(repository=repo, key=key)).entry


def test_a_neutral_write_stages_the_key_and_records_it_for_good(env: GravelerEnv) -> None:
    repo = env.new_repo()
    first = _written(env, repo, b"file one")
    _stage(env, repo, "main", "db/t/data/a.parquet", first)
    staged = env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="db/t/data/a.parquet")).entry
    assert staged.physical_address == first.physical_address
    assert _neutral(env, repo, "db/t/data/a.parquet").physical_address == first.physical_address

    # Gone from every ref: deleted, committed, rewritten through the branch form.
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="db/t/data/a.parquet"))
    env.commit(repo, "main", allow_empty=True)
    env.put(repo, "main", "db/t/data/a.parquet", "other bytes")
    recorded = _neutral(env, repo, "db/t/data/a.parquet")
    assert (recorded.physical_address, recorded.etag, recorded.size) == (first.physical_address, first.etag, 8)


def test_other_content_is_refused_and_nothing_is_staged(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="b1", source_ref="main"))
    first = _written(env, repo, b"first")
    _stage(env, repo, "main", "k", first)
    with pytest.raises(grpc.RpcError) as refused:
        _stage(env, repo, "b1", "k", _written(env, repo, b"second"))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as missing:
        env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="b1", key="k"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert _neutral(env, repo, "k").physical_address == first.physical_address


def test_an_identical_write_stages_the_recorded_bytes(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="b1", source_ref="main"))
    first = _written(env, repo, b"same")
    _stage(env, repo, "main", "k", first)
    retry = _written(env, repo, b"same")  # a retry whose first answer was lost: new bytes, same ETag
    _stage(env, repo, "main", "k", retry)
    _stage(env, repo, "b1", "k", retry)
    for ref in ("main", "b1"):
        staged = env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref=ref, key="k")).entry
        assert staged.physical_address == first.physical_address
    assert _neutral(env, repo, "k").physical_address == first.physical_address


def test_a_record_whose_bytes_are_gone_takes_an_identical_write(env: GravelerEnv) -> None:
    repo = env.new_repo()
    first = _written(env, repo, b"same")
    _stage(env, repo, "main", "k", first)
    env.graveler.committed.adapter.delete(f"local://{repo}", first.physical_address)  # collected
    again = _written(env, repo, b"same")
    _stage(env, repo, "main", "k", again)
    assert _neutral(env, repo, "k").physical_address == again.physical_address
    assert env.etag(repo, "main", "k") == again.etag


def test_a_missing_branch_records_nothing(env: GravelerEnv) -> None:
    repo = env.new_repo()
    with pytest.raises(grpc.RpcError) as refused:
        _stage(env, repo, "nope", "k", _written(env, repo, b"x"))
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as missing:
        _neutral(env, repo, "k")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_only_addresses_in_the_namespace_are_recorded(env: GravelerEnv) -> None:
    repo = env.new_repo()
    for address in ("s3://elsewhere/x", f"local://{repo}/data/x", "_silt/metaranges/abc", "data/../_silt/x"):
        entry = pb.Entry(physical_address=address, size=1, etag="e")
        with pytest.raises(grpc.RpcError) as refused:
            _stage(env, repo, "main", "k", entry)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as refused:
            env.stub.RecordNeutralEntries(
                api.RecordNeutralEntriesRequest(repository=repo, entries=[api.EntryInfo(key="k", entry=entry)])
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as missing:
        _neutral(env, repo, "k")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_record_without_staging_and_first_conflict_named(env: GravelerEnv) -> None:
    repo = env.new_repo()
    a, b = _written(env, repo, b"a"), _written(env, repo, b"b")
    env.stub.RecordNeutralEntries(
        api.RecordNeutralEntriesRequest(
            repository=repo,
            branch="main",
            entries=[api.EntryInfo(key="m/a", entry=a), api.EntryInfo(key="m/b", entry=b)],
        )
    )
    assert _neutral(env, repo, "m/b").physical_address == b.physical_address
    with pytest.raises(grpc.RpcError) as missing:
        env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="m/a"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND  # recorded, not staged
    with pytest.raises(grpc.RpcError) as refused:
        env.stub.RecordNeutralEntries(
            api.RecordNeutralEntriesRequest(repository=repo, branch="main", entries=[api.EntryInfo(key="m/a", entry=b)])
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_records_are_journaled_as_their_own_kind() -> None:
    assert key_kind(b"neutral/db/t/data/a.parquet") == "neutral"
