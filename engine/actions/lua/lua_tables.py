"""Lua setup: table.insert, remove, move, concat and sort that the bounds can stop.

Lua's versions loop in C over a range the script chooses: a `__len` metamethod can claim a
length of 2^63 and `table.move` takes any bounds, and moving or shifting nils through a
plain table allocates nothing, so neither the count hook (which never fires inside C) nor
the memory limit would end the loop. These run the same loops in Lua, under the hook, with
Lua's semantics (metamethods included) and messages. `concat` and `sort` gather the
elements into a plain table first and hand that to the C function, whose work is then
bounded by the memory the gathered elements take.
"""

SOURCE = r"""
local I = ...
local error, type, select, format = error, type, select, I.string.format
local checkint, optint, optstr, checktable, badtype = I.checkint, I.optint, I.optstr, I.checktable, I.badtype
local nconcat, nsort = I.concat, I.sort
local pcall, native, positioned = I.pcall, I.native, I.positioned
local MAXINTEGER = math.maxinteger

local function insert(t, ...)
  checktable(t, 1, "insert")
  local e = #t + 1
  local nargs = select("#", ...)
  if nargs == 1 then
    t[e] = ...
    return
  elseif nargs ~= 2 then
    error("wrong number of arguments to 'insert'", 2)
  end
  local pos, v = ...
  pos = checkint(pos, 2, "insert")
  if pos < 1 or pos > e then
    error("bad argument #2 to 'insert' (position out of bounds)", 2)
  end
  for i = e, pos + 1, -1 do
    t[i] = t[i - 1]
  end
  t[pos] = v
end

local function remove(t, pos)
  checktable(t, 1, "remove")
  local size = #t
  pos = optint(pos, 2, "remove", size)
  if pos ~= size and (pos < 1 or pos > size + 1) then
    error("bad argument #2 to 'remove' (position out of bounds)", 2)
  end
  local v = t[pos]
  while pos < size do
    t[pos] = t[pos + 1]
    pos = pos + 1
  end
  t[pos] = nil
  return v
end

local function move(a1, f, e, t, a2)
  f = checkint(f, 2, "move")
  e = checkint(e, 3, "move")
  t = checkint(t, 4, "move")
  if a2 == nil then
    a2 = a1
  end
  checktable(a1, 1, "move")
  checktable(a2, 5, "move")
  if e >= f then
    if not (f > 0 or e < MAXINTEGER + f) then
      error("bad argument #3 to 'move' (too many elements to move)", 2)
    end
    local n = e - f + 1
    if t > MAXINTEGER - n + 1 then
      error("bad argument #4 to 'move' (destination wrap around)", 2)
    end
    if t > e or t <= f or a1 ~= a2 then
      for i = 0, n - 1 do
        a2[t + i] = a1[f + i]
      end
    else
      for i = n - 1, 0, -1 do
        a2[t + i] = a1[f + i]
      end
    end
  end
  return a2
end

local function concat(list, sep, i, j)
  checktable(list, 1, "concat")
  sep = optstr(sep, 2, "concat", "")
  i = optint(i, 3, "concat", 1)
  if j == nil then
    j = #list
  else
    j = checkint(j, 4, "concat")
  end
  local parts, n = {}, 0
  for k = i, j do
    local v = list[k]
    local vt = type(v)
    if vt ~= "string" and vt ~= "number" then
      error(format("invalid value (at index %d) in table for 'concat'", k), 2)
    end
    n = n + 1
    parts[n] = v
  end
  return nconcat(parts, sep, 1, n)
end

local function sorted(list, items, n, ok, ...)
  if not ok then
    return positioned(ok, ...)
  end
  for k = 1, n do
    list[k] = items[k]
  end
end

local function sort(list, comp)
  checktable(list, 1, "sort")
  if comp ~= nil and type(comp) ~= "function" then
    error(badtype(2, "sort", "function", comp), 2)
  end
  local n = #list
  if n < 2 then
    return
  elseif n >= 2147483647 then
    error("bad argument #1 to 'sort' (array too big)", 2)
  end
  local items = {}
  for k = 1, n do
    items[k] = list[k]
  end
  return sorted(list, items, n, pcall(native, nsort, items, comp))
end

table.insert, table.remove, table.move, table.concat, table.sort = insert, remove, move, concat, sort
"""
