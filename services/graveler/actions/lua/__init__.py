"""Lua hooks: lakeFS's `type: lua` hooks, run in a sandboxed, bounded Lua 5.4 (lupa).

Entry point: `run_lua` (runtime.py), with `LuaLimits`, `LuaOutcome`, the `LakeFSCalls`
protocol the `lakefs` module calls (calls.py), and `lua_action`, the `action` global built
from the webhook event payload (action.py).
"""

from services.graveler.actions.lua.action import lua_action
from services.graveler.actions.lua.calls import LakeFSCalls
from services.graveler.actions.lua.runtime import LuaLimits, LuaOutcome, run_lua

__all__ = ["LakeFSCalls", "LuaLimits", "LuaOutcome", "lua_action", "run_lua"]
