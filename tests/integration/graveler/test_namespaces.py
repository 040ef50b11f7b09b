"""Where repositories may keep their bytes, through graveler's real gRPC API: below an allowed
root (derived from the first when unnamed), never overlapping another live repository's
namespace, bare repositories included; refusals name no other repository."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from services.graveler.committed.cache import CommittedCache
from services.graveler.committed.manager import CommittedManager
from services.graveler.graveler import Graveler, GravelerOptions
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.kv import Store
from tests.integration.graveler.conftest import GravelerEnv

INVALID = grpc.StatusCode.INVALID_ARGUMENT
DENIED = grpc.StatusCode.PERMISSION_DENIED


@pytest.fixture
def lake(store: Store, tmp_path: Path) -> Iterator[GravelerEnv]:
    """Graveler allowing namespaces below local://lake/ only (the Cassandra leg shares one
    keyspace, so each test's root is its own)."""
    root = f"local://lake-{uuid.uuid4().hex[:8]}/"
    adapter = LocalAdapter(tmp_path / "data")
    options = GravelerOptions(allowed_namespace_roots=(root,))
    graveler = Graveler(store, CommittedManager(adapter, CommittedCache()), options)
    server, port = start(graveler, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield GravelerEnv(api_grpc.GravelerServiceStub(channel), graveler, tmp_path / "data")
    finally:
        channel.close()
        server.stop(None)
        graveler.close()


def _root(env: GravelerEnv) -> str:
    return env.graveler.options.allowed_namespace_roots[0]


def _name(prefix: str = "repo") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _create(env: GravelerEnv, name: str, namespace: str, bare: bool = False) -> api.RepositoryInfo:
    request = api.CreateRepositoryRequest(name=name, storage_namespace=namespace, bare=bare)
    return env.stub.CreateRepository(request)


def _refusal(env: GravelerEnv, name: str, namespace: str, bare: bool = False) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        _create(env, name, namespace, bare)
    request = api.GetRepositoryRequest(name=name)
    with pytest.raises(grpc.RpcError) as missing:
        env.stub.GetRepository(request)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND, "a refused repository must not exist"
    return caught.value


@pytest.mark.parametrize(
    "outside",
    [
        "s3://someone-elses-bucket/data",  # any bucket the object-store credentials reach
        "local://elsewhere/data",  # another directory of the local store
        "local://lake-x/",  # not strictly below the root
    ],
)
def test_a_namespace_outside_the_allowed_roots_is_refused(lake: GravelerEnv, outside: str) -> None:
    error = _refusal(lake, _name(), outside)
    assert error.code() == INVALID
    assert "outside the allowed namespace roots" in (error.details() or "")


@pytest.mark.parametrize(
    "trick",
    [
        "{root}../elsewhere",
        "{root}x/../../elsewhere",
        "{root}./x",
        "{root}/x",
        "{root}x//y",
        "{root}x\\..\\..\\y",
        "{root}.silt-uploads",
    ],
)
def test_path_tricks_cannot_leave_the_root(lake: GravelerEnv, trick: str) -> None:
    error = _refusal(lake, _name(), trick.format(root=_root(lake)))
    assert error.code() == INVALID


def test_scheme_case_and_a_trailing_slash_are_the_same_place(lake: GravelerEnv) -> None:
    name = _name()
    info = _create(lake, name, _root(lake).replace("local://", "LOCAL://") + name + "/")
    assert info.storage_namespace == f"{_root(lake)}{name}"


def test_an_unnamed_namespace_is_the_first_root_plus_the_name(lake: GravelerEnv) -> None:
    name = _name()
    assert _create(lake, name, "").storage_namespace == f"{_root(lake)}{name}"


def test_an_unnamed_namespace_is_made_unique_when_its_place_is_taken(lake: GravelerEnv) -> None:
    name = _name()
    _create(lake, _name("squatter"), f"{_root(lake)}{name}/data")
    derived = _create(lake, name, "").storage_namespace
    assert derived.startswith(f"{_root(lake)}{name}-")
    lake.put(name, "main", "k", "v")  # a working repository
    lake.commit(name, "main")


@pytest.mark.parametrize("bare", [False, True])
@pytest.mark.parametrize("where", ["parent", "child", "equal", "equal, other spelling"])
def test_no_repository_overlaps_a_live_one(lake: GravelerEnv, bare: bool, where: str) -> None:
    victim = _name("victim")
    victim_ns = _create(lake, victim, f"{_root(lake)}team/{victim}").storage_namespace
    namespace = {
        "parent": f"{_root(lake)}team",
        "child": f"{victim_ns}/sub",
        "equal": victim_ns,
        "equal, other spelling": victim_ns.replace("local://", "LOCAL://") + "/",
    }[where]
    error = _refusal(lake, _name("intruder"), namespace, bare)
    # A bare repository on exactly the namespace is an administrator's restore: this caller
    # (no auth at all here) is not one. Anything else is simply not a place one may take.
    assert error.code() == (DENIED if bare and where.startswith("equal") else INVALID)
    details = error.details() or ""
    assert "overlaps an existing repository's" in details
    assert victim not in details and victim_ns not in details and "team" not in details


def test_a_sibling_with_a_longer_name_is_no_overlap(lake: GravelerEnv) -> None:
    first = _create(lake, _name(), "").storage_namespace
    _create(lake, _name(), first + "-two")


def test_a_deleted_repositorys_namespace_may_be_taken_again(lake: GravelerEnv) -> None:
    name = _name()
    namespace = _create(lake, name, "").storage_namespace
    lake.stub.DeleteRepository(api.DeleteRepositoryRequest(name=name))
    assert _create(lake, _name(), namespace, bare=True).storage_namespace == namespace
