"""Each S3 object operation asks auth once per repository it touches (for an object operation,
the key scope of its action: silt/key_scope.py), and costs the graveler
calls its answer needs: a gateway app served in this process as the edge composes it (uvicorn,
the real Backend against the stack's auth and graveler processes, graveler's reader over the
stack's KV store) with its authorizer, graveler stub and direct reads counted."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import secrets
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config as BotoConfig

from edge.gateway.app import GatewayApp
from edge.gateway.backend import Backend
from engine.core.refs.manager import BranchRecord
from engine.open import open_engine
from silt.config import load_config
from silt.graveler.v1 import graveler_pb2 as api
from silt.kv.store import Predicate
from tests.support.gateway_stack import GatewayStack
from tests.support.in_process import served_in_process

pytestmark = pytest.mark.e2e


class Counted:
    """A served gateway whose Backend counts authorize calls (action, resource; a key scope's
    (object action, repository)) and graveler calls
    (every one goes through the edge core's graveler_call)."""

    def __init__(self, app: GatewayApp, endpoint: str) -> None:
        self.app = app
        self.endpoint = endpoint
        self.authorized: list[tuple[str, str]] = []
        self.graveler: collections.Counter[str] = collections.Counter()
        self.direct: collections.Counter[str] = collections.Counter()
        # The direct reads made on the event loop itself rather than in a worker thread.
        self.on_the_loop: collections.Counter[str] = collections.Counter()
        # Each StatEntry: whether it ran on the loop, and whether it was allowed to wait.
        self.stats: list[tuple[bool, bool]] = []
        self.real_reads: Any = None

    def instrument(self, backend: Backend) -> None:
        real_allowed = backend.allowed
        real_scope = backend.key_scope
        real_call = backend.graveler_call
        assert backend.reads is not None
        real_reads = backend.reads
        self.real_reads = real_reads
        counted = self

        class CountedReads:
            """The reader's point reads and listings, counted where they run."""

            def __getattr__(self, name: str) -> Any:
                method = getattr(real_reads, name)
                if name not in ("StatEntry", "ListEntries", "GetNeutralEntry"):
                    return method

                def read(request: Any, **kwargs: Any) -> Any:
                    counted.direct[name] += 1
                    try:
                        asyncio.get_running_loop()
                        on_the_loop = True
                        counted.on_the_loop[name] += 1
                    except RuntimeError:
                        on_the_loop = False  # a worker thread
                    if name == "StatEntry":
                        counted.stats.append((on_the_loop, kwargs.get("wait", True)))
                    return method(request, **kwargs)

                return read

        async def allowed(user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
            self.authorized.append((action, resource))
            return await real_allowed(user_id, action, resource, source_ip)

        async def key_scope(user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> Any:
            self.authorized.append((action, repository))
            return await real_scope(user_id, action, repository, branch, source_ip)

        async def call(method: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            self.graveler[type(request).__name__.removesuffix("Request")] += 1
            return await real_call(method, request, *args, **kwargs)

        backend.allowed = allowed  # type: ignore[method-assign]
        backend.key_scope = key_scope  # type: ignore[method-assign]
        backend.graveler_call = call  # type: ignore[method-assign]
        backend.reads = CountedReads()

    def reset(self) -> None:
        self.authorized.clear()
        self.graveler.clear()
        self.direct.clear()
        self.on_the_loop.clear()
        self.stats.clear()


@pytest.fixture(scope="module")
def counted(gw: GatewayStack) -> Iterator[Counted]:
    gateway_env = gw.stack._services["gateway"].env
    config = load_config(gw.stack.config_path, env=gateway_env)
    app = GatewayApp(config, lambda: open_engine(config, "reader"))
    with served_in_process(app, "the in-process gateway to start") as endpoint:
        served = Counted(app, endpoint)
        assert app.backend is not None
        served.instrument(app.backend)
        yield served


def _client(gw: GatewayStack, endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=gw.admin.access_key_id,
        aws_secret_access_key=gw.admin.secret_access_key.get_secret_value(),
        region_name=gw.region,
        config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"),
    )


def test_put_authorizes_once_and_stages_with_one_graveler_call(gw: GatewayStack, counted: Counted) -> None:
    s3 = _client(gw, counted.endpoint)
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"caches the namespace and the branch")
    counted.reset()
    s3.put_object(Bucket=bucket, Key="main/a.txt", Body=b"x" * 4096)
    assert counted.authorized == [("WriteObject", bucket)]
    assert counted.graveler == {"StageEntry": 1}
    counted.reset()
    # The branch root marker S3A writes is a PUT too: authorized once as well.
    s3.put_object(Bucket=bucket, Key="main/", Body=b"")
    assert counted.authorized == [("WriteObject", bucket)]
    assert counted.graveler == {}


def test_reads_and_copies_authorize_each_repository_once(gw: GatewayStack, counted: Counted) -> None:
    s3 = _client(gw, counted.endpoint)
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/a.txt", Body=b"payload")
    counted.reset()
    assert s3.get_object(Bucket=bucket, Key="main/a.txt")["Body"].read() == b"payload"
    s3.head_object(Bucket=bucket, Key="main/a.txt")
    # HEAD and GET call graveler not at all: the gateway resolves the ref and reads the entry
    # itself, in one read, on its event loop (this stack's KV and objects are on local disk).
    assert counted.authorized == [("ReadObject", bucket), ("ReadObject", bucket)]
    assert counted.graveler == {}
    assert counted.direct == {"StatEntry": 2}
    assert counted.on_the_loop == {"StatEntry": 2}
    counted.reset()
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]] == ["main/a.txt"]
    assert counted.graveler == {}
    assert counted.direct == {"ListEntries": 1}
    assert counted.on_the_loop == {}, "a listing's page may be long work: it runs in a worker thread"
    counted.reset()
    s3.copy_object(Bucket=bucket, Key="main/b.txt", CopySource={"Bucket": bucket, "Key": "main/a.txt"})
    assert counted.authorized == [("ReadObject", bucket), ("WriteObject", bucket)]
    assert s3.get_object(Bucket=bucket, Key="main/b.txt")["Body"].read() == b"payload"


def test_a_get_whose_read_on_the_loop_meets_a_branch_change_is_read_again_in_a_thread(
    gw: GatewayStack, counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop's read is not allowed to wait: when the branch changes under it (as a commit
    makes it), it gives up and the gateway reads again in a worker thread, where the reader may
    back off; the client sees one ordinary answer."""
    s3 = _client(gw, counted.endpoint)
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/a.txt", Body=b"payload")
    refs = counted.real_reads.refs
    fresh_branch = refs.fresh_branch
    raced: list[str] = []

    def changed_once(repo: Any, name: str) -> BranchRecord:
        record: BranchRecord = fresh_branch(repo, name)
        if raced:
            return record
        raced.append(name)
        return dataclasses.replace(record, predicate=Predicate(record.predicate + b"-changed"))

    monkeypatch.setattr(refs, "fresh_branch", changed_once)
    counted.reset()
    assert s3.get_object(Bucket=bucket, Key="main/a.txt")["Body"].read() == b"payload"
    assert raced == ["main"]
    assert counted.stats == [(True, False), (False, True)]
    assert counted.graveler == {}


def test_a_refused_put_writes_nothing_and_asks_once(gw: GatewayStack, counted: Counted) -> None:
    s3 = _client(gw, counted.endpoint)
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    reader = boto3.client(
        "s3",
        endpoint_url=counted.endpoint,
        aws_access_key_id=gw.reader.access_key_id,
        aws_secret_access_key=gw.reader.secret_access_key.get_secret_value(),
        region_name=gw.region,
        config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"),
    )
    counted.reset()
    with pytest.raises(reader.exceptions.ClientError) as refused:
        reader.put_object(Bucket=bucket, Key="main/nope", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert counted.authorized == [("WriteObject", bucket)]
    assert counted.graveler == {}  # refused before the target was resolved or a byte was written


def test_delete_objects_is_one_graveler_call_per_branch(gw: GatewayStack, counted: Counted) -> None:
    s3 = _client(gw, counted.endpoint)
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    for name in ("a", "b", "c"):
        s3.put_object(Bucket=bucket, Key=f"main/dir/{name}", Body=name.encode())
    counted.reset()
    keys = ["main/dir/a", "main/dir/b", "main/dir/c", "main/dir/missing", "main/", "main/dir/a"]
    answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    assert counted.authorized == [("DeleteObject", bucket)]
    assert counted.graveler == {"DeleteEntries": 1}
    assert sorted(d["Key"] for d in answer["Deleted"]) == sorted(keys)
    assert "Errors" not in answer
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/dir/")


def test_delete_objects_asks_auth_only_about_branch_names_and_at_most_ten(gw: GatewayStack, counted: Counted) -> None:
    s3 = _client(gw, counted.endpoint)
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/a", Body=b"a")
    counted.reset()
    # Names no branch can have: each key refused for its name, auth asked about main alone.
    misnamed = ["a..b/k", "-x/k", "x@y/k", "a b/k", "main~1/k", "0" * 64 + "/k", "/k"]
    answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in ["main/a", *misnamed]]})
    assert counted.authorized == [("DeleteObject", bucket)]
    assert [d["Key"] for d in answer["Deleted"]] == ["main/a"]
    codes = [(e["Key"], e["Code"]) for e in answer["Errors"]]
    assert codes == [(k, "MethodNotAllowed") for k in misnamed[:-1]] + [("/k", "InvalidArgument")]
    counted.reset()
    answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in misnamed]})
    assert counted.authorized == [] and counted.graveler == {}
    assert len(answer["Errors"]) == len(misnamed)
    counted.reset()
    # Ten branches (none of them there but main) are asked about one by one; eleven are refused whole.
    ten = ["main/a", *(f"b{i}/k" for i in range(9))]
    answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in ten]})
    assert counted.authorized == [("DeleteObject", bucket)] * 10
    assert [d["Key"] for d in answer["Deleted"]] == ["main/a"]
    counted.reset()
    with pytest.raises(s3.exceptions.ClientError) as refused:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in [*ten, "b9/k", "b9/other"]]})
    assert refused.value.response["Error"]["Code"] == "MalformedXML"
    assert "at most 10 branches" in refused.value.response["Error"]["Message"]
    assert counted.authorized == [] and counted.graveler == {}


def test_without_direct_reads_a_read_is_one_graveler_call(gw: GatewayStack) -> None:
    """gateways.s3.direct_reads: false (or the mem driver): the same answers, by StatEntry and
    ListEntries calls."""
    s3 = gw.client()
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/a.txt", Body=b"payload")
    config = load_config(gw.stack.config_path, env={**gw.stack._services["gateway"].env})
    s3_section = config.gateways.s3.model_copy(update={"direct_reads": False})
    off = config.model_copy(update={"gateways": config.gateways.model_copy(update={"s3": s3_section})})
    assert open_engine(off, "reader") is None

    async def read() -> tuple[str, list[str]]:
        backend = Backend(config)
        calls: collections.Counter[str] = collections.Counter()
        real_call = backend.graveler_call

        async def call(method: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            calls[type(request).__name__.removesuffix("Request")] += 1
            return await real_call(method, request, *args, **kwargs)

        backend.graveler_call = call  # type: ignore[method-assign]
        try:
            stat = await backend.stat_entry(api.StatEntryRequest(repository=bucket, ref="main", key="a.txt"))
            page = await backend.list_entries(api.ListEntriesRequest(repository=bucket, ref="main"))
        finally:
            await backend.close()
        assert calls == {"StatEntry": 1, "ListEntries": 1}
        return stat.entry.etag, [item.key for item in page.items]

    etag, keys = asyncio.run(read())
    assert etag == hashlib.md5(b"payload").hexdigest() and keys == ["a.txt"]


def test_ref_neutral_put_and_get_cost_one_call_each(gw: GatewayStack, counted: Counted) -> None:
    """A write through `@<branch>/<key>` is one StageEntry (the key recorded in it, never batched
    with others); a read of it is one read of the record in this process, no graveler call."""
    s3 = _client(gw, counted.endpoint)
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"caches the namespace and the branch")
    counted.reset()
    s3.put_object(Bucket=bucket, Key="@main/db/t/data/f.parquet", Body=b"x" * 4096)
    assert counted.authorized == [("WriteObject", bucket)]
    assert counted.graveler == {"StageEntry": 1}
    counted.reset()
    assert s3.get_object(Bucket=bucket, Key="@gone/db/t/data/f.parquet")["Body"].read() == b"x" * 4096
    assert counted.authorized == [("ReadObject", bucket)]
    assert counted.graveler == {}
    assert counted.direct == {"GetNeutralEntry": 1}
