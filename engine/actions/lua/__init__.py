"""Lua hooks: lakeFS's `type: lua` hooks, run in a sandboxed and bounded Lua 5.4 (lupa).

Entry point: `run_lua` (runtime.py), with `LuaLimits` and `LuaOutcome`; `LakeFSCalls`, what
the `lakefs` module asks of the server (calls.py); `lua_action`, how the `action` global is
built from the webhook event payload (action.py).

The sandbox
    Every run gets a fresh Lua state, thrown away afterwards. Hook code runs in a globals
    table of its own holding the base functions (assert, error, ipairs, next, pairs, pcall,
    xpcall, print, rawequal, rawget, rawlen, rawset, select, getmetatable, setmetatable,
    tonumber, tostring, type, collectgarbage for "collect", "count", "step" and
    "isrunning"), the string, table, math, utf8 and coroutine libraries, `require`, and
    lakeFS's globals `action`, `args`, `username` and `array`. There is no `os`, `io`,
    `debug`, `load`, `loadstring`, `dofile`, `loadfile`, `string.dump`, `warn` or
    `package.loadlib` (lakeFS has no `os` either: use the `time` module), and the script
    is compiled as text, never bytecode. `require` knows the modules below and what the
    script puts in `package.preload`, nothing on disk. `setmetatable` refuses `__gc`,
    because Lua runs finalizers with hooks off, and `getmetatable` never returns a
    metatable the sandbox shares between values (guarded with `__metatable`). Graveler
    runs `run_lua` in a child process of its own (../hook_process.py), not in itself.

    No Python object is reachable: lupa's `python` table and its eval and builtins are
    gone, attribute access on Python objects is refused, and the Python functions behind
    the modules are upvalues of trusted Lua closures that check their arguments, so only
    strings, numbers, booleans and nil cross into Python and a Python exception never
    crosses back (a failure is a short Lua error message).

The bounds
    Memory: lupa's allocator limit, LuaLimits.max_memory_bytes beyond the prepared
    environment; a failed allocation is Lua's "not enough memory" error, reported as the
    memory limit. Inside calls into Python the limit is lifted (a failed allocation there
    would unwind across Python frames; bridge.py) and Python sizes what it builds against
    the memory left instead.

    Instructions and wall time: a count hook installed before the script runs (and in
    every coroutine it creates) counts instructions and looks at the clock every 10,000
    instructions. Once a bound is hit every instruction fails, so pcall cannot keep a
    script alive. C functions are not interrupted by the hook: Lua's pattern matcher,
    `string.rep` of empty strings, and table.insert, remove, move, concat and sort, whose
    time a script can make unbounded, are replaced by versions that run in Lua or bound
    their work first (lua_strings.py, lua_tables.py). What remains uninterrupted is
    bounded by memory or by a budget: a C pattern match (about 0.1 s at most), table.sort
    with C-function comparisons over a table that fits in memory, Python's work in a
    module call (linear in its input; YAML capped at 256 KiB), a `lakefs` call (use
    timeouts in LakeFSCalls), and `time.sleep` (cut at the deadline).

    Output: print() keeps the first and last halves of LuaLimits.max_output_bytes and
    says how many bytes it dropped between them.

Modules (lakeFS's names, arguments and returns)
    encoding/json: marshal(value[, {indent=, prefix=}]), unmarshal(s)
    encoding/yaml: marshal(value), unmarshal(s)
    encoding/base64: encode, decode, url_encode, url_decode
    encoding/hex: encode, decode
    crypto/sha256: digest (raw bytes)
    crypto/hmac: sign_sha256(message, key), sign_sha1(message, key) (raw bytes)
    strings: split, trim, replace, has_prefix, has_suffix, contains
    path: parse, join, is_hidden, default_separator, extract_dir_name
    regexp (RE2, linear time): match, quote_meta, compile -> find, find_all,
        find_submatch, find_all_submatch
    lakefs: stat_object, get_object, list_objects, diff_refs, diff_branch, create_tag
    hook: fail
    time: now, since, add, sleep, format_iso, parse_iso
    uuid: new

    Left out: lakefs.update_object_user_metadata; time.format and time.parse (Go
    layouts); lakeFS's net/http, net/url, storage/aws, storage/gcloud, storage/azure,
    databricks, formats, encoding/parquet, encoding/z85, crypto/aes, the Lua-written
    lakefs/catalogexport modules, and go-lua's bit32 (Lua 5.4 has bitwise operators).

Differences from lakeFS
    Lua 5.4 rather than go-lua's 5.2: integers are a subtype of numbers (JSON integers
    decode to integers), `//` and bitwise operators exist. No `load` (lakeFS compiles
    strings at run time). Optional arguments may be nil. `encoding/json` encodes a table
    with keys 1..n as an array (lakeFS only marked ones). `path.is_hidden` and
    `path.extract_dir_name` take paths up to 64 KiB. `action.commit.committer` is an
    addition.
"""

from engine.actions.lua.action import lua_action
from engine.actions.lua.calls import LakeFSCalls
from engine.actions.lua.runtime import LuaLimits, LuaOutcome, run_lua

__all__ = ["LakeFSCalls", "LuaLimits", "LuaOutcome", "lua_action", "run_lua"]
