"""edge/core/client.py: the one way both front ends of the edge write, stage and delete object bytes.

A real local block adapter; graveler's answers are the gRPC errors its channel raises.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import grpc
import grpc.aio
import pytest
from pydantic import SecretStr

from edge.api.backend import Backend as ApiBackend
from edge.api.errors import ApiError, from_rpc
from edge.core.client import SMALL_BODY, EdgeClient
from edge.core.object_writes import (
    ConditionFailed,
    NoSuchBranch,
    NotABranch,
    ObjectWriteFailed,
    ShortBody,
    SourceBody,
    WritePhase,
)
from edge.core.write_outcome import Attempts, NotApplied, SentWhenReady, certainly_not_applied, not_applied_error
from edge.gateway.backend import Backend as GatewayBackend
from edge.gateway.backend import s3_error
from engine.reads import ReadWouldWait
from silt.block.adapter import ObjectReader, PutResult
from silt.config import Config
from silt.errors import NotApplied as SiltNotApplied
from silt.errors import NotFound, SiltError
from silt.free_ports import free_port
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.repository_place import RepositoryPlace
from silt.rpc.errors import STATUS_DETAILS_KEY, error_from_rpc, rich_status
from silt.rpc.signing import Credentials

NAMESPACE = "local://repo"
ADDRESS = "data/object"


def _rpc_error(code: grpc.StatusCode, details: str = "") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def _stored(client: EdgeClient) -> bool:
    try:
        client.adapter.stat(NAMESPACE, ADDRESS)
    except Exception:
        return False
    return True


async def _with_client(tmp_path: Path, body: Callable[[EdgeClient], Awaitable[None]]) -> None:
    config = Config.model_validate({"blockstore": {"type": "local", "local": {"path": str(tmp_path)}}})
    client = EdgeClient(config, Credentials("AKIAIOSFODNN7EXAMPLE", SecretStr("secret")), ev.API, "test-io")
    try:
        await body(client)
    finally:
        await client.close()


def test_bytes_of_a_failed_write_are_deleted(tmp_path: Path) -> None:
    async def body(client: EdgeClient) -> None:
        with pytest.raises(ValueError, match="bad digest"):
            async with client.new_bytes(NAMESPACE, ADDRESS):
                await client.write_bytes(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
                assert _stored(client)
                raise ValueError("bad digest")  # a check after the write, as S3's Content-MD5
        assert not _stored(client)
        async with client.new_bytes(NAMESPACE, ADDRESS):
            result = await client.write_bytes(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
        assert result.size == 7
        assert _stored(client)

    asyncio.run(_with_client(tmp_path, body))


@pytest.mark.parametrize(
    ("error", "kept"),
    [
        (_rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "exists"), False),
        # The edge never sent it (the channel was not ready), or graveler skipped it as expired.
        (not_applied_error(grpc.StatusCode.UNAVAILABLE, "not reachable"), False),
        (not_applied_error(grpc.StatusCode.DEADLINE_EXCEEDED, "expired"), False),
        # Graveler may have staged it before the answer was lost: the bytes must stay.
        (_rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED), True),
        (_rpc_error(grpc.StatusCode.UNAVAILABLE, "Socket closed"), True),
        # A message's text proves nothing: this may be graveler's own answer, its store
        # (Cassandra) refusing a connection after the write landed.
        (_rpc_error(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; connection refused"), True),
        (_rpc_error(grpc.StatusCode.INTERNAL), True),
        (_rpc_error(grpc.StatusCode.UNKNOWN), True),
        (_rpc_error(grpc.StatusCode.CANCELLED), True),
    ],
)
def test_bytes_are_deleted_only_when_graveler_certainly_refused_them(
    tmp_path: Path, error: grpc.aio.AioRpcError, kept: bool
) -> None:
    assert certainly_not_applied(error) is not kept

    async def body(client: EdgeClient) -> None:
        await client.write_bytes(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
        _answer(client, _Graveler(stage=[error] * 3))
        with pytest.raises(SiltError) as failed:
            await client.stage_new_bytes(_request(), RepositoryPlace(NAMESPACE, "id-1"))
        assert certainly_not_applied(failed.value) is not kept
        assert _stored(client) is kept

    asyncio.run(_with_client(tmp_path, body))


def _missing_repository() -> grpc.aio.AioRpcError:
    code = grpc.StatusCode.NOT_FOUND
    trailing = grpc.aio.Metadata((STATUS_DETAILS_KEY, rich_status(code, "repository not found", "repository")))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, "repository not found")


def test_a_write_to_a_repository_created_again_is_copied_into_and_staged_in_the_new_one(tmp_path: Path) -> None:
    """Graveler refused the write because the repository looked up is gone and another took its
    name: the bytes are copied into the new one's namespace and staged there, by the core alone."""

    async def body(client: EdgeClient) -> None:
        await client.write_bytes(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
        graveler = _Graveler(stage=[_missing_repository(), None], repository=("local://again", "id-2"))
        _answer(client, graveler)
        request = _request()
        staged_in = await client.stage_new_bytes(request, RepositoryPlace(NAMESPACE, "id-1"))
        assert staged_in == RepositoryPlace("local://again", "id-2")
        assert [r.repository_id for r in graveler.staged] == ["id-1", "id-2"]
        moved = request.entry.physical_address
        assert moved != ADDRESS and graveler.staged[1].entry.physical_address == moved
        assert client.adapter.stat("local://again", moved).size == 7
        assert _stored(client)  # an earlier attempt may have staged them in the old one: they stay

    asyncio.run(_with_client(tmp_path, body))


def test_a_write_that_must_not_follow_a_replacement_is_refused_and_its_bytes_go(tmp_path: Path) -> None:
    async def body(client: EdgeClient) -> None:
        await client.write_bytes(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
        graveler = _Graveler(stage=[_missing_repository()], repository=("local://again", "id-2"))
        _answer(client, graveler)
        with pytest.raises(NotFound):
            await client.stage_new_bytes(_request(), RepositoryPlace(NAMESPACE, "id-1"), follow_replacement=False)
        assert not _stored(client)
        assert graveler.looked_up == 0

    asyncio.run(_with_client(tmp_path, body))


def test_a_write_to_a_repository_gone_for_good_is_refused_and_its_bytes_go(tmp_path: Path) -> None:
    async def body(client: EdgeClient) -> None:
        await client.write_bytes(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
        graveler = _Graveler(stage=[_missing_repository()], repository=None)
        _answer(client, graveler)
        with pytest.raises(NotFound) as refused:
            await client.stage_new_bytes(_request(), RepositoryPlace(NAMESPACE, "id-1"))
        assert refused.value.what == "repository"
        assert not _stored(client)
        assert graveler.looked_up == 1

    asyncio.run(_with_client(tmp_path, body))


def test_a_refused_write_whose_replacement_cannot_be_looked_up_is_not_applied(tmp_path: Path) -> None:
    """Graveler certainly refused the write (its repository is gone); looking up whether another
    took the name then fails: the write certainly was not applied (a retry finds out which
    repository the name names), never "may have staged", nor a refusal that says none does."""

    async def body(client: EdgeClient) -> None:
        await client.write_bytes(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
        graveler = _Graveler(stage=[_missing_repository()], repository=("local://again", "id-2"))
        graveler.lookup_error = _rpc_error(grpc.StatusCode.INTERNAL, "KV store failed")
        _answer(client, graveler)
        with pytest.raises(SiltNotApplied) as failed:
            await client.stage_new_bytes(_request(), RepositoryPlace(NAMESPACE, "id-1"))
        assert certainly_not_applied(failed.value) and "nothing was staged" in str(failed.value)
        assert graveler.looked_up == 1
        assert not _stored(client)

    asyncio.run(_with_client(tmp_path, body))


class _Graveler:
    """Graveler's StageEntry answering each of `stage` in turn (an error raised, None accepted) and
    GetRepository answering `repository` (namespace, id), or NOT_FOUND for None."""

    def __init__(
        self,
        stage: list[grpc.aio.AioRpcError | None],
        repository: tuple[str, str] | None = None,
        refs: dict[str, api.ResolveRefResponse.RefType.ValueType] | None = None,
    ) -> None:
        self._stage = list(stage)
        self._repository = repository
        self._refs = refs or {}
        self.staged: list[api.StageEntryRequest] = []
        self.looked_up = 0
        self.lookup_error: grpc.aio.AioRpcError | None = None
        self.resolved: list[str] = []
        self.named: list[str] = []  # GetBranch
        self.present: set[str] = set()  # keys StatEntry finds
        self.stated: list[str] = []

    async def ResolveRef(self, request: api.ResolveRefRequest, *, timeout: float | None = None) -> object:
        self.resolved.append(request.ref)
        if request.ref not in self._refs:
            raise _rpc_error(grpc.StatusCode.NOT_FOUND, f"ref {request.ref} not found")
        return api.ResolveRefResponse(type=self._refs[request.ref])

    async def GetBranch(self, request: api.GetBranchRequest, *, timeout: float | None = None) -> object:
        self.named.append(request.name)
        if self._refs.get(request.name) != api.ResolveRefResponse.REF_TYPE_BRANCH:
            raise _rpc_error(grpc.StatusCode.NOT_FOUND, f"branch {request.name} not found")
        return api.BranchInfo(name=request.name)

    async def StatEntry(self, request: api.StatEntryRequest, *, timeout: float | None = None) -> object:
        self.stated.append(request.key)
        if request.key not in self.present:
            raise _rpc_error(grpc.StatusCode.NOT_FOUND, f"object {request.key} not found")
        return api.EntryInfo(entry=pb.Entry(physical_address="elsewhere"))

    async def StageEntry(self, request: api.StageEntryRequest, *, timeout: float | None = None) -> object:
        copy = api.StageEntryRequest()
        copy.CopyFrom(request)
        self.staged.append(copy)
        answer = self._stage.pop(0)
        if answer is not None:
            raise answer
        return api.StageEntryResponse()

    async def GetRepository(self, request: api.GetRepositoryRequest, *, timeout: float | None = None) -> object:
        self.looked_up += 1
        if self.lookup_error is not None:
            raise self.lookup_error
        if self._repository is None:
            raise _missing_repository()
        namespace, unique_id = self._repository
        return api.RepositoryInfo(name=request.name, storage_namespace=namespace, unique_id=unique_id)

    async def ready(self, timeout: float | None) -> None:
        return None


def _answer(client: EdgeClient, graveler: _Graveler) -> None:
    client.staging = graveler  # type: ignore[assignment]
    client.graveler = graveler  # type: ignore[assignment]
    client.gate = graveler  # type: ignore[assignment]


def _request() -> api.StageEntryRequest:
    entry = pb.Entry(physical_address=ADDRESS, size=7)
    return api.StageEntryRequest(repository="repo", branch="main", key="k", entry=entry)


def test_a_refusal_after_an_attempt_that_may_have_applied_is_not_a_refusal() -> None:
    """Across attempts: the write is certainly not applied only if no attempt may have been."""
    attempts = Attempts()
    attempts.failed(not_applied_error(grpc.StatusCode.UNAVAILABLE, "never sent"))
    assert attempts.not_applied
    attempts.failed(_rpc_error(grpc.StatusCode.UNAVAILABLE, "Socket closed"))
    attempts.failed(_rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "exists"))
    assert not attempts.not_applied


class _RecordingStub:
    """Graveler's two write methods, recording what was sent to them."""

    def __init__(self) -> None:
        self.sent: list[object] = []
        self.timeouts: list[float | None] = []

    async def StageEntry(self, request: api.StageEntryRequest, *, timeout: float | None = None) -> object:
        self.sent.append(request)
        self.timeouts.append(timeout)
        return api.StageEntryResponse()

    async def StageEntries(self, request: api.StageEntriesRequest, *, timeout: float | None = None) -> object:
        self.sent.append(request)
        self.timeouts.append(timeout)
        return api.StageEntriesResponse()


def test_a_write_goes_out_only_on_a_ready_channel_and_one_never_sent_is_not_applied() -> None:
    """The one proof that a write never reached graveler, without reading a message: the edge
    did not send it. A real channel to a port nobody listens on, then to a live server."""
    request = api.StageEntryRequest(repository="repo", branch="main", key="k")

    async def scenario() -> None:
        stub = _RecordingStub()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{free_port()}") as nowhere:
            gate = SentWhenReady(stub, nowhere, wait=2.0)
            calls = (gate.StageEntry(request, timeout=5), gate.StageEntries(api.StageEntriesRequest(), timeout=5))
            for call in calls:
                with pytest.raises(NotApplied) as unsent:
                    await call
                assert unsent.value.code() == grpc.StatusCode.UNAVAILABLE
                assert certainly_not_applied(unsent.value)
        assert stub.sent == []
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as live:
                await SentWhenReady(stub, live, wait=10.0).StageEntry(request, timeout=10)
        finally:
            await server.stop(None)
        assert stub.sent == [request]

    asyncio.run(scenario())


class SlowToConnect:
    """A channel to a graveler that is restarting: CONNECTING until `after` seconds of a fake
    clock have passed, READY from then on (the clock moves when the gate waits for a change)."""

    def __init__(self, now: list[float], after: float) -> None:
        self.now = now
        self.after = after
        self.state = grpc.ChannelConnectivity.CONNECTING

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self.state

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        self.now[0] += self.after
        self.state = grpc.ChannelConnectivity.READY


def test_the_wait_for_a_ready_channel_counts_against_the_writes_time() -> None:
    """The channel turns READY 0.9 s into a write with 2 s: graveler gets what is left (1.1 s),
    never the full 2 s, so it cannot write after its caller was told DEADLINE_EXCEEDED."""
    now = [0.0]
    stub = _RecordingStub()
    gate = SentWhenReady(stub, SlowToConnect(now, 0.9), clock=lambda: now[0])  # type: ignore[arg-type]
    request = api.StageEntryRequest(repository="repo", branch="main", key="k")
    asyncio.run(gate.StageEntry(request, timeout=2.0))
    assert stub.sent == [request]
    (timeout,) = stub.timeouts
    assert timeout is not None and timeout <= 2.0 - 0.9 + 1e-9


def test_a_write_whose_time_ran_out_while_waiting_for_the_channel_is_not_sent() -> None:
    now = [0.0]
    stub = _RecordingStub()
    gate = SentWhenReady(stub, SlowToConnect(now, 0.9), wait=5.0, clock=lambda: now[0])  # type: ignore[arg-type]
    request = api.StageEntriesRequest(repository="repo", branch="main")
    with pytest.raises(NotApplied) as unsent:
        asyncio.run(gate.StageEntries(request, timeout=0.5))
    assert unsent.value.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
    assert stub.sent == []


@pytest.mark.parametrize("code", [grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE])
def test_a_write_the_edge_knows_was_not_sent_is_answered_503_by_both_front_ends(code: grpc.StatusCode) -> None:
    """Its time ran out before it was sent, or graveler was not reachable: a retryable 503
    (S3 ServiceUnavailable, lakeFS 503), never 500."""
    unsent = not_applied_error(code, "the write was not sent")
    assert s3_error(error_from_rpc(unsent)).code == "ServiceUnavailable"
    assert from_rpc(unsent, "graveler").status == 503


class _Pieces:
    """Bytes read in pieces; a read past `bad_at` bytes raises the front end's own error."""

    def __init__(self, data: bytes, bad_at: int | None) -> None:
        self._data = data
        self._bad_at = bad_at
        self._read = 0

    async def read(self, n: int) -> bytes:
        if self._bad_at is not None and self._read + n > self._bad_at:
            raise _BadChunk("a chunk's signature does not match")
        out, self._data = self._data[:n], self._data[n:]
        self._read += len(out)
        return out


class _Body(SourceBody):
    """A checked body over bytes, as a front end writes one: `bad_at` makes a read past that
    many bytes raise the front end's own error; `refuse` makes the checks on the whole body
    refuse it."""

    stall_seconds = 5.0

    def __init__(self, data: bytes, declared: int | None, bad_at: int | None = None, refuse: bool = False) -> None:
        super().__init__(_Pieces(data, bad_at), declared)
        self._refuse = refuse

    async def finish(self, written: PutResult) -> dict[str, str]:
        if self._refuse:
            raise _BadChunk("Content-MD5 does not match")
        return {"checksum": written.etag.strip('"')}


class _BadChunk(Exception):
    """A front end's own error for a bad body."""


_BRANCH = api.ResolveRefResponse.REF_TYPE_BRANCH
_TAG = api.ResolveRefResponse.REF_TYPE_TAG


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_an_object_write_is_one_call_that_checks_the_branch_writes_the_bytes_and_stages_them(tmp_path: Path) -> None:
    async def body(client: EdgeClient) -> None:
        graveler = _Graveler(stage=[None, None], repository=(NAMESPACE, "id-1"), refs={"main": _BRANCH})
        _answer(client, graveler)
        for data in (b"payload", b"x" * (SMALL_BODY + 5)):  # read whole, and streamed from a thread
            request = _request()
            request.entry.physical_address = ""
            place = await client.write_object(request, _Body(data, len(data)))
            assert place == RepositoryPlace(NAMESPACE, "id-1")
            entry = graveler.staged[-1].entry
            assert entry.size == len(data) and entry.physical_address and entry.last_modified.seconds > 0
            assert entry.metadata["checksum"] == entry.etag  # what the body's checks keep
            assert graveler.staged[-1].repository_id == "id-1" and graveler.staged[-1].fresh_address
            with client.adapter.get(NAMESPACE, entry.physical_address) as stored:
                assert stored.read() == data
        assert graveler.resolved == ["main"] and graveler.looked_up == 1  # remembered for the second

    asyncio.run(_with_client(tmp_path, body))


@pytest.mark.parametrize(
    ("data", "declared", "bad_at", "refuse", "raised"),
    [
        (b"payload", 7, None, True, _BadChunk),  # the whole body's check refuses it
        (b"x" * (SMALL_BODY * 2), SMALL_BODY * 2, SMALL_BODY, False, _BadChunk),  # raised in the thread
        (b"short", 7, None, False, ShortBody),
        (b"x" * SMALL_BODY, SMALL_BODY + 10, None, False, ShortBody),
    ],
)
def test_a_bad_body_leaves_no_bytes_and_stages_nothing(
    tmp_path: Path, data: bytes, declared: int, bad_at: int | None, refuse: bool, raised: type[Exception]
) -> None:
    async def body(client: EdgeClient) -> None:
        graveler = _Graveler(stage=[], repository=(NAMESPACE, "id-1"), refs={"main": _BRANCH})
        _answer(client, graveler)
        with pytest.raises((raised, ObjectWriteFailed)) as failed:
            await client.write_object(_request(), _Body(data, declared, bad_at, refuse))
        if isinstance(failed.value, ObjectWriteFailed):  # the core's own, said in which phase
            assert failed.value.phase is WritePhase.BYTES and isinstance(failed.value.error, raised)
        else:  # the body's own error, as it raised it
            assert raised is _BadChunk
        assert graveler.staged == []
        assert _files(tmp_path) == []

    asyncio.run(_with_client(tmp_path, body))


@pytest.mark.parametrize(
    ("ref", "raised", "resolved"),
    [
        ("v1", NotABranch, ["v1"]),
        ("main~1", NotABranch, []),
        ("main@", NotABranch, []),
        ("gone", NoSuchBranch, ["gone"]),
    ],
)
def test_only_a_branch_takes_a_write(tmp_path: Path, ref: str, raised: type[Exception], resolved: list[str]) -> None:
    async def body(client: EdgeClient) -> None:
        graveler = _Graveler(stage=[], repository=(NAMESPACE, "id-1"), refs={"main": _BRANCH, "v1": _TAG})
        _answer(client, graveler)
        request = _request()
        request.branch = ref
        with pytest.raises(ObjectWriteFailed) as failed:
            await client.write_object(request, _Body(b"payload", 7))
        assert failed.value.phase is WritePhase.TARGET and isinstance(failed.value.error, raised)
        assert graveler.resolved == resolved
        assert graveler.staged == [] and _files(tmp_path) == []

    asyncio.run(_with_client(tmp_path, body))


class _TypedBody(_Body):
    """A body that says its own content type once started (as a form part does)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data, len(data))
        self.started = False

    async def start(self) -> None:
        self.started = True
        self.content_type = "text/csv"


def test_a_write_checked_by_branch_name_refuses_an_existing_key_before_its_body_starts(tmp_path: Path) -> None:
    """The REST API's upload: the branch looked up by name, refused as graveler refuses it (not as
    a ref that is no branch), and If-None-Match: * over an existing key refused before any byte."""

    async def body(client: EdgeClient) -> None:
        graveler = _Graveler(stage=[None], repository=(NAMESPACE, "id-1"), refs={"main": _BRANCH, "v1": _TAG})
        graveler.present = {"k"}
        _answer(client, graveler)
        options = {"branch_by_name": True, "absent_first": True}
        request = _request()
        request.if_absent = True
        first = _TypedBody(b"payload")
        with pytest.raises(ObjectWriteFailed) as failed:
            await client.write_object(request, first, **options)  # type: ignore[arg-type]
        assert failed.value.phase is WritePhase.TARGET and isinstance(failed.value.error, ConditionFailed)
        assert not first.started and graveler.named == ["main"] and graveler.resolved == []

        tagged = _request()
        tagged.branch = "v1"
        with pytest.raises(ObjectWriteFailed) as failed:
            await client.write_object(tagged, _TypedBody(b"payload"), **options)  # type: ignore[arg-type]
        assert isinstance(failed.value.error, NotFound) and not isinstance(failed.value.error, NoSuchBranch)
        assert "branch v1 not found" in str(failed.value.error)

        absent = _request()
        absent.key, absent.if_absent = "k2", True
        await client.write_object(absent, _TypedBody(b"payload"), **options)  # type: ignore[arg-type]
        assert graveler.stated == ["k", "k2"] and graveler.named == ["main", "v1"]  # main remembered
        staged = graveler.staged[-1]
        assert staged.key == "k2" and staged.if_absent and staged.entry.content_type == "text/csv"
        with client.adapter.get(NAMESPACE, staged.entry.physical_address) as stored:
            assert stored.read() == b"payload"  # the one write whose body was read
        assert len([f for f in _files(tmp_path) if not f.name.startswith(".silt-etag-")]) == 1

    asyncio.run(_with_client(tmp_path, body))


def test_a_copy_is_one_call_sharing_bytes_within_a_repository_and_copying_them_from_another(tmp_path: Path) -> None:
    other = "local://other"

    async def body(client: EdgeClient) -> None:
        refused = _rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "the branch is protected")
        graveler = _Graveler(
            stage=[None, None, refused, refused], repository=(NAMESPACE, "id-1"), refs={"main": _BRANCH}
        )
        _answer(client, graveler)
        place = RepositoryPlace(NAMESPACE, "id-1")
        client.adapter.put(NAMESPACE, ADDRESS, io.BytesIO(b"payload"), 7)
        client.adapter.put(other, ADDRESS, io.BytesIO(b"elsewhere"), 9)
        source = pb.Entry(physical_address=ADDRESS, size=7)

        within = _request()
        within.entry.CopyFrom(source)
        assert await client.copy_entry(within, place, source, read_in="id-1") == place
        staged = graveler.staged[-1]
        assert staged.entry.physical_address == ADDRESS  # the source's own bytes
        assert staged.repository_id == "id-1" and not staged.fresh_address

        across = _request()
        across.entry.CopyFrom(source)
        await client.copy_entry(across, place, source, other, read_in="ignored")
        staged = graveler.staged[-1]
        assert staged.fresh_address and staged.entry.physical_address != ADDRESS
        with client.adapter.get(NAMESPACE, staged.entry.physical_address) as stored:
            assert stored.read() == b"elsewhere"

        refused_copy = _request()
        refused_copy.entry.CopyFrom(source)
        with pytest.raises(ObjectWriteFailed) as failed:
            await client.copy_entry(refused_copy, place, source, other)
        assert failed.value.phase is WritePhase.STAGING
        # Graveler certainly refused it: the copied bytes are gone (only the two written remain).
        kept = sorted(f.name for f in _files(tmp_path) if not f.name.startswith(".silt-etag-"))
        assert len(kept) == 3 and refused_copy.entry.physical_address.rsplit("/", 1)[-1] not in kept

        # A refused copy within the repository deletes nothing: the bytes are the source's own.
        refused_within = _request()
        refused_within.entry.CopyFrom(source)
        with pytest.raises(ObjectWriteFailed) as failed:
            await client.copy_entry(refused_within, place, source, read_in="id-1")
        assert failed.value.phase is WritePhase.STAGING
        with client.adapter.get(NAMESPACE, ADDRESS) as stored:
            assert stored.read() == b"payload"

    asyncio.run(_with_client(tmp_path, body))


def _on_the_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _PointReads:
    """An EntryReads' StatEntry that records the thread each call ran on and the wait it was given,
    and, while `races` lasts, gives up as a read told not to wait does when a branch changed."""

    def __init__(self, races: int = 0) -> None:
        self.calls: list[tuple[int, bool]] = []
        self.races = races
        self.listed_on_the_loop: bool | None = None

    def StatEntry(self, request: api.StatEntryRequest, *, timeout: float, wait: bool = True) -> api.EntryInfo:
        self.calls.append((threading.get_ident(), wait))
        if not wait and self.races:
            self.races -= 1
            raise ReadWouldWait("the branch changed during the read")
        return api.EntryInfo(key=request.key, entry=pb.Entry(physical_address="data/x"))

    def ListEntries(self, request: api.ListEntriesRequest, *, timeout: float) -> api.ListEntriesResponse:
        self.listed_on_the_loop = _on_the_loop()
        raise AssertionError("not a point read")

    def GetNeutralEntry(self, request: api.GetNeutralEntryRequest, *, timeout: float) -> api.EntryInfo:
        raise AssertionError("not asked here")

    def close(self) -> None:
        return None


def _client(config: dict[str, Any], reads: _PointReads) -> EdgeClient:
    """An EdgeClient of this configuration whose entry reads are reads'."""
    return EdgeClient(
        Config.model_validate(config),
        Credentials("AKIAIOSFODNN7EXAMPLE", SecretStr("secret")),
        ev.API,
        "test-io",
        reads=reads,
    )


def _read_one_entry(config: dict[str, Any], reads: _PointReads) -> tuple[int, bool]:
    """EdgeClient.read_entry of one StatEntry: whether the client reads inline, and the loop's thread."""

    async def scenario() -> tuple[int, bool]:
        client = _client(config, reads)
        try:
            request = api.StatEntryRequest(repository="repo", ref="main", key="k")
            info = await client.read_entry(reads.StatEntry, request)
            assert info.key == "k"
            return threading.get_ident(), client.inline_reads
        finally:
            await client.close()

    return asyncio.run(scenario())


def _local(tmp_path: Path, **s3: object) -> dict[str, Any]:
    return {
        "database": {"type": "local", "local": {"path": str(tmp_path / "kv.db")}},
        "blockstore": {"type": "local", "local": {"path": str(tmp_path / "data")}},
        "gateways": {"s3": s3},
    }


def _keyed(tmp_path: Path) -> Config:
    """_local's configuration with the service credentials a front end's backend signs with."""
    keys = {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "secret"}
    return Config.model_validate({**_local(tmp_path), "credentials": keys})


def test_a_point_read_of_local_disk_runs_on_the_event_loop_without_waiting(tmp_path: Path) -> None:
    reads = _PointReads()
    loop_thread, inline = _read_one_entry(_local(tmp_path), reads)
    assert inline
    assert reads.calls == [(loop_thread, False)]


def test_a_point_read_that_would_wait_runs_again_in_a_worker_thread(tmp_path: Path) -> None:
    reads = _PointReads(races=1)
    loop_thread, _ = _read_one_entry(_local(tmp_path), reads)
    (first, first_wait), (second, second_wait) = reads.calls
    assert (first, first_wait) == (loop_thread, False)
    assert second != loop_thread and second_wait, "the second attempt must run in a thread, allowed to wait"


@pytest.mark.parametrize(
    "where",
    [
        pytest.param({"gateways": {"s3": {"inline_local_reads": False}}}, id="turned-off"),
        pytest.param({"database": {"type": "cassandra"}}, id="cassandra"),
        pytest.param({"blockstore": {"type": "s3", "s3": {"region": "us-east-1"}}}, id="object-store-s3"),
        pytest.param(
            {"blockstore": {"local": {"import_enabled": True, "allowed_external_prefixes": ["/mnt/landing"]}}},
            id="imported-files-elsewhere",
        ),
        pytest.param({"graveler": {"allowed_import_prefixes": ["local://landing/"]}}, id="graveler-import-prefixes"),
    ],
)
def test_a_point_read_that_may_wait_on_a_network_or_a_slow_disk_runs_in_a_worker_thread(
    tmp_path: Path, where: dict[str, Any]
) -> None:
    config = _local(tmp_path)
    for section, values in where.items():
        config[section] = {**config.get(section, {}), **values}
        if section == "blockstore" and "local" in values:
            config[section]["local"] = {**_local(tmp_path)["blockstore"]["local"], **values["local"]}
    reads = _PointReads()
    loop_thread, inline = _read_one_entry(config, reads)
    assert not inline
    [(thread, wait)] = reads.calls
    assert thread != loop_thread and wait


def test_the_rest_apis_object_stat_is_a_point_read_and_its_listing_is_not(tmp_path: Path) -> None:
    """lakeFS's stat and get of an object read the entry as the gateway does, on the event loop
    where the disk is local; a listing's page runs in a worker thread."""
    reads = _PointReads()

    async def scenario() -> int:
        backend = ApiBackend(_keyed(tmp_path), reads=reads)
        try:
            request = api.StatEntryRequest(repository="repo", ref="main", key="k")
            info = await backend.stat_entry(request, time.monotonic() + 10)
            assert info.key == "k"
            with pytest.raises(AssertionError, match="not a point read"):
                await backend.list_entries(api.ListEntriesRequest(repository="repo", ref="main"), time.monotonic() + 10)
            return threading.get_ident()
        finally:
            await backend.close()

    loop_thread = asyncio.run(scenario())
    assert reads.calls == [(loop_thread, False)]
    assert reads.listed_on_the_loop is False


class _RecordingReader:
    """An ObjectReader whose get and get_range record whether they ran on the event loop."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.on_the_loop: list[bool] = []

    def get(self, namespace: str, address: str) -> io.BytesIO:
        self.on_the_loop.append(_on_the_loop())
        return io.BytesIO(self.data)

    def get_range(self, namespace: str, address: str, start: int, end: int) -> io.BytesIO:
        self.on_the_loop.append(_on_the_loop())
        return io.BytesIO(self.data[start : end + 1])


@pytest.mark.parametrize("inline", [True, False], ids=["local-disk", "turned-off"])
@pytest.mark.parametrize("byte_range", [None, (1, 3)], ids=["whole", "ranged"])
def test_a_small_objects_bytes_are_read_where_its_entry_is(
    tmp_path: Path, inline: bool, byte_range: tuple[int, int] | None
) -> None:
    """read_small through the block adapter itself: a small object's bytes (a ranged GET's, the
    REST API's) on the event loop where point reads run there, in a worker thread otherwise."""
    reader = _RecordingReader(b"bytes")

    async def scenario() -> bytes:
        client = _client(_local(tmp_path, inline_local_reads=inline), _PointReads())
        client.adapter = reader  # type: ignore[assignment]
        try:
            return await client.read_small(cast(ObjectReader, reader), "ns", "data/x", byte_range)
        finally:
            await client.close()

    assert asyncio.run(scenario()) == (b"bytes" if byte_range is None else b"yte")
    assert reader.on_the_loop == [inline]


def test_an_imported_or_linked_objects_bytes_are_never_read_on_the_event_loop(tmp_path: Path) -> None:
    """A reader other than the block adapter (an imported or linked object's, which checks its
    source first, possibly hashing a whole file) reads in a worker thread, and a read_entry step
    told not to wait gives up on it (ReadWouldWait) rather than read it."""
    source = _RecordingReader(b"bytes")
    plain = _RecordingReader(b"plain")

    async def scenario() -> None:
        client = _client(_local(tmp_path, inline_local_reads=True), _PointReads())
        client.adapter = plain  # type: ignore[assignment]
        try:
            assert client.inline_reads
            imported, own = cast(ObjectReader, source), cast(ObjectReader, plain)
            assert await client.read_small(imported, "ns", "data/x", None) == b"bytes"
            with pytest.raises(ReadWouldWait):
                client.read_small_here(imported, "ns", "data/x", None, wait=False)
            assert client.read_small_here(own, "ns", "data/x", None, wait=False) == b"plain"
            assert client.read_small_here(imported, "ns", "data/x", None, wait=True) == b"bytes"
        finally:
            await client.close()

    asyncio.run(scenario())
    assert source.on_the_loop == [False, True]
    assert plain.on_the_loop == [True]


def test_a_gets_step_that_would_wait_on_the_loop_runs_again_with_its_entry_in_a_thread(tmp_path: Path) -> None:
    """stat_entry_then: a GET's step told not to wait that gives up (an imported object's bytes)
    runs again, entry and step together, in a worker thread told it may wait."""
    reads = _PointReads()
    steps: list[tuple[bool, bool]] = []

    def step(entry: pb.Entry, wait: bool) -> bytes:
        steps.append((_on_the_loop(), wait))
        if not wait:
            raise ReadWouldWait("an imported object's bytes")
        return entry.physical_address.encode()

    async def scenario() -> tuple[pb.Entry, bytes]:
        backend = GatewayBackend(_keyed(tmp_path), reads=reads)
        try:
            request = api.StatEntryRequest(repository="repo", ref="main", key="k")
            return await backend.stat_entry_then(request, step)
        finally:
            await backend.close()

    entry, small = asyncio.run(scenario())
    assert small == b"data/x" == entry.physical_address.encode()
    assert steps == [(True, False), (False, True)]
    assert [wait for _, wait in reads.calls] == [False, True]


class _MissingEntry(_PointReads):
    """A StatEntry that finds no entry, wherever it runs."""

    def StatEntry(self, request: api.StatEntryRequest, *, timeout: float, wait: bool = True) -> api.EntryInfo:
        self.calls.append((threading.get_ident(), wait))
        raise NotFound(f"{request.key} not found", what="object")


@pytest.mark.parametrize("typed", [False, True], ids=["lakefs-error", "typed"])
def test_a_refusal_read_on_the_event_loop_reaches_the_api_as_one_read_in_a_thread_does(
    tmp_path: Path, typed: bool
) -> None:
    """The REST API's stat of a missing object, read on the loop: a lakeFS 404 for a route, the
    silt NotFound itself for a caller that asked for typed refusals (the Iceberg catalog's and the
    table merges' reads), and no second attempt in a thread."""
    reads = _MissingEntry()

    async def scenario() -> BaseException:
        backend = ApiBackend(_keyed(tmp_path), reads=reads)
        try:
            request = api.StatEntryRequest(repository="repo", ref="main", key="k")
            with pytest.raises((NotFound, ApiError)) as caught:
                await backend.stat_entry(request, time.monotonic() + 10, typed=typed)
            return caught.value
        finally:
            await backend.close()

    error = asyncio.run(scenario())
    if typed:
        assert isinstance(error, NotFound)
    else:
        assert isinstance(error, ApiError) and error.status == 404, error
    assert [wait for _, wait in reads.calls] == [False]
