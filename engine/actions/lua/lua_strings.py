"""Lua setup: string.find, match, gmatch and gsub that the bounds can stop, and string.rep.

Lua's pattern matcher is C code that backtracks: ``("a"):rep(40):find(("a*"):rep(20) .. "b")``
takes longer than the universe has, and a count hook never fires inside a C function.
Plain search (``find`` with ``plain``) is C too and takes time the product of the two
lengths.

Each call first bounds the work the C matcher may do, from the subject's length and the
pattern: every ``*``, ``+`` or ``-`` item may try each position of the subject again (one
that ends the pattern succeeds or fails once), ``?`` doubles the tries, ``%b`` and back
references scan the subject. Below a budget the C functions run as they are; above it, a
port of Lua 5.4's matcher written in Lua runs instead, with the same results and errors,
under the hook (instruction and time bounds) and the memory limit. Plain search above the
budget goes to Python's linear-time substring search.

``string.rep`` with an empty string and separator loops in C once per repetition without
allocating; that case answers at once, and a result larger than the memory limit fails as
a memory error before C tries to allocate it.
"""

SOURCE = r"""
local I = ...
local S = I.string
local nfind, nmatch, ngmatch, ngsub, nrep = S.find, S.match, S.gmatch, S.gsub, S.rep
local byte, sub, format = S.byte, S.sub, S.format
local concat, unpack = I.concat, I.unpack
local error, type, tostring, pcall = error, type, tostring, I.pcall
local native, positioned = I.native, I.positioned
local checkstr, optstr, checkint, optint, badtype = I.checkstr, I.optstr, I.checkint, I.optint, I.badtype
local find_plain = I.py.find_plain
local BUDGET = I.conf.pattern_budget
local MAX_MEMORY = I.conf.max_memory
local NO_MEMORY = I.conf.no_memory

local MAXCCALLS = 200
local MAXCAPTURES = 32
local CAP_UNFINISHED = -1
local CAP_POSITION = -2
local L_ESC, OPEN, CLOSE, CARET, DOLLAR, DOT = 37, 40, 41, 94, 36, 46
local LBRACKET, RBRACKET, STAR, PLUS, MINUS, QUESTION = 91, 93, 42, 43, 45, 63

-- Character classes in the C locale, as the C matcher sees them there.
local CLASS = {}
local function class(letter, ...)
  local set = {}
  local ranges = {...}
  for i = 1, #ranges, 2 do
    for c = ranges[i], ranges[i + 1] do
      set[c] = true
    end
  end
  CLASS[byte(letter)] = set
end
class("a", 65, 90, 97, 122)
class("c", 0, 31, 127, 127)
class("d", 48, 57)
class("g", 33, 126)
class("l", 97, 122)
class("p", 33, 47, 58, 64, 91, 96, 123, 126)
class("s", 9, 13, 32, 32)
class("u", 65, 90)
class("w", 48, 57, 65, 90, 97, 122)
class("x", 48, 57, 65, 70, 97, 102)
class("z", 0, 0)  -- deprecated, still in 5.4

local function match_class(c, cl)
  local set = CLASS[cl]
  if set then
    return set[c] == true
  end
  if cl >= 65 and cl <= 90 then
    set = CLASS[cl + 32]
    if set then
      return set[c] ~= true
    end
  end
  return cl == c
end

-- The matcher of lstrlib.c over subject S and pattern P, with 1-based positions.
local function matcher(S, P)
  local src_end, p_end = #S + 1, #P + 1
  local level, depth = 0, MAXCCALLS
  local cap_init, cap_len = {}, {}
  local do_match

  local function class_end(p)
    local c = byte(P, p)
    p = p + 1
    if c == L_ESC then
      if p >= p_end then
        error("malformed pattern (ends with '%')")
      end
      return p + 1
    elseif c == LBRACKET then
      if byte(P, p) == CARET then
        p = p + 1
      end
      repeat
        if p >= p_end then
          error("malformed pattern (missing ']')")
        end
        local cc = byte(P, p)
        p = p + 1
        if cc == L_ESC and p < p_end then
          p = p + 1
        end
      until byte(P, p) == RBRACKET
      return p + 1
    end
    return p
  end

  local function bracket_class(c, p, ec)
    local sig = true
    if byte(P, p + 1) == CARET then
      sig = false
      p = p + 1
    end
    p = p + 1
    while p < ec do
      local pc = byte(P, p)
      if pc == L_ESC then
        p = p + 1
        if match_class(c, byte(P, p)) then
          return sig
        end
        p = p + 1
      elseif byte(P, p + 1) == MINUS and p + 2 < ec then
        if pc <= c and c <= byte(P, p + 2) then
          return sig
        end
        p = p + 3
      else
        if pc == c then
          return sig
        end
        p = p + 1
      end
    end
    return not sig
  end

  local function single(s, p, ep)
    if s >= src_end then
      return false
    end
    local c, pc = byte(S, s), byte(P, p)
    if pc == DOT then
      return true
    elseif pc == L_ESC then
      return match_class(c, byte(P, p + 1))
    elseif pc == LBRACKET then
      return bracket_class(c, p, ep - 1)
    end
    return pc == c
  end

  local function max_expand(s, p, ep)
    local i = 0
    while single(s + i, p, ep) do
      i = i + 1
    end
    while i >= 0 do
      local res = do_match(s + i, ep + 1)
      if res then
        return res
      end
      i = i - 1
    end
    return nil
  end

  local function min_expand(s, p, ep)
    while true do
      local res = do_match(s, ep + 1)
      if res then
        return res
      elseif single(s, p, ep) then
        s = s + 1
      else
        return nil
      end
    end
  end

  local function start_capture(s, p, what)
    if level >= MAXCAPTURES then
      error("too many captures")
    end
    level = level + 1
    cap_init[level], cap_len[level] = s, what
    local res = do_match(s, p)
    if not res then
      level = level - 1
    end
    return res
  end

  local function end_capture(s, p)
    local l = level
    while l >= 1 and cap_len[l] ~= CAP_UNFINISHED do
      l = l - 1
    end
    if l < 1 then
      error("invalid pattern capture")
    end
    cap_len[l] = s - cap_init[l]
    local res = do_match(s, p)
    if not res then
      cap_len[l] = CAP_UNFINISHED
    end
    return res
  end

  local function match_balance(s, p)
    if p >= p_end - 1 then
      error("malformed pattern (missing arguments to '%b')")
    end
    local b, e = byte(P, p), byte(P, p + 1)
    if s >= src_end or byte(S, s) ~= b then
      return nil
    end
    local cont = 1
    s = s + 1
    while s < src_end do
      local c = byte(S, s)
      if c == e then
        cont = cont - 1
        if cont == 0 then
          return s + 1
        end
      elseif c == b then
        cont = cont + 1
      end
      s = s + 1
    end
    return nil
  end

  local function match_capture(s, digit)
    local l = digit - 48
    if l < 1 or l > level or cap_len[l] == CAP_UNFINISHED then
      error(format("invalid capture index %%%d", l))
    end
    local init, len = cap_init[l], cap_len[l]
    if len >= 0 and src_end - s >= len and sub(S, init, init + len - 1) == sub(S, s, s + len - 1) then
      return s + len
    end
    return nil
  end

  do_match = function(s, p)
    if depth == 0 then
      error("pattern too complex")
    end
    depth = depth - 1
    while p ~= p_end do
      local pc = byte(P, p)
      local p1 = byte(P, p + 1)
      if pc == OPEN then
        if p1 == CLOSE then
          s = start_capture(s, p + 2, CAP_POSITION)
        else
          s = start_capture(s, p + 1, CAP_UNFINISHED)
        end
        break
      elseif pc == CLOSE then
        s = end_capture(s, p + 1)
        break
      elseif pc == DOLLAR and p + 1 == p_end then
        if s ~= src_end then
          s = nil
        end
        break
      elseif pc == L_ESC and p1 == 98 then  -- %b
        s = match_balance(s, p + 2)
        if not s then
          break
        end
        p = p + 4
      elseif pc == L_ESC and p1 == 102 then  -- %f
        p = p + 2
        if byte(P, p) ~= LBRACKET then
          error("missing '[' after '%f' in pattern")
        end
        local ep = class_end(p)
        local previous = s == 1 and 0 or byte(S, s - 1)
        local current = s < src_end and byte(S, s) or 0
        if bracket_class(previous, p, ep - 1) or not bracket_class(current, p, ep - 1) then
          s = nil
          break
        end
        p = ep
      elseif pc == L_ESC and p1 and p1 >= 48 and p1 <= 57 then  -- back reference
        s = match_capture(s, p1)
        if not s then
          break
        end
        p = p + 2
      else
        local ep = class_end(p)
        local epc = byte(P, ep)
        if not single(s, p, ep) then
          if epc == STAR or epc == QUESTION or epc == MINUS then
            p = ep + 1
          else
            s = nil
            break
          end
        elseif epc == QUESTION then
          local res = do_match(s + 1, ep + 1)
          if res then
            s = res
            break
          end
          p = ep + 1
        elseif epc == PLUS then
          s = max_expand(s + 1, p, ep)
          break
        elseif epc == STAR then
          s = max_expand(s, p, ep)
          break
        elseif epc == MINUS then
          s = min_expand(s, p, ep)
          break
        else
          s = s + 1
          p = ep
        end
      end
    end
    depth = depth + 1
    return s
  end

  local m = {}

  function m.try(s, p)
    level, depth = 0, MAXCCALLS
    return do_match(s, p)
  end

  function m.capture(i, s, e)
    if i > level then
      if i ~= 1 then
        error(format("invalid capture index %%%d", i))
      end
      return sub(S, s, e - 1)
    end
    local init, len = cap_init[i], cap_len[i]
    if len == CAP_UNFINISHED then
      error("unfinished capture")
    elseif len == CAP_POSITION then
      return init
    end
    return sub(S, init, init + len - 1)
  end

  -- The captures, or the whole match (from s to e) when there are none and s is given.
  function m.captures(s, e)
    local n = (level == 0 and s) and 1 or level
    local caps = {}
    for i = 1, n do
      caps[i] = m.capture(i, s, e)
    end
    return unpack(caps, 1, n)
  end

  return m
end

local function lua_find(S, P, init, find)
  local m = matcher(S, P)
  local anchor = byte(P, 1) == CARET
  local p = anchor and 2 or 1
  local s1, src_end = init, #S + 1
  repeat
    local e = m.try(s1, p)
    if e then
      if find then
        return s1, e - 1, m.captures(nil, nil)
      end
      return m.captures(s1, e)
    end
    s1 = s1 + 1
  until anchor or s1 > src_end
  return nil
end

local function lua_gmatch(S, P, init)
  local m = matcher(S, P)
  local src, src_end, last = init, #S + 1, nil
  return function()
    while src <= src_end do
      local start = src
      local e = m.try(start, 1)
      if e and e ~= last then
        src, last = e, e
        return m.captures(start, e)
      end
      src = src + 1
    end
    return nil
  end
end

local function add_string(out, k, m, news, S, s, e)
  local i = 1
  while true do
    local at = nfind(news, "%", i, true)
    if not at then
      break
    end
    k = k + 1
    out[k] = sub(news, i, at - 1)
    local d = byte(news, at + 1)
    k = k + 1
    if d == L_ESC then
      out[k] = "%"
    elseif d == 48 then
      out[k] = sub(S, s, e - 1)
    elseif d and d >= 49 and d <= 57 then
      local cap = m.capture(d - 48, s, e)
      out[k] = type(cap) == "number" and tostring(cap) or cap
    else
      error("invalid use of '%' in replacement string")
    end
    i = at + 2
  end
  k = k + 1
  out[k] = sub(news, i)
  return k
end

local function lua_gsub(S, P, repl, kind, max_n)
  local m = matcher(S, P)
  local anchor = byte(P, 1) == CARET
  local p = anchor and 2 or 1
  local src, src_end, last = 1, #S + 1, nil
  local copied = 1  -- S[copied, src) is unchanged text not yet in out
  local out, k, n, changed = {}, 0, 0, false
  while n < max_n do
    local e = m.try(src, p)
    if e and e ~= last then
      n = n + 1
      k = k + 1
      out[k] = sub(S, copied, src - 1)
      if kind == "string" then
        k = add_string(out, k, m, repl, S, src, e)
        changed = true
      else
        local v
        if kind == "function" then
          v = repl(m.captures(src, e))
        else
          v = repl[m.capture(1, src, e)]
        end
        local vt = type(v)
        k = k + 1
        if not v then
          out[k] = sub(S, src, e - 1)
        elseif vt == "string" or vt == "number" then
          out[k] = v
          changed = true
        else
          error(format("invalid replacement value (a %s)", vt))
        end
      end
      src, last, copied = e, e, e
    elseif src < src_end then
      src = src + 1
    else
      break
    end
    if anchor then
      break
    end
  end
  if not changed then
    return S, n
  end
  k = k + 1
  out[k] = sub(S, copied)
  return concat(out, "", 1, k), n
end

-- Work the C matcher may do: tries of a pattern item, multiplied over the pattern.
local function skip_set(P, i)
  if byte(P, i) ~= LBRACKET then
    return nil
  end
  local n = #P
  i = i + 1
  if byte(P, i) == CARET then
    i = i + 1
  end
  repeat
    if i > n then
      return nil
    end
    local c = byte(P, i)
    i = i + 1
    if c == L_ESC then
      i = i + 1
    end
  until byte(P, i) == RBRACKET
  return i + 1
end

local function cheap(P, n, starts, anchored)
  local plen = #P
  local i = 1
  if anchored and byte(P, 1) == CARET then
    starts, i = 1, 2
  end
  -- Floats: the products may exceed the integers.
  local tries = n + 1.0
  local cost = starts * (plen + 1.0)
  local last, trailing = 1, false  -- the latest repeated item's factor, and whether it ends the pattern
  while i <= plen do
    local c = byte(P, i)
    local item_end
    if c == CLOSE then
      i = i + 1
    elseif c == OPEN or (c == DOLLAR and i == plen) then
      i, trailing = i + 1, false
    elseif c == L_ESC then
      local d = byte(P, i + 1)
      if not d then
        return false
      elseif d == 98 or (d >= 48 and d <= 57) then  -- %b, back reference: a scan each
        cost, trailing = cost * tries, false
        i = i + (d == 98 and 4 or 2)
      elseif d == 102 then
        i = skip_set(P, i + 2)
        if not i then
          return false
        end
        trailing = false
      else
        item_end = i + 2
      end
    elseif c == LBRACKET then
      item_end = skip_set(P, i)
      if not item_end then
        return false
      end
    else
      item_end = i + 1
    end
    if item_end then
      local q = byte(P, item_end)
      if q == STAR or q == PLUS or q == MINUS then
        cost, last, trailing = cost * last, tries, true
        i = item_end + 1
      elseif q == QUESTION then
        cost, trailing = cost * 2, false
        i = item_end + 1
      else
        trailing = false
        i = item_end
      end
    end
    if cost > BUDGET then
      return false
    end
  end
  if not trailing then
    cost = cost * last
  end
  return cost <= BUDGET
end

local function has_specials(P)
  return nfind(P, "[%^%$%*%+%?%.%(%[%%%-]") ~= nil
end

local function start(init, len, n, fname)
  init = optint(init, n, fname, 1)
  if init > 0 then
    return init
  elseif init == 0 or init < -len then
    return 1
  end
  return len + init + 1
end

-- find (is_find) and match, as Lua's own str_find_aux serves both. Called in tail position, so
-- that a bad argument's error still names the hook code that called find or match.
local function find_aux(s, p, init, plain, is_find, fname)
  s, p = checkstr(s, 1, fname), checkstr(p, 2, fname)
  local len = #s
  local i = start(init, len, 3, fname)
  if i > len + 1 then
    return nil
  end
  if is_find and (plain or not has_specials(p)) then
    if (len - i + 1) * #p <= BUDGET then
      return positioned(pcall(native, nfind, s, p, i, true))
    end
    local at = find_plain(s, p, i)
    if at == 0 then
      return nil
    end
    return at, at + #p - 1
  end
  if cheap(p, len - i + 1, len - i + 2, true) then
    return positioned(pcall(native, is_find and nfind or nmatch, s, p, i))
  end
  return positioned(pcall(lua_find, s, p, i, is_find))
end

local function find(s, p, init, plain)
  return find_aux(s, p, init, plain, true, "find")
end

local function match(s, p, init)
  return find_aux(s, p, init, false, false, "match")
end

local function gmatch(s, p, init)
  s, p = checkstr(s, 1, "gmatch"), checkstr(p, 2, "gmatch")
  local len = #s
  local i = start(init, len, 3, "gmatch")
  if i > len + 1 then
    i = len + 2
  end
  local step = cheap(p, len, len + 1, false) and ngmatch(s, p, i) or lua_gmatch(s, p, i)
  return function()
    return positioned(pcall(native, step))
  end
end

local REPL_KINDS = {string = "string", number = "string", ["function"] = "function", table = "table"}

local function gsub(s, p, repl, n)
  s, p = checkstr(s, 1, "gsub"), checkstr(p, 2, "gsub")
  local kind = REPL_KINDS[type(repl)]
  if not kind then
    error(badtype(3, "gsub", "string/function/table", repl), 2)
  end
  local max_n = optint(n, 4, "gsub", #s + 1)
  if cheap(p, #s, #s + 1, true) then
    return positioned(pcall(native, ngsub, s, p, repl, max_n))
  end
  if kind == "string" then
    repl = tostring(repl)
  end
  return positioned(pcall(lua_gsub, s, p, repl, kind, max_n))
end

local function rep(s, n, sep)
  s, n = checkstr(s, 1, "rep"), checkint(n, 2, "rep")
  sep = optstr(sep, 3, "rep", "")
  if n <= 0 or (s == "" and sep == "") then
    return ""
  end
  if (#s + #sep) * (n + 0.0) - #sep >= MAX_MEMORY then
    error(NO_MEMORY, 0)
  end
  return positioned(pcall(native, nrep, s, n, sep))
end

string.find, string.match, string.gmatch, string.gsub, string.rep = find, match, gmatch, gsub, rep
"""
