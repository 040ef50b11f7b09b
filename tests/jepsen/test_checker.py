"""The checker on hand-written histories: each must pass or must fail, for the reason named."""

from __future__ import annotations

import itertools
import random

from tests.jepsen.checker import (
    ANY,
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
    for i in range(20):
        h.op(WRITE, 10 * i, 10 * i + 1, OK, f"v{i}")
    h.op(READ, 300, 301, OK, "nobody-wrote-this")
    assert linearizable(h.ops, limit=10) is Verdict.TOO_LARGE


def test_a_delete_leaves_the_key_absent_even_when_no_read_saw_it_absent() -> None:
    h = H()
    h.op(WRITE, 0, None, UNKNOWN, "u")
    h.op(DELETE, 10, 11, OK)
    h.op(CREATE, 12, 13, OK, "c")
    assert linearizable(h.ops) is Verdict.LINEARIZABLE
    assert linearizable(h.ops, initial=ANY) is Verdict.LINEARIZABLE


def test_many_unknown_writes_nobody_read_are_decided_at_once() -> None:
    """40 concurrent unknown writes: 2**40 subsets, but those of values nobody read are alike."""
    h = H()
    for i in range(40):
        h.op(WRITE, i, None, UNKNOWN, f"v{i}", process=f"p{i}")
        h.op(DELETE, i, None, UNKNOWN, process=f"q{i}")
    h.op(READ, 100, 101, OK, None)
    h.op(CREATE, 102, 103, OK, "c", precondition_failed=True)  # one of them landed by now
    h.op(READ, 104, 105, OK, None, process="p2")  # and a delete after it
    assert linearizable(h.ops, limit=50_000) is Verdict.LINEARIZABLE
    h.op(READ, 106, 107, OK, "v7")  # v7 is read: it is its own value again
    assert linearizable(h.ops, limit=50_000) is Verdict.LINEARIZABLE
    h.op(READ, 108, 109, OK, "nobody-wrote-this")
    assert linearizable(h.ops, limit=50_000) is Verdict.VIOLATION


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
    assert [op.index for op in missed[0].slice] == [1, 3, 0]  # b, the commit, and a's write
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


# --- the search against brute force ---------------------------------------------------------


def _brute_force(ops: list[Op], initial: str | None) -> bool:
    """Linearizable by trying every order of every admissible subset (small histories only)."""
    acknowledged = [op for op in ops if op.outcome is OK]
    unknown = [op for op in ops if op.outcome is UNKNOWN and op.kind != READ]
    for r in range(len(unknown) + 1):
        for chosen in itertools.combinations(unknown, r):
            for order in itertools.permutations([*acknowledged, *chosen]):
                in_time = all(
                    not (b.outcome is OK and b.complete_ns is not None and b.complete_ns < a.invoke_ns)
                    for i, a in enumerate(order)
                    for b in order[i + 1 :]
                )
                if in_time and _legal(order, initial):
                    return True
    return False


def _legal(order: tuple[Op, ...], initial: str | None) -> bool:
    state = initial
    for op in order:
        if state == ANY and op.kind in (READ, CREATE, CAS):
            state = op.value if op.kind == READ or not op.precondition_failed else state
            continue
        if op.kind == READ and state != op.value:
            return False
        if op.kind == CREATE and (state is None) == op.precondition_failed:
            return False
        if op.kind == CAS and (state == op.expected) == op.precondition_failed:
            return False
        if op.kind == DELETE:
            state = None
        elif op.kind != READ and not op.precondition_failed:
            state = op.value
    return True


def _check_against_brute_force(
    seed: int,
    histories: int,
    sizes: tuple[int, int],
    kinds: list[str],
    outcomes: list[Outcome],
    read_outcomes: list[Outcome],
    reads_of_written: int,
    span: int = 40,
) -> None:
    """Random histories of one key: the search's verdict, from absence and from any value, must
    be brute force's. reads_of_written: how much likelier a read returns a written value than
    absence; span: the milliseconds over which operations begin."""
    rng = random.Random(seed)
    for _ in range(histories):
        h, written = H(), list[str | None]()
        for i in range(rng.randint(*sizes)):
            kind = rng.choice(kinds)
            start = rng.randint(0, span)
            outcome = rng.choice(read_outcomes if kind == READ else outcomes)
            value = f"v{i}" if kind != DELETE else None
            if kind == READ:
                value = rng.choice([*written * reads_of_written, None])
            elif value is not None:
                written.append(value)
            expected = rng.choice([*written[:-1], "other"]) if kind == CAS else None
            refused = kind in (CREATE, CAS) and outcome is OK and rng.random() < 0.4
            end = None if outcome is UNKNOWN else start + rng.randint(1, 15)
            h.op(kind, start, end, outcome, value, expected, f"p{i}", refused)
        for initial in (None, ANY):
            expected_verdict = Verdict.LINEARIZABLE if _brute_force(h.ops, initial) else Verdict.VIOLATION
            assert linearizable(h.ops, initial=initial) is expected_verdict, [op.describe() for op in h.ops]


def test_the_search_agrees_with_brute_force_on_random_small_histories() -> None:
    outcomes = [OK, OK, OK, UNKNOWN, FAIL]
    kinds = [WRITE, READ, DELETE, CREATE, CAS, READ]
    _check_against_brute_force(53, 400, (1, 6), kinds, outcomes, read_outcomes=outcomes, reads_of_written=1)


def test_the_search_agrees_with_brute_force_where_most_outcomes_are_unknown() -> None:
    """Unknown writes whose values are read, unknown creates and compare-and-sets: the
    configurations the search skips as covered by one with fewer unknown operations taken."""
    kinds = [WRITE, WRITE, READ, READ, DELETE, CREATE, CAS]
    _check_against_brute_force(
        61, 600, (3, 7), kinds, [OK, UNKNOWN, UNKNOWN], read_outcomes=[OK], reads_of_written=2, span=30
    )


def test_unknown_writes_that_were_read_are_decided_without_searching_their_subsets() -> None:
    """30 concurrent unknown writes, each read in turn: a search of each subset taken would
    need 2**30 configurations to show that the last read, of a value nobody wrote, is illegal."""
    h = H()
    for i in range(30):
        h.op(WRITE, i, None, UNKNOWN, f"v{i}", process=f"w{i}")
    for i in range(30):
        h.op(READ, 100 + 2 * i, 101 + 2 * i, OK, f"v{i}")
    assert linearizable(h.ops, limit=20_000) is Verdict.LINEARIZABLE
    h.op(READ, 200, 201, OK, "v3")  # v3 was overwritten for good: only a resurrection reads it
    assert linearizable(h.ops, limit=20_000) is Verdict.VIOLATION
