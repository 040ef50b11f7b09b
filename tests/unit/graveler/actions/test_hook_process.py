"""Lua hooks and action-file YAML in child processes (hook_process.py): real children, their
bounds (wall clock, address space), their environment and their dumpable flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.actions.files import InvalidActionFile
from engine.actions.hook_process import HookProcesses
from engine.actions.lua import LuaLimits
from tests.unit.graveler.actions.test_lua_runtime import EVENT, GCBOMB, FakeCalls

ROOT = Path(__file__).resolve().parents[4]
SECRET = "s3cr3t-do-not-leak"


@pytest.fixture
def processes() -> Iterator[HookProcesses]:
    # This test process (pytest) stays dumpable: protecting the server is checked as nobody below.
    running = HookProcesses(spares=1, protect_server=False)
    yield running
    running.close()


def test_a_script_runs_in_a_child_and_its_calls_come_back_over_the_pipe(processes: HookProcesses) -> None:
    calls = FakeCalls()
    script = """
      local lakefs = require("lakefs")
      local code, body = lakefs.get_object(action.repository_id, "main", "conf.yaml")
      local scode, text = lakefs.stat_object(action.repository_id, "main", "conf.yaml")
      local stat = require("encoding/json").unmarshal(text)
      local mcode, missing = lakefs.get_object(action.repository_id, "main", "missing")
      print(code, #body, scode, stat.size_bytes, mcode, args.n[2], username)
    """
    outcome = processes.run_lua(script, EVENT, {"n": [1, 2]}, calls, username="alice")
    assert outcome.ok, outcome.error
    assert outcome.output == "200\t28\t200\t12\t404\t2\talice\n"
    assert [request[0] for request in calls.requests] == ["get_object", "stat_object", "get_object"]


def test_a_failing_call_reaches_the_script_as_an_error(processes: HookProcesses) -> None:
    script = 'local lakefs = require("lakefs") lakefs.list_objects(action.repository_id, "boom")'
    outcome = processes.run_lua(script, EVENT, {}, FakeCalls())
    assert not outcome.ok
    assert "lakefs.list_objects: internal error" in outcome.error
    assert "10.0.0.7" not in outcome.error


def test_the_gcbomb_ends_with_an_error(processes: HookProcesses) -> None:
    start = time.monotonic()
    outcome = processes.run_lua(GCBOMB, EVENT, {}, FakeCalls(), LuaLimits(timeout_seconds=2.0))
    assert not outcome.ok
    assert "attempt to index a string value" in outcome.error
    assert time.monotonic() - start < 30


def test_an_infinite_loop_is_killed_by_the_wall_clock(processes: HookProcesses) -> None:
    # The VM's own clock would end it after a minute: the kill comes first.
    limits = LuaLimits(timeout_seconds=60.0, max_instructions=10**15)
    start = time.monotonic()
    outcome = processes.run_lua("while true do end", EVENT, {}, FakeCalls(), limits, wall_seconds=1.0)
    took = time.monotonic() - start
    assert not outcome.ok
    assert outcome.error == "killed: the hook ran past 1 s"
    assert took < 10, took


def test_unbounded_allocation_is_stopped_by_the_address_space_limit(processes: HookProcesses) -> None:
    # Lua's own limit (a TiB) never applies: the process may grow by 64 MiB only.
    limits = LuaLimits(max_memory_bytes=1 << 40, timeout_seconds=60.0, max_instructions=10**15)
    script = """
      local kept, chunk = {}, string.rep("x", 1 << 20)
      for i = 1, 512 do kept[i] = chunk .. i end
      print("allocated", #kept)
    """
    outcome = processes.run_lua(script, EVENT, {}, FakeCalls(), limits, process_memory_bytes=64 << 20)
    assert not outcome.ok, outcome.output
    assert "memory" in outcome.error


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return found


def test_the_child_holds_no_secret_of_the_server(processes: HookProcesses, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SILT_AUTH_ENCRYPT_SECRET_KEY", "AWS_SECRET_ACCESS_KEY", "SILT_DATABASE_CASSANDRA_PASSWORD"):
        monkeypatch.setenv(name, SECRET)
    calls = FakeCalls()
    seen: dict[int, bytes] = {}
    inside = threading.Event()

    def stat_object(*args: Any) -> tuple[int, Any]:
        # Called while the child waits for the answer: it is alive, and it is ours.
        for pid in _children(os.getpid()):
            if b"hook_process" in Path(f"/proc/{pid}/cmdline").read_bytes():
                seen[pid] = Path(f"/proc/{pid}/environ").read_bytes()
        inside.set()
        return 200, {"size_bytes": 1}

    calls.stat_object = stat_object  # type: ignore[method-assign,assignment]
    processes.close()  # the spare was started before the secrets were set: no spare here
    fresh = HookProcesses(spares=0, protect_server=False)
    try:
        outcome = fresh.run_lua('require("lakefs").stat_object("r", "main", "x")', EVENT, {}, calls)
    finally:
        fresh.close()
    assert outcome.ok, outcome.error
    assert inside.is_set() and seen
    for environ in seen.values():
        assert SECRET.encode() not in environ
        names = {item.split(b"=", 1)[0] for item in environ.split(b"\0") if item}
        assert not any(name.startswith((b"SILT_", b"AWS_")) for name in names), names


_SERVER = textwrap.dedent(
    """
    import json
    from engine.actions.hook_process import HookProcesses
    from silt.sandbox.process import is_dumpable
    processes = HookProcesses(spares=0, protect_server=True)
    child = processes._take()
    processes._ready(child)
    child.end()
    print(json.dumps({"server": is_dumpable(), "child": json.loads(child.hello)["dumpable"]}))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_the_child_and_the_server_are_not_dumpable() -> None:
    # In a process of its own: this one (pytest) stays dumpable. The child answers what the
    # kernel says of it (PR_GET_DUMPABLE) once it has started; the server asks of itself.
    done = subprocess.run(
        [sys.executable, "-c", _SERVER],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"server": False, "child": False}


def test_yaml_is_parsed_in_a_child(processes: HookProcesses) -> None:
    document = processes.load_yaml(
        b"name: a\non:\n  pre-commit:\nhooks: [{id: x, args: {1: 2.5, t: 2024-05-01}}]\n", "f"
    )
    assert document["on"] == {"pre-commit": None}
    assert document["hooks"][0]["args"][1] == 2.5
    assert str(document["hooks"][0]["args"]["t"]) == "2024-05-01"
    with pytest.raises(InvalidActionFile, match="not valid YAML"):
        processes.load_yaml(b"name: [unclosed\n", "bad.yaml")
