"""Hooks run outside graveler: each Lua script, and each action file's YAML, in a child process
of its own that graveler can kill (silt/sandbox/process.py: minimal environment, no inherited
descriptors, not dumpable, no_new_privs, RLIMIT_AS and RLIMIT_CPU).

Why a process: the Lua sandbox's own bounds (instruction count, wall clock, allocator limit:
lua/runtime.py) run inside the Lua VM. Whatever escapes them (a finalizer, which Lua runs with
hooks off; a bug in lupa or in the sandbox; a C call that does not return) used to spin inside
graveler holding the GIL, freezing every repository's requests and graveler's health. In a
child it costs that child: the server's thread waits on a pipe with a deadline and kills the
child with SIGKILL past it (`wall_seconds`: the hook's timeout and a grace), and the kernel
stops it at its CPU and address-space limits. YAML is parsed there too: PyYAML is pure Python,
seconds of CPU for a large file, and a parse in the server holds the GIL.

The child never reaches the object store, the KV store or any credential. A Lua script's
`lakefs` calls come back to graveler over the pipe (CALL), which answers them with the hook's
own scoped reads (reads.ScopedCalls: the hook's repository only) and sends the answer back
(RESULT, or RESULT_BYTES for an object's bytes). Every frame from the child is bounded
(MAX_CALL_BYTES, the answer's size from the output bound), so a child can make graveler
neither wait past the deadline nor hold more than a bounded frame.

Each child serves one job and exits; `spares` children are kept started (an interpreter with
lupa and the sandbox imported), so a hook waits for a start only when hooks come faster.

Frames (kind byte, 4-byte length, payload):
child -> server: READY (JSON {dumpable}); CALL (JSON [method, args]); ANSWER (JSON); REFUSED (a message)
server -> child: LUA (JSON {script, action, args, limits, name, username, memory, cpu});
                 YAML (JSON {file, memory, cpu} then the file's bytes after a newline);
                 RESULT (JSON [status, body]); RESULT_BYTES (2-byte status, the bytes);
                 FAILED (the call's error, as the script sees it)
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, BinaryIO

from engine.actions.files import InvalidActionFile
from engine.actions.lua.calls import LakeFSCalls
from engine.actions.lua.runtime import LuaLimits, LuaOutcome
from silt.errors import SiltError
from silt.sandbox import process as sandbox

log = logging.getLogger(__name__)

READY, CALL, ANSWER, REFUSED = b"R", b"C", b"A", b"E"
LUA, YAML, RESULT, RESULT_BYTES, FAILED = b"L", b"Y", b"D", b"B", b"X"

# An interpreter start and the imports (lupa, the sandbox, PyYAML), on a busy machine.
START_SECONDS = 30.0
# Past the hook's own timeout (which the Lua VM enforces itself, with a clean message), the
# time graveler waits before it kills the child.
GRACE_SECONDS = 2.0
# Address space for the child's Python beyond what the script may allocate in Lua: an object
# read by lakefs.get_object (reads.MAX_READ_BYTES) is held as Python bytes and as a Lua string.
HEADROOM_BYTES = 96 * 1024 * 1024
# A YAML parse: its CPU and wall-clock time, and its address space.
PARSE_SECONDS = 10.0
PARSE_MEMORY_BYTES = 256 * 1024 * 1024
# A call's method and arguments (paths, refs, prefixes): far more than any real one.
MAX_CALL_BYTES = 64 * 1024
# An action file's document as tagged JSON: a few times the file's bytes.
MAX_DOCUMENT_BYTES = 8 * 1024 * 1024
MAX_MESSAGE_BYTES = 4096
# The child's CPU priority below graveler's, once its imports are done: under contention
# graveler's requests go first. Not lower: a pre-event hook is part of a request too, and at
# niceness 10 on a saturated machine a 1 ms script took seconds to get the CPU.
CHILD_NICENESS = 5
_METHODS = ("stat_object", "get_object", "list_objects", "diff_refs", "diff_branch", "create_tag")
_MODULE = "engine.actions.hook_process"


class HookProcessError(Exception):
    """A child that did not start or answer; the message says so for a hook's run."""


class NotParsed(InvalidActionFile):
    """An action file not parsed because no process could be started: nothing said about the
    file itself (so not to be remembered as its parse's outcome)."""


class _Child(sandbox.Child):
    def __init__(self) -> None:
        super().__init__(_MODULE, START_SECONDS, sandbox.minimal_env())


class HookProcesses:
    """Starts and kills hook children; one spare (or `spares`) kept started."""

    def __init__(self, spares: int = 1, protect_server: bool = True) -> None:
        self._lock = threading.Lock()
        self._spares: list[_Child] = []
        self._running: set[_Child] = set()  # taken by a job: killed by close() too
        self._wanted = spares
        self._closed = False
        self._protect = protect_server
        self.started = 0  # children started, for tests and measurements

    def _start(self) -> _Child:
        if self._protect:
            # Before the first child: the server's environment and memory are then root's.
            sandbox.protect_server()
            self._protect = False
        self.started += 1
        return _Child()

    def _take(self) -> _Child:
        with self._lock:
            if self._closed:
                raise HookProcessError("graveler is shutting down")
            child = self._spares.pop() if self._spares else None
            if child is None or child.proc.poll() is not None:
                if child is not None:
                    child.end()
                child = self._start()
            self._running.add(child)
        return child

    def _done(self, child: _Child) -> None:
        child.end()
        with self._lock:
            self._running.discard(child)
        self._refill()

    def _refill(self) -> None:
        with self._lock:
            while not self._closed and len(self._spares) < self._wanted:
                try:
                    self._spares.append(self._start())
                except OSError as exc:  # the next hook starts its own
                    log.warning("no spare hook process started: %s", exc)
                    return

    def _ready(self, child: _Child) -> None:
        try:
            child.wait_ready(READY)
        except (TimeoutError, sandbox.Gone) as exc:
            raise HookProcessError(f"no hook process could be started: retry shortly ({exc})") from None
        if sandbox.LINUX and b'"dumpable": false' not in child.hello:
            log.warning("hook process %s is dumpable: its memory is readable by processes of its user", child.proc.pid)

    def run_lua(
        self,
        script: str,
        action: Mapping[str, Any],
        args: Mapping[str, Any],
        calls: LakeFSCalls,
        limits: LuaLimits = LuaLimits(),  # noqa: B008 - frozen
        script_name: str = "hook",
        username: str = "",
        wall_seconds: float | None = None,
        process_memory_bytes: int | None = None,
    ) -> LuaOutcome:
        """As lua.run_lua, in a child killed after `wall_seconds` (by default the hook's timeout
        and GRACE_SECONDS), whose address space may grow by `process_memory_bytes` past its
        imports (by default the script's memory and HEADROOM_BYTES). A child that dies or is
        killed fails the hook with a message that says which bound ended it."""
        wall = limits.timeout_seconds + GRACE_SECONDS if wall_seconds is None else wall_seconds
        request = {
            "script": script,
            "action": _tagged(action),
            "args": _tagged(args),
            "limits": asdict(limits),
            "name": script_name,
            "username": username,
            "memory": process_memory_bytes or limits.max_memory_bytes + HEADROOM_BYTES,
            "cpu": math.ceil(wall) + 1,
        }
        payload = json.dumps(request, default=str).encode()
        child = self._take()
        try:
            self._ready(child)
            deadline = time.monotonic() + wall
            try:
                child.send(LUA, payload, deadline)
                answer = self._serve(child, calls, deadline, 6 * limits.max_output_bytes + 2 * MAX_MESSAGE_BYTES)
                return LuaOutcome(ok=bool(answer["ok"]), output=str(answer["output"]), error=str(answer["error"]))
            except TimeoutError:
                return LuaOutcome(ok=False, output="", error=f"killed: the hook ran past {wall:g} s")
            except (sandbox.Gone, ValueError, KeyError, TypeError) as exc:
                status = child.end()
                log.warning("hook process ended without an answer (exit %s): %s", status, exc)
                return LuaOutcome(ok=False, output="", error=_death(status, limits))
        except HookProcessError as exc:
            return LuaOutcome(ok=False, output="", error=str(exc))
        finally:
            self._done(child)

    def _serve(self, child: _Child, calls: LakeFSCalls, deadline: float, answer_limit: int) -> dict[str, Any]:
        """Answer the child's calls until its answer comes."""
        while True:
            kind, payload = child.receive(deadline, max(answer_limit, MAX_CALL_BYTES))
            if kind == ANSWER:
                answer = json.loads(payload)
                if not isinstance(answer, dict):
                    raise ValueError("an answer that is not an object")
                return answer
            if kind != CALL or len(payload) > MAX_CALL_BYTES:
                raise sandbox.Gone("a frame the hook's process may not send")
            method, arguments = json.loads(payload)
            if method not in _METHODS or not isinstance(arguments, list):
                raise sandbox.Gone(f"a call of {str(method)[:64]!r}")
            if not all(isinstance(a, str | int | bool) for a in arguments):
                raise sandbox.Gone("a call with arguments that are not scalars")
            try:
                status, body = getattr(calls, method)(*arguments)
            except SiltError as exc:
                child.send(FAILED, f"lakefs.{method}: {type(exc).__name__}".encode(), deadline)
                continue
            except Exception as exc:
                log.warning("Lua hook call %s failed", method, exc_info=exc)
                child.send(FAILED, f"lakefs.{method}: internal error".encode(), deadline)
                continue
            if isinstance(body, bytes):
                child.send(RESULT_BYTES, int(status).to_bytes(2, "big") + body, deadline)
            else:
                child.send(RESULT, json.dumps([status, body], default=str).encode(), deadline)

    def load_yaml(self, data: bytes, file: str) -> Any:
        """The YAML document of an action file, parsed in a child (files.load_yaml);
        InvalidActionFile if it is not valid YAML or its parse went past its bounds."""
        header = json.dumps({"file": file, "memory": PARSE_MEMORY_BYTES, "cpu": math.ceil(PARSE_SECONDS) + 1})
        child = self._take()
        try:
            self._ready(child)
            deadline = time.monotonic() + PARSE_SECONDS
            try:
                child.send(YAML, header.encode() + b"\n" + data, deadline)
                kind, payload = child.receive(deadline, MAX_DOCUMENT_BYTES)
            except TimeoutError:
                raise InvalidActionFile(
                    f"action file {file!r}: parsing it took more than {PARSE_SECONDS:g} s"
                ) from None
            except sandbox.Gone:
                raise InvalidActionFile(f"action file {file!r}: parsing it went past its memory or time") from None
            if kind == REFUSED:
                raise InvalidActionFile(payload[:MAX_MESSAGE_BYTES].decode("utf-8", "replace"))
            if kind != ANSWER:
                raise InvalidActionFile(f"action file {file!r}: its parse ended without an answer")
            try:
                return _untagged(json.loads(payload))
            except (ValueError, RecursionError, TypeError, KeyError):
                raise InvalidActionFile(f"action file {file!r}: nested too deeply") from None
        except HookProcessError as exc:
            raise NotParsed(f"action file {file!r}: {exc}") from None
        finally:
            self._done(child)

    def close(self) -> None:
        """Kill every child, spares and those running a hook (whose run fails at once): a
        graveler told to stop does not wait for a hook."""
        with self._lock:
            self._closed = True
            spares, self._spares = self._spares, []
            running = list(self._running)
        for child in spares:
            child.end()
        for child in running:
            # Killed only: its job's thread reads EOF, fails the hook and closes the pipes (closed
            # here, their descriptors could be reused under that thread's poll).
            if child.proc.poll() is None:
                child.proc.kill()


def _death(status: int | None, limits: LuaLimits) -> str:
    if status is not None and status < 0 and -status in (24, 9):  # SIGXCPU, SIGKILL
        return "killed: the hook's process went past its CPU limit"
    return (
        "the hook's process ended without an answer: it went past its memory"
        f" ({limits.max_memory_bytes} bytes and the interpreter's) or CPU limit"
    )


# --- YAML documents as JSON: every value the safe loader makes, keys of any type kept -------


def _tagged(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ["f", repr(value)]
    if isinstance(value, Mapping):
        return ["m", [[_tagged(k), _tagged(v)] for k, v in value.items()]]
    if isinstance(value, list | tuple):
        return ["l", [_tagged(v) for v in value]]
    if isinstance(value, set | frozenset):
        return ["l", [_tagged(v) for v in value]]
    if isinstance(value, bytes):
        return ["b", base64.b64encode(value).decode()]
    if isinstance(value, datetime.datetime):
        return ["t", value.isoformat()]
    if isinstance(value, datetime.date):
        return ["d", value.isoformat()]
    return str(value)


def _untagged(value: Any) -> Any:
    if not isinstance(value, list):
        if isinstance(value, dict):
            raise ValueError("an object in a tagged document")
        return value
    tag, body = value
    if tag == "m":
        return {_key(_untagged(k)): _untagged(v) for k, v in body}
    if tag == "l":
        return [_untagged(v) for v in body]
    if tag == "f":
        return float(body)
    if tag == "b":
        return base64.b64decode(body)
    if tag == "t":
        return datetime.datetime.fromisoformat(body)
    if tag == "d":
        return datetime.date.fromisoformat(body)
    raise ValueError(f"tag {str(tag)[:8]!r}")


def _key(value: Any) -> Any:
    # A mapping key must be hashable: YAML's complex keys (a list) become their text.
    return str(value) if isinstance(value, list | dict) else value


# --- the child's side ---------------------------------------------------------------------


class _PipeCalls:
    """LakeFSCalls answered by graveler over the pipe."""

    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self._inp, self._out = inp, out

    def _call(self, method: str, *arguments: Any) -> tuple[int, Any]:
        from engine.actions.lua.bridge import BridgeError

        sandbox.send(self._out, CALL, json.dumps([method, list(arguments)]).encode())
        kind, payload = sandbox.receive(self._inp)
        if kind == RESULT_BYTES:
            return int.from_bytes(payload[:2], "big"), payload[2:]
        if kind == RESULT:
            status, body = json.loads(payload)
            return int(status), body
        raise BridgeError(payload.decode("utf-8", "replace"))

    def stat_object(self, *a: Any) -> tuple[int, Any]:
        return self._call("stat_object", *a)

    def get_object(self, *a: Any) -> tuple[int, Any]:
        return self._call("get_object", *a)

    def list_objects(self, *a: Any) -> tuple[int, Any]:
        return self._call("list_objects", *a)

    def diff_refs(self, *a: Any) -> tuple[int, Any]:
        return self._call("diff_refs", *a)

    def diff_branch(self, *a: Any) -> tuple[int, Any]:
        return self._call("diff_branch", *a)

    def create_tag(self, *a: Any) -> tuple[int, Any]:
        return self._call("create_tag", *a)


def _limit(request: Mapping[str, Any]) -> None:
    sandbox.limit(int(request["memory"]), int(request["cpu"]))


def _run_lua(inp: BinaryIO, out: BinaryIO, payload: bytes) -> None:
    from engine.actions.lua.runtime import run_lua

    request = json.loads(payload)
    _limit(request)
    limits = LuaLimits(**request["limits"])
    outcome = run_lua(
        request["script"],
        _untagged(request["action"]),
        _untagged(request["args"]),
        _PipeCalls(inp, out),
        limits,
        request["name"],
        request["username"],
    )
    answer = {"ok": outcome.ok, "output": outcome.output, "error": outcome.error}
    sandbox.send(out, ANSWER, json.dumps(answer).encode())


def _load_yaml(out: BinaryIO, payload: bytes) -> None:
    from engine.actions.files import load_yaml

    header, data = payload.split(b"\n", 1)
    request = json.loads(header)
    _limit(request)
    file = str(request["file"])
    try:
        document = json.dumps(_tagged(load_yaml(data, file))).encode()
    except InvalidActionFile as exc:
        sandbox.send(out, REFUSED, str(exc)[:MAX_MESSAGE_BYTES].encode())
        return
    except (RecursionError, MemoryError):
        sandbox.send(out, REFUSED, f"action file {file!r}: nested too deeply or too large".encode())
        return
    sandbox.send(out, ANSWER, document)


def child_main(parent: int) -> None:
    sandbox.die_with(parent)
    sandbox.drop(0)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the pipe
    # Trusted imports, before any job: what a job would otherwise wait for. At graveler's
    # priority: a hook waiting for its process waits for them.
    from engine.actions import files  # noqa: F401
    from engine.actions.lua import runtime  # noqa: F401

    os.nice(CHILD_NICENESS)

    # What the kernel says of this process, for the server to check (a dumpable child is logged).
    sandbox.send(out, READY, json.dumps({"dumpable": sandbox.is_dumpable()}).encode())
    kind, payload = sandbox.receive(inp)
    if kind == LUA:
        _run_lua(inp, out, payload)
    elif kind == YAML:
        _load_yaml(out, payload)
    else:
        raise SystemExit(2)


if __name__ == "__main__":
    child_main(int(sys.argv[1]))
