"""The check of the keys an operation changes (silt/changed_keys.py): writes need WriteObject,
removals DeleteObject, every user checked, a refusal naming the key only to a user who may
read it, changes read no further than the first refusal, and no check at all for users who
hold every key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.core.committed.diff import Difference, DifferenceRun
from engine.core.key_changes import applied, undone
from silt.changed_keys import ChangeCheck, ChangeScope, MayRead, narrowed
from silt.errors import KeysRefused, PermissionDenied
from silt.key_scope import KeyScope, whole

REPO = "weather"


def _scope(user: str, *, write_deny: tuple[str, ...] = (), delete_deny: tuple[str, ...] = ()) -> ChangeScope:
    return ChangeScope(
        user,
        KeyScope(REPO, every_key=True, deny=write_deny),
        KeyScope(REPO, every_key=True, deny=delete_deny),
    )


def _unreadable(prefix: str) -> MayRead:
    def may_read(user: str, key: str) -> bool:
        return not key.startswith(prefix)

    return may_read


def _check(*scopes: ChangeScope, hidden: str = "hidden/") -> ChangeCheck:
    check = narrowed(REPO, scopes, _unreadable(hidden))
    assert check is not None
    return check


def test_users_holding_every_key_get_no_check() -> None:
    holder = ChangeScope("admin", whole(REPO), whole(REPO))
    # An Allow of the object action covering every key is as whole as the repository's action.
    covering = ChangeScope("svc", KeyScope(REPO, every_key=False, allow=(f"{REPO}/*",)), whole(REPO))
    assert narrowed(REPO, [holder, covering], _unreadable("x")) is None
    check = narrowed(REPO, [holder, _scope("u", write_deny=(f"{REPO}/secret/*",))], _unreadable("x"))
    assert check is not None and [s.user_id for s in check.scopes] == ["u"]


def test_writes_need_write_object_and_removals_delete_object() -> None:
    check = _check(_scope("u", write_deny=(f"{REPO}/w/*",), delete_deny=(f"{REPO}/d/*",)))
    check.check([(b"w/x", True), (b"d/x", False), (b"other", False), (b"other", True)], "merging")
    with pytest.raises(KeysRefused) as written:
        check.check([(b"a", False), (b"w/x", False)], "merging")
    assert str(written.value) == f"user u may not WriteObject on {REPO}/w/x, which merging would change"
    with pytest.raises(KeysRefused) as removed:
        check.check([(b"d/x", True)], "the reset")
    assert str(removed.value) == f"user u may not DeleteObject on {REPO}/d/x, which the reset would change"
    assert isinstance(removed.value, PermissionDenied)  # PERMISSION_DENIED on the wire


def test_a_refused_key_is_named_only_to_a_user_who_may_read_it() -> None:
    check = _check(_scope("u", write_deny=(f"{REPO}/hidden/*",)))
    with pytest.raises(KeysRefused) as caught:
        check.check([(b"hidden/salaries.csv", False)], "merging")
    assert "salaries" not in str(caught.value)
    assert str(caught.value) == f"user u may not WriteObject on every key merging would change in {REPO}"


def test_every_user_is_checked_and_reading_stops_at_the_first_refusal() -> None:
    api = ChangeScope("svc-api", whole(REPO), whole(REPO))
    user = _scope("alice", write_deny=(f"{REPO}/secret/*",))
    check = _check(api, user)
    read: list[bytes] = []

    def changes() -> Iterator[tuple[bytes, bool]]:
        for key in (b"a", b"secret/s", b"z"):
            read.append(key)
            yield key, False

    with pytest.raises(KeysRefused, match="user alice may not WriteObject"):
        check.check(changes(), "merging")
    assert read == [b"a", b"secret/s"]


def test_import_destinations() -> None:
    check = _check(_scope("u", write_deny=(f"{REPO}/secret/*",)))
    check.check_keys(["open/x"], "the import")
    check.check_prefixes(["", "open/", "secret-ish/"], "the import")  # some key below may be written
    with pytest.raises(KeysRefused):
        check.check_keys(["secret/x"], "the import")
    with pytest.raises(KeysRefused, match=f"any key under {REPO}/secret/sub/"):
        check.check_prefixes(["secret/sub/"], "the import")


def test_the_changes_of_a_diff_and_of_dropping_uncommitted_ones() -> None:
    diff: list[Difference | DifferenceRun] = [
        DifferenceRun("added", [b"a1", b"a2"], [b"", b""], [b"", b""]),
        Difference(b"c", "changed", None, None),
        Difference(b"r", "removed", None, None),
        DifferenceRun("removed", [b"r2"], [b""], [b""]),
    ]
    assert list(applied(diff)) == [(b"a1", False), (b"a2", False), (b"c", False), (b"r", True), (b"r2", True)]
    staged = [Difference(b"new", "added", None, None), Difference(b"gone", "removed", None, None)]
    assert list(undone(staged)) == [(b"new", True), (b"gone", False)]


def test_a_branch_deletion_reads_only_under_the_delete_deny_patterns_literal_prefixes() -> None:
    both = _check(
        _scope("alice", delete_deny=(f"{REPO}/secret/*", f"{REPO}/secret/deep/*", f"{REPO}/hr/?ay*")),
        _scope("bob", write_deny=(f"{REPO}/open/*",)),  # may remove every key: nothing to read
    )
    assert both.removal_prefixes() == ["hr/", "secret/"]
    # A pattern whose wildcard comes before the key, or other repositories' patterns.
    assert _check(_scope("carol", delete_deny=(f"{REPO}*/x",))).removal_prefixes() == [""]
    assert _check(_scope("dan", delete_deny=("other/secret/*", f"{REPO}/a"))).removal_prefixes() == ["a"]
    # A user holding only the keys an Allow names may remove nothing else: every key is read.
    allow_only = ChangeScope("erin", whole(REPO), KeyScope(REPO, every_key=False, allow=(f"{REPO}/open/*",)))
    assert _check(allow_only).removal_prefixes() == [""]
