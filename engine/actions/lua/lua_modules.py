"""Lua setup: the modules `require` hands out, as lakeFS names them.

Each module function checks its arguments in Lua (only strings, numbers, booleans and nil
ever reach Python; bridge.py says why) and unpacks what Python answers. Where lakeFS takes
optional trailing arguments, nil counts as absent.
"""

SOURCE = r"""
local I = ...
local py, results = I.py, I.results
local checkstr, optstr, checkint, optint = I.checkstr, I.optstr, I.checkint, I.optint
local checknum, checktable = I.checknum, I.checktable
local error, select, pairs, ipairs, floor = error, select, pairs, ipairs, math.floor
-- Hook code can replace the fields of the shared `table` library; these stay the originals.
local pack, unpack = table.pack, table.unpack
local json_encode = I.json_encode
local M = I.modules

M["strings"] = function()
  local split, trim, replace = py["strings.split"], py["strings.trim"], py["strings.replace"]
  local has_prefix, has_suffix, contains = py["strings.has_prefix"], py["strings.has_suffix"], py["strings.contains"]
  return {
    split = function(s, sep)
      return results(split(checkstr(s, 1, "split"), checkstr(sep, 2, "split")))
    end,
    trim = function(s)
      return results(trim(checkstr(s, 1, "trim")))
    end,
    replace = function(s, old, new, n)
      return results(replace(checkstr(s, 1, "replace"), checkstr(old, 2, "replace"),
        checkstr(new, 3, "replace"), optint(n, 4, "replace", -1)))
    end,
    has_prefix = function(s, prefix)
      return results(has_prefix(checkstr(s, 1, "has_prefix"), checkstr(prefix, 2, "has_prefix")))
    end,
    has_suffix = function(s, suffix)
      return results(has_suffix(checkstr(s, 1, "has_suffix"), checkstr(suffix, 2, "has_suffix")))
    end,
    contains = function(s, sub)
      return results(contains(checkstr(s, 1, "contains"), checkstr(sub, 2, "contains")))
    end,
  }
end

M["path"] = function()
  local parse, join, is_hidden = py["path.parse"], py["path.join"], py["path.is_hidden"]
  local default_separator, extract_dir_name = py["path.default_separator"], py["path.extract_dir_name"]
  return {
    parse = function(p, sep)
      return results(parse(checkstr(p, 1, "parse"), optstr(sep, 2, "parse", "/")))
    end,
    join = function(sep, ...)
      local parts = pack(checkstr(sep, 1, "join"), ...)
      for i = 2, parts.n do
        parts[i] = checkstr(parts[i], i, "join")
      end
      return results(join(unpack(parts, 1, parts.n)))
    end,
    is_hidden = function(p, sep, prefix)
      return results(is_hidden(checkstr(p, 1, "is_hidden"), optstr(sep, 2, "is_hidden", "/"),
        optstr(prefix, 3, "is_hidden", "_")))
    end,
    default_separator = function()
      return results(default_separator())
    end,
    extract_dir_name = function(p)
      return results(extract_dir_name(checkstr(p, 1, "extract_dir_name")))
    end,
  }
end

M["regexp"] = function()
  local match, quote_meta, compile = py["regexp.match"], py["regexp.quote_meta"], py["regexp.compile"]
  local find, find_submatch = py["regexp.find"], py["regexp.find_submatch"]
  local find_all, find_all_submatch = py["regexp.find_all"], py["regexp.find_all_submatch"]

  -- lakeFS's compiled pattern takes `re.find(s)`; `re:find(s)` works as well.
  local function compiled(pattern)
    local re = {}
    local function args(a, b, c)
      if a == re then
        return b, c
      end
      return a, b
    end
    function re.find(...)
      local s = args(...)
      return results(find(pattern, checkstr(s, 1, "find")))
    end
    function re.find_submatch(...)
      local s = args(...)
      return results(find_submatch(pattern, checkstr(s, 1, "find_submatch")))
    end
    function re.find_all(...)
      local s, n = args(...)
      return results(find_all(pattern, checkstr(s, 1, "find_all"), optint(n, 2, "find_all", -1)))
    end
    function re.find_all_submatch(...)
      local s, n = args(...)
      return results(find_all_submatch(pattern, checkstr(s, 1, "find_all_submatch"),
        optint(n, 2, "find_all_submatch", -1)))
    end
    return re
  end

  return {
    match = function(pattern, s)
      return results(match(checkstr(pattern, 1, "match"), checkstr(s, 2, "match")))
    end,
    quote_meta = function(s)
      return results(quote_meta(checkstr(s, 1, "quote_meta")))
    end,
    compile = function(pattern)
      pattern = checkstr(pattern, 1, "compile")
      local r = compile(pattern)
      if not r[1] then
        error(r[2], 2)
      end
      return compiled(pattern)
    end,
  }
end

M["encoding/json"] = function()
  local unmarshal = py["encoding.json_unmarshal"]
  return {
    marshal = function(value, options)
      local indent, prefix = "", ""
      if options ~= nil then
        checktable(options, 2, "marshal")
        indent = optstr(options.indent, 2, "marshal", "")
        prefix = optstr(options.prefix, 2, "marshal", "")
      end
      return json_encode(value, indent, prefix)
    end,
    unmarshal = function(s)
      return results(unmarshal(checkstr(s, 1, "unmarshal")))
    end,
  }
end

M["encoding/yaml"] = function()
  local from_json, unmarshal = py["encoding.yaml_from_json"], py["encoding.yaml_unmarshal"]
  return {
    marshal = function(value)
      return results(from_json(json_encode(value, "", "")))
    end,
    unmarshal = function(s)
      return results(unmarshal(checkstr(s, 1, "unmarshal")))
    end,
  }
end

local function string_functions(names)
  local module = {}
  for lua_name, bridge_name in pairs(names) do
    local call = py[bridge_name]
    module[lua_name] = function(s)
      return results(call(checkstr(s, 1, lua_name)))
    end
  end
  return module
end

M["encoding/base64"] = function()
  return string_functions({
    encode = "encoding.base64_encode", decode = "encoding.base64_decode",
    url_encode = "encoding.base64_url_encode", url_decode = "encoding.base64_url_decode",
  })
end

M["encoding/hex"] = function()
  return string_functions({encode = "encoding.hex_encode", decode = "encoding.hex_decode"})
end

M["crypto/sha256"] = function()
  return string_functions({digest = "crypto.sha256"})
end

M["crypto/hmac"] = function()
  local sha256, sha1 = py["crypto.hmac_sha256"], py["crypto.hmac_sha1"]
  return {
    sign_sha256 = function(message, key)
      return results(sha256(checkstr(message, 1, "sign_sha256"), checkstr(key, 2, "sign_sha256")))
    end,
    sign_sha1 = function(message, key)
      return results(sha1(checkstr(message, 1, "sign_sha1"), checkstr(key, 2, "sign_sha1")))
    end,
  }
end

M["hook"] = function()
  return {
    fail = function(message)
      error("<HookFailure>" .. checkstr(message, 1, "fail") .. "</HookFailure>", 0)
    end,
  }
end

M["uuid"] = function()
  local new = py["uuid.new"]
  return {
    new = function()
      return results(new())
    end,
  }
end

-- Times are Unix nanoseconds, as lakeFS's are.
M["time"] = function()
  local now, sleep = py.time_now, py.time_sleep
  local format_iso, parse_iso = py["time.format_iso"], py["time.parse_iso"]
  return {
    now = function()
      return now()
    end,
    since = function(start)
      return now() - checknum(start, 1, "since")
    end,
    add = function(start, delta)
      start = checknum(start, 1, "add")
      checktable(delta, 2, "add")
      local hours = optint(delta.hour, 2, "add", 0)
      local minutes = optint(delta.minute, 2, "add", 0)
      local seconds = optint(delta.second, 2, "add", 0)
      return start + ((hours * 60 + minutes) * 60 + seconds) * 1000000000
    end,
    sleep = function(ns)
      sleep(checkint(ns, 1, "sleep"))
    end,
    format_iso = function(ns, zone)
      return results(format_iso(floor(checknum(ns, 1, "format_iso")), optstr(zone, 2, "format_iso", "")))
    end,
    parse_iso = function(value)
      return results(parse_iso(checkstr(value, 1, "parse_iso")))
    end,
  }
end

M["lakefs"] = function()
  local c = {}
  for _, name in ipairs({
    "stat_object", "get_object", "list_objects", "diff_refs", "diff_branch", "create_tag",
  }) do
    c[name] = py["lakefs." .. name]
  end
  local function flag(given, value)
    if given then
      return value and true or false
    end
    return nil
  end
  return {
    stat_object = function(repository, ref, path, ...)
      return results(c.stat_object(checkstr(repository, 1, "stat_object"), checkstr(ref, 2, "stat_object"),
        checkstr(path, 3, "stat_object"), flag(select("#", ...) > 0, ...)))
    end,
    get_object = function(repository, ref, path)
      return results(c.get_object(checkstr(repository, 1, "get_object"), checkstr(ref, 2, "get_object"),
        checkstr(path, 3, "get_object")))
    end,
    list_objects = function(repository, ref, after, prefix, delimiter, amount, ...)
      return results(c.list_objects(checkstr(repository, 1, "list_objects"), checkstr(ref, 2, "list_objects"),
        optstr(after, 3, "list_objects", ""), optstr(prefix, 4, "list_objects", ""),
        optstr(delimiter, 5, "list_objects", ""), optint(amount, 6, "list_objects", nil),
        flag(select("#", ...) > 0, ...)))
    end,
    diff_refs = function(repository, left_ref, right_ref, after, prefix, delimiter, amount)
      return results(c.diff_refs(checkstr(repository, 1, "diff_refs"), checkstr(left_ref, 2, "diff_refs"),
        checkstr(right_ref, 3, "diff_refs"), optstr(after, 4, "diff_refs", ""),
        optstr(prefix, 5, "diff_refs", ""), optstr(delimiter, 6, "diff_refs", ""),
        optint(amount, 7, "diff_refs", nil)))
    end,
    diff_branch = function(repository, branch, after, amount, prefix, delimiter)
      return results(c.diff_branch(checkstr(repository, 1, "diff_branch"), checkstr(branch, 2, "diff_branch"),
        optstr(after, 3, "diff_branch", ""), optint(amount, 4, "diff_branch", nil),
        optstr(prefix, 5, "diff_branch", ""), optstr(delimiter, 6, "diff_branch", "")))
    end,
    create_tag = function(repository, ref, tag)
      return results(c.create_tag(checkstr(repository, 1, "create_tag"), checkstr(ref, 2, "create_tag"),
        checkstr(tag, 3, "create_tag")))
    end,
  }
end
"""
