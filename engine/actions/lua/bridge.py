"""Calls from a hook's Lua code into Python, and the values they hand back.

lupa creates Lua values (strings, tables, registry references) with plain Lua API calls,
outside any Lua protected call. If such an allocation fails, Lua unwinds with a long jump
straight across the Python and Cython frames in between (or, with no Lua frame to land in,
aborts the process): the interpreter is left holding the GIL and half-built frames. Under a
memory limit that failure is exactly what a script can provoke, so no Lua allocation may
fail while Python is on the stack:

- Lua calls Python with strings, numbers, booleans and nil only (the Lua side checks every
  argument), whose conversion allocates nothing in Lua.
- For the length of a call, the Gate lifts the memory limit and stops the collector (so no
  finalizer written by the script runs inside the call, unbounded), and puts both back
  before returning. Python bounds what it builds instead: every string against the memory
  that is left, and tables by checking the runtime's usage as they grow.
- A call never raises into Lua (lupa would allocate to carry the exception) and never
  returns a string: it returns one table, built while the limit was lifted,
  ``{ok, value..., n = count, arrays = {...}}``, which the Lua side unpacks. A failure is
  ``{false, message}`` and becomes a Lua error there.

Lists come back with the array marker lakeFS puts on them (``arrays``, set on the Lua side),
so that ``encoding/json`` marshals an empty one as ``[]``.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from silt.errors import SiltError

log = logging.getLogger(__name__)

# Lua's own message for a failed allocation, so that both kinds read alike to a script and
# to the run's outcome.
NO_MEMORY = "not enough memory"

_MAX_DEPTH = 200
_MAX_MESSAGE = 1000
# How often a conversion looks at the memory it has used and at the clock.
_CHECK_EVERY = 512
# Headroom for the table slots and string headers a value adds beyond its bytes.
_STRING_OVERHEAD = 64

LuaValue = Any  # bytes, int, float, bool, None or a lupa table: what lupa pushes as is


class BridgeError(Exception):
    """A failure the script sees as a Lua error carrying this message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OutOfMemory(BridgeError):
    def __init__(self) -> None:
        super().__init__(NO_MEMORY)


class Gate:
    """The runtime's memory limit, lifted while Python works inside a call from Lua."""

    def __init__(self, runtime: Any, deadline: float) -> None:
        self.runtime: Any = runtime
        self.deadline = deadline
        self._limit_total = 0  # lupa's absolute limit in bytes; 0 (none) until armed

    def arm(self, max_memory: int) -> None:
        """Apply the limit: `max_memory` bytes beyond what the runtime holds now."""
        self._limit_total = self.runtime.get_memory_used(total=True) + max_memory
        self.runtime.set_max_memory(self._limit_total, total=True)

    def disarm(self) -> None:
        self.runtime.set_max_memory(0)

    def remaining(self) -> int:
        if not self._limit_total:
            return 1 << 62
        return int(self._limit_total - self.runtime.get_memory_used(total=True))

    def close(self) -> None:
        """Drop the runtime, so that the Python callables Lua holds keep nothing alive."""
        self.runtime = None

    def wrap(self, name: str, impl: Callable[..., tuple[LuaValue, ...]]) -> Callable[..., Any]:
        """`impl(builder, *args)` as a function Lua may call; see the module docstring."""

        def call(*args: Any) -> Any:
            runtime = self.runtime
            if runtime is None:
                return None
            runtime.set_max_memory(0)
            try:
                with runtime.nogc():
                    builder = Builder(self)
                    try:
                        return builder.pack(impl(builder, *args))
                    except BridgeError as exc:
                        message = exc.message
                    except Exception as exc:
                        log.warning("Lua hook call %s failed", name, exc_info=exc)
                        message = f"{name}: {_describe(exc)}"
                    return builder.failure(message)
            finally:
                if self._limit_total:
                    runtime.set_max_memory(self._limit_total, total=True)

        return call


def _describe(exc: Exception) -> str:
    # The exception's text may name internals (addresses, paths); its class says enough.
    return type(exc).__name__ if isinstance(exc, SiltError) else "internal error"


class Builder:
    """Builds Lua values from Python ones within one call, bounded by the memory left."""

    def __init__(self, gate: Gate) -> None:
        self._gate = gate
        self._runtime = gate.runtime
        self._nodes = 0
        # Shared and cyclic structures (YAML anchors) map to one Lua table each; the Python
        # object is kept alongside so that its id is not reused while the memo lives.
        self._memo: dict[int, tuple[Any, object]] = {}
        self._arrays: list[Any] = []

    def pack(self, values: tuple[LuaValue, ...]) -> Any:
        result = self._runtime.table()
        result[1] = True
        for index, value in enumerate(values, start=2):
            if isinstance(value, bytes):
                self.check_bytes(len(value))
            result[index] = value
        result[b"n"] = len(values) + 1
        if self._arrays:
            result[b"arrays"] = self._runtime.table_from(self._arrays)
        return result

    def failure(self, message: str) -> Any:
        # Not checked against the memory left: it must not fail, and it is small.
        return self._runtime.table_from([False, message[:_MAX_MESSAGE].encode("utf-8", "replace")])

    def check_bytes(self, size: int) -> None:
        if size + _STRING_OVERHEAD > self._gate.remaining():
            raise OutOfMemory()

    def _tick(self) -> None:
        self._nodes += 1
        if self._nodes % _CHECK_EVERY:
            return
        if self._gate.remaining() < 0:
            raise OutOfMemory()
        if time.monotonic() > self._gate.deadline:
            raise BridgeError("timed out")

    def value(self, value: Any, depth: int = 0) -> LuaValue:
        """A Python value (as JSON or YAML decode it, or the REST API shapes it) for Lua."""
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, bytes):
            self.check_bytes(len(value))
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, int):
            return _lua_int(value)
        if isinstance(value, float):
            return value
        if depth >= _MAX_DEPTH:
            raise BridgeError(f"value nested deeper than {_MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            return self._mapping(value, depth + 1)
        if isinstance(value, list | tuple | set | frozenset):
            return self._sequence(value, depth + 1)
        if isinstance(value, datetime.date | datetime.time):
            return self.text(value.isoformat())
        return self.text(str(value))

    def text(self, value: str) -> bytes:
        data = utf8(value)
        self.check_bytes(len(data))
        return data

    def array(self, items: Iterable[LuaValue]) -> Any:
        """A Lua array of values already fit for Lua, filled as `items` yields them."""
        table = self._runtime.table()
        self._arrays.append(table)
        for index, item in enumerate(items, start=1):
            if isinstance(item, bytes):
                self.check_bytes(len(item))
            table[index] = item
            self._tick()
        return table

    def _mapping(self, value: Mapping[Any, Any], depth: int) -> Any:
        known = self._memo.get(id(value))
        if known is not None:
            return known[0]
        table = self._runtime.table()
        self._memo[id(value)] = (table, value)
        for key, item in value.items():
            lua_key = self._key(key)
            if lua_key is not None:
                table[lua_key] = self.value(item, depth)
            self._tick()
        return table

    def _sequence(self, value: Iterable[Any], depth: int) -> Any:
        known = self._memo.get(id(value))
        if known is not None:
            return known[0]
        table = self._runtime.table()
        self._memo[id(value)] = (table, value)
        self._arrays.append(table)
        for index, item in enumerate(value, start=1):
            table[index] = self.value(item, depth)
            self._tick()
        return table

    def _key(self, key: Any) -> LuaValue:
        # Lua raises on a nil or NaN key, and lupa would turn None into a Python object.
        if isinstance(key, str | bytes | bool):
            return self.value(key)
        if isinstance(key, int):
            return _lua_int(key)
        if isinstance(key, float):
            return None if key != key else key
        return self.text("null" if key is None else str(key))


def _lua_int(value: int) -> int | float:
    return value if -(1 << 63) <= value < (1 << 63) else float(value)


def utf8(value: str) -> bytes:
    """`value` as UTF-8, with lone surrogates (which JSON can carry) as U+FFFD."""
    try:
        return value.encode()
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in value).encode()
