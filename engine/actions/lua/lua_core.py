"""Lua setup, first chunk: what every other chunk shares, and the bounds.

It runs before any other Lua code in a fresh runtime. It keeps the standard functions the
sandbox builds on in a private table, removes from the real globals everything hook code
must not reach (``debug``, ``io``, ``os``, ``package``, lupa's ``python``, ``load`` and its
kin), and defines the count hook that bounds instructions and wall time.

The hook runs every `hook_interval` VM instructions. Once a bound is hit it records why,
and from then on fails on every instruction of every coroutine that runs: a script may
catch the error with pcall, but can execute nothing after catching it (and the sandbox's
pcall, xpcall and coroutine.resume rethrow it as soon as they return). Lua looks a hook
function up per coroutine, so every coroutine the script creates installs it first
(lua_sandbox.py).
"""

SOURCE = r"""
local py, conf = ...
local error, type, tostring, tonumber, format = error, type, tostring, tonumber, string.format
local tointeger, mathtype = math.tointeger, math.type
local sethook = debug.sethook

local I = {
  py = py,
  conf = conf,
  sethook = sethook,
  getmetatable = debug.getmetatable,  -- raw: ignores __metatable
  load = load,
  pcall = pcall,
  xpcall = xpcall,
  collectgarbage = collectgarbage,
  string = {
    find = string.find, match = string.match, gmatch = string.gmatch, gsub = string.gsub,
    rep = string.rep, sub = string.sub, byte = string.byte, char = string.char, format = format,
  },
  concat = table.concat, unpack = table.unpack, sort = table.sort,
  co_create = coroutine.create, co_wrap = coroutine.wrap,
  co_resume = coroutine.resume, co_close = coroutine.close,
  utf8len = utf8.len,
  -- lupa looks the global `debug` up by name before each call from Python; keeping the
  -- name's string alive keeps that lookup from allocating.
  keep = "debug",
}

I.base = {}
for _, name in ipairs({
  "assert", "error", "getmetatable", "ipairs", "next", "pairs", "rawequal", "rawget", "rawlen",
  "rawset", "select", "setmetatable", "tonumber", "tostring", "type", "_VERSION",
}) do
  I.base[name] = _G[name]
end

for _, name in ipairs({
  "debug", "io", "os", "package", "python", "load", "loadfile", "dofile", "require",
  "collectgarbage", "warn",
}) do
  _G[name] = nil
end
string.dump = nil
-- Hook code cannot swap the methods of every string through the shared metatable.
I.getmetatable("").__metatable = "string"

-- The bounds.
local interval, max_instructions = conf.hook_interval, conf.max_instructions
local tick = py.tick
local steps = 0
local stop = nil  -- why the script must end; set once

local hook
hook = function()
  if not stop then
    steps = steps + interval
    if steps > max_instructions then
      stop = conf.instruction_message
    elseif tick() then
      stop = conf.timeout_message
    else
      return
    end
  end
  sethook(hook, "", 1)
  error(stop, 0)
end

function I.install_hook()
  sethook(hook, "", stop and 1 or interval)
end

function I.stopped()
  return stop
end

-- After the run: whatever Lua still runs (finalizers when the runtime closes) fails at once.
function I.close()
  stop = stop or conf.closed_message
  sethook(hook, "", 1)
end

local function rethrow(...)
  if stop then
    error(stop, 0)
  end
  return ...
end
I.rethrow = rethrow

-- Lua's own C functions raise their errors at the position of the code that called them.
-- Called from these chunks, that would be a line of the sandbox ("sandbox/strings:300:").
-- So a C function (or a port that raises plain errors) is called as
-- `return positioned(pcall(native, f, ...))`, in tail position: an error raised at a
-- sandbox line moves to the code that called the sandbox's function, and every other error
-- (the script's own, from a callback) passes through unchanged.
local CHUNKS = "sandbox/"
local sub, nfind = string.sub, string.find

function I.native(f, ...)
  return f(...)
end

function I.positioned(ok, ...)
  if ok then
    return ...
  end
  local e = ...
  if type(e) == "string" and sub(e, 1, #CHUNKS) == CHUNKS then
    local at = nfind(e, ": ", #CHUNKS + 1, true)
    if at then
      error(sub(e, at + 2), 2)
    end
  end
  error(e, 0)
end

-- Argument checks, with the messages and levels of Lua's own: raised in the function that
-- checks, so level 3 is the hook code that called it.
local function typename(v)
  return v == nil and "nil" or type(v)
end

local function badtype(n, fname, expected, v)
  return format("bad argument #%d to '%s' (%s expected, got %s)", n, fname, expected, typename(v))
end
I.badtype = badtype

-- A string or number as a string (as Lua's lua_tolstring converts); anything else nil.
local function tostr(v)
  local t = type(v)
  if t == "string" then
    return v
  elseif t == "number" then
    return tostring(v)
  end
end
I.tostr = tostr

local function toint(v)
  if type(v) == "string" then
    v = tonumber(v)
  end
  if type(v) ~= "number" then
    return nil, false
  end
  local i = tointeger(v)
  return i, i == nil
end

local function interror(n, fname, v, nonintegral)
  if nonintegral then
    return format("bad argument #%d to '%s' (number has no integer representation)", n, fname)
  end
  return badtype(n, fname, "number", v)
end

-- A check of one argument's type: `convert`'s answer, else an error at level 3, which names
-- the hook code that called the module function doing the check.
local function checker(convert, expected)
  return function(v, n, fname)
    local x = convert(v)
    if x then
      return x
    end
    error(badtype(n, fname, expected, v), 3)
  end
end

I.checkstr = checker(tostr, "string")

-- A tail call: the error's level still names the caller of optstr.
function I.optstr(v, n, fname, default)
  if v == nil then
    return default
  end
  return I.checkstr(v, n, fname)
end

function I.checkint(v, n, fname)
  local i, nonintegral = toint(v)
  if i then
    return i
  end
  error(interror(n, fname, v, nonintegral), 3)
end

function I.optint(v, n, fname, default)
  if v == nil then
    return default
  end
  return I.checkint(v, n, fname)
end

I.checknum = checker(tonumber, "number")

function I.checktable(v, n, fname)
  if type(v) ~= "table" then
    error(badtype(n, fname, "table", v), 3)
  end
  return v
end

-- A call into Python answers {ok, value..., n = count, arrays = {...}} (bridge.py). Called in
-- tail position by module functions, so level 2 is the hook code that called them.
local setmetatable, unpack = setmetatable, table.unpack
-- lakeFS's marker for a table that is a list. One table shared by every list, so hook code
-- must never reach it: a `__gc` it added would mark every list made afterwards for a
-- finalizer, and Lua runs finalizers with hooks off, where no bound stops them. The guard
-- makes `getmetatable` answer the string and `setmetatable` refuse to replace it.
local ARRAY = {_is_array = true, __metatable = "array"}
I.ARRAY = ARRAY
local no_memory = conf.no_memory

function I.results(r)
  if not r[1] then
    error(r[2], r[2] == no_memory and 0 or 2)
  end
  local arrays = r.arrays
  if arrays then
    for i = 1, #arrays do
      setmetatable(arrays[i], ARRAY)
    end
  end
  return unpack(r, 2, r.n)
end

I.modules = {}
return I
"""
