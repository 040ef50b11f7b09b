"""A reset drops exactly what it checked: a write staged by another user between the reset's
check of the keys it changes and its drop is either checked (refused if the resetting user may
not change it) or kept, never dropped unchecked. For the whole branch, a prefix, one key and a
hard reset, on every KV driver; the write is staged from inside the check, once the check has
read every change, which is the moment between the two."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import pytest

from engine.core.key_changes import Change, KeyCheck
from silt.changed_keys import ChangeScope, narrowed
from silt.errors import KeysRefused
from silt.key_scope import KeyScope
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_branching import contents


class WritesAfterChecking:
    """The resetting user's real check (no WriteObject or DeleteObject under secret/), which,
    the first time it has read every change, lets another user's write land."""

    def __init__(self, repo: str, late_write: Callable[[], object]) -> None:
        denied = (f"{repo}/secret/*",)
        scope = ChangeScope(
            "resetter", KeyScope(repo, every_key=True, deny=denied), KeyScope(repo, every_key=True, deny=denied)
        )
        check = narrowed(repo, [scope], lambda user, key: True)
        assert check is not None
        self.inner: KeyCheck = check
        self.late_write: Callable[[], object] | None = late_write
        self.checked: list[bytes] = []

    def check(self, changes: Iterable[Change], what: str) -> None:
        seen = list(changes)
        self.checked += [key for key, _ in seen]
        self.inner.check(seen, what)
        write, self.late_write = self.late_write, None
        if write is not None:
            write()

    def check_keys(self, keys: Iterable[str], what: str) -> None:
        self.inner.check_keys(keys, what)

    def check_prefixes(self, prefixes: Iterable[str], what: str) -> None:
        self.inner.check_prefixes(prefixes, what)

    def removal_prefixes(self) -> list[str]:
        return self.inner.removal_prefixes()


@pytest.fixture
def repo(env: GravelerEnv) -> str:
    name = env.new_repo("resetrace")
    env.put(name, "main", "data/k", "base")
    env.put(name, "main", "secret/s", "base")
    env.commit(name, "main", "base")
    env.put(name, "main", "data/k", "mine")
    env.put(name, "main", "data/new", "mine")
    return name


class Reset(NamedTuple):
    key: str | None = None
    prefix: str | None = None
    hard_ref: str | None = None


# Each reset, and the key another user writes between its check and its drop.
RESETS = {
    "all": (Reset(), "secret/late"),
    "prefix": (Reset(prefix="data/"), "data/late"),
    "key": (Reset(key="data/k"), "data/k"),
    "hard": (Reset(hard_ref="main"), "secret/late"),
}


@pytest.mark.parametrize("compacted", [False, True], ids=["staged", "compacted"])
@pytest.mark.parametrize("kind", RESETS)
def test_a_write_staged_between_the_check_and_the_drop_is_kept(
    env: GravelerEnv, repo: str, kind: str, compacted: bool
) -> None:
    """On a branch with only keys the user may change uncommitted (staged, or compacted), the
    reset passes its check; the late write (to a key the user may not change, or to the very
    key being reset) is kept."""
    if compacted:
        env.graveler.compact(repo, "main")
        assert env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch.compacted_metarange_id
    target, late_key = RESETS[kind]
    check = WritesAfterChecking(repo, lambda: env.put(repo, "main", late_key, "late"))
    env.graveler.reset_branch(repo, "main", key=target.key, prefix=target.prefix, hard_ref=target.hard_ref, check=check)
    assert check.late_write is None  # the write landed inside the reset
    assert late_key.encode() not in check.checked or late_key == "data/k"
    after = contents(env, repo, "main")
    assert after[late_key] == "late"
    assert after["data/k" if late_key != "data/k" else "secret/s"] == "base"
    assert "data/new" not in after or kind == "key"


def test_a_denied_uncommitted_change_is_refused_and_kept(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "secret/s", "mine")
    check = WritesAfterChecking(repo, lambda: None)
    with pytest.raises(KeysRefused):
        env.graveler.reset_branch(repo, "main", prefix="secret/", check=check)
    assert check.checked == [b"secret/s"]
    assert contents(env, repo, "main")["secret/s"] == "mine"
    env.graveler.reset_branch(repo, "main", prefix="data/", check=WritesAfterChecking(repo, lambda: None))
    assert contents(env, repo, "main") == {"data/k": "base", "secret/s": "mine"}


def test_a_late_write_of_a_branch_reset_with_nothing_staged_is_kept(env: GravelerEnv, repo: str) -> None:
    """Nothing to seal: the staging token the check found empty is kept, with what lands in it."""
    env.graveler.reset_branch(repo, "main")
    check = WritesAfterChecking(repo, lambda: env.put(repo, "main", "secret/late", "late"))
    env.graveler.reset_branch(repo, "main", check=check)
    assert check.checked == []
    assert contents(env, repo, "main") == {"data/k": "base", "secret/s": "base", "secret/late": "late"}
