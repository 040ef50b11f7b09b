"""Lua setup: a JSON encoder written in Lua, for `encoding/json` and `encoding/yaml`'s marshal.

Encoding walks a table the script built, which may be cyclic or huge; walking it in Lua
keeps that walk under the hook and the memory limit, and keeps script tables out of
Python (see bridge.py). The output follows Go's encoding/json as lakeFS uses it: keys
sorted, ``<``, ``>`` and ``&`` escaped, invalid UTF-8 replaced by U+FFFD, a newline at the
end, and ``{indent=..., prefix=...}`` laid out as Go's Encoder.SetIndent does.

A table is a JSON array when it carries lakeFS's array marker (`array(t)`, or a list that
came from Python), or when its keys are exactly 1..n; an empty unmarked table is ``{}``.
(lakeFS encodes an unmarked list as an object with keys "1", "2", ...)
"""

SOURCE = r"""
local I = ...
local S = I.string
local format, gsub, nfind, rep, char = S.format, S.gsub, S.find, S.rep, S.char
local concat, nsort = I.concat, I.sort
local getmetatable, rawget, rawlen, next = I.getmetatable, rawget, rawlen, next
local error, type, tostring, tonumber = error, type, tostring, tonumber
local mathtype, floor, huge = math.type, math.floor, math.huge
local utf8len, results = I.utf8len, I.results
local fix_utf8 = I.py["encoding.fix_utf8"]
local MAX_DEPTH = 1000

local ESCAPES = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r",
  ["\t"] = "\\t", ["<"] = "\\u003c", [">"] = "\\u003e", ["&"] = "\\u0026",
}
for b = 0, 31 do
  local c = char(b)
  if not ESCAPES[c] then
    ESCAPES[c] = format("\\u%04x", b)
  end
end
local SEPARATORS = {["\226\128\168"] = "\\u2028", ["\226\128\169"] = "\\u2029"}

local function quote(s)
  if not utf8len(s) then
    s = results(fix_utf8(s))
  end
  s = gsub(s, '[%c"\\<>&]', ESCAPES)
  if nfind(s, "\226\128[\168\169]") then
    s = gsub(s, "\226\128[\168\169]", SEPARATORS)
  end
  return '"' .. s .. '"'
end

local function number(x)
  if mathtype(x) == "integer" then
    return format("%d", x)
  end
  if x ~= x or x == huge or x == -huge then
    error("json: unsupported value: " .. tostring(x), 0)
  end
  if x == floor(x) and x > -1e21 and x < 1e21 then
    return format("%.0f", x)
  end
  local s
  for digits = 15, 17 do
    s = format("%." .. digits .. "g", x)
    if tonumber(s) == x then
      break
    end
  end
  return (gsub(s, "e([-+])0*(%d)", "e%1%2"))
end

local function key(k)
  local t = type(k)
  if t == "string" then
    return k
  elseif t == "number" then
    return mathtype(k) == "integer" and format("%d", k) or format("%.14g", k)
  end
  error("json: table key must be a string or a number, not a " .. t, 0)
end

local function array_length(t)
  local mt = getmetatable(t)
  if mt and rawget(mt, "_is_array") then
    return rawlen(t)
  end
  local n = rawlen(t)
  if n == 0 then
    return nil
  end
  local count = 0
  for k in next, t do
    if mathtype(k) ~= "integer" or k < 1 or k > n then
      return nil
    end
    count = count + 1
  end
  return count == n and n or nil
end

function I.json_encode(value, indent, prefix)
  local out, n = {}, 0
  local pretty = indent ~= "" or prefix ~= ""
  local colon = pretty and ": " or ":"

  local function newline(depth)
    if pretty then
      n = n + 1
      out[n] = "\n" .. prefix .. rep(indent, depth)
    end
  end

  local walk

  -- An array (names nil: rawget(values, 1..count)) or an object (each names[i], sorted, with
  -- values[names[i]]), between open and close.
  local function container(open, close, count, names, values, depth)
    if count == 0 then
      out[n] = open .. close
      return
    end
    out[n] = open
    for i = 1, count do
      if i > 1 then
        n = n + 1
        out[n] = ","
      end
      newline(depth + 1)
      local item
      if names then
        n = n + 1
        out[n] = quote(names[i]) .. colon
        item = values[names[i]]
      else
        item = rawget(values, i)
      end
      walk(item, depth + 1)
    end
    newline(depth)
    n = n + 1
    out[n] = close
  end

  walk = function(v, depth)
    local t = type(v)
    n = n + 1
    if t == "nil" then
      out[n] = "null"
    elseif t == "boolean" then
      out[n] = v and "true" or "false"
    elseif t == "number" then
      out[n] = number(v)
    elseif t == "string" then
      out[n] = quote(v)
    elseif t ~= "table" then
      error("json: unsupported type: " .. t, 0)
    elseif depth >= MAX_DEPTH then
      error("json: unsupported value: tables nested deeper than " .. MAX_DEPTH .. " (a cycle?)", 0)
    else
      local len = array_length(v)
      if len then
        container("[", "]", len, nil, v, depth)
        return
      end
      local keys, items, count = {}, {}, 0
      for k, item in next, v do
        local ks = key(k)
        if items[ks] == nil then
          count = count + 1
          keys[count] = ks
        end
        items[ks] = item
      end
      nsort(keys)
      container("{", "}", count, keys, items, depth)
    end
  end

  walk(value, 0)
  n = n + 1
  out[n] = "\n"
  return concat(out, "", 1, n)
end
"""
