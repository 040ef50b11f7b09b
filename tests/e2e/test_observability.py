"""Observability end to end: traces across the services reach a real OTLP receiver, metrics
are scraped over HTTP, request ids reach every service's log, health answers probes."""

from __future__ import annotations

import contextlib
import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from silt.free_ports import free_port
from silt.graveler.v1 import graveler_pb2 as gapi
from tests.e2e.conftest import Silt
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.otlp import OtlpReceiver, ReceivedSpan, environment, otel_env
from tests.support.wait import wait_until

SERVER, CLIENT = 2, 3  # OTLP span kinds


@dataclass
class Observed:
    stack: GatewayStack
    receiver: OtlpReceiver
    metrics: dict[str, int]  # service -> metrics port


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    ports = {name: free_port() for name in ("auth", "graveler", "gateway")}
    overrides = {
        "logging": {"format": "json"},
        # Storage calls traced too: these tests follow a request down to its KV and block calls.
        "telemetry": {"tracing": True, "trace_storage_calls": True, "health_check_interval_seconds": 0.5},
        # Uncached: every request then calls auth, so its trace and log must show it.
        "auth": {"cache_ttl_seconds": 0, "metrics_listen_address": f"127.0.0.1:{ports['auth']}"},
        "graveler": {"metrics_listen_address": f"127.0.0.1:{ports['graveler']}"},
        "gateways": {"s3": {"metrics_listen_address": f"127.0.0.1:{ports['gateway']}"}},
    }
    with OtlpReceiver() as receiver:
        data_dir = Path(tmp_path_factory.mktemp("observed"))
        with environment(otel_env(receiver)), gateway_stack(data_dir, log_level="DEBUG", overrides=overrides) as stack:
            yield Observed(stack, receiver, ports)


def _s3(observed: Observed) -> object:
    # Plain (not aws-chunked) bodies, so bytes received equal the object's size.
    return observed.stack.client(request_checksum_calculation="when_required")


def _ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[ReceivedSpan]:
    chain = []
    while span.parent_span_id in by_id:
        span = by_id[span.parent_span_id]
        chain.append(span)
    return chain


def test_one_put_is_one_trace_from_gateway_through_auth_and_graveler_to_kv(observed: Observed) -> None:
    s3 = _s3(observed)
    s3.create_bucket(Bucket="traced")  # type: ignore[attr-defined]
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)

    def traceparent(request: object, **_: object) -> None:
        request.headers["traceparent"] = f"00-{trace_id}-{caller_span}-01"  # type: ignore[attr-defined]

    s3.meta.events.register("before-send.s3.PutObject", traceparent)  # type: ignore[attr-defined]
    s3.put_object(Bucket="traced", Key="main/data/a.csv", Body=b"a,b\n1,2\n")  # type: ignore[attr-defined]

    def complete(spans: list[ReceivedSpan]) -> bool:
        mine = [s for s in spans if s.trace_id == trace_id]
        names = {(s.service, s.name) for s in mine}
        return (
            ("silt-gateway", "S3 PutObject") in names
            and ("silt-graveler", "/silt.graveler.v1.GravelerService/StageEntry") in names
            and any(s.service == "silt-auth" and s.kind == SERVER for s in mine)
            and any(s.service == "silt-graveler" and s.name.startswith("kv.") for s in mine)
        )

    spans = [s for s in observed.receiver.wait_for(complete) if s.trace_id == trace_id]
    by_id = {s.span_id: s for s in spans}

    # One root: the gateway's server span, a child of the caller's span from traceparent.
    root = next(s for s in spans if s.name == "S3 PutObject")
    assert root.service == "silt-gateway" and root.kind == SERVER
    assert root.parent_span_id == caller_span
    assert root.attributes["s3.operation"] == "PutObject"
    assert root.attributes["s3.bucket"] == "traced"
    assert root.attributes["silt.ref"] == "main"
    assert root.attributes["http.response.status_code"] == 200
    # Every other span hangs off a span of this trace: no broken parent links.
    for span in spans:
        if span is not root:
            assert span.parent_span_id in by_id, f"{span.service} {span.name} has an unknown parent"
            assert root in _ancestors(span, by_id)

    stage = next(s for s in spans if s.name.endswith("GravelerService/StageEntry") and s.service == "silt-graveler")
    assert stage.kind == SERVER
    assert by_id[stage.parent_span_id].service == "silt-gateway"
    assert by_id[stage.parent_span_id].kind == CLIENT

    auth_server = [s for s in spans if s.service == "silt-auth" and s.kind == SERVER]
    assert all(by_id[s.parent_span_id].kind == CLIENT for s in auth_server)
    assert any(by_id[s.parent_span_id].service == "silt-gateway" for s in auth_server)

    kv_in_stage = [
        s for s in spans if s.service == "silt-graveler" and s.name.startswith("kv.") and stage in _ancestors(s, by_id)
    ]
    assert kv_in_stage, "graveler's KV calls for the staged write are not in the trace"
    assert {s.attributes["db.system.name"] for s in kv_in_stage} == {"local"}
    assert {s.attributes["db.operation.name"] for s in kv_in_stage} <= {
        "get",
        "get_many",
        "set",
        "set_if",
        "delete",
        "scan",
        "apply",
    }
    assert any(s.service == "silt-auth" and s.name.startswith("kv.") for s in spans)
    assert any(s.service == "silt-gateway" and s.name == "block.put" for s in spans)

    # Never a secret: no attribute anywhere carries the secret key or the signature.
    secret = observed.stack.admin.secret_access_key.get_secret_value()
    for span in spans:
        for value in span.attributes.values():
            # "Signature=" (an Authorization header or a presigned query), not the RPC name VerifyS3Signature.
            assert secret not in str(value) and "Signature=" not in str(value)


def _trace_of(receiver: OtlpReceiver, root: ReceivedSpan) -> list[ReceivedSpan]:
    # Spans arrive in batches per process: wait for the server span of every call the trace made
    # (a GET makes none to graveler: the gateway reads the entry itself).
    def arrived(spans: list[ReceivedSpan]) -> bool:
        mine = [s for s in spans if s.trace_id == root.trace_id]
        served = {s.parent_span_id for s in mine if s.kind == SERVER}
        return all(s.span_id in served for s in mine if s.kind == CLIENT)

    return [s for s in receiver.wait_for(arrived) if s.trace_id == root.trace_id]


def test_by_default_a_traced_request_is_a_handful_of_spans_in_one_trace(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        overrides = {"telemetry": {"tracing": True}}
        with environment(otel_env(receiver)), gateway_stack(tmp_path / "data", overrides=overrides) as stack:
            s3 = stack.client(request_checksum_calculation="when_required")
            s3.create_bucket(Bucket="lean")
            s3.put_object(Bucket="lean", Key="main/a", Body=b"a")
            s3.put_object(Bucket="lean", Key="main/b", Body=b"b")
            for _ in range(2):
                assert s3.get_object(Bucket="lean", Key="main/a")["Body"].read() == b"a"

            def roots(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
                return [s for s in spans if s.name in ("S3 PutObject", "S3 GetObject")]

            traced = sorted(
                roots(receiver.wait_for(lambda ss: len(roots(ss)) == 4)), key=lambda s: s.attributes["silt.request_id"]
            )
            for root in traced:
                spans = _trace_of(receiver, root)
                by_id = {s.span_id: s for s in spans}
                shape = [(s.service, s.name) for s in spans]
                assert root.parent_span_id == "" and root.service == "silt-gateway"
                # The S3 span and a client and a server span per gRPC call, each hanging off
                # the span that made the call: no span per KV or object-store call unless
                # telemetry.trace_storage_calls asks for them.
                for span in spans:
                    if span is root:
                        continue
                    assert span.attributes["rpc.system"] == "grpc", shape
                    parent = by_id[span.parent_span_id]
                    if span.kind == SERVER:
                        assert parent.kind == CLIENT and parent.name == span.name, shape
                        assert span.attributes["rpc.grpc.status_code"] == 0
                    else:
                        assert span.kind == CLIENT and (parent is root or parent.kind == SERVER), shape
                served_by = {s.service for s in spans if s.kind == SERVER}
                if root.name == "S3 PutObject":
                    assert "silt-graveler" in served_by, shape
                else:  # the gateway reads the entry itself (gateways.s3.direct_reads)
                    assert "silt-graveler" not in served_by, shape
                # Nothing else: one span per request, two per gRPC call it causes.
                clients = [s for s in spans if s.kind == CLIENT]
                assert len(spans) == 1 + 2 * len(clients), shape


def test_a_commit_traces_the_build(observed: Observed) -> None:
    s3 = _s3(observed)
    s3.create_bucket(Bucket="built")  # type: ignore[attr-defined]
    s3.put_object(Bucket="built", Key="main/x", Body=b"x")  # type: ignore[attr-defined]
    observed.stack.graveler.Commit(gapi.CommitRequest(repository="built", branch="main", message="m"), timeout=30)

    def built(spans: list[ReceivedSpan]) -> bool:
        # The Commit's server span ends after the build span, and may come in a later batch.
        builds = [s for s in spans if s.name == "graveler.commit.build"]
        return bool(builds) and any(s.span_id == builds[0].parent_span_id for s in spans)

    spans = observed.receiver.wait_for(built)
    build = next(s for s in spans if s.name == "graveler.commit.build")
    assert build.service == "silt-graveler" and build.attributes["silt.commit.entries"] == 1
    parent = next(s for s in spans if s.span_id == build.parent_span_id)
    assert parent.name.endswith("GravelerService/Commit") and parent.kind == SERVER


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _delta(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_count_exactly_what_was_done(observed: Observed) -> None:
    s3 = _s3(observed)
    s3.create_bucket(Bucket="counted")  # type: ignore[attr-defined]
    before = {name: _scrape(port) for name, port in observed.metrics.items()}
    body = b"x" * 1000
    for i in range(3):
        s3.put_object(Bucket="counted", Key=f"main/k{i}", Body=body)  # type: ignore[attr-defined]
    assert s3.get_object(Bucket="counted", Key="main/k0")["Body"].read() == body  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="NoSuchKey"):
        s3.get_object(Bucket="counted", Key="main/missing")  # type: ignore[attr-defined]
    observed.stack.graveler.Commit(gapi.CommitRequest(repository="counted", branch="main", message="m"), timeout=30)
    after = {name: _scrape(port) for name, port in observed.metrics.items()}

    gw_before, gw_after = before["gateway"], after["gateway"]
    assert _delta(gw_before, gw_after, "silt_s3_requests_total", operation="PutObject", status="200") == 3
    assert _delta(gw_before, gw_after, "silt_s3_requests_total", operation="GetObject", status="200") == 1
    assert _delta(gw_before, gw_after, "silt_s3_requests_total", operation="GetObject", status="404") == 1
    assert _delta(gw_before, gw_after, "silt_s3_received_bytes_total", operation="PutObject") == 3000
    assert _delta(gw_before, gw_after, "silt_s3_sent_bytes_total", operation="GetObject") >= 1000
    assert _delta(gw_before, gw_after, "silt_s3_request_duration_seconds_count", operation="PutObject") == 3
    # The gateway's own KV (multipart uploads) was not touched by simple PUTs.
    assert _delta(gw_before, gw_after, "silt_kv_operations_total", driver="local", operation="set") == 0

    gv_before, gv_after = before["graveler"], after["graveler"]
    assert _delta(gv_before, gv_after, "silt_graveler_staging_writes_total", kind="put") == 3
    stage = {"service": "silt.graveler.v1.GravelerService", "method": "StageEntry"}
    assert _delta(gv_before, gv_after, "silt_grpc_server_handled_total", **stage, code="OK") == 3
    assert _delta(gv_before, gv_after, "silt_grpc_server_handling_seconds_count", **stage) == 3
    assert _delta(gv_before, gv_after, "silt_graveler_commits_total") == 1
    assert _delta(gv_before, gv_after, "silt_graveler_commit_entries_total") == 3
    assert _delta(gv_before, gv_after, "silt_graveler_commit_ranges_written_total") >= 1
    assert _delta(gv_before, gv_after, "silt_graveler_commit_sealed_tokens_count") == 1
    assert (
        _delta(gv_before, gv_after, "silt_kv_operations_total", driver="local", operation="apply") >= 1
    )  # journaled: a write and its record in one apply

    au_before, au_after = before["auth"], after["auth"]
    # At least one AuthorizeMany per S3 request that reached authorization (cache TTL 0 at the
    # gateway, whose cached authority asks AuthorizeMany like every service's); graveler
    # authorizes the calls it serves too, through a cache whose expiry falls where the scheduler
    # puts it, so the total is a lower bound, not an exact count.
    authorized = sum(
        _delta(
            au_before,
            au_after,
            "silt_grpc_server_handled_total",
            service="silt.auth.v1.AuthService",
            method=method,
            code="OK",
        )
        for method in ("Authorize", "AuthorizeMany")
    )
    assert authorized >= 5
    # Decisions count cached answers as well as Authorize calls.
    assert _delta(au_before, au_after, "silt_auth_decisions_total", decision="allow") >= authorized


def test_request_id_reaches_every_services_log_and_the_access_log(observed: Observed) -> None:
    s3 = _s3(observed)
    s3.create_bucket(Bucket="logged")  # type: ignore[attr-defined]
    reply = s3.put_object(Bucket="logged", Key="main/secret-plans.txt", Body=b"12345")  # type: ignore[attr-defined]
    request_id = reply["ResponseMetadata"]["RequestId"]
    assert reply["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"] == request_id
    logs = observed.stack.stack.logs_dir

    def lines(service: str) -> list[dict]:
        out = []
        for line in (logs / f"{service}.log").read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return [x for x in out if isinstance(x, dict) and x.get("request_id") == request_id]

    # The access line is written once the response has gone out, so it may trail the reply.
    access = wait_until(
        lambda: [x for x in lines("gateway") if x.get("logger") == "silt.access"], 10, "the access line written"
    )
    assert len(access) == 1
    line = access[0]
    assert line["operation"] == "PutObject" and line["status"] == 200 and line["error_code"] == ""
    assert line["bucket"] == "logged" and line["ref"] == "main" and line["key"] == "secret-plans.txt"
    assert line["user"] == "admin" and line["bytes_in"] == 5 and line["duration_ms"] > 0
    assert len(line["trace_id"]) == 32
    secret = observed.stack.admin.secret_access_key.get_secret_value()
    assert secret not in (logs / "gateway.log").read_text()
    assert any("StageEntry" in x["message"] for x in lines("graveler"))
    assert any("Authorize" in x["message"] for x in lines("auth"))


def _health(endpoint: str) -> int:
    with grpc.insecure_channel(endpoint) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)  # type: ignore[attr-defined]
        return int(reply.status)


def _http(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_health_answers_unauthenticated_probes(observed: Observed, tmp_path: Path) -> None:
    endpoints = observed.stack.stack.endpoints
    assert _health(endpoints["auth"]) == health_pb2.HealthCheckResponse.SERVING
    assert _health(endpoints["graveler"]) == health_pb2.HealthCheckResponse.SERVING
    gateway = endpoints["gateway"]
    assert _http(f"{gateway}/_silt/health/live") == (200, {"status": "live"})
    assert _http(f"{gateway}/_silt/health/ready") == (200, {"status": "ready"})
    # What each dependency's state was is for the operator's metrics, not the anonymous answer.
    scraped = _scrape(observed.metrics["gateway"])
    for dependency in ("auth", "graveler", "kv"):
        assert scraped[("silt_gateway_dependency_up", (("dependency", dependency),))] == 1.0
    # Only health is open: the S3 API next to it still wants a signature.
    status, _ = _http_raw(f"{gateway}/")
    assert status == 403

    user = Silt(observed.stack.stack.env_for_clients(), tmp_path)  # type: ignore[arg-type]
    checks = {c["service"]: c for c in user.proc("doctor", "--json").json()}
    assert checks["auth health"]["status"] == checks["graveler health"]["status"] == "ok"
    assert checks["gateway health"] == {**checks["gateway health"], "status": "ok", "detail": "ready"}


def _http_raw(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_gateway_workers_share_one_metrics_endpoint(tmp_path: Path) -> None:
    port = free_port()
    overrides = {"gateways": {"s3": {"metrics_listen_address": f"127.0.0.1:{port}"}}}
    with gateway_stack(tmp_path / "data", workers=2, overrides=overrides) as stack:
        s3 = stack.client(request_checksum_calculation="when_required")
        s3.create_bucket(Bucket="workers")
        before = _scrape(port)
        # New connections each time, so that both workers take some of the requests.
        for i in range(20):
            stack.client(request_checksum_calculation="when_required").put_object(
                Bucket="workers", Key=f"main/{i}", Body=b"abc"
            )
        after = _scrape(port)
    assert _delta(before, after, "silt_s3_requests_total", operation="PutObject", status="200") == 20
    assert _delta(before, after, "silt_s3_received_bytes_total", operation="PutObject") == 60
