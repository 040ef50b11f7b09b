"""The Prometheus metrics every Silt process may expose, and the /metrics endpoint.

Names follow Prometheus conventions (base units in the name, ``_total`` counters). Labels
take values from small fixed sets only — operation names, status codes, drivers — never
repository, branch, key or user names, so the number of series stays bounded however
much data Silt holds. deploy/grafana/silt.json is built on these names.
"""

from __future__ import annotations

import inspect
import os

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess, start_http_server
from prometheus_client import values as _values

# In multiprocess mode (the gateway's workers) every increment first asks which process it is in,
# to start files of its own after a fork: by default a getpid system call each time, several per
# request. The id is kept here instead and renewed in a forked child (os.register_at_fork: the one
# moment it changes; a spawned worker imports this module afresh). A fork made below Python (a C
# extension's, without PyOS_AfterFork_Child) would keep the parent's id, and its child write the
# parent's files: no Silt process forks so, and none may while counting metrics.
_process_id = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _process_id.__setitem__(0, os.getpid()))


def _this_process() -> int:
    return _process_id[0]


if _values.ValueClass is not _values.MutexValue:
    # Two classes in one process would each open this process's files and write over each other's
    # entries, so the default one must not have made a value yet: this module makes every metric.
    if inspect.getclosurevars(_values.ValueClass.__init__).nonlocals.get("values"):
        raise RuntimeError("prometheus_client values were made before silt.telemetry.metrics was imported")
    _values.ValueClass = _values.MultiProcessValue(process_identifier=_this_process)

# Seconds; from sub-millisecond cache hits to slow object-store transfers.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
KV_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
COMMIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
COUNT_BUCKETS = (0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 100)

# --- REST API -----------------------------------------------------------------------------
API_REQUESTS = Counter(
    "silt_api_requests", "REST API requests answered, by operation and HTTP status", ["operation", "status"]
)
API_DURATION = Histogram(
    "silt_api_request_duration_seconds",
    "Time from a REST API request to the last byte of its response",
    ["operation"],
    buckets=REQUEST_BUCKETS,
)

# --- S3 gateway ---------------------------------------------------------------------------
S3_REQUESTS = Counter("silt_s3_requests", "S3 requests answered, by operation and HTTP status", ["operation", "status"])
S3_DURATION = Histogram(
    "silt_s3_request_duration_seconds",
    "Time from request to the last byte of the response",
    ["operation"],
    buckets=REQUEST_BUCKETS,
)
S3_RECEIVED = Counter("silt_s3_received_bytes", "Request body bytes received", ["operation"])
S3_SENT = Counter("silt_s3_sent_bytes", "Response body bytes sent", ["operation"])
# Labels: auth, graveler, kv. With several gateway workers, the lowest of the live ones.
GATEWAY_DEPENDENCY_UP = Gauge(
    "silt_gateway_dependency_up",
    "1 if the gateway's last readiness check found the dependency answering, else 0",
    ["dependency"],
    multiprocess_mode="livemin",
)

# --- gRPC (server side of every service) --------------------------------------------------
GRPC_HANDLED = Counter(
    "silt_grpc_server_handled",
    "gRPC calls completed, by service, method and status code",
    ["service", "method", "code"],
)
GRPC_DURATION = Histogram(
    "silt_grpc_server_handling_seconds",
    "gRPC call handling time",
    ["service", "method"],
    buckets=REQUEST_BUCKETS,
)

# --- KV ----------------------------------------------------------------------------------
KV_OPERATIONS = Counter("silt_kv_operations", "KV operations, by driver and operation", ["driver", "operation"])
KV_ERRORS = Counter(
    "silt_kv_operation_errors",
    "KV operations that failed (not counting NotFound or set_if conflicts)",
    ["driver", "operation"],
)
KV_DURATION = Histogram(
    "silt_kv_operation_duration_seconds", "KV operation latency", ["driver", "operation"], buckets=KV_BUCKETS
)
KV_CONFLICTS = Counter("silt_kv_set_if_conflicts", "set_if calls whose predicate did not hold", ["driver"])

# --- graveler ----------------------------------------------------------------------------
COMMITS = Counter("silt_graveler_commits", "Commits created (merges excluded)")
COMMIT_DURATION = Histogram(
    "silt_graveler_commit_duration_seconds", "Time to seal, build and record a commit", buckets=COMMIT_BUCKETS
)
COMMIT_ENTRIES = Counter("silt_graveler_commit_entries", "Entries added, changed or removed by commits")
COMMIT_RANGES_WRITTEN = Counter("silt_graveler_commit_ranges_written", "Ranges written by commits")
COMMIT_SEALED_TOKENS = Histogram(
    "silt_graveler_commit_sealed_tokens",
    "Sealed staging tokens of the branch a commit applied (per-branch backlog, no branch label)",
    buckets=COUNT_BUCKETS,
)
STAGING_WRITES = Counter("silt_graveler_staging_writes", "Staged writes, by kind", ["kind"])
CLEANUP_FAILURES = Counter(
    "silt_graveler_cleanup_failures",
    "Background clean-ups (staged values of dropped tokens, the committed part of a prefix commit) that failed "
    "and were scheduled again",
)
CLEANUP_RETRIES_WAITING = Gauge(
    "silt_graveler_cleanup_retries_waiting", "Failed background clean-ups waiting for their next try"
)

# --- journal clock (docs/design/journal.md, "Decision 2") ---------------------------------
CLOCK_FAR_AHEAD = Counter(
    "silt_journal_clock_far_ahead",
    "Logical timestamps observed further ahead of this process's wall clock than the journal allows "
    "(a writer whose clock runs ahead drags every clock forward): still observed, to keep the order",
)

# --- history events (docs/design/journal.md, "History events") ----------------------------
HISTORY_EVENTS_DROPPED = Counter(
    "silt_history_events_dropped",
    "History events lost by the process that emitted them: queue_full (never waiting for room), send_failed, "
    "or invalid (a name protobuf cannot carry)",
    ["reason"],
)
HISTORY_EVENTS_SENT = Counter("silt_history_events_sent", "History events delivered to their store, in batches")

# --- compactor (docs/design/compaction.md) ------------------------------------------------
COMPACTION_DURATION = Histogram(
    "silt_compactor_compaction_duration_seconds",
    "Time to seal, build and publish one compaction (successful or not)",
    buckets=COMMIT_BUCKETS,
)
COMPACTIONS = Counter(
    "silt_compactor_compactions",
    "Compactions finished, by result: published, lost (a commit or reset won), failed",
    ["result"],
)
COMPACTION_SEALED_TOKENS = Counter(
    "silt_compactor_sealed_tokens_compacted", "Sealed staging tokens folded into compacted metaranges"
)
COMPACTION_TRIGGERS = Counter(
    "silt_compactor_triggers", "Sensor triggers received, by whether they were accepted", ["accepted"]
)

# --- auth --------------------------------------------------------------------------------
AUTH_DECISIONS = Counter("silt_auth_decisions", "Authorization decisions, by outcome", ["decision"])
AUTH_CACHE = Counter(
    "silt_auth_cache_lookups", "Lookups in the caches of keys and decisions, by result", ["cache", "result"]
)


def serve(address: str, multiprocess_dir: str | None = None) -> int:
    """Serve /metrics over HTTP on address (host:port; port 0 picks one); return the port.

    multiprocess_dir: serve the sum of the metrics every worker process writes there instead
    of this process's own.
    """
    host, _, port = address.rpartition(":")
    registry = REGISTRY
    if multiprocess_dir:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=multiprocess_dir)
    server, _thread = start_http_server(int(port), addr=host.strip("[]") or "0.0.0.0", registry=registry)
    return int(server.server_address[1])
