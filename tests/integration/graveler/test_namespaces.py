"""Where repositories may keep their bytes, through graveler's real gRPC API: below an allowed
root (derived from the first when unnamed), never overlapping another live repository's
namespace, bare repositories included; refusals name no other repository."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.claims import STALE_AFTER_SECONDS, claim_key
from engine.graveler import GravelerOptions
from engine.open import open_graveler
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store
from silt.kv.store import scan_prefix
from silt.namespaces import parse_namespace
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
    graveler = open_graveler(store, adapter, options)
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


# --- racing creations: claims ---------------------------------------------------------------


def _race(env: GravelerEnv, namespaces: list[str]) -> list[str | grpc.RpcError]:
    """CreateRepository for every namespace at once, from as many threads; each one's outcome."""
    start = threading.Barrier(len(namespaces))

    def create(namespace: str) -> str | grpc.RpcError:
        name = _name("racer")
        start.wait()
        try:
            _create(env, name, namespace)
        except grpc.RpcError as error:
            return error
        return name

    with ThreadPoolExecutor(len(namespaces)) as pool:
        return list(pool.map(create, namespaces))


def test_racing_creations_of_overlapping_namespaces_succeed_at_most_once_per_group(lake: GravelerEnv) -> None:
    root = _root(lake)
    groups = 5
    # Each group: the same place twice (once in other letters' case), a child, a grandchild,
    # a second child: every two of them overlap except the two children.
    members = ["g{g}", "G{g}", "g{g}/a", "g{g}/a/b", "g{g}/a/b"]
    for _ in range(3):
        run = uuid.uuid4().hex[:6]
        namespaces = [root + run + "-" + member.format(g=g) for g in range(groups) for member in members]
        outcomes = _race(lake, namespaces)
        for g in range(groups):
            mine = outcomes[g * len(members) : (g + 1) * len(members)]
            created = [o for o in mine if isinstance(o, str)]
            # Before: several creations of a group passed the listing check before any record
            # was written, and GC of the outer one would have swept the inner ones' objects.
            assert len(created) <= 1, f"group {g}: {len(created)} overlapping repositories were created"
            for refused in (o for o in mine if not isinstance(o, str)):
                assert refused.code() in (INVALID, grpc.StatusCode.ABORTED), refused
            # Whoever refused released its claim: a group nobody won is free for one creation.
            if not created:
                _create(lake, _name(), f"{root}{run}-g{g}/a")


def test_a_claim_counts_until_it_goes_stale_and_only_its_own_is_released(lake: GravelerEnv) -> None:
    kv = lake.graveler.refs.kv
    root = _root(lake)

    def plant(namespace: str, age: float) -> bytes:
        """A claim with no repository record: a creation in progress, or one that crashed."""
        stamp = Timestamp()
        stamp.FromNanoseconds(int((time.time() - age) * 1e9))
        record = pb.Repository(name=_name("ghost"), storage_namespace=namespace, unique_id=uuid.uuid4().hex)
        record.creation_date.CopyFrom(stamp)
        key = claim_key(parse_namespace(namespace), record.unique_id)
        kv.set_if(b"graveler", key, record.SerializeToString(), None)
        return key

    in_progress = plant(f"{root}busy", 5)
    assert _refusal(lake, _name(), f"{root}busy/below").code() == INVALID
    crashed = plant(f"{root}left", STALE_AFTER_SECONDS + 60)
    _create(lake, _name(), f"{root}left/below")  # a stale leftover does not count; it is removed
    assert [e.key for e in scan_prefix(kv, b"graveler", crashed)] == []
    assert [e.key for e in scan_prefix(kv, b"graveler", in_progress)] == [in_progress]

    # The administrators' restore next to the original: two claims on one place. Deleting
    # either keeps the other's, and the place stays taken until both are gone.
    original, restored = _name("original"), _name("restored")
    namespace = _create(lake, original, f"{root}shared").storage_namespace
    lake.graveler.lifecycle.create_repository(restored, namespace, "", True, may_share=lambda name: name == original)
    lake.stub.DeleteRepository(api.DeleteRepositoryRequest(name=original))
    assert _refusal(lake, _name(), f"{namespace}/sub").code() == INVALID
    prefix = claim_key(parse_namespace(namespace), "")
    assert len(list(scan_prefix(kv, b"graveler", prefix))) == 1
    lake.stub.DeleteRepository(api.DeleteRepositoryRequest(name=restored))
    assert list(scan_prefix(kv, b"graveler", prefix)) == []
    _create(lake, _name(), f"{namespace}/sub")
