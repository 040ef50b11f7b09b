"""An edge's write of new bytes when graveler's answer cannot be trusted or never comes.

The edge writes an object's bytes, then stages their entry; it may delete the bytes again only
when graveler certainly did not apply the entry in any attempt (edge/core/write_outcome.py). Here a
real graveler gRPC server runs in this process behind a TCP proxy (tests/support/tcp_proxy.py),
and the edge's own code (the gateway's Backend and staging path, the REST API's, the batcher)
reaches it over real gRPC. Faults (tests/support/edge_faults.py): graveler applies the write and
the connection breaks before the answer; graveler's store fails with Cassandra's "connection
refused" after the write landed or before; a graveler that does not serve StageEntries.

What must hold: an entry graveler staged never points at deleted bytes, a conditional write
whose retry meets its own entry succeeds, and the client is answered a retryable error whenever
the write may stand.
"""

from __future__ import annotations

import asyncio
import io
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from edge.api.backend import Backend as ApiBackend
from edge.api.context import Context as ApiContext
from edge.api.errors import ApiError
from edge.api.objects.write import stage_new_bytes as api_stage_new_bytes
from edge.gateway.backend import Backend
from edge.gateway.errors import S3Error
from edge.gateway.operations import multipart
from edge.gateway.operations.common import Context, Response, WriteCondition
from edge.gateway.operations.common import stage_new_bytes as gateway_stage_new_bytes
from edge.gateway.request import Body, Request, parse_query
from engine.graveler import Graveler, GravelerOptions
from engine.open import open_graveler
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.config import Config, DatabaseConfig, LocalDatabaseConfig, S3GatewayConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.key_scope import KeyScope, whole
from silt.kv import Store, open_store
from silt.kv.forwarding import ForwardingStore
from silt.repository_place import RepositoryPlace
from tests.support.edge_faults import CallFaults, StagingWriteFaults
from tests.support.tcp_proxy import TcpProxy

T = TypeVar("T")


class SlowBranchReads(ForwardingStore):
    """inner, except that while `pause` is set each read of a branch record first waits that
    long, and while `held` is set, until it is let go: graveler is slow between taking a call
    and writing its entries."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.pause = 0.0
        self.held: threading.Event | None = None

    def get(self, partition: bytes, key: bytes) -> Any:
        if key.startswith(b"branches/"):
            if self.pause:
                time.sleep(self.pause)
            held = self.held
            if held is not None:
                held.wait(30)
        return self.inner.get(partition, key)


@dataclass
class Stack:
    graveler: Graveler
    stub: api_grpc.GravelerServiceStub  # straight to graveler, past the proxy
    faults: CallFaults
    kv: StagingWriteFaults
    slow: SlowBranchReads
    proxy: TcpProxy  # what the edge dials
    config: Config
    data: Path

    def new_repo(self) -> tuple[str, str]:
        name = f"edge-{uuid.uuid4().hex[:12]}"
        namespace = f"local://{name}"
        self.stub.CreateRepository(api.CreateRepositoryRequest(name=name, storage_namespace=namespace))
        return name, namespace

    def staged(self, repo: str, key: str) -> pb.Entry | None:
        try:
            return self.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key=key)).entry
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND, exc
            return None

    def stored(self, namespace: str, address: str) -> bool:
        try:
            LocalAdapter(self.data).stat(namespace, address)
        except Exception:
            return False
        return True

    def cut(self) -> None:
        """The connection between edge and graveler breaks (graveler's replica went away)."""
        self.proxy.stop()

    def cut_and_restore(self) -> None:
        """The connection breaks, and graveler is reachable again at once (another replica)."""
        self.proxy.stop()
        self.proxy.start()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(tmp_path / "graveler.db"))))
    slow = SlowBranchReads(store)
    kv = StagingWriteFaults(slow)
    # Without the branch cache, every write reads its branch record, where SlowBranchReads waits.
    graveler = open_graveler(kv, LocalAdapter(tmp_path / "data"), GravelerOptions(branch_cache_seconds=0))
    faults = CallFaults()
    server, port = start(graveler, "127.0.0.1:0", interceptors=[faults])
    proxy = TcpProxy("127.0.0.1", port)
    proxy.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    config = Config.model_validate(
        {
            "database": {"type": "local", "local": {"path": str(tmp_path / "edge.db")}},
            "blockstore": {"type": "local", "local": {"path": str(tmp_path / "data")}},
            "graveler": {"endpoint": f"127.0.0.1:{proxy.port}"},
            "auth": {"endpoint": "127.0.0.1:1"},
            "credentials": {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "secret"},
        }
    )
    try:
        yield Stack(
            graveler,
            api_grpc.GravelerServiceStub(channel),
            faults,
            kv,
            slow,
            proxy,
            config,
            tmp_path / "data",
        )
    finally:
        proxy.stop()
        channel.close()
        server.stop(None)
        graveler.close()
        store.close()


def with_gateway(stack: Stack, body: Callable[[Backend], Awaitable[T]]) -> T:
    async def run() -> T:
        backend = Backend(stack.config)
        try:
            return await body(backend)
        finally:
            await backend.close()

    return asyncio.run(run())


async def gateway_put(
    backend: Backend, repo: str, namespace: str, key: str, condition: WriteCondition | None = None
) -> tuple[pb.Entry, BaseException | None]:
    """A PutObject as the gateway does it: new bytes, then their entry staged (the S3 request
    itself, its parsing and authorization, do not matter here)."""
    data = uuid.uuid4().bytes
    address = f"data/{uuid.uuid4().hex}"
    await backend.write_bytes(namespace, address, io.BytesIO(data), len(data))
    entry = pb.Entry(physical_address=address, size=len(data), etag=uuid.uuid4().hex)
    # The S3 request itself (its parsing, its authorization) plays no part in staging.
    ctx = Context(request=None, backend=backend, config=None)  # type: ignore[arg-type]
    try:
        await gateway_stage_new_bytes(ctx, repo, "main", key, entry, RepositoryPlace(namespace, ""), condition)
    except Exception as exc:
        return entry, exc
    return entry, None


def no_entry_without_bytes(stack: Stack, repo: str, namespace: str, keys: list[str]) -> None:
    for key in keys:
        entry = stack.staged(repo, key)
        if entry is not None:
            assert stack.stored(namespace, entry.physical_address), f"{key} points at deleted bytes"


# --- the rule: bytes go only when no attempt may have been applied --------------------------


def test_a_conditional_put_whose_answer_was_lost_is_not_sent_again_and_keeps_its_bytes(stack: Stack) -> None:
    """Graveler applied it and the answer was lost; graveler is reachable again at once. The
    edge does not send it again (it may stand: 503, the client decides), and keeps its bytes."""
    repo, namespace = stack.new_repo()
    stack.faults.lose_answer("StageEntry", then=stack.cut_and_restore)

    entry, error = with_gateway(
        stack, lambda backend: gateway_put(backend, repo, namespace, "k", WriteCondition(if_absent=True))
    )

    assert isinstance(error, S3Error) and error.code == "ServiceUnavailable", error
    assert getattr(error, "not_applied", None) is False
    assert stack.faults.calls.get("StageEntry") == 1
    assert stack.staged(repo, "k") == entry
    assert stack.stored(namespace, entry.physical_address)


def test_a_write_whose_answer_was_lost_is_never_applied_again_over_a_later_acknowledged_write(
    stack: Stack,
) -> None:
    """A is applied and its answer lost; B, another writer's, is acknowledged after; graveler is
    reachable again at once. Sending A again would put it over B, which was acknowledged after
    A landed: the edge answers 503 instead, and B stands."""
    repo, namespace = stack.new_repo()
    other = pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", etag="other")

    def another_writer_then_cut() -> None:
        stack.graveler.stage_entry(repo, "main", "k", other)
        stack.cut_and_restore()

    stack.faults.lose_answer("StageEntry", then=another_writer_then_cut)
    entry, error = with_gateway(stack, lambda backend: gateway_put(backend, repo, namespace, "k"))

    assert isinstance(error, S3Error) and error.code == "ServiceUnavailable", error
    assert getattr(error, "not_applied", None) is False
    assert stack.faults.calls.get("StageEntry") == 1
    assert stack.staged(repo, "k") == other
    assert stack.stored(namespace, entry.physical_address)  # left to garbage collection


def test_a_put_whose_answer_was_lost_keeps_its_bytes_while_graveler_stays_unreachable(stack: Stack) -> None:
    repo, namespace = stack.new_repo()
    stack.faults.lose_answer("StageEntry", then=stack.cut)

    entry, error = with_gateway(stack, lambda backend: gateway_put(backend, repo, namespace, "k"))

    # The retries found graveler unreachable ("connection refused"): that says nothing about the
    # first attempt, which landed.
    assert stack.staged(repo, "k") == entry
    assert stack.stored(namespace, entry.physical_address)
    assert isinstance(error, S3Error) and error.code == "ServiceUnavailable", error


def test_batched_puts_whose_answers_were_lost_keep_their_bytes(stack: Stack) -> None:
    """Concurrent PUTs share StageEntries calls; every call is applied and its answer lost, and
    graveler stays unreachable after the first."""
    repo, namespace = stack.new_repo()
    stack.faults.lose_answer("StageEntry", times=-1, then=stack.cut)
    stack.faults.lose_answer("StageEntries", times=-1, then=stack.cut)
    keys = [f"k{i}" for i in range(8)]

    async def puts(backend: Backend) -> list[tuple[pb.Entry, BaseException | None]]:
        return list(await asyncio.gather(*(gateway_put(backend, repo, namespace, key) for key in keys)))

    results = with_gateway(stack, puts)

    assert stack.faults.applied, "no call was applied"
    staged = [key for key in keys if stack.staged(repo, key) is not None]
    assert staged, "nothing was staged"
    no_entry_without_bytes(stack, repo, namespace, keys)
    assert all(isinstance(error, S3Error) and error.code == "ServiceUnavailable" for _, error in results), results


def test_gravelers_own_unavailable_after_the_write_landed_keeps_the_bytes(stack: Stack) -> None:
    """Graveler's store (Cassandra) answers "connection refused" after the write landed."""
    repo, namespace = stack.new_repo()
    stack.kv.arm(applied=True)

    entry, error = with_gateway(stack, lambda backend: gateway_put(backend, repo, namespace, "k"))

    stack.kv.disarm()
    assert stack.staged(repo, "k") == entry
    assert stack.stored(namespace, entry.physical_address)
    assert isinstance(error, S3Error) and error.code == "ServiceUnavailable", error


def test_the_rest_apis_write_keeps_its_bytes_after_gravelers_own_unavailable(stack: Stack) -> None:
    repo, namespace = stack.new_repo()
    data = b"payload"
    address = f"data/{uuid.uuid4().hex}"
    entry = pb.Entry(physical_address=address, size=len(data), etag="payload")
    request = api.StageEntryRequest(repository=repo, branch="main", key="k", entry=entry)
    stack.kv.arm(applied=True)

    async def put() -> BaseException | None:
        backend = ApiBackend(stack.config)
        try:
            await backend.write_bytes(namespace, address, io.BytesIO(data), len(data))
            ctx = ApiContext(backend=backend, caller=None)  # type: ignore[arg-type]
            try:
                await api_stage_new_bytes(ctx, request, RepositoryPlace(namespace, ""))
            except Exception as exc:
                return exc
            return None
        finally:
            await backend.close()

    error = asyncio.run(put())

    stack.kv.disarm()
    assert stack.staged(repo, "k") == entry
    assert stack.stored(namespace, address)
    assert isinstance(error, ApiError) and error.status == 503, error


def test_the_rest_apis_call_whose_answer_was_lost_is_not_sent_again(stack: Stack) -> None:
    """A delete through the REST API's graveler call: applied, answer lost, graveler reachable
    again at once. Sending it again could delete a later acknowledged write; it is answered 503."""
    repo, _ = stack.new_repo()
    stack.graveler.stage_entry(repo, "main", "k", pb.Entry(physical_address="data/k", etag="k"))
    stack.faults.lose_answer("DeleteEntry", then=stack.cut_and_restore)

    async def delete() -> BaseException | None:
        backend = ApiBackend(stack.config)
        try:
            await backend.call(
                backend.graveler.DeleteEntry, api.DeleteEntryRequest(repository=repo, branch="main", key="k")
            )
        except Exception as exc:
            return exc
        finally:
            await backend.close()
        return None

    error = asyncio.run(delete())

    assert isinstance(error, ApiError) and error.status == 503, error
    assert stack.faults.calls.get("DeleteEntry") == 1
    assert stack.staged(repo, "k") is None


def test_a_guard_left_by_a_failed_conditional_put_never_completes_an_entry_without_bytes(stack: Stack) -> None:
    """The conditional writer's guard is written, its value never is (the store fails after the
    guard, with "connection refused", on every attempt). The next conditional writer of the key
    finishes the write from the guard (StagingStore.read_for_write): its bytes must still be
    there."""
    repo, namespace = stack.new_repo()
    stack.kv.arm(applied=False)

    entry, error = with_gateway(
        stack, lambda backend: gateway_put(backend, repo, namespace, "k", WriteCondition(if_absent=True))
    )

    stack.kv.disarm()
    assert isinstance(error, S3Error), error
    assert stack.kv.faulted >= 1
    assert stack.staged(repo, "k") is None  # the guard only, so far

    # The next conditional writer finishes the guarded write, and its own condition fails on it.
    with pytest.raises(grpc.RpcError) as refused:
        stack.stub.StageEntry(
            api.StageEntryRequest(
                repository=repo,
                branch="main",
                key="k",
                entry=pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", etag="next"),
                if_absent=True,
            )
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert stack.staged(repo, "k") == entry
    assert stack.stored(namespace, entry.physical_address)
    assert error.code == "ServiceUnavailable", error


class Authorized(Context):
    """A request already authorized: auth plays no part here."""

    async def authorize(self, action: str, repository: str) -> None:
        return None

    async def authorize_key(self, action: str, repository: str, key: str, branch: str = "") -> None:
        return None

    async def key_scope(self, action: str, repository: str, branch: str = "") -> KeyScope:
        return whole(repository)


def s3_request(repo: str, path: str, query: str = "", body: bytes = b"", **headers: str) -> Request:
    """An S3 request as the gateway's router hands it to an operation."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(
        method="POST",
        raw_path=f"/{repo}/{path}",
        query_string=query,
        query=parse_query(query),
        headers={"content-length": str(len(body)), **{k.replace("_", "-"): v for k, v in headers.items()}},
        host="localhost",
        body=Body(receive),
        bucket=repo,
        path=path,
    )


def _complete_body(etag: str) -> bytes:
    part = f"<Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part>"
    return f"<CompleteMultipartUpload>{part}</CompleteMultipartUpload>".encode()


def test_a_conditional_complete_retried_after_a_lost_answer_meets_its_own_entry(stack: Stack) -> None:
    """CompleteMultipartUpload with If-None-Match: its entry landed, the answer was lost and
    graveler stayed unreachable (503). Composing consumed the parts; the client's retry of the
    same Complete stages the composed object again, and graveler takes the entry it finds as
    this write's own: success. A Complete naming other parts after composition is InvalidPart."""
    repo, namespace = stack.new_repo()

    async def first(backend: Backend) -> tuple[str, str, BaseException | None]:
        def ctx(request: Request) -> Authorized:
            return Authorized(request=request, backend=backend, config=S3GatewayConfig())

        created = await multipart.create(ctx(s3_request(repo, "main/k", "uploads=")))
        match = re.search(rb"<UploadId>([0-9a-f]+)</UploadId>", created.body)
        assert match is not None, created.body
        upload_id = match.group(1).decode()
        part = await multipart.upload_part(
            ctx(s3_request(repo, "main/k", f"partNumber=1&uploadId={upload_id}", b"part one"))
        )
        etag = dict(part.headers)["ETag"]
        stack.faults.lose_answer("StageEntry", then=stack.cut)
        query = f"uploadId={upload_id}"
        try:
            await multipart.complete(ctx(s3_request(repo, "main/k", query, _complete_body(etag), if_none_match="*")))
        except S3Error as exc:
            return upload_id, etag, exc
        return upload_id, etag, None

    upload_id, etag, error = with_gateway(stack, first)
    assert isinstance(error, S3Error) and error.code == "ServiceUnavailable", error
    landed = stack.staged(repo, "k")
    assert landed is not None
    stack.proxy.start()

    async def retry(backend: Backend) -> Response:
        def ctx(body: bytes) -> Authorized:
            request = s3_request(repo, "main/k", f"uploadId={upload_id}", body, if_none_match="*")
            return Authorized(request=request, backend=backend, config=S3GatewayConfig())

        with pytest.raises(S3Error) as other:
            await multipart.complete(ctx(_complete_body('"0123456789abcdef0123456789abcdef"')))
        assert other.value.code == "InvalidPart"
        return await multipart.complete(ctx(_complete_body(etag)))

    answer = with_gateway(stack, retry)
    assert answer.status == 200 and b"<CompleteMultipartUploadResult" in answer.body
    staged = stack.staged(repo, "k")
    assert staged is not None and staged.physical_address == landed.physical_address
    assert staged.size == len(b"part one")
    assert stack.stored(namespace, staged.physical_address)


# --- a conditional write that meets its own entry ----------------------------------------


def _conditional(repo: str, entry: pb.Entry, fresh_address: bool) -> api.StageEntryRequest:
    return api.StageEntryRequest(
        repository=repo, branch="main", key="k", entry=entry, if_absent=True, fresh_address=fresh_address
    )


def _entry(address: str, modified: int, **fields: Any) -> pb.Entry:
    entry = pb.Entry(physical_address=address, size=7, etag="e", content_type="text/plain", **fields)
    entry.last_modified.FromSeconds(modified)
    return entry


def test_a_retry_of_a_write_of_fresh_bytes_meets_its_own_entry_and_succeeds(stack: Stack) -> None:
    """An attempt landed (its answer lost); the retry resends the same entry, stamped anew."""
    repo, _ = stack.new_repo()
    stack.stub.StageEntry(_conditional(repo, _entry("data/mine", 100), fresh_address=True))
    stack.stub.StageEntry(_conditional(repo, _entry("data/mine", 200), fresh_address=True))
    assert stack.staged(repo, "k") == _entry("data/mine", 100)


def test_another_write_linking_the_same_address_is_refused(stack: Stack) -> None:
    """The REST API links client-chosen addresses (an import prefix many writes share): an equal
    entry there is not proof of being the same write. If-None-Match: * refuses it."""
    repo, _ = stack.new_repo()
    stack.stub.StageEntry(_conditional(repo, _entry("data/shared", 100), fresh_address=False))
    with pytest.raises(grpc.RpcError) as refused:
        stack.stub.StageEntry(_conditional(repo, _entry("data/shared", 100), fresh_address=False))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_an_entry_at_the_same_address_that_differs_is_not_the_writes_own(stack: Stack) -> None:
    repo, _ = stack.new_repo()
    stack.stub.StageEntry(_conditional(repo, _entry("data/mine", 100), fresh_address=True))
    other = _entry("data/mine", 100, metadata={"x-amz-meta-who": "another"})
    with pytest.raises(grpc.RpcError) as refused:
        stack.stub.StageEntry(_conditional(repo, other, fresh_address=True))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


# --- per-entry deadlines ------------------------------------------------------------------


def test_an_entry_whose_own_time_ran_out_before_graveler_wrote_it_is_not_staged(stack: Stack) -> None:
    """StageEntries over gRPC: graveler takes 200 ms before it writes; an entry whose time ends
    10 ms after the call's arrival (slack_ms before the call's 30 s; gRPC may round that up by
    up to 100 ms) is skipped (RESULT_EXPIRED), the other staged."""
    repo, _ = stack.new_repo()
    request = api.StageEntriesRequest(repository=repo, branch="main")
    request.entries.add(key="short", entry=pb.Entry(physical_address="data/short", etag="s"), slack_ms=29_990)
    request.entries.add(key="long", entry=pb.Entry(physical_address="data/long", etag="l"), slack_ms=0)
    stack.slow.pause = 0.2

    outcomes = stack.stub.StageEntries(request, timeout=30).outcomes

    stack.slow.pause = 0.0
    assert [o.result for o in outcomes] == [
        api.StageEntryOutcome.RESULT_EXPIRED,
        api.StageEntryOutcome.RESULT_STAGED,
    ]
    assert stack.staged(repo, "short") is None
    assert stack.staged(repo, "long") is not None


def test_a_stage_entry_whose_deadline_passed_before_its_write_is_never_written(stack: Stack) -> None:
    """The call's deadline passes while graveler reads the branch: the write is not made, so
    nothing lands after its caller was told DEADLINE_EXCEEDED."""
    repo, _ = stack.new_repo()
    let_go = stack.slow.held = threading.Event()  # until the caller has been told
    try:
        with pytest.raises(grpc.RpcError) as late:
            stack.stub.StageEntry(
                api.StageEntryRequest(
                    repository=repo, branch="main", key="late", entry=pb.Entry(physical_address="data/late")
                ),
                timeout=0.2,
            )
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        stack.slow.held = None
        let_go.set()
    stack.faults.wait_done("StageEntry", 1)  # graveler's handler went on after its client gave up
    assert stack.staged(repo, "late") is None


# --- a graveler older than StageEntries ---------------------------------------------------


def test_stage_entries_falls_back_to_stage_entry_on_a_graveler_without_it(stack: Stack) -> None:
    repo, namespace = stack.new_repo()
    stack.faults.unimplemented("StageEntries")

    async def round_of(backend: Backend, prefix: str) -> list[tuple[pb.Entry, BaseException | None]]:
        return list(await asyncio.gather(*(gateway_put(backend, repo, namespace, f"{prefix}{i}") for i in range(8))))

    refused_in_first_round = 0

    async def rounds(backend: Backend) -> tuple[list[Any], list[Any]]:
        nonlocal refused_in_first_round
        first = await round_of(backend, "a")
        refused_in_first_round = stack.faults.calls.get("StageEntries", 0)
        return first, await round_of(backend, "b")

    first, second = with_gateway(stack, rounds)

    assert [error for _, error in first + second] == [None] * 16
    for prefix, results in (("a", first), ("b", second)):
        for i, (entry, _) in enumerate(results):
            assert stack.staged(repo, f"{prefix}{i}") == entry
    # Refused (by each call in flight before the first refusal came back); the edge then
    # remembers and sends StageEntry calls only.
    assert refused_in_first_round >= 1
    assert stack.faults.calls.get("StageEntries") == refused_in_first_round
    assert stack.faults.calls.get("StageEntry", 0) >= 15
