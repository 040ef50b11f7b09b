"""Objects decoded in a child process that no file or query can make big or slow: each job (a
Parquet preview, an object diff, a SQL query: the job's `kind`) runs in a fresh process limited
to MEMORY_BYTES of address space beyond what its imports took, killed when it runs past
DECODE_SECONDS, and gone with the server (PR_SET_PDEATHSIG).

Why a process: a few hundred bytes of Parquet can decode into gigabytes (one dictionary value
of tens of MB repeated in every row), and nothing the footer claims bounds that. Decoded in the
server, that memory and the seconds of work holding the GIL stall every S3 and API request,
health checks included. A child's memory is its own, its decode holds no lock of the server's,
and the server's thread only waits on a pipe.

The child never touches the object store or the server's credentials: it starts with an almost
empty environment and no inherited descriptors but its pipes (the process shape every sandbox
child shares: silt/sandbox/process.py), asks the server for byte ranges
of the job's sources (one or two objects; each served within the job's byte budget) and answers
JSON. Each child serves one job and exits; one spare is kept started (importing pyarrow and
DuckDB takes seconds on a busy machine), so a job only waits for a start when jobs come faster
than that.

Frames on the pipes: one kind byte, a 4-byte big-endian length, the payload.
child -> server: READY; RANGE (source: 1 byte, start, end: 8 bytes each); ANSWER (JSON);
                 REFUSED ({status, message})
server -> child: REQUEST ({kind, sizes, budget, params}); DATA (the range's bytes); FAILED (a message)
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from silt.sandbox import process as sandbox

log = logging.getLogger(__name__)

# Address space a job may use beyond its interpreter, pyarrow and DuckDB: a preview's 16 MiB read,
# one batch decoded and its cells, many times over; DuckDB's own limit (jobs.py) sits below it.
MEMORY_BYTES = 512 * 1024 * 1024
# From the request to the answer; the CPU limit backs it up should the server be stopped.
DECODE_SECONDS = 10.0
CPU_SECONDS = int(DECODE_SECONDS) + 5
# A child's interpreter start and imports, on a machine busy with other work.
START_SECONDS = 30.0
# The answer's JSON: 100 rows of 200 columns of 1,000-character cells would be 20 MB; the rows
# that fit in this are sent (the rest counted in "rows_cut"), so the server parses a bounded
# answer.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_MESSAGE_BYTES = 64 * 1024

READY, RANGE, ANSWER, REFUSED = b"R", b"G", b"A", b"E"
REQUEST, DATA, FAILED = b"Q", b"D", b"X"
# The child's CPU priority below the server's: a job's seconds of DuckDB never slow requests.
CHILD_NICENESS = 10

ReadRange = Callable[[int, int], BinaryIO]
# What a job does in the child: jobs.py maps each to its code.
KINDS = ("preview", "diff", "query")
_RANGE_BYTES = 17


@dataclass(frozen=True)
class Source:
    """An object a job reads: ranged reads of it, and its size."""

    read_range: ReadRange
    size: int


class Refused(Exception):
    """A job not done: its HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def protect_server() -> None:
    """Makes this process non-dumpable before it starts children: its /proc/<pid>/environ, mem,
    maps and fd then belong to root, and a process of the same user (a child whose DuckDB or
    Arrow an object or a query took over) can no longer read the service credentials in its
    environment or its memory, nor ptrace it. The cost: no core dumps of the server (it is
    never run for them) and no same-user debugger attach (py-spy needs root or sudo then)."""
    sandbox.protect_server()


_Gone = sandbox.Gone


class _Child(sandbox.Child):
    def __init__(self) -> None:
        # One Arrow thread: threads' stacks are address space.
        env = sandbox.minimal_env({"OMP_NUM_THREADS": "1"})
        super().__init__("edge.api.preview.sandbox", START_SECONDS, env)

    def wait_ready(self, ready: bytes = READY) -> None:
        super().wait_ready(ready)

    def run(self, kind: str, sources: list[Source], params: dict[str, Any], budget: int) -> dict[str, Any]:
        deadline = time.monotonic() + DECODE_SECONDS
        sizes = [source.size for source in sources]
        request = json.dumps({"kind": kind, "sizes": sizes, "budget": budget, "params": params}).encode()
        self.send(REQUEST, request, deadline)
        served = [0] * len(sources)
        while True:
            kind_byte, payload = self.receive(deadline, max(MAX_ANSWER_BYTES, MAX_MESSAGE_BYTES))
            if kind_byte == ANSWER:
                answer: dict[str, Any] = json.loads(payload)
                return answer
            if kind_byte == REFUSED:
                refusal = json.loads(payload)
                raise Refused(int(refusal["status"]), str(refusal["message"]))
            if kind_byte != RANGE or len(payload) != _RANGE_BYTES:
                raise _Gone("a frame the job's process may not send")
            index = payload[0]
            start, end = int.from_bytes(payload[1:9], "big"), int.from_bytes(payload[9:], "big")
            if index >= len(sources):
                raise _Gone(f"a range of source {index} of {len(sources)}")
            # The child keeps to the budget itself; the server holds it to it all the same.
            served[index] += end - start + 1
            if not 0 <= start <= end < sizes[index] or served[index] > budget:
                raise _Gone(f"a range {start}-{end} outside the object or the budget")
            try:
                with sources[index].read_range(start, end) as reader:
                    data = reader.read()
                reply_kind, reply = DATA, data
            except OSError as exc:
                # The store's own message may name the object's physical address or a server
                # path, and the child may answer it to the user: it gets none of it.
                log.warning("a %s job's read of the store failed: %s", kind, type(exc).__name__)
                reply_kind, reply = FAILED, b"the object could not be read from the store"
            self.send(reply_kind, reply, deadline)


class Sandbox:
    """Runs jobs in children: one per job, one spare started ahead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spare: _Child | None = None
        self._closed = False
        self._protected = False

    def _protect(self) -> None:
        """Once, before the first child starts (called with the lock held)."""
        if not self._protected:
            protect_server()
            self._protected = True

    def _take(self) -> _Child:
        """A child for this job: the spare, or one started now. Started from the caller's thread,
        a long-lived worker thread: PR_SET_PDEATHSIG fires when the thread that started the child
        ends, so never from a thread that ends soon."""
        with self._lock:
            if self._closed:
                raise Refused(503, "the server is shutting down")
            self._protect()
            child, self._spare = self._spare, None
        if child is None or child.proc.poll() is not None:
            if child is not None:
                child.end()
            child = _Child()
        return child

    def _refill(self) -> None:
        """A spare for the next job, started once this job is over: a child importing pyarrow and
        DuckDB while the job runs would take a core from it on a small machine."""
        with self._lock:
            if self._closed or self._spare is not None:
                return
            self._protect()
            try:
                self._spare = _Child()
            except OSError as exc:  # the next job starts its own
                log.warning("no spare job process started: %s", exc)

    def preview(self, read_range: ReadRange, size: int, rows: int, budget: int) -> dict[str, Any]:
        """The preview's answer (parquet.decode), or Refused: 413 past the memory or time
        bound, 400 for what is no Parquet file or too large to read, 503 if no child starts.
        Blocking: run it in a worker thread (it waits on pipes, holding no lock)."""
        return self.run("preview", [Source(read_range, size)], {"rows": rows}, budget)

    def run(self, kind: str, sources: list[Source], params: dict[str, Any], budget: int) -> dict[str, Any]:
        """The answer of one job (jobs.py) over its sources, each read within `budget` bytes, or
        Refused: the job's own refusals (400, 404, 413...), past the time bound 504 and past the
        memory bound 422 (413 for previews, as they always answered), 503 if no child starts.
        Blocking: run it in a worker thread (it waits on pipes, holding no lock)."""
        if kind not in KINDS or not 1 <= len(sources) <= 2:
            raise ValueError(f"a {kind} job over {len(sources)} sources")
        child = self._take()
        try:
            try:
                child.wait_ready()
            except (TimeoutError, _Gone) as exc:
                raise Refused(503, f"no {kind} process could be started: retry shortly ({exc})") from None
            try:
                return child.run(kind, sources, params, budget)
            except TimeoutError:
                if kind == "preview":
                    raise Refused(
                        413, f"too large to preview: decoding it takes more than {DECODE_SECONDS:.0f} s"
                    ) from None
                raise Refused(504, f"the {kind} took more than {DECODE_SECONDS:.0f} s and was stopped") from None
            except _Gone as exc:
                status = child.end()
                log.warning("%s process ended without an answer (exit %s): %s", kind, status, exc)
                if kind == "preview":
                    raise Refused(
                        413, "too large to preview: decoding it went past the memory or time a preview may use"
                    ) from None
                raise Refused(
                    422,
                    f"the {kind} went past the memory ({MEMORY_BYTES // (1024 * 1024)} MiB) or time "
                    f"({DECODE_SECONDS:.0f} s) it may use and was stopped",
                ) from None
        finally:
            child.end()
            self._refill()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.end()


# --- the child's side ---------------------------------------------------------------------


def _drop() -> None:
    """What the child gives up before it reads a byte of a job (silt/sandbox/process.py)."""
    sandbox.drop(CHILD_NICENESS)


def _send(out: BinaryIO, kind: bytes, payload: bytes = b"") -> None:
    sandbox.send(out, kind, payload)


def _receive(inp: BinaryIO) -> tuple[bytes, bytes]:
    return sandbox.receive(inp)


def _fitting(answer: dict[str, Any]) -> bytes:
    """The answer as JSON, with as many of its rows as fit in MAX_ANSWER_BYTES (an answer with
    no "rows" as it is). Rows left out are counted in "rows_cut"; a paged answer (one with an
    "offset") then has more, and its "next_offset" is the first row not sent, so the next page
    starts there and no row is skipped. A query's "cells_cut_by_row" becomes "cells_cut", the
    cut cells of the rows sent."""
    rows = answer.get("rows")
    if rows is None:
        return json.dumps(answer, separators=(",", ":")).encode()
    kept: list[bytes] = []
    answer["rows"] = []
    answer["rows_cut"] = 0
    cells_cut = answer.pop("cells_cut_by_row", None)
    if cells_cut is not None:
        answer["cells_cut"] = sum(cells_cut)
    paged = isinstance(answer.get("offset"), int)
    if paged:
        answer["next_offset"] = answer["offset"] + len(rows) if answer.get("has_more") else None
    room = MAX_ANSWER_BYTES - len(json.dumps(answer, separators=(",", ":")).encode()) - 64
    for row in rows:
        encoded = json.dumps(row, separators=(",", ":")).encode()
        room -= len(encoded) + 1
        if room < 0:
            break
        kept.append(encoded)
    if not kept and rows:
        raise MemoryError
    if len(kept) < len(rows):
        answer["rows_cut"] = len(rows) - len(kept)
        if paged:
            answer["has_more"] = True
            answer["next_offset"] = answer["offset"] + len(kept)
        if cells_cut is not None:
            answer["cells_cut"] = sum(cells_cut[: len(kept)])
    body = json.dumps(answer, separators=(",", ":")).encode()
    head, tail = body.split(b'"rows":[]', 1)
    return head + b'"rows":[' + b",".join(kept) + b"]" + tail


def _refuse(out: BinaryIO, status: int, message: str) -> None:
    _send(out, REFUSED, json.dumps({"status": status, "message": message[:4096]}).encode())


def child_main(parent: int) -> None:
    sandbox.die_with(parent)
    _drop()
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the pipe
    import io

    from edge.api.preview import jobs  # pyarrow and DuckDB: trusted imports, before the limit

    jobs.prepare()
    sandbox.limit(MEMORY_BYTES, CPU_SECONDS)
    _send(out, READY)
    kind, payload = _receive(inp)
    if kind != REQUEST:
        raise SystemExit(2)
    request = json.loads(payload)

    def reader_of(index: int) -> ReadRange:
        def read_range(start: int, end: int) -> BinaryIO:
            _send(out, RANGE, bytes([index]) + start.to_bytes(8, "big") + end.to_bytes(8, "big"))
            kind, data = _receive(inp)
            if kind != DATA:
                raise OSError(data.decode(errors="replace"))
            return io.BytesIO(data)

        return read_range

    sources = [(reader_of(index), int(size)) for index, size in enumerate(request["sizes"])]
    try:
        answer = jobs.run(str(request["kind"]), sources, dict(request["params"]), int(request["budget"]))
        _send(out, ANSWER, _fitting(answer))
    except jobs.JobRefused as refused:
        _refuse(out, refused.status, refused.message)
    except OSError:  # a range the server could not read (its message says no more)
        _refuse(out, 503, "the object could not be read from the store: retry shortly")
    except MemoryError:
        if request["kind"] == "preview":
            _refuse(out, 413, "too large to preview: its first rows decode to more memory than a preview may use")
        else:
            _refuse(out, 422, f"the {request['kind']} needs more memory than it may use")


if __name__ == "__main__":
    child_main(int(sys.argv[1]))
