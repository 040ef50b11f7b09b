"""Garbage-collection runs: their ids and where a run keeps its files in a storage namespace.

Shared by graveler, which writes a run's export there, and the GC job (jobs/gc), which reads
it and writes its report and summary beside it; the job reaches graveler only over gRPC.
"""

from __future__ import annotations

import datetime as dt
import uuid

from silt.errors import InvalidArgument

# Every run's files lie under this prefix of the repository's storage namespace.
GC_PREFIX = "_silt/gc/"
# Last-access runs (jobs/retention) keep their export, report and summary under this one.
RETENTION_PREFIX = "_silt/retention/"


def new_run_id(now: dt.datetime) -> str:
    # Sorts by time, so an operator listing `_silt/gc/` sees runs in order.
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def validate_run_id(run_id: str) -> str:
    if not run_id or len(run_id) > 64 or not all(c.isalnum() or c in "-_" for c in run_id):
        raise InvalidArgument(f"invalid GC run id {run_id!r}")
    return run_id
