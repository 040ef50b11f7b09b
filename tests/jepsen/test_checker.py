"""The checker on hand-written histories: each must pass or must fail, for the reason named."""

from __future__ import annotations

from tests.jepsen.checker import (
    FINAL,
    Verdict,
    body_of,
    check_key,
    commit_misses,
    linearizable,
    resurrections,
    unreadable,
    value_of,
)
from tests.jepsen.history import CAS, COMMIT, CREATE, DELETE, READ, WRITE, Op, Outcome

OK, FAIL, UNKNOWN = Outcome.OK, Outcome.FAIL, Outcome.UNKNOWN


class H:
    """Operations at times given in milliseconds."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def op(
        self,
        kind: str,
        start: int,
        end: int | None,
        outcome: Outcome,
        value: str | None = None,
        expected: str | None = None,
        process: str = "p1",
        precondition_failed: bool = False,
        key: str = "k",
    ) -> Op:
        op = Op(len(self.ops), process, kind, key, start * 1_000_000, value, expected)
        op.complete_ns = None if end is None else end * 1_000_000
        op.outcome = outcome
        op.precondition_failed = precondition_failed
        self.ops.append(op)
        return op


def test_sequential_writes_and_reads_are_linearizable() -> None:
    h = H()
    h.op(READ, 0, 1, OK, None)
    h.op(WRITE, 2, 3, OK, "a")
    h.op(READ, 4, 5, OK, "a")
    h.op(WRITE, 6, 7, OK, "b")
    h.op(READ, 8, 9, OK, "b")
    h.op(DELETE, 10, 11, OK)
    h.op(READ, 12, 13, OK, None)
    assert linearizable(h.ops) is Verdict.LINEARIZABLE


def test_a_stale_read_after_an_acknowledged_overwrite_is_a_violation() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(WRITE, 2, 3, OK, "b", process="p2")
    h.op(READ, 4, 5, OK, "a")
    verdict, violations = check_key("k", h.ops)
    assert verdict is Verdict.VIOLATION
    assert [v.kind for v in violations] == ["not linearizable"]
    # From whatever the key held before: b acknowledged, then a read of something older.
    assert {op.index for op in violations[0].slice} == {1, 2}


def test_a_slice_keeps_the_unknown_writes_begun_before_it() -> None:
    """An unknown write may take effect inside the slice: leaving it out would invent a violation."""
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(WRITE, 2, None, UNKNOWN, "u", process="p2")
    for i in range(5):
        h.op(WRITE, 10 + 10 * i, 11 + 10 * i, OK, f"v{i}")
    h.op(READ, 100, 101, OK, "u")  # legal: the unknown write landed late
    h.op(WRITE, 110, 111, OK, "b")
    h.op(READ, 120, 121, OK, "v4")  # not legal
    verdict, violations = check_key("k", h.ops)
    assert verdict is Verdict.VIOLATION
    indexes = {op.index for op in violations[0].slice}
    assert {8, 9}.issubset(indexes) and 1 in indexes, violations[0].render()


def test_concurrent_writes_may_be_read_in_either_order() -> None:
    h = H()
    h.op(WRITE, 0, 10, OK, "a")
    h.op(WRITE, 1, 9, OK, "b", process="p2")
    h.op(READ, 11, 12, OK, "a")
    h.op(READ, 13, 14, OK, "a", process="p2")
    assert linearizable(h.ops) is Verdict.LINEARIZABLE
    h.op(READ, 15, 16, OK, "b")  # ...but not both orders
    assert linearizable(h.ops) is Verdict.VIOLATION


def test_an_unknown_write_may_take_effect_late_or_never() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(WRITE, 2, None, UNKNOWN, "b", process="p2")
    h.op(READ, 10, 11, OK, "a")
    h.op(READ, 20, 21, OK, "b")  # took effect between 11 and 20
    assert linearizable(h.ops) is Verdict.LINEARIZABLE
    h2 = H()
    h2.op(WRITE, 0, 1, OK, "a")
    h2.op(WRITE, 2, None, UNKNOWN, "b", process="p2")
    h2.op(READ, 10, 11, OK, "a")
    assert linearizable(h2.ops) is Verdict.LINEARIZABLE


def test_an_unknown_write_cannot_take_effect_before_it_was_invoked() -> None:
    h = H()
    h.op(READ, 0, 1, OK, "b")
    h.op(WRITE, 2, None, UNKNOWN, "b")
    assert linearizable(h.ops) is Verdict.VIOLATION


def test_a_failed_write_must_never_be_seen() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(WRITE, 2, 3, FAIL, "b", process="p2")
    h.op(READ, 4, 5, OK, "b")
    verdict, violations = check_key("k", h.ops)
    assert verdict is Verdict.VIOLATION
    assert violations[0].slice[-1].kind == READ


def test_create_if_none_match_is_compare_and_set_on_absence() -> None:
    h = H()
    h.op(CREATE, 0, 1, OK, "a")
    h.op(CREATE, 2, 3, OK, "b", process="p2", precondition_failed=True)  # 412: the key existed
    h.op(READ, 4, 5, OK, "a")
    assert linearizable(h.ops) is Verdict.LINEARIZABLE
    h.op(CREATE, 6, 7, OK, "c", process="p3")  # a second create that succeeds: impossible
    assert linearizable(h.ops) is Verdict.VIOLATION


def test_a_412_on_an_absent_key_is_a_violation() -> None:
    h = H()
    h.op(CREATE, 0, 1, OK, "a", precondition_failed=True)
    assert linearizable(h.ops) is Verdict.VIOLATION


def test_a_conditional_write_answered_412_whose_value_then_shows_is_a_violation() -> None:
    """The ambiguous-answer case: the entry was staged, yet the client was told 412."""
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(CAS, 2, 3, OK, "b", expected="a", precondition_failed=True)
    h.op(READ, 4, 5, OK, "b", process=FINAL)
    verdict, violations = check_key("k", h.ops)
    assert verdict is Verdict.VIOLATION and violations


def test_if_match_succeeds_only_on_the_expected_value() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(CAS, 2, 3, OK, "b", expected="a")
    h.op(CAS, 4, 5, OK, "c", expected="a", precondition_failed=True)
    h.op(READ, 6, 7, OK, "b")
    assert linearizable(h.ops) is Verdict.LINEARIZABLE
    h.op(CAS, 8, 9, OK, "d", expected="a", process="p2")
    assert linearizable(h.ops) is Verdict.VIOLATION


def test_the_final_read_finding_nothing_is_reported_as_lost() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(READ, 5, 6, OK, None, process=FINAL)
    _, violations = check_key("k", h.ops)
    assert [v.kind for v in violations] == ["lost"]


def test_the_slice_leaves_out_operations_that_do_not_matter() -> None:
    h = H()
    for i in range(30):  # a long healthy prefix on another process
        h.op(WRITE, 10 * i, 10 * i + 1, OK, f"v{i}")
        h.op(READ, 10 * i + 2, 10 * i + 3, OK, f"v{i}")
    h.op(WRITE, 400, 401, OK, "x", process="p2")
    h.op(READ, 402, 403, OK, "v29", process="p3")
    _, violations = check_key("k", h.ops)
    indexes = {op.index for op in violations[0].slice}
    assert len(violations[0].slice) <= 3, violations[0].render()
    assert indexes >= {60, 61}


def test_the_search_gives_up_rather_than_hang() -> None:
    h = H()
    for i in range(40):  # 40 concurrent unknown writes: 2**40 subsets
        h.op(WRITE, i, None, UNKNOWN, f"v{i}", process=f"p{i}")
    h.op(READ, 100, 101, OK, "nobody-wrote-this")
    assert linearizable(h.ops, limit=1000) is Verdict.TOO_LARGE


def test_a_read_after_an_acknowledged_delete_is_a_resurrection() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(DELETE, 2, 3, OK, process="p2")
    h.op(READ, 4, 5, OK, "a")
    found = resurrections("k", h.ops)
    assert [v.kind for v in found] == ["resurrected"]
    assert [op.index for op in found[0].slice] == [0, 1, 2]
    concurrent = H()
    concurrent.op(WRITE, 0, 5, OK, "a")
    concurrent.op(DELETE, 2, 3, OK, process="p2")
    concurrent.op(READ, 6, 7, OK, "a")
    assert resurrections("k", concurrent.ops) == []
    assert linearizable(concurrent.ops) is Verdict.LINEARIZABLE


def test_a_final_read_that_fails_means_unreadable_bytes() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(CAS, 2, 3, OK, "b", expected="a", precondition_failed=True)
    h.op(READ, 4, 5, UNKNOWN, process=FINAL).error = "500 InternalError"
    h.op(READ, 4, 5, UNKNOWN, process="p2")  # during a fault, a failed read says nothing
    missing = h.op(READ, 6, 7, FAIL, process=FINAL)
    missing.result["entry"] = "b"  # HEAD found b's entry, GET not its bytes
    found = unreadable("k", h.ops)
    assert [v.kind for v in found] == ["unreadable", "unreadable"]
    assert [op.index for op in found[1].slice] == [1, 4]


def test_a_commit_must_hold_every_write_acknowledged_before_it_began() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(WRITE, 2, 3, OK, "b")
    h.op(WRITE, 4, 20, OK, "c", process="p2")  # concurrent with the commit
    commit = h.op(COMMIT, 10, 11, OK, key="main")
    ops = {"k": h.ops[:3]}
    assert commit_misses(commit, {"k": "b"}, ops, commit.invoke_ns) == []
    assert commit_misses(commit, {"k": "c"}, ops, commit.invoke_ns) == []
    missed = commit_misses(commit, {"k": "a"}, ops, commit.invoke_ns)
    assert [v.kind for v in missed] == ["commit misses a write"]
    assert commit_misses(commit, {}, ops, commit.invoke_ns)  # absent: lost too


def test_a_commit_may_miss_a_key_deleted_before_it_began() -> None:
    h = H()
    h.op(WRITE, 0, 1, OK, "a")
    h.op(DELETE, 2, 3, OK)
    commit = h.op(COMMIT, 10, 11, OK, key="main")
    assert commit_misses(commit, {}, {"k": h.ops[:2]}, commit.invoke_ns) == []
    assert commit_misses(commit, {"k": "a"}, {"k": h.ops[:2]}, commit.invoke_ns)


def test_bytes_name_their_value_and_a_wrong_byte_is_caught() -> None:
    body = body_of("p1-7", 300)
    assert len(body) == 300 and value_of(body, 300) == "p1-7"
    assert value_of(body[:-1] + b"?", 300) == "corrupt:p1-7"
