"""silt/child_process.py: what every pooled worker and piped child gets, whoever starts it."""

from __future__ import annotations

import os
import sys

from silt.child_process import is_dumpable, spawn_pool, start_module
from silt.sandbox.process import minimal_env

_initialised: tuple[str, int] | None = None


def _remember(name: str, parent: int) -> None:
    global _initialised
    _initialised = (name, parent)


def _state() -> tuple[tuple[str, int] | None, bool, int]:
    return _initialised, is_dumpable(), os.getppid()


def test_a_pool_worker_runs_its_initializer_not_dumpable_and_watching_its_parent() -> None:
    # As it is now: a service started in this process by an earlier test may have made it
    # not dumpable already.
    dumpable_before = is_dumpable()
    pool = spawn_pool(1, _remember, ("import", os.getpid()))
    try:
        initialised, dumpable, parent = pool.submit(_state).result(timeout=120)
    finally:
        pool.shutdown(wait=True)
    assert initialised == ("import", os.getpid())
    assert parent == os.getpid()
    if sys.platform.startswith("linux"):
        assert dumpable is False
        # This process, which started the pool, is left as it was.
        assert is_dumpable() is dumpable_before


def test_a_module_child_gets_this_pid_pipes_and_only_its_environment() -> None:
    env = minimal_env({"SILT_CHILD_TEST": "1"})
    code = "import os, sys; print(sys.argv[1], os.environ.get('SILT_CHILD_TEST'), os.environ.get('HOME'))"
    proc = start_module("tests.support.child_echo", env)
    try:
        out, _ = proc.communicate(code.encode(), timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.decode().split() == [str(os.getpid()), "1", "None"]
