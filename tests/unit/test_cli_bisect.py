"""`silt bisect`'s search (cli/bisect_state.py): which commit is tested next, what a verdict
keeps, and the session file lakectl shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.bisect_state import BAD, GOOD, Bisect, load, remove, save


def _commits(n: int) -> list[dict[str, str]]:
    """n commits newest first, as the log lists them: c{n} ... c1."""
    return [{"id": f"c{i}", "message": f"m{i}"} for i in range(n, 0, -1)]


def _search(n: int, first_bad: int) -> tuple[str, int]:
    """Bisect n candidates (c1 oldest) where c{first_bad} and newer are bad: what it finds, in how many tests."""
    state = Bisect("r", bad_commit=f"c{n}", good_commit="c0", commits=_commits(n))
    tests = 0
    while state.current is not None:
        tested = int(state.current["id"][1:])
        state.select(BAD if tested >= first_bad else GOOD)
        tests += 1
    assert state.found is not None
    return state.found["id"], tests


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 100])
def test_every_first_bad_commit_is_found_in_logarithmic_steps(n: int) -> None:
    for first_bad in range(1, n + 1):
        found, tests = _search(n, first_bad)
        assert found == f"c{first_bad}"
        assert tests <= n.bit_length()


def test_the_middle_commit_is_tested_and_verdicts_keep_the_right_half() -> None:
    state = Bisect("r", "c4", "c0", _commits(4))  # c4 c3 c2 c1
    assert state.current == {"id": "c2", "message": "m2"}
    state.select(GOOD)  # the change came after c2
    assert [c["id"] for c in state.commits] == ["c4", "c3"]
    state.select(BAD)  # c3 is bad: it or an older one of those left
    assert [c["id"] for c in state.commits] == ["c3"] and state.current is None
    state.select(GOOD)  # over: nothing changes
    assert state.found == {"id": "c3", "message": "m3"}
    assert "Found commit lakefs://r/c3 m3" in state.status()[-1]
    with pytest.raises(ValueError):
        state.select("maybe")


def test_status_says_what_is_missing_and_what_is_tested() -> None:
    assert Bisect("r").status()[-1] == "Missing both good and bad commits"
    assert "waiting for good commit" in Bisect("r", bad_commit="b").status()[-1]
    assert "waiting for bad commit" in Bisect("r", good_commit="g").status()[-1]
    assert Bisect("r", "b", "g").status()[-1] == "No commits found"
    lines = Bisect("r", "c8", "c0", _commits(8)).status()
    assert lines[1].startswith("Bisecting: 4 commits left") and lines[2].startswith("Current commit lakefs://r/c4")


def test_the_session_file_has_lakectls_fields_and_survives_a_round_trip(tmp_path: Path) -> None:
    path = tmp_path / ".lakectl.bisect.json"
    assert load(path) is None and not remove(path)
    state = Bisect("r", "c3", "c0", _commits(3), created="2026-11-28T05:00:00Z")
    save(state, path)
    assert set(path.read_text() and state.to_json()) == {"created", "repository", "badCommit", "goodCommit", "commits"}
    assert load(path) == state
    assert remove(path) and load(path) is None
