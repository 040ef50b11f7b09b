"""What a Cassandra cluster's own settings mean for Silt's driver (`silt doctor`).

Silt rides out one lost or frozen node with its driver settings alone (docs/design/kv.md,
"Faults on a Cassandra cluster"), but two server settings can still work against it:

* the `kv` table's `speculative_retry`: a percentile (Cassandra's default for tables Silt did
  not create) grows with the reads stalled on a dead replica, until the coordinator stops
  asking another replica in time; Silt creates the table with ALWAYS (a fixed delay works
  too, at that delay per read while a frozen replica is still believed alive);
* write and Paxos (CAS contention) timeouts at or above `database.cassandra.request_timeout_s`:
  the client then gives up on a write before the server can answer that it timed out, so
  writes the server would have reported as retryable end with an unknown outcome;
* a read timeout that does not end well before `database.cassandra.read_timeout_s`: a read
  a coordinator holds for a replica that just died then fails at the client, where the
  server's ReadTimeout would have sent it to another coordinator.

Server timeouts are readable from `system_views.settings`, which exists from Cassandra 4.0;
on older servers only the table's options are checked, and the answer says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from silt.config import CassandraConfig

# system_views.settings names: Cassandra 4.0 ("..._in_ms", milliseconds) and 4.1+ (a duration).
_TIMEOUTS = {
    "write": ("write_request_timeout", "write_request_timeout_in_ms"),
    "cas_contention": ("cas_contention_timeout", "cas_contention_timeout_in_ms"),
    "read": ("read_request_timeout", "read_request_timeout_in_ms"),
}
# The ones a client timeout must exceed so that the server's own answer arrives first.
_MUST_BE_SHORTER = ("write", "cas_contention")
_FIXED_DELAY = re.compile(r"^\d+(\.\d+)?\s*ms$", re.IGNORECASE)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|us|µs)?$", re.IGNORECASE)
_UNIT_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "us": 0.001, "µs": 0.001}


@dataclass
class Finding:
    name: str
    ok: bool
    detail: str


def duration_ms(value: str) -> float | None:
    """A settings value in milliseconds: "5000" (4.0's ..._in_ms) or "5000ms", "5s" (4.1+)."""
    match = _DURATION.match(str(value).strip())
    if match is None:
        return None
    unit = (match.group(2) or "ms").lower()
    return float(match.group(1)) * _UNIT_MS[unit]


def server_timeouts_ms(rows: list[tuple[str, Any]]) -> dict[str, float]:
    """kind -> milliseconds, from system_views.settings rows (name, value)."""
    values = {str(name): value for name, value in rows}
    out: dict[str, float] = {}
    for kind, (name, legacy) in _TIMEOUTS.items():
        for key in (name, legacy):
            if key in values and values[key] is not None:
                ms = duration_ms(str(values[key]))
                if ms is not None:
                    out[kind] = ms
                    break
    return out


def speculative_retry_finding(option: str | None) -> Finding:
    if option is None:
        return Finding("kv speculative_retry", False, "the kv table was not found in the keyspace")
    text = str(option).strip()
    if text.upper() == "ALWAYS":
        return Finding("kv speculative_retry", True, text)
    if _FIXED_DELAY.match(text):
        return Finding(
            "kv speculative_retry",
            True,
            f"{text}: a replica that froze costs each read that sends to it this long until the server's timeouts"
            " expire; ALWAYS costs nothing (ALTER TABLE <keyspace>.kv WITH speculative_retry = 'ALWAYS')",
        )
    return Finding(
        "kv speculative_retry",
        False,
        f"{text}: a node that died is waited on until the server's read timeout; set ALWAYS"
        " (ALTER TABLE <keyspace>.kv WITH speculative_retry = 'ALWAYS')",
    )


def timeout_findings(timeouts_ms: dict[str, float], config: CassandraConfig) -> list[Finding]:
    client_ms = config.request_timeout_s * 1000
    findings = []
    for kind in _MUST_BE_SHORTER:
        if kind not in timeouts_ms:
            continue
        server_ms = timeouts_ms[kind]
        ok = server_ms < client_ms
        detail = f"{server_ms:g} ms (database.cassandra.request_timeout_s: {config.request_timeout_s:g} s)"
        if not ok:
            detail += (
                ": the client gives up first, so a write the server would report as timed out (and Silt would"
                " retry or resolve at once) ends with an unknown outcome; lower it, or raise request_timeout_s"
            )
        findings.append(Finding(f"server {kind} timeout", ok, detail))
    if "read" in timeouts_ms:
        findings.append(read_timeout_finding(timeouts_ms["read"], config))
    return findings


# What a read sent again after the server's ReadTimeout needs, within read_timeout_s, to be answered.
_READ_RETRY_MARGIN_MS = 1000.0


def read_timeout_finding(server_ms: float, config: CassandraConfig) -> Finding:
    """The server's read timeout must end well before the client's: a coordinator holding a read
    for a replica that died answers ReadTimeout then, and the read goes to another coordinator."""
    client_ms = config.read_timeout_s * 1000
    ok = server_ms + _READ_RETRY_MARGIN_MS <= client_ms
    detail = f"{server_ms:g} ms (database.cassandra.read_timeout_s: {config.read_timeout_s:g} s)"
    if not ok:
        least_s = (server_ms + _READ_RETRY_MARGIN_MS) / 1000
        detail += (
            ": a read a coordinator holds for a replica that just died fails at the client before the server"
            f" answers and it is sent elsewhere; raise read_timeout_s to {least_s:g} s or more"
        )
    return Finding("server read timeout", ok, detail)


def check_cluster(config: CassandraConfig) -> list[Finding]:
    """Connect with config and report what the cluster's settings mean for Silt."""
    from cassandra.cluster import Cluster

    from silt.kv.cassandra import _auth_provider

    extra: dict[str, Any] = {}
    if config.protocol_version is not None:
        extra["protocol_version"] = config.protocol_version
    cluster = Cluster(
        contact_points=list(config.contact_points),
        port=config.port,
        auth_provider=_auth_provider(config),
        connect_timeout=config.connect_timeout_s,
        control_connection_timeout=config.connect_timeout_s,
        **extra,
    )
    try:
        session = cluster.connect()
        versions = sorted({str(host.release_version) for host in cluster.metadata.all_hosts()})
        findings = [Finding("cassandra version", True, ", ".join(versions))]
        keyspace = cluster.metadata.keyspaces.get(config.keyspace.lower())
        table = keyspace.tables.get("kv") if keyspace is not None else None
        findings.append(speculative_retry_finding(None if table is None else table.options.get("speculative_retry")))
        try:
            rows = list(
                session.execute("SELECT name, value FROM system_views.settings", timeout=config.request_timeout_s)
            )
        except Exception:
            findings.append(
                Finding(
                    "server timeouts",
                    True,
                    "not readable here (system_views.settings exists from Cassandra 4.0); Silt's driver defaults"
                    " ride out one lost node with Cassandra's default timeouts (a read_request_timeout_in_ms at"
                    f" least 1 s below read_timeout_s, {config.read_timeout_s:g} s, keeps it so)",
                )
            )
        else:
            findings += timeout_findings(server_timeouts_ms([(row[0], row[1]) for row in rows]), config)
        return findings
    finally:
        cluster.shutdown()
