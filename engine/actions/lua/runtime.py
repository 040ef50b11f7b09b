"""run_lua: one Lua hook script, run once in a runtime of its own, within bounds.

Each run builds a fresh Lua 5.4 state (lupa), prepares it with the setup chunks (lua_*.py)
while no memory limit applies, then applies the limit and runs the script. The state is
thrown away afterwards, so runs share nothing and may go on in several threads at once;
Lua itself runs without the GIL, which a run takes back only inside calls into Python.
A run of an empty script costs about 1 ms, nearly all of it compiling the setup chunks (a
bare Lua state takes 0.03 ms); loading them as precompiled bytecode would save most of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import lupa.lua54 as lupa  # type: ignore[import-untyped]  # lupa ships no type information

from engine.actions.lua import (
    lib_encoding,
    lib_lakefs,
    lib_misc,
    lib_regexp,
    lib_text,
    lua_core,
    lua_json,
    lua_modules,
    lua_sandbox,
    lua_strings,
    lua_tables,
)
from engine.actions.lua.action import lua_action
from engine.actions.lua.bridge import NO_MEMORY, BridgeError, Builder, Gate, utf8
from engine.actions.lua.calls import LakeFSCalls
from engine.actions.lua.output import BoundedOutput

# How many VM instructions pass between two runs of the count hook: the granularity of the
# instruction bound, and of the clock's (one look at the clock per run of the hook).
HOOK_INTERVAL = 10_000
# Steps the C pattern matcher may take in one call before the Lua port takes over
# (lua_strings.py): measured at up to 2 ns a step, a tenth of a second of C that no bound
# interrupts.
PATTERN_BUDGET = 50_000_000
MAX_ERROR_CHARS = 4096

_SETUP = (
    ("sandbox/strings", lua_strings.SOURCE),
    ("sandbox/tables", lua_tables.SOURCE),
    ("sandbox/json", lua_json.SOURCE),
    ("sandbox/modules", lua_modules.SOURCE),
)
_CLOSED = "the hook has ended"
_HOOK_FAILURE = ("<HookFailure>", "</HookFailure>")


@dataclass(frozen=True)
class LuaLimits:
    # Memory the script may allocate beyond its prepared environment (modules, action, args).
    max_memory_bytes: int = 64 * 1024 * 1024
    # VM instructions, counted by the hook every HOOK_INTERVAL of them.
    max_instructions: int = 200_000_000
    # Wall-clock time from the start of run_lua, checked by the same hook and by calls into
    # Python; a call into Python (a lakeFS request) is not interrupted.
    timeout_seconds: float = 30.0
    # What print() output is kept: the first half and the last half of this many bytes.
    max_output_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        if min(self.max_memory_bytes, self.max_instructions, self.max_output_bytes) <= 0 or self.timeout_seconds <= 0:
            raise ValueError("Lua limits must be positive")

    def timeout_message(self) -> str:
        return f"timed out after {self.timeout_seconds:g} s"

    def instruction_message(self) -> str:
        return f"instruction limit of {self.max_instructions} exceeded"

    def memory_message(self) -> str:
        return f"memory limit of {self.max_memory_bytes} bytes exceeded"


@dataclass(frozen=True)
class LuaOutcome:
    ok: bool
    output: str  # what the script printed, bounded as LuaLimits.max_output_bytes says
    error: str  # "" when ok; the Lua error message, or which bound ended the script


def _deny_attribute(obj: object, name: object, value: object = None) -> Any:
    raise AttributeError("Python attributes are not accessible")


class _Report:
    """What the script's run reported from inside Lua (lua_sandbox.py)."""

    def __init__(self) -> None:
        self.done = False
        self.ok = False
        self.message = b""
        self.stop = b""

    def __call__(self, ok: bool, message: bytes, stop: bytes) -> None:
        self.done, self.ok, self.message, self.stop = True, bool(ok), message, stop


def _python_functions(
    gate: Gate, calls: LakeFSCalls, output: BoundedOutput, report: _Report
) -> dict[bytes, Callable[..., Any]]:
    """What Lua's setup chunks may call. Those that take and return only scalars are called
    directly; the rest go through the gate (bridge.py)."""
    library: dict[str, Callable[..., tuple[Any, ...]]] = {
        **lib_text.FUNCTIONS,
        **lib_regexp.FUNCTIONS,
        **lib_encoding.FUNCTIONS,
        **lib_misc.FUNCTIONS,
        **lib_lakefs.functions(calls),
    }
    functions = {name.encode(): gate.wrap(name, impl) for name, impl in library.items()}
    deadline = gate.deadline

    def write(data: bytes) -> None:
        if isinstance(data, bytes):
            output.write(data)

    def find_plain(s: bytes, pattern: bytes, init: int) -> int:
        return s.find(pattern, init - 1) + 1

    def sleep(ns: int) -> None:
        time.sleep(max(0.0, min(ns / 1e9, deadline - time.monotonic())))

    functions.update(
        {
            b"tick": lambda: time.monotonic() > deadline,
            b"write": write,
            b"report": report,
            b"find_plain": find_plain,
            b"time_now": time.time_ns,
            b"time_sleep": sleep,
        }
    )
    return functions


def _error_text(message: bytes) -> str:
    text = message.decode("utf-8", "replace")
    opening, closing = _HOOK_FAILURE
    if opening in text:
        # hook.fail(message): the message alone, as lakeFS reports it.
        text = text.split(opening, 1)[1].split(closing, 1)[0]
    return text[:MAX_ERROR_CHARS]


def _outcome(limits: LuaLimits, report: _Report, failure: str | None, output: BoundedOutput) -> LuaOutcome:
    if report.done:
        ok, error = report.ok, "" if report.ok else _error_text(report.message)
        stop = report.stop.decode("utf-8", "replace")
    else:
        # Lua failed outside the script's protected call: a bound hit in the instructions
        # between the script's end and its report, or memory too short to report at all.
        ok, error = False, failure or "the hook ended without a result"
        stop = error if error in (limits.timeout_message(), limits.instruction_message()) else ""
    if stop:
        ok, error = False, stop
    elif not ok and error == NO_MEMORY:
        error = limits.memory_message()
    return LuaOutcome(ok=ok, output=output.text(), error=error)


def run_lua(
    script: str,
    action: Mapping[str, Any],
    args: Mapping[str, Any],
    calls: LakeFSCalls,
    limits: LuaLimits = LuaLimits(),
    script_name: str = "hook",
    username: str = "",
) -> LuaOutcome:
    """Run one hook script. `action` is the webhook event payload (action.py), `args` the
    hook's `properties.args`. The script fails by raising an error (`error(...)`,
    `hook.fail(...)`), or when a bound ends it."""
    deadline = time.monotonic() + limits.timeout_seconds
    output = BoundedOutput(limits.max_output_bytes)
    report = _Report()
    runtime = lupa.LuaRuntime(
        encoding=None,
        register_eval=False,
        register_builtins=False,
        attribute_handlers=(_deny_attribute, _deny_attribute),
        max_memory=limits.max_memory_bytes,
    )
    gate = Gate(runtime, deadline)
    failure: str | None = None
    try:
        gate.disarm()
        functions = _python_functions(gate, calls, output, report)
        try:
            run = _prepare(runtime, gate, limits, functions, action, args, (script, script_name, username))
        except BridgeError as exc:
            return LuaOutcome(ok=False, output="", error=f"hook arguments: {exc.message}")
        gate.arm(limits.max_memory_bytes)
        try:
            run()
        except lupa.LuaMemoryError:
            failure = NO_MEMORY
        except lupa.LuaError as exc:
            # With encoding=None, lupa hands the message over decoded as Latin-1.
            failure = _error_text(str(exc).encode("latin-1", "replace"))
    finally:
        gate.close()
    return _outcome(limits, report, failure, output)


def _prepare(
    runtime: Any,
    gate: Gate,
    limits: LuaLimits,
    functions: dict[bytes, Callable[..., Any]],
    action: Mapping[str, Any],
    args: Mapping[str, Any],
    texts: tuple[str, str, str],
) -> Any:
    """The prepared runtime's `run` function (lua_sandbox.py); `texts` are the script, its
    name and the username."""
    conf = {
        b"hook_interval": min(HOOK_INTERVAL, limits.max_instructions),
        b"max_instructions": limits.max_instructions,
        b"max_memory": limits.max_memory_bytes,
        b"pattern_budget": PATTERN_BUDGET,
        b"no_memory": NO_MEMORY.encode(),
        b"timeout_message": limits.timeout_message().encode(),
        b"instruction_message": limits.instruction_message().encode(),
        b"closed_message": _CLOSED.encode(),
    }
    internals = runtime.execute(
        lua_core.SOURCE.encode(), runtime.table_from(functions), runtime.table_from(conf), name=b"=sandbox/core"
    )
    for name, source in _SETUP:
        runtime.execute(source.encode(), internals, name=f"={name}".encode())
    builder = Builder(gate)
    prepared = builder.pack((builder.value(lua_action(action)), builder.value(dict(args))))
    script, script_name, username = (utf8(text) for text in texts)
    return runtime.execute(
        lua_sandbox.SOURCE.encode(), internals, prepared, username, script, script_name, name=b"=sandbox/run"
    )
