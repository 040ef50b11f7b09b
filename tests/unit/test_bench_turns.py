"""The benchmarks' turn orders: every alternative in every position, and after every other one,
equally often over a whole design."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.turns import balanced_rounds, turn_order, williams_rows


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6])
def test_a_williams_design_balances_positions_and_predecessors(count: int) -> None:
    rows = williams_rows(count)
    assert len(rows) == (count if count % 2 == 0 else 2 * count)
    assert all(sorted(row) == list(range(count)) for row in rows)
    positions = Counter((position, item) for row in rows for position, item in enumerate(row))
    assert len(set(positions.values())) == 1 and len(positions) == count * count
    pairs = Counter((row[i], row[i + 1]) for row in rows for i in range(count - 1))
    assert len(set(pairs.values())) <= 1 and len(pairs) == count * (count - 1)


def test_rounds_cover_whole_designs_and_orders_repeat_after_one() -> None:
    assert balanced_rounds(2) == 4
    assert balanced_rounds(3) == 6
    assert balanced_rounds(4) == 4
    modes = ("off", "metrics", "tracing")
    orders = [turn_order(modes, r) for r in range(balanced_rounds(3))]
    assert Counter(order[0] for order in orders) == {mode: 2 for mode in modes}
    assert turn_order(modes, 6) == orders[0]
