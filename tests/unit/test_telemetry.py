"""Pure logic of silt/telemetry and the gateway's request records: metric names, the KV
wrapper's counting, health decisions, access-log lines, exporter selection."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2
from prometheus_client import REGISTRY

from edge.gateway.observe import _text, operation_name
from edge.gateway.operations import dispatch
from edge.gateway.operations.common import Context
from edge.gateway.request import from_scope
from silt.config import DatabaseConfig
from silt.errors import ConfigError, InvalidArgument, PredicateFailed, Unavailable
from silt.kv import open_store
from silt.telemetry import metrics, requestid, tracing
from silt.telemetry import setup as telemetry_setup
from silt.telemetry.health import HealthMonitor
from silt.telemetry.kv import InstrumentedStore
from silt.telemetry.stores import open_observed_store

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "silt.json"


def test_dashboard_uses_only_metrics_silt_exports() -> None:
    exported = {
        sample_name
        for family in REGISTRY.collect()
        if family.name.startswith("silt_")
        for sample_name in (family.name, family.name + "_total", family.name + "_bucket")
    }
    dashboard = json.loads(DASHBOARD.read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bsilt_[a-z0-9_]+", target["expr"])
    }
    assert used and used <= exported, used - exported
    # Every family Silt exports is on the dashboard.
    families = {f.name for f in REGISTRY.collect() if f.name.startswith("silt_")}
    missing = {f for f in families if not any(re.fullmatch(f + r"(_total|_bucket)?", n) for n in used)}
    assert not missing, missing


def _request(method: str, path: str, query: str = "", headers: dict[str, str] | None = None) -> Context:
    scope = {
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(k.encode(), v.encode()) for k, v in {"host": "localhost", **(headers or {})}.items()],
    }
    request = from_scope(scope, None)  # type: ignore[arg-type]
    bucket, _, rest = path.lstrip("/").partition("/")
    request.bucket, request.path = bucket, rest
    return Context(request, None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "expected"),
    [
        ("GET", "/", "", {}, "ListBuckets"),
        ("PUT", "/repo", "", {}, "CreateBucket"),
        ("HEAD", "/repo", "", {}, "HeadBucket"),
        ("GET", "/repo", "list-type=2&prefix=main/", {}, "ListObjectsV2"),
        ("GET", "/repo", "prefix=main/", {}, "ListObjects"),
        ("GET", "/repo/main/k", "", {}, "GetObject"),
        ("HEAD", "/repo/main/k", "", {}, "HeadObject"),
        ("PUT", "/repo/main/k", "", {}, "PutObject"),
        ("PUT", "/repo/main/k", "", {"x-amz-copy-source": "/repo/main/j"}, "CopyObject"),
        ("PUT", "/repo/main/k", "uploadId=u&partNumber=1", {}, "UploadPart"),
        ("POST", "/repo/main/k", "uploads", {}, "CreateMultipartUpload"),
        ("POST", "/repo", "delete", {}, "DeleteObjects"),
        ("DELETE", "/repo/main/k", "", {}, "DeleteObject"),
        ("GET", "/repo/main/k", "tagging", {}, "NotImplemented"),
    ],
)
def test_operation_names_are_s3s(method: str, path: str, query: str, headers: dict[str, str], expected: str) -> None:
    ctx = _request(method, path, query, headers)
    assert operation_name(ctx.request, dispatch(ctx)) == expected


def test_unknown_handlers_share_one_label() -> None:
    ctx = _request("GET", "/repo/main/k")
    assert operation_name(ctx.request, None) == "Unknown"


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_instrumented_store_counts_operations_conflicts_and_errors() -> None:
    store = InstrumentedStore(open_store(DatabaseConfig(type="mem")), "mem", tracer=None, with_metrics=True)
    before = {op: _sample("silt_kv_operations_total", driver="mem", operation=op) for op in ("get", "set_if", "scan")}
    conflicts = _sample("silt_kv_set_if_conflicts_total", driver="mem")
    store.set_if(b"p", b"k", b"v1", None)
    with pytest.raises(PredicateFailed):
        store.set_if(b"p", b"k", b"v2", None)
    assert store.get(b"p", b"k").value == b"v1"
    assert [e.key for e in store.scan(b"p")] == [b"k"]
    assert _sample("silt_kv_operations_total", driver="mem", operation="set_if") - before["set_if"] == 2
    assert _sample("silt_kv_operations_total", driver="mem", operation="get") - before["get"] == 1
    assert _sample("silt_kv_operations_total", driver="mem", operation="scan") - before["scan"] == 1
    assert _sample("silt_kv_set_if_conflicts_total", driver="mem") - conflicts == 1
    errors = _sample("silt_kv_operation_errors_total", driver="mem", operation="get")
    with pytest.raises(InvalidArgument):  # a failure, unlike NotFound and conflicts
        store.get(b"", b"k")
    assert _sample("silt_kv_operation_errors_total", driver="mem", operation="get") - errors == 1
    store.close()


def test_services_open_bare_stores_unless_the_process_is_observed(monkeypatch: pytest.MonkeyPatch) -> None:
    config = DatabaseConfig(type="mem")
    assert not isinstance(open_store(config), InstrumentedStore)  # the KV layer never wraps
    monkeypatch.setitem(telemetry_setup._state, "metrics", False)
    monkeypatch.setitem(telemetry_setup._state, "tracing", False)
    assert not isinstance(open_observed_store(config), InstrumentedStore)
    monkeypatch.setitem(telemetry_setup._state, "metrics", True)
    observed = open_observed_store(config)
    assert isinstance(observed, InstrumentedStore) and observed.driver == "mem"
    assert not isinstance(observed.inner, InstrumentedStore)  # wrapped once


def test_health_is_not_serving_while_a_probe_fails_or_hangs_and_serving_after() -> None:
    state = {"fail": False}
    release = threading.Event()

    def kv() -> None:
        if state["fail"]:
            raise Unavailable("down")

    def blockstore() -> None:
        if not release.is_set():
            release.wait(5)

    monitor = HealthMonitor(["svc.v1.Service"], {"kv": kv, "blockstore": blockstore}, 60, timeout_seconds=0.2)
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING

    def status(name: str = "") -> int:
        return monitor.servicer.Check(health_pb2.HealthCheckRequest(service=name), None).status  # type: ignore[arg-type]

    assert monitor.check_once() == ["blockstore"]  # hung: answers NOT_SERVING after the timeout
    assert status() == status("svc.v1.Service") == not_serving
    release.set()
    assert monitor.check_once() == [] and status() == status("svc.v1.Service") == serving
    state["fail"] = True
    assert monitor.check_once() == ["kv"] and status() == not_serving
    state["fail"] = False
    assert monitor.check_once() == [] and status() == serving
    monitor.stop()


def test_access_log_text_lines_cannot_be_split_or_forged() -> None:
    line = _text({"request_id": "R1", "key": 'evil\nstatus=200 "x"', "status": 403, "error_code": ""})
    assert "\n" not in line and line.startswith("access key=") and "R1" not in line
    assert 'key="evil\\nstatus=200 \\"x\\""' in line and "error_code" not in line


def test_request_ids_from_other_processes_are_bounded_and_printable() -> None:
    assert requestid.sanitize("ABC123") == "ABC123"
    assert requestid.sanitize("x" * 1000) == "x" * requestid.MAX_LENGTH
    assert requestid.sanitize("bad\nid") is None
    assert requestid.sanitize("") is None


def test_exporters_come_from_otel_traces_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing._exporters() == []
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,otlp")
    assert [type(e).__name__ for e in tracing._exporters()] == ["ConsoleSpanExporter", "OTLPSpanExporter"]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ConfigError, match="unknown exporter 'zipkin'"):
        tracing._exporters()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    with pytest.raises(ConfigError, match="only grpc"):
        tracing._exporters()


def test_metric_label_sets_are_fixed() -> None:
    # Labels that could take user-chosen values (repository, branch, key, user) never appear.
    forbidden = {"repository", "repo", "branch", "key", "user", "bucket", "partition", "path"}
    for collector in vars(metrics).values():
        labels = getattr(collector, "_labelnames", None)
        if labels is not None:
            assert not forbidden & set(labels), collector
