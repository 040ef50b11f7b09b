"""A conditional write of several keys as one compare-and-set (StageEntriesIf): racing writers
never both win, a failed condition stages nothing, a reader never sees some keys of a set
without the others (also across commits sealing the staging token), and a set whose writer died
between its guards and its values is finished whole by the next conditional writer.

Every leg runs on each KV driver, Cassandra's included (marked ``cassandra``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import pytest

from engine.core.staging import KEY_PREFIX
from silt.errors import ConditionFailed, Unavailable
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.store import AllOf, Condition
from silt.rpc.errors import error_from_rpc
from tests.integration.graveler.conftest import GravelerEnv

KEYS = ["t/a/_pointer", "t/b/_pointer", "t/c/_pointer"]
WRITERS = 4
ROUNDS = 12


def _entry(etag: str) -> pb.Entry:
    return pb.Entry(etag=etag, physical_address=f"data/{uuid.uuid4().hex}")


def _stage_if(env: GravelerEnv, repo: str, writes: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """StageEntriesIf's outcome for (key, etag to write, condition) each: "ok" or the code's name."""
    request = api.StageEntriesIfRequest(
        repository=repo,
        branch="main",
        entries=[api.ConditionalEntry(key=key, entry=_entry(etag), **cond) for key, etag, cond in writes],
    )
    try:
        env.stub.StageEntriesIf(request, timeout=60)
        return "ok"
    except grpc.RpcError as exc:
        return exc.code().name


def _etags(env: GravelerEnv, repo: str) -> dict[str, str]:
    """Every key's ETag on main, from one listing (one consistent read of the branch)."""
    page = env.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref="main", prefix="t/"))
    return {item.key: item.entry.etag for item in page.items}


def test_racing_sets_never_both_win_and_are_never_seen_in_part(env: GravelerEnv) -> None:
    repo = env.new_repo("sets")
    assert _stage_if(env, repo, [(key, "v0", {"if_absent": True}) for key in KEYS]) == "ok"
    # Every set writes one version on every key: (the version it expected, the one it wrote).
    won: list[tuple[str, str]] = []
    undecided: list[tuple[str, str]] = []
    seen_partial: list[dict[str, str]] = []
    reads = [0]
    errors: list[BaseException] = []
    stop = threading.Event()
    lock = threading.Lock()

    def writer(number: int) -> None:
        try:
            for round_ in range(ROUNDS):
                current = _etags(env, repo)
                expected = current[KEYS[0]]
                mine = f"w{number}-{round_}"
                writes = [(key, mine, {"if_match_etag": current[key]}) for key in KEYS]
                outcome = _stage_if(env, repo, writes)
                with lock:
                    if outcome == "ok":
                        won.append((expected, mine))
                    elif outcome == "ABORTED":
                        undecided.append((expected, mine))
                    else:
                        assert outcome == "FAILED_PRECONDITION", outcome
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            etags = _etags(env, repo)
            reads[0] += 1
            if len(set(etags.values())) != 1 or len(etags) != len(KEYS):
                seen_partial.append(etags)

    def committer() -> None:
        while not stop.is_set():
            env.commit(repo, "main", allow_empty=True)
            stop.wait(0.05)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    watchers = [threading.Thread(target=reader), threading.Thread(target=committer)]
    for thread in threads + watchers:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    for thread in watchers:
        thread.join()
    assert not errors, errors
    assert not seen_partial, seen_partial[:3]
    assert reads[0] > 0
    assert won, "no set won at all"
    # Never both: each version was replaced by at most one set that won.
    expected = [before for before, _ in won]
    assert len(expected) == len(set(expected)), won
    # Every version is written by one set, so each has one predecessor: walking back from the
    # current version must reach v0 through sets that won or were undecided, and pass every
    # set that won. (An undecided set that expected the same version as a winner did not stand.)
    written_over = {mine: before for before, mine in won + undecided}
    current = _etags(env, repo)
    assert len(set(current.values())) == 1, current
    version = current[KEYS[0]]
    path = [version]
    while version != "v0":
        assert version in written_over and len(path) <= len(written_over), (version, path, won, undecided)
        version = written_over[version]
        path.append(version)
    assert {mine for _, mine in won} <= set(path), (path, won)


def test_one_failed_condition_stages_nothing_and_is_named(env: GravelerEnv) -> None:
    repo = env.new_repo("refused")
    assert _stage_if(env, repo, [(key, "v0", {"if_absent": True}) for key in KEYS]) == "ok"
    env.put(repo, "main", KEYS[1], "moved")  # another writer moves the second key
    request = api.StageEntriesIfRequest(
        repository=repo,
        branch="main",
        entries=[api.ConditionalEntry(key=key, entry=_entry("v1"), if_match_etag="v0") for key in KEYS],
    )
    with pytest.raises(grpc.RpcError) as raised:
        env.stub.StageEntriesIf(request, timeout=60)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    error = error_from_rpc(raised.value)
    assert isinstance(error, ConditionFailed)
    assert error.key == KEYS[1]
    assert _etags(env, repo) == {KEYS[0]: "v0", KEYS[1]: "moved", KEYS[2]: "v0"}
    # A missing key fails its If-Match the same way; if_absent on an existing key too.
    assert _stage_if(env, repo, [(KEYS[0], "x", {"if_match_etag": "v0"}), ("t/new", "x", {"if_match_etag": "v0"})]) == (
        "FAILED_PRECONDITION"
    )
    assert _stage_if(env, repo, [("t/new", "x", {"if_absent": True}), (KEYS[2], "x", {"if_absent": True})]) == (
        "FAILED_PRECONDITION"
    )
    assert _etags(env, repo) == {KEYS[0]: "v0", KEYS[1]: "moved", KEYS[2]: "v0"}
    # Unconditional entries and a key given twice are refused as invalid.
    assert _stage_if(env, repo, [(KEYS[0], "x", {})]) == "INVALID_ARGUMENT"
    assert _stage_if(env, repo, [(KEYS[0], "x", {"if_absent": True})] * 2) == "INVALID_ARGUMENT"


class DiesBeforeItsValues:
    """Makes the next conditional writer fail between its guards' compare-and-set and the plain
    write of its values, as a writer that dies there."""

    def __init__(self, env: GravelerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
        kv = env.graveler.staging.kv
        self.inner = kv.apply
        self.died = False

        def apply(
            partition: bytes,
            puts: Sequence[tuple[bytes, bytes]],
            deletes: Sequence[bytes] = (),
            condition: Condition | AllOf | None = None,
            timestamp: int | tuple[int, ...] | None = None,
            before_write: Callable[[], None] | None = None,
            **rest: Any,
        ) -> None:
            if not self.died and timestamp is not None and puts and puts[0][0].startswith(KEY_PREFIX):
                self.died = True
                raise Unavailable("the writer died before writing its values")
            self.inner(partition, puts, deletes, condition, timestamp, before_write=before_write, **rest)

        monkeypatch.setattr(kv, "apply", apply)


def test_a_set_whose_writer_died_is_finished_whole(env: GravelerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = env.new_repo("died")
    assert _stage_if(env, repo, [(key, "v0", {"if_absent": True}) for key in KEYS]) == "ok"
    dies = DiesBeforeItsValues(env, monkeypatch)
    assert _stage_if(env, repo, [(key, "v1", {"if_match_etag": "v0"}) for key in KEYS]) == "UNAVAILABLE"
    assert dies.died
    assert _etags(env, repo) == dict.fromkeys(KEYS, "v0")  # admitted, not yet visible
    # A conditional writer of the last key alone finishes the whole set first, then judges.
    request = api.StageEntryRequest(
        repository=repo, branch="main", key=KEYS[2], entry=_entry("solo"), if_match_etag="v0"
    )
    with pytest.raises(grpc.RpcError) as raised:
        env.stub.StageEntry(request, timeout=60)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert _etags(env, repo) == dict.fromkeys(KEYS, "v1")
