"""Action files inside the engine: bounded in bytes, parsed once per content whether they parse
or fail, and parsed only by a run that holds its slot."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.actions.manager import ActionsOptions
from engine.actions.targets import WebhookPolicy
from engine.graveler import Graveler, GravelerOptions
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import HookAborted, ResourceExhausted
from silt.kv.mem import MemStore
from tests.integration.graveler.test_actions_engine import Hooks, _put, _repo, _webhook
from tests.integration.graveler.test_actions_engine import hooks as hooks  # the fixture, re-exported


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Graveler]:
    # The test's webhook listens on loopback, which a deployment must allow.
    actions = ActionsOptions(max_runs_per_repository=1, max_file_bytes=4096, webhook=WebhookPolicy(allow_private=True))
    options = GravelerOptions(actions=actions)
    g = open_graveler(MemStore(), LocalAdapter(tmp_path / "data"), options)
    yield g
    g.close()


def test_an_action_file_over_the_cap_fails_the_run_clearly(engine: Graveler) -> None:
    repo = _repo(engine, "big-file")
    padding = "#" + "x" * 5000 + "\n"
    _put(engine, repo, "main", "_lakefs_actions/big.yaml", (padding + "name: big\non: {pre-commit: }\n").encode())
    _put(engine, repo, "main", "f")
    with pytest.raises(HookAborted, match="more than the 4096 an action file may have"):
        engine.commit(repo, "main", "refused")
    assert engine.actions.parses == 0  # refused by its size: never read, never parsed


def test_action_files_over_the_total_fail_the_run(tmp_path: Path) -> None:
    options = GravelerOptions(actions=ActionsOptions(max_file_bytes=4096, max_total_bytes=6000))
    g = open_graveler(MemStore(), LocalAdapter(tmp_path / "data"), options)
    try:
        repo = _repo(g, "many-files")
        for n in range(3):
            body = f"name: a{n}\non: {{pre-commit: }}\nhooks: []\n#" + "x" * 2500 + "\n"
            _put(g, repo, "main", f"_lakefs_actions/a{n}.yaml", body.encode())
        with pytest.raises(HookAborted, match="more than the 6000 they may hold together"):
            g.commit(repo, "main", "refused")
    finally:
        g.close()


def test_an_invalid_action_file_is_parsed_once(engine: Graveler) -> None:
    repo = _repo(engine, "broken-file")
    _put(engine, repo, "main", "_lakefs_actions/broken.yaml", b"name: [unclosed\n")
    _put(engine, repo, "main", "f")
    for _ in range(3):
        with pytest.raises(HookAborted, match="not valid YAML"):
            engine.commit(repo, "main", "refused")
    assert engine.actions.parses == 1
    # Another content at the same path is parsed again.
    _put(engine, repo, "main", "_lakefs_actions/broken.yaml", b"name: [still unclosed\n")
    with pytest.raises(HookAborted, match="not valid YAML"):
        engine.commit(repo, "main", "refused")
    assert engine.actions.parses == 2


def test_a_run_takes_its_slot_before_it_parses(engine: Graveler, hooks: Hooks) -> None:
    repo = _repo(engine, "slot-first")
    gate = hooks.gate("/hold")
    _put(engine, repo, "main", "_lakefs_actions/a.yaml", _webhook("hold", "pre-commit", hooks.url("/hold")))
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            engine.commit(repo, "main", "held by its hook")
        except BaseException as exc:
            errors.append(exc)

    held = threading.Thread(target=commit)
    held.start()
    hooks.wait_seen(lambda path, _: path == "/hold")
    parsed = engine.actions.parses
    # The action file is new content: the commit is refused for the slot before it is parsed.
    _put(engine, repo, "main", "_lakefs_actions/a.yaml", _webhook("other", "pre-commit", hooks.url("/other")))
    started = time.monotonic()
    with pytest.raises(ResourceExhausted, match="pre-event hook runs"):
        engine.commit(repo, "main", "one too many")
    assert time.monotonic() - started < 1
    assert engine.actions.parses == parsed
    gate.set()
    held.join(10)
    assert not errors, errors
