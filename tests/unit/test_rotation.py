"""tests/support/rotation.py: the slice of the nightly tests each commit runs under `make test`
is a pure function of the commit's ordinal, and any PERIOD consecutive commits run every nightly
test; the current nightly tests fit PERIOD slices; the legs mark and run the commit's slice."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.support import legs, rotation

# Sets of estimated seconds: one test, fewer tests than slices, more, uneven, and the real one.
SETS = {
    "one": {"t::a": 60.0},
    "three": {"t::a": 100.0, "t::b": 100.0, "t::c": 10.0},
    "twelve": {f"t::n{i:02d}": float(10 + 17 * i % 110) for i in range(12)},
    "one-too-long": {"t::long": 900.0, "t::b": 200.0, "t::c": 150.0, "t::d": 100.0},
    "real": rotation.estimates_for(rotation.ESTIMATES),
}


@pytest.mark.parametrize("name", SETS)
def test_any_period_consecutive_commits_run_every_nightly_test(name: str) -> None:
    estimates = SETS[name]
    period = rotation.period_of(estimates)
    assert period == rotation.PERIOD
    for first in range(0, 3 * period + 1):  # every phase, commit ordinals from 0 on
        window = range(first, first + period)
        ran = [test for ordinal in window for test in rotation.selected(ordinal, estimates)]
        assert sorted(ran) == sorted(estimates), f"commits {window.start}..{window.stop - 1}"  # each exactly once
    # Consecutive windows along a branch's history: the ordinals git gives, 1 (the first commit) to 40.
    history = [rotation.selected(ordinal, estimates) for ordinal in range(1, 41)]
    for first in range(len(history) - period + 1):
        assert {t for tests in history[first : first + period] for t in tests} == set(estimates)


def test_the_selection_depends_on_the_ordinal_and_the_estimates_only() -> None:
    estimates = SETS["twelve"]
    shuffled = list(estimates.items())
    random.Random(7).shuffle(shuffled)
    for ordinal in (0, 1, 4, 5, 348, 10**9 + 3):
        assert rotation.selected(ordinal, dict(shuffled)) == rotation.selected(ordinal, estimates)
        assert rotation.selected(ordinal, estimates) == rotation.selected(ordinal + rotation.PERIOD, estimates)


def test_the_current_nightly_tests_fit_period_slices_of_the_share() -> None:
    """Fails when the nightly tests outgrow the rotation: make a test smaller or splittable, or
    give the share more (tests/support/rotation.py)."""
    estimates = SETS["real"]
    assert rotation.period_of(estimates) == rotation.PERIOD
    plan = rotation.slices(estimates)
    assert sorted(t for tests in plan for t in tests) == sorted(estimates)
    for tests in plan:
        total = sum(estimates[t] for t in tests)
        # Over the share only as a single test: one no selection can divide.
        assert total <= rotation.SHARE_S or len(tests) == 1, (tests, total)
    # Jepsen's nightly variant is divided: the rotation runs it at fewer runs than make test-all.
    assert int(rotation.ROTATION_ENV["SILT_JEPSEN_RUNS"]) < 20


def test_the_jepsen_runs_go_through_every_nightly_seed_turn_by_turn() -> None:
    runs = int(rotation.ROTATION_ENV["SILT_JEPSEN_RUNS"])
    turns = rotation.JEPSEN_NIGHTLY_RUNS // runs
    firsts = [int(rotation.rotation_env(o)["SILT_JEPSEN_FIRST_RUN"]) for o in range(rotation.PERIOD * turns)]
    # The same first run for the commits of one turn, the next runs on the next turn.
    assert firsts[: rotation.PERIOD] == [0] * rotation.PERIOD and firsts[rotation.PERIOD] == runs
    seeds = {first + i for first in firsts for i in range(runs)}
    assert seeds == set(range(rotation.JEPSEN_NIGHTLY_RUNS))


def test_slices_are_filled_longest_first_into_the_emptiest() -> None:
    plan = rotation.slices(SETS["one-too-long"])
    assert plan == [["t::long"], ["t::b"], ["t::c"], ["t::d"], [], [], []]
    assert rotation.slices({"t::b": 50.0, "t::a": 50.0, "t::c": 50.0}, 2) == [["t::a", "t::c"], ["t::b"]]


def test_the_tests_of_one_together_entry_share_a_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module's stack starts once in the slice that holds all its nightly tests."""
    # The real plan: the replicas tests on one node, in one slice.
    real = SETS["real"]
    node = [t for t in real if rotation.together(t) == "the replicas tests on one node"]
    assert len(node) == 4
    assert sum(set(node) <= set(tests) for tests in rotation.slices(real)) == 1
    # A unit is packed by its summed estimate, longest first, and never divided.
    monkeypatch.setattr(rotation, "TOGETHER", {"pair": ("t::p",)})
    estimates = {"t::p1": 70.0, "t::p2": 60.0, "t::a": 120.0, "t::b": 110.0, "t::c": 20.0}
    assert rotation.slices(estimates, 2) == [["t::c", "t::p1", "t::p2"], ["t::a", "t::b"]]
    assert rotation.slices(estimates, 3) == [["t::p1", "t::p2"], ["t::a"], ["t::b", "t::c"]]
    for ordinal in range(rotation.PERIOD):
        chosen = rotation.selected(ordinal, estimates)
        assert ("t::p1" in chosen) == ("t::p2" in chosen)
    # Over the share, a unit alone still fits: no selection can divide it.
    assert rotation.fits(["t::p1", "t::p2"], {"t::p1": 200.0, "t::p2": 200.0})
    assert not rotation.fits(["t::a", "t::b"], {"t::a": 200.0, "t::b": 200.0})


def test_tests_that_outgrow_the_share_lengthen_the_period_and_still_all_run() -> None:
    estimates = {f"t::n{i}": 200.0 for i in range(8)}  # 1,600 s: two per slice would be 400 s
    period = rotation.period_of(estimates)
    assert period == 8
    assert {t for ordinal in range(11, 11 + period) for t in rotation.selected(ordinal, estimates)} == set(estimates)
    assert all(len(rotation.selected(ordinal, estimates)) == 1 for ordinal in range(period))


def test_the_commit_ordinal_comes_from_the_environment_git_or_the_commits_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    assert rotation.commit_ordinal({rotation.ORDINAL_ENV: "41"}) == (41, rotation.ORDINAL_ENV)
    answers = {
        ("rev-parse", "--is-shallow-repository"): "false",
        ("rev-list", "--count", "--first-parent", "HEAD"): "348",
    }
    monkeypatch.setattr(rotation, "_git", lambda *args: answers.get(args))
    assert rotation.commit_ordinal({})[0] == 348
    # A shallow clone counts its depth: the hash picks the slice instead.
    sha = "9389428e" + "0" * 32
    answers = {("rev-parse", "--is-shallow-repository"): "true", ("rev-parse", "HEAD"): sha}
    assert rotation.commit_ordinal({})[0] == int(sha[:12], 16)
    answers = {}  # no git at all
    assert rotation.commit_ordinal({rotation.COMMIT_ENV: sha})[0] == int(sha[:12], 16)
    assert rotation.commit_ordinal({})[0] == 0


SUITE = """
import os
import pytest


def test_every_commit():
    pass


@pytest.mark.nightly
def test_nightly_a():
    pass


@pytest.mark.nightly
def test_nightly_b():
    assert os.environ["SILT_JEPSEN_RUNS"] == "1" and os.environ["SILT_JEPSEN_FIRST_RUN"] == "1"


@pytest.mark.nightly
@pytest.mark.cassandra
def test_nightly_c():
    pass


@pytest.mark.nightly
@pytest.mark.podman
def test_nightly_with_podman():
    pass
"""


def test_the_legs_run_the_commits_slice_and_nothing_podman_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    markers = "".join(f"    {m}: x\n" for m in ("cassandra", "cassandra_cluster", "spark", "nightly", "podman"))
    (suite / "pytest.ini").write_text(f"[pytest]\nmarkers =\n{markers}")
    (suite / "test_sample.py").write_text(SUITE)
    # The legs keep what the environment already says (a `make test` leg running this test has
    # its own commit's rotation sizes there): the inner legs must compute theirs.
    monkeypatch.delenv("SILT_JEPSEN_RUNS", raising=False)
    monkeypatch.delenv("SILT_JEPSEN_FIRST_RUN", raising=False)
    # Three nightly tests of the default estimate: slices 0, 1, 2 in test id order; 8 % 7 is 1.
    monkeypatch.setenv(rotation.ORDINAL_ENV, "8")
    marks = "not podman and (not nightly or nightly_slice)"
    args = ["--nightly-slice", "-p", "no:cacheprovider", "-rA", "-m", marks, str(suite)]
    assert legs.main(args, tmp_path / "logs") == 0
    out = capsys.readouterr().out
    passed = sorted(line.split("::")[-1] for line in out.splitlines() if line.startswith("PASSED "))
    assert passed == ["test_every_commit", "test_nightly_b"]
    assert "nightly slice: commit ordinal 8 (from SILT_COMMIT_ORDINAL)" in out
    assert "-> slice 1:   120 s" in out
    # Commit 9 runs the next one, which is in the other leg.
    monkeypatch.setenv(rotation.ORDINAL_ENV, "9")
    assert legs.main(args, tmp_path / "logs") == 0
    out = capsys.readouterr().out
    assert sorted(line.split("::")[-1] for line in out.splitlines() if line.startswith("PASSED ")) == [
        "test_every_commit",
        "test_nightly_c",
    ]
