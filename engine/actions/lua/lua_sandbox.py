"""Lua setup, last chunk: the environment hook code runs in, and the function that runs it.

Hook code gets a table of its own as its globals (`_G` is that table): the safe base
functions, the string, table, math, utf8 and coroutine libraries (with the replacements of
the other chunks), `print`, a `require` that knows only the sandbox's modules (and what the
script puts in `package.preload`), and lakeFS's globals `action`, `args`, `username` and
`array`. It is compiled as text only (no bytecode, which can break the VM's invariants).
`setmetatable` refuses a metatable with `__gc`: Lua runs finalizers with hooks off, where
no bound could stop them; and `getmetatable` never hands out a metatable the sandbox shares
between values (a `__gc` added to one would mark every value it is attached to later).

`run` reports the outcome through Python's `report` before it returns: once the script
has ended, the hook fails every instruction, the end of `run` included.
"""

SOURCE = r"""
local I, prepared, username, script, chunkname = ...
local action, args = I.results(prepared)
local error, type, tostring, select, rawget, format = error, type, tostring, select, rawget, I.string.format
local setmetatable, getmetatable = setmetatable, I.getmetatable
local pcall, xpcall, rethrow = I.pcall, I.xpcall, I.rethrow
local checkstr, checktable, optint, badtype, tostr = I.checkstr, I.checktable, I.optint, I.badtype, I.tostr
local co_create, co_wrap, co_resume, co_close = I.co_create, I.co_wrap, I.co_resume, I.co_close
local install_hook, stopped, sethook = I.install_hook, I.stopped, I.sethook
local collectgarbage, modules, ARRAY = I.collectgarbage, I.modules, I.ARRAY
local write, report = I.py.write, I.py.report

local env = {}
for name, value in pairs(I.base) do
  env[name] = value
end

-- Lua runs finalizers with hooks off, so no bound could stop one; and an object is marked
-- for finalization only when it gets a metatable that has __gc at that moment.
env.setmetatable = function(t, mt)
  if type(t) ~= "table" then
    error(badtype(1, "setmetatable", "table", t), 2)
  elseif mt ~= nil and type(mt) ~= "table" then
    error(badtype(2, "setmetatable", "nil or table", mt), 2)
  elseif mt and rawget(mt, "__gc") ~= nil then
    error("__gc metamethods are not supported", 2)
  end
  local current = getmetatable(t)
  if current and rawget(current, "__metatable") ~= nil then
    error("cannot change a protected metatable", 2)
  end
  return setmetatable(t, mt)
end

-- The metatables the sandbox attaches (the list marker, strings') are shared by every value
-- that has them: hook code gets their guard, never the table, even should one lack a guard.
local HOST_METATABLES = {[ARRAY] = true, [getmetatable("")] = true}
local base_getmetatable = I.base.getmetatable
env.getmetatable = function(...)
  local mt = select("#", ...) > 0 and getmetatable((...)) or nil
  if mt ~= nil and HOST_METATABLES[mt] then
    local guard = rawget(mt, "__metatable")
    if guard == nil then
      return "protected"
    end
    return guard
  end
  return base_getmetatable(...)
end

env.pcall = function(f, ...)
  return rethrow(pcall(f, ...))
end

env.xpcall = function(f, handler, ...)
  return rethrow(xpcall(f, handler, ...))
end

-- Lua looks the hook function up per coroutine: each one installs it before the script's code.
local function hooked(f)
  return function(...)
    install_hook()
    return f(...)
  end
end

coroutine.create = function(f)
  if type(f) ~= "function" then
    error(badtype(1, "create", "function", f), 2)
  end
  return co_create(hooked(f))
end

coroutine.wrap = function(f)
  if type(f) ~= "function" then
    error(badtype(1, "wrap", "function", f), 2)
  end
  return co_wrap(hooked(f))
end

coroutine.resume = function(co, ...)
  if type(co) ~= "thread" then
    error(badtype(1, "resume", "coroutine", co), 2)
  end
  return rethrow(co_resume(co, ...))
end

coroutine.close = function(co)
  if type(co) ~= "thread" then
    error(badtype(1, "close", "coroutine", co), 2)
  end
  return rethrow(co_close(co))
end

env.string, env.table, env.math, env.utf8, env.coroutine = string, table, math, utf8, coroutine

env.print = function(...)
  local values = {...}
  for i = 1, select("#", ...) do
    if i > 1 then
      write("\t")
    end
    write(tostring(values[i]))
  end
  write("\n")
end

local COLLECTGARBAGE = {collect = true, count = true, step = true, isrunning = true}
env.collectgarbage = function(option, step)
  option = option or "collect"
  if not COLLECTGARBAGE[option] then
    error(format("bad argument #1 to 'collectgarbage' (option '%s' is not allowed)", tostring(option)), 2)
  end
  return collectgarbage(option, optint(step, 2, "collectgarbage", 0))
end

local loaded, preload = {}, {}
env.package = {loaded = loaded, preload = preload}
env.require = function(name)
  name = checkstr(name, 1, "require")
  local module = rawget(loaded, name)
  if module ~= nil then
    return module
  end
  local open = rawget(preload, name)
  if open == nil then
    open = rawget(modules, name)
  end
  if open == nil then
    error(format("module '%s' not found", name), 2)
  end
  module = open(name)
  if module == nil then
    module = true
  end
  loaded[name] = module
  return module
end

env.array = function(t)
  return setmetatable(checktable(t, 1, "array"), ARRAY)
end

env.action, env.args, env.username = action, args, username
env._G = env

local function message(e)
  local s = tostr(e)
  if s then
    return s
  end
  local mt = getmetatable(e)
  if mt and rawget(mt, "__tostring") then
    local ok, s = pcall(tostring, e)
    if ok and type(s) == "string" then
      return s
    end
  end
  return "(error object is a " .. type(e) .. " value)"
end

local function handler(e)
  return stopped() or message(e)
end

return function()
  local main, err = I.load(script, "=" .. chunkname, "t", env)
  script = nil
  if main then
    install_hook()
    local ok, e = xpcall(main, handler)
    sethook()
    err = not ok and e or nil
  end
  report(err == nil, err or "", stopped() or "")
  I.close()
end
"""
