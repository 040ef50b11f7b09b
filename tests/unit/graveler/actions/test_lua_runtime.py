"""The Lua hook runtime: lakeFS's globals and modules, the sandbox, and the bounds."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

import lupa.lua54 as lupa  # type: ignore[import-untyped]  # lupa ships no type information
import pytest

from engine.actions.lua import LuaLimits, LuaOutcome, lua_action, run_lua
from engine.actions.lua import runtime as lua_runtime
from engine.actions.lua.output import BoundedOutput

EVENT = {
    "event_type": "pre-merge",
    "event_time": "2024-05-01T10:00:00Z",
    "action_name": "check formats",
    "hook_id": "formats",
    "repository_id": "repo1",
    "branch_id": "main",
    "source_ref": "feature",
    "commit_message": "merge feature",
    "committer": "alice",
    "commit_metadata": {"owner": "data-team", "ticket": "T-1"},
    "merge_source": "feature",
}
# Small bounds, so that a test of a bound ends quickly.
QUICK = LuaLimits(timeout_seconds=0.25, max_memory_bytes=8 << 20, max_instructions=10**12)
# For scripts that must end on the memory bound: a time bound that a loaded machine cannot reach
# first (filling 8 MiB takes well under a second on an idle one).
MEMORY = LuaLimits(timeout_seconds=30.0, max_memory_bytes=8 << 20, max_instructions=10**12)


class FakeCalls:
    """lakeFS's REST answers, recorded; a diff of one page holding `paths`."""

    def __init__(self, paths: tuple[str, ...] = ("tables/a.parquet", "tables/b.csv")) -> None:
        self.paths = paths
        self.requests: list[tuple[Any, ...]] = []

    def stat_object(self, repository: str, ref: str, path: str, user_metadata: bool) -> tuple[int, Any]:
        self.requests.append(("stat_object", repository, ref, path, user_metadata))
        return 200, {"path": path, "size_bytes": 12, "checksum": "abc", "metadata": {"k": "v"}}

    def get_object(self, repository: str, ref: str, path: str) -> tuple[int, bytes]:
        self.requests.append(("get_object", repository, ref, path))
        if path == "missing":
            return 404, b'{"message":"not found"}'
        return 200, b"name: sales\nfields: [a, b]\n\xff"

    def list_objects(
        self, repository: str, ref: str, after: str, prefix: str, delimiter: str, amount: int, user_metadata: bool
    ) -> tuple[int, Any]:
        self.requests.append(("list_objects", repository, ref, after, prefix, delimiter, amount, user_metadata))
        if ref == "boom":
            raise RuntimeError("connection to 10.0.0.7:9000 refused")
        return 200, {"results": [], "pagination": {"has_more": False, "next_offset": "", "results": 0}}

    def diff_refs(
        self, repository: str, left_ref: str, right_ref: str, after: str, prefix: str, delimiter: str, amount: int
    ) -> tuple[int, Any]:
        self.requests.append(("diff_refs", repository, left_ref, right_ref, after, prefix, delimiter, amount))
        results = [{"path": p, "type": "added", "path_type": "object", "size_bytes": 5} for p in self.paths]
        return 200, {"results": results, "pagination": {"has_more": False, "next_offset": "", "results": len(results)}}

    def diff_branch(
        self, repository: str, branch: str, after: str, amount: int, prefix: str, delimiter: str
    ) -> tuple[int, Any]:
        self.requests.append(("diff_branch", repository, branch, after, amount, prefix, delimiter))
        return 200, {"results": [], "pagination": {"has_more": False}}

    def create_tag(self, repository: str, ref: str, tag: str) -> tuple[int, Any]:
        self.requests.append(("create_tag", repository, ref, tag))
        return 201, {"id": tag, "commit_id": "c0ffee"}


def run(
    script: str,
    *,
    args: dict[str, Any] | None = None,
    calls: FakeCalls | None = None,
    limits: LuaLimits = LuaLimits(),  # noqa: B008 - frozen
) -> LuaOutcome:
    return run_lua(script, EVENT, args or {}, calls or FakeCalls(), limits, username="alice")


def lines(script: str, **kwargs: Any) -> list[str]:
    outcome = run(script, **kwargs)
    assert outcome.ok, outcome.error
    return outcome.output.splitlines()


# Running a script


def test_a_passing_script_succeeds_with_its_output() -> None:
    outcome = run('print("hello", 1 + 2, nil, true) print(username)')
    assert outcome == LuaOutcome(ok=True, output="hello\t3\tnil\ttrue\nalice\n", error="")


def test_error_fails_the_hook_with_its_message() -> None:
    outcome = run('print("checking")\nerror("forbidden paths found")')
    assert not outcome.ok
    assert outcome.error == "hook:2: forbidden paths found"
    assert outcome.output == "checking\n"


def test_error_objects_other_than_strings() -> None:
    assert run("error({code = 3})").error == "(error object is a table value)"
    assert run('error(setmetatable({}, {__tostring = function() return "custom" end}))').error == "custom"
    assert run("error(42)").error == "42"


def test_hook_fail_reports_the_message_alone() -> None:
    outcome = run('local hook = require("hook")\nhook.fail("no metadata for tables/a")')
    assert (outcome.ok, outcome.error) == (False, "no metadata for tables/a")


def test_syntax_errors_fail_with_their_line() -> None:
    outcome = run("local x = 1\nif x then\nprint(x)\n")
    assert not outcome.ok and outcome.error.startswith("hook:4:") and "'end' expected" in outcome.error


def test_print_output_keeps_its_beginning_and_end() -> None:
    limits = LuaLimits(max_output_bytes=100)
    outcome = run('for i = 1, 1000 do print(string.format("line %04d", i)) end', limits=limits)
    assert outcome.ok
    head, dropped, tail = outcome.output.partition("[... ")
    assert head.startswith("line 0001\nline 0002\n") and len(head) <= 51
    assert dropped == "[... " and tail.startswith("9900 bytes of output dropped ...]\n")
    assert tail.endswith("line 1000\n")


def test_bounded_output_keeps_everything_that_fits() -> None:
    output = BoundedOutput(10)
    output.write(b"abc")
    output.write(b"de")
    assert output.text() == "abcde"
    output.write(b"0123456789")
    assert output.text() == "abcde\n[... 5 bytes of output dropped ...]\n56789"


# lakeFS's globals


def test_action_has_lakefs_shape() -> None:
    out = lines(
        """
        print(action.repository_id, action.branch_id, action.source_ref, action.event_type)
        print(action.hook_id, action.action_name, action.merge_source, action.tag_id == "", action.commit_id == "")
        local commit = action.commit
        print(commit.message, commit.committer, commit.metadata.owner, commit.metadata.ticket)
        print(#action.commit.parents, action.commit.version, action.commit.creation_date)
        """
    )
    assert out == [
        "repo1\tmain\tfeature\tpre-merge",
        "formats\tcheck formats\tfeature\ttrue\ttrue",
        "merge feature\talice\tdata-team\tT-1",
        "0\t0\t0001-01-01T00:00:00Z",
    ]


def test_action_table_from_the_webhook_payload() -> None:
    action = lua_action({**EVENT, "commit_parents": ["p1"], "commit_version": 1, "run_id": "r1"})
    assert set(action) == {
        "action_name", "hook_id", "run_id", "pre_run_id", "event_type", "commit_id", "branch_id", "source_ref",
        "tag_id", "merge_source", "repository_id", "storage_namespace", "commit",
    }  # fmt: skip
    assert action["run_id"] == "r1" and action["tag_id"] == ""
    assert action["commit"] == {
        "message": "merge feature",
        "committer": "alice",
        "meta_range_id": "",
        "creation_date": "0001-01-01T00:00:00Z",
        "version": 1,
        "metadata": {"owner": "data-team", "ticket": "T-1"},
        "parents": ["p1"],
    }


def test_args_become_nested_tables() -> None:
    args = {"allow_list": ["parquet", "orc"], "ignore_hidden": True, "limits": {"max": 3, "ratio": 0.5}, "n": None}
    out = lines(
        """
        print(#args.allow_list, args.allow_list[1], args.allow_list[2], args.ignore_hidden)
        print(args.limits.max, args.limits.ratio, math.type(args.limits.max), args.n)
        for i, ext in ipairs(args.allow_list) do print(i, ext) end
        """,
        args=args,
    )
    assert out == ["2\tparquet\torc\ttrue", "3\t0.5\tinteger\tnil", "1\tparquet", "2\torc"]


def test_json_marshal_of_action_lists_every_field() -> None:
    out = run('print(require("encoding/json").marshal(action))').output
    decoded = json.loads(out)
    assert decoded["commit"]["parents"] == [] and decoded["commit"]["metadata"]["owner"] == "data-team"
    assert decoded["storage_namespace"] == "" and decoded["repository_id"] == "repo1"


# Modules


def test_json_round_trip_and_go_formatting() -> None:
    out = lines(
        r"""
        local json = require("encoding/json")
        local t = {b = 1, a = {1, 2.5, "x"}, c = {}, d = array({}), e = "<q\"uote>\n", f = true}
        local s = json.marshal(t)
        print(s)
        local back = json.unmarshal(s)
        print(back.a[2], back.a[3], math.type(back.b), json.marshal(back.d), json.marshal(back.c))
        print(json.marshal({x = {1}}, {indent = "  "}))
        print(json.marshal(json.unmarshal("[]")), json.marshal(nil), json.marshal("é"))
        print(pcall(json.unmarshal, "{bad"))
        local cyc = {} cyc.self = cyc
        print(pcall(json.marshal, cyc))
        """
    )
    assert out[0] == '{"a":[1,2.5,"x"],"b":1,"c":{},"d":[],"e":"\\u003cq\\"uote\\u003e\\n","f":true}'
    assert out[2:4] == ["2.5\tx\tinteger\t[]", "\t{}"]
    assert out[5:9] == ["{", '  "x": [', "    1", "  ]"]
    assert out[11:14] == ["[]", "\tnull", '\t"é"']
    # Through pcall, as for Lua's own C functions, a module's error carries no position.
    assert out[15].startswith("false\tjson: Expecting property name")
    assert out[16].startswith("false\tjson: unsupported value: tables nested deeper than 1000")


def test_yaml_unmarshal_and_marshal() -> None:
    out = lines(
        """
        local yaml = require("encoding/yaml")
        local doc = yaml.unmarshal("name: sales\\nfields:\\n  - name: id\\n    required: true\\n  - name: email\\n")
        print(doc.name, #doc.fields, doc.fields[1].name, doc.fields[1].required, doc.fields[2].required)
        local text = yaml.marshal({b = {1, 2}, a = "x"})
        print(text == yaml.marshal(yaml.unmarshal(text)), text)
        print(pcall(yaml.unmarshal, "a: [1, 2"))
        print(pcall(yaml.unmarshal, string.rep("x", 300 * 1024)))
        """
    )
    assert out[0] == "sales\t2\tid\ttrue\tnil"
    assert out[1:4] == ["true\ta: x", "b:", "- 1"]
    assert out[6].startswith("false\tyaml: while parsing a flow sequence")  # the message goes on for lines
    assert out[-1] == "false\tyaml: documents are limited to 262144 bytes"


def test_base64_hex_and_digests() -> None:
    out = lines(
        """
        local b64, hex = require("encoding/base64"), require("encoding/hex")
        local sha256, hmac = require("crypto/sha256"), require("crypto/hmac")
        print(b64.encode("hi?>"), b64.decode("aGk/Pg=="), b64.url_encode("hi?>"), b64.url_decode("aGk_Pg"))
        print(pcall(b64.decode, "aGk"))
        print(pcall(b64.url_decode, "aGk/Pg"))
        print(hex.encode("\\1\\255"), hex.decode("01ff") == "\\1\\255", pcall(hex.decode, "0g"))
        print(hex.encode(sha256.digest("abc")))
        print(hex.encode(hmac.sign_sha256("message", "key")), #hmac.sign_sha1("message", "key"))
        """
    )
    assert out[0] == "aGk/Pg==\thi?>\taGk_Pg\thi?>"
    assert out[1:3] == ["false\tillegal base64 data"] * 2
    assert out[3] == "01ff\ttrue\tfalse\tencoding/hex: invalid byte: U+0067 'g'"
    assert out[4] == hashlib.sha256(b"abc").hexdigest()
    assert out[5] == "6e9ef29b75fffc5b7abae527d58fdadb2fe42e7219011976917343065f58ed4a\t20"
    # Called directly, the error is at the script's line, as for Lua's own functions.
    assert run('require("encoding/hex").decode("012")').error == "hook:1: encoding/hex: odd length hex string"


def test_strings_module() -> None:
    out = lines(
        """
        local strings = require("strings")
        local parts = strings.split("a/b//c", "/")
        print(#parts, parts[1], parts[3] == "", parts[4])
        print(table.concat(strings.split("héy", ""), "|"), #strings.split("", ","))
        print("[" .. strings.trim(" \\t x y \\n") .. "]", strings.replace("aaaa", "a", "b", 2),
          strings.replace("ab", "", "-", -1))
        print(strings.has_prefix("tables/a", "tables/"), strings.has_suffix("a.csv", ".parquet"),
          strings.contains("abc", "bc"))
        print(pcall(strings.split, {}, ","))
        """
    )
    assert out == [
        "4\ta\ttrue\tc",
        "h|é|y\t1",
        "[x y]\tbbaa\t-a-b-",
        "true\tfalse\ttrue",
        "false\tbad argument #1 to 'split' (string expected, got table)",
    ]


def test_path_module() -> None:
    out = lines(
        """
        local path = require("path")
        local p = path.parse("tables/sales/part-1.parquet")
        print(p.parent, p.base_name, path.parse("file").parent == "", path.parse("dir/").base_name)
        print(path.join("/", "tables/", "/sales", "x.csv"), path.join("/", "a", "b"))
        print(path.is_hidden("tables/_tmp/x"), path.is_hidden("tables/x"), path.is_hidden("_x"),
          path.is_hidden("a/.b", "/", "."))
        print(path.default_separator(), path.extract_dir_name("a/b/c.txt"), path.extract_dir_name("c.txt"))
        """
    )
    assert out == [
        "tables/sales/\tpart-1.parquet\ttrue\tdir",
        "tables/sales/x.csv\ta/b",
        "true\tfalse\ttrue\ttrue",
        "/\ta/b\t.",
    ]


def test_regexp_module_follows_go() -> None:
    out = lines(
        r"""
        local regexp = require("regexp")
        print(regexp.match("^https?://", "https://x"), regexp.match("^a$", "ab"), regexp.quote_meta("a.b*c"))
        local re = regexp.compile("(\\w+)=(\\d+)?")
        print(re.find("x k=1 y="), #re.find_submatch("nothing"), table.concat(re.find_submatch("y="), "|"))
        print(table.concat(regexp.compile("a*").find_all("baaab", -1), "|"))
        print(#re.find_all("a=1 b=2 c=3", 2), re:find_all_submatch("a=1 b=2", -1)[2][3])
        print(pcall(regexp.match, "(", "x"))
        """
    )
    assert out[0] == "true\tfalse\ta\\.b\\*c"
    assert out[1] == "k=1\t0\ty=|y|"
    assert out[2] == "|aaa|"
    assert out[3] == "2\t2"
    assert out[4] == "false\terror parsing regexp: missing ): ("


def test_regexp_is_linear_on_a_hostile_pattern() -> None:
    started = time.monotonic()
    out = lines('local s = string.rep("a", 200000) .. "!" print(require("regexp").match("(a+)+$", s))')
    assert out == ["false"] and time.monotonic() - started < 5.0  # backtracking would take ages
    outcome = run(f'require("regexp").compile("{"a" * 5000}")')
    assert outcome.error == "hook:1: regexp longer than 4096 bytes"


def test_time_and_uuid_modules() -> None:
    out = lines(
        """
        local time, uuid = require("time"), require("uuid")
        local t = time.parse_iso("2024-05-01T10:00:00+02:00")
        print(t, time.format_iso(t, "UTC"), time.format_iso(time.add(t, {hour = 1}), "Asia/Tokyo"))
        print(time.since(time.now()) >= 0, #uuid.new(), pcall(time.format_iso, 0, "Nowhere/City"))
        """
    )
    assert out == [
        "1714550400000000000\t2024-05-01T08:00:00+00:00\t2024-05-01T18:00:00+09:00",
        "true\t36\tfalse\tunknown time zone Nowhere/City",
    ]


# The lakefs module


FORMAT_VALIDATOR = """
local lakefs = require("lakefs")
local strings = require("strings")
local after, has_more, forbidden = "", true, {}
while has_more do
  local code, resp = lakefs.diff_refs(action.repository_id, action.branch_id, action.source_ref, after)
  if code ~= 200 then error("could not diff: " .. resp.message) end
  for _, result in ipairs(resp.results) do
    print(result.type, result.path)
    if strings.has_suffix(result.path, ".csv") then table.insert(forbidden, result.path) end
  end
  has_more, after = resp.pagination.has_more, resp.pagination.next_offset
end
if #forbidden > 0 then error("forbidden paths found: " .. table.concat(forbidden, ", ")) end
"""


def test_a_validator_walks_a_diff_and_fails_on_a_csv() -> None:
    calls = FakeCalls()
    outcome = run(FORMAT_VALIDATOR, calls=calls)
    assert not outcome.ok
    assert outcome.error == "hook:14: forbidden paths found: tables/b.csv"
    assert outcome.output == "added\ttables/a.parquet\nadded\ttables/b.csv\n"
    assert calls.requests == [("diff_refs", "repo1", "main", "feature", "", "", "", 100)]
    assert run(FORMAT_VALIDATOR, calls=FakeCalls(("tables/a.parquet",))).ok


def test_lakefs_calls_pass_arguments_and_shape_answers() -> None:
    calls = FakeCalls()
    out = lines(
        """
        local lakefs, json = require("lakefs"), require("encoding/json")
        local code, body = lakefs.stat_object("repo1", "main", "a.csv")
        print(code, type(body), json.unmarshal(body).size_bytes)
        code, body = lakefs.get_object("repo1", "main", "a.yaml")
        print(code, #body, body:sub(1, 11))
        code, body = lakefs.get_object("repo1", "main", "missing")
        print(code, json.unmarshal(body).message)
        code, body = lakefs.list_objects("repo1", "main", "b", "tables/", "/", 5, false)
        print(code, #body.results, body.pagination.has_more, json.marshal(body.results) == "[]\\n")
        code, body = lakefs.diff_branch("repo1", "main", "x", 7)
        print(code, #body.results)
        code, body = lakefs.create_tag("repo1", "main", "v1")
        print(code, body.id, body.commit_id)
        """,
        calls=calls,
    )
    assert out == [
        "200\tstring\t12",
        "200\t28\tname: sales",
        "404\tnot found",
        "200\t0\tfalse\ttrue",
        "200\t0",
        "201\tv1\tc0ffee",
    ]
    assert calls.requests == [
        ("stat_object", "repo1", "main", "a.csv", True),
        ("get_object", "repo1", "main", "a.yaml"),
        ("get_object", "repo1", "main", "missing"),
        ("list_objects", "repo1", "main", "b", "tables/", "/", 5, False),
        ("diff_branch", "repo1", "main", "x", 7, "", ""),
        ("create_tag", "repo1", "main", "v1"),
    ]


def test_a_failing_call_is_a_short_lua_error() -> None:
    outcome = run('local lakefs = require("lakefs")\nlakefs.list_objects("repo1", "boom")')
    assert outcome.error == "hook:2: lakefs.list_objects: internal error"
    caught = run('print(pcall(require("lakefs").list_objects, "repo1", "boom"))')
    assert caught.ok and "10.0.0.7" not in caught.output


# The sandbox


@pytest.mark.parametrize(
    "expression",
    [
        "os", "io", "debug", "load", "loadstring", "dofile", "loadfile", "python", "warn", "string.dump",
        "package.loadlib", "package.searchers", "package.path",
    ],
)  # fmt: skip
def test_dangerous_globals_are_absent(expression: str) -> None:
    assert lines(f"print({expression} == nil)") == ["true"]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ('require("io")', "module 'io' not found"),
        ('require("os")', "module 'os' not found"),
        ('require("debug")', "module 'debug' not found"),
        ('require("python")', "module 'python' not found"),
        ('require("net/http")', "module 'net/http' not found"),
        ('os.execute("true")', "attempt to index a nil value (global 'os')"),
        ('io.open("/etc/passwd")', "attempt to index a nil value (global 'io')"),
        ('load("return 1")()', "attempt to call a nil value (global 'load')"),
        ('dofile("/etc/passwd")', "attempt to call a nil value (global 'dofile')"),
        ('python.eval("1")', "attempt to index a nil value (global 'python')"),
        ("debug.getregistry()", "attempt to index a nil value (global 'debug')"),
        ('getmetatable("").__index.rep = nil', "attempt to index a nil value (field '__index')"),
        ('collectgarbage("stop")', "option 'stop' is not allowed"),
        ("setmetatable({}, {__gc = function() end})", "__gc metamethods are not supported"),
    ],
)
def test_escapes_fail(script: str, message: str) -> None:
    outcome = run(script)
    assert not outcome.ok and message in outcome.error, outcome.error


def test_no_python_object_is_reachable() -> None:
    # Every value reachable from the globals, through tables and metatables, is plain Lua.
    out = lines(
        """
        for _, name in ipairs({"strings", "path", "regexp", "encoding/json", "encoding/yaml", "encoding/base64",
            "encoding/hex", "crypto/sha256", "crypto/hmac", "lakefs", "hook", "time", "uuid"}) do
          require(name)
        end
        local seen, kinds = {}, {}
        local function walk(v)
          local t = type(v)
          kinds[t] = true
          if (t == "table" or t == "function") and not seen[v] then
            seen[v] = true
            if t == "table" then
              for k, x in next, v do walk(k) walk(x) end
            end
            walk(getmetatable(v))
          end
        end
        walk(_G)
        walk(getmetatable(""))
        print(kinds.userdata, kinds.thread, kinds.table, kinds["function"])
        """
    )
    assert out == ["nil\tnil\ttrue\ttrue"]


def test_string_methods_and_shared_libraries_stay_usable() -> None:
    out = lines('string.upper = nil print(("x"):rep(3), ("a,b"):find(",", 1, true), ("10") + 1, getmetatable(""))')
    assert out == ["xxx\t2\t11\tstring"]


# The bounds


@pytest.mark.parametrize(
    "script",
    [
        "while true do end",
        "while true do pcall(function() while true do end end) end",
        "while true do pcall(error, 'x') end",
        "coroutine.wrap(function() while true do end end)()",
        "local co = coroutine.create(function() while true do pcall(function() while true do end end) end end)\n"
        "while true do coroutine.resume(co) end",
        'string.find(string.rep("a", 40), string.rep("a*", 20) .. "b")',
        'string.gsub(string.rep("a", 5000), "a-a-a-b", "x")',
        "local t = setmetatable({}, {__len = function() return math.maxinteger - 1 end}) table.insert(t, 1, 1)",
        "table.move({}, 1, math.maxinteger - 1, 1, {})",
    ],
    ids=["loop", "pcall-loop", "pcall-error", "coroutine", "coroutine-pcall", "pattern", "gsub", "len", "move"],
)
def test_a_runaway_script_times_out(script: str) -> None:
    started = time.monotonic()
    outcome = run(script, limits=QUICK)
    assert (outcome.ok, outcome.error) == (False, "timed out after 0.25 s")
    assert time.monotonic() - started < 5.0  # ends, on a loaded machine too


def test_the_instruction_bound() -> None:
    limits = LuaLimits(max_instructions=100_000)
    outcome = run("local i = 0 while true do i = i + 1 end", limits=limits)
    assert (outcome.ok, outcome.error) == (False, "instruction limit of 100000 exceeded")
    assert run("for i = 1, 1000 do end", limits=limits).ok


@pytest.mark.parametrize(
    "script",
    [
        'local s = string.rep("x", 1e10)',
        'local s = string.rep("x", 1e7)',
        "local t = {} for i = 1, 1e9 do t[i] = i end",
        'local s = "x" while true do s = s .. s end',
        "local function f() return 1 + f() end f()",
        'local s = string.rep("ab", 1e6) require("strings").split(s, "")',
    ],
    ids=["rep-huge", "rep", "table", "doubling", "recursion", "split"],
)
def test_memory_bombs_end_with_a_memory_error(script: str) -> None:
    outcome = run(script, limits=MEMORY)
    assert (outcome.ok, outcome.error) == (False, "memory limit of 8388608 bytes exceeded")


def test_a_script_survives_running_out_of_memory_in_calls() -> None:
    # Memory is full while the modules build their answers: each fails as a Lua error.
    out = lines(
        """
        local strings, json = require("strings"), require("encoding/json")
        local hog = {}
        print(pcall(function() while true do hog[#hog + 1] = string.rep("x", 1000) .. #hog end end))
        local failures = 0
        for i = 1, 200 do
          if not pcall(strings.split, "a,b,c", ",") then failures = failures + 1 end
          if not pcall(json.unmarshal, "[1, [2], {}]") then failures = failures + 1 end
        end
        print(failures > 0)
        hog = nil
        collectgarbage()
        print(#strings.split("a,b,c", ","))
        """,
        limits=MEMORY,
    )
    assert out == ["false\tnot enough memory", "true", "3"]


def test_runs_go_on_in_parallel_threads() -> None:
    outcomes: list[LuaOutcome] = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(run("while true do end", limits=QUICK))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Each run ends on its own deadline, whatever the others do (how long four take together, with
    # Lua running without the GIL, is a speed figure, not asserted here).
    assert {outcome.error for outcome in outcomes} == {"timed out after 0.25 s"}


# Lua patterns beyond the budget of the C matcher


PATTERN_CORPUS = r"""
local subjects = {"", "hello world", "  key=value; k2=v2  ", "f(a(b)c)d", "THE (quick) fox", "aaa", "x=1, y=22", "a\0b"}
local patterns = {"l+", "l*", "l-o", "^h", "d$", "%a+", "[^%s]+", "(%w+)=(%w+)", "()a()", "%b()", "%f[%w]%w+", "(.)%1",
  "^%s*(.-)%s*$", "[%-=]", "a?a", "%z", "(", "[a", "%", "%1"}
local repls = {"<%0>", "%1|%1", {hello = "HI"}, function(a) return a:upper() end}
local function show(...)
  local out = {}
  for i = 1, select("#", ...) do out[i] = string.format("%q", tostring((select(i, ...)))) end
  return table.concat(out, ",")
end
for _, s in ipairs(subjects) do
  for _, p in ipairs(patterns) do
    print(show(pcall(string.find, s, p)), show(pcall(string.match, s, p, 2)))
    local found = {}
    local ok, e = pcall(function() for a, b in s:gmatch(p) do found[#found + 1] = show(a, b) end end)
    print(show(ok, e), table.concat(found))
    for _, r in ipairs(repls) do print(show(pcall(string.gsub, s, p, r))) end
  end
end
"""


def test_the_lua_pattern_matcher_agrees_with_lua(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = lupa.LuaRuntime(encoding=None)
    printed: list[bytes] = []
    reference.globals().print = lambda *values: printed.append(b"\t".join(values))
    reference.execute(PATTERN_CORPUS.encode(), name=b"=hook")
    expected = b"\n".join(printed).decode("utf-8", "replace") + "\n"
    monkeypatch.setattr(lua_runtime, "PATTERN_BUDGET", 0)  # every match through the Lua port
    ported = run(PATTERN_CORPUS, limits=LuaLimits(max_output_bytes=1 << 24))
    assert ported.ok and ported.output == expected


# Shared metatables: a finalizer runs with hooks off, so no bound would stop one.

GCBOMB = """
local A = getmetatable(array({}))
A.__gc = function() while true do end end
keep = array({})
"""

_RUN_IN_A_CHILD = """
import json, sys
from engine.actions.lua import LuaLimits, run_lua
from tests.unit.graveler.actions.test_lua_runtime import EVENT, FakeCalls
outcome = run_lua(sys.argv[1], EVENT, {}, FakeCalls(), LuaLimits(timeout_seconds=2.0))
print(json.dumps({"ok": outcome.ok, "error": outcome.error}))
"""


def test_a_script_cannot_reach_the_shared_array_metatable() -> None:
    # In a process of its own: before the guard, this script's finalizer spun forever while the
    # runtime closed, holding the GIL (no timeout inside the process could end it).
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _RUN_IN_A_CHILD, GCBOMB],
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert not outcome["ok"]
    assert "attempt to index a string value" in outcome["error"], outcome


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("print(getmetatable(array({})))", "array"),
        ('print(getmetatable(""))', "string"),
        ("local ok = pcall(setmetatable, array({}), {}) print(ok)", "false"),
        ("local t = setmetatable({}, {}) print(type(getmetatable(t)))", "table"),
    ],
)
def test_getmetatable_hands_out_no_shared_metatable(script: str, expected: str) -> None:
    assert lines(script) == [expected]
