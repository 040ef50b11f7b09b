"""The order in which benchmarked alternatives take their turns, round after round.

On a shared machine each turn is measured right after another one, whose leftovers (batches
still exported, files still flushed, caches filled) may fall on it. Rotating the order moves each
alternative through every position but keeps who comes before whom; a Williams design also gives
each alternative every other one as its predecessor, equally often.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

_Item = TypeVar("_Item")


def williams_rows(count: int) -> list[list[int]]:
    """The rows of a Williams design for count alternatives: in each row every alternative once;
    over all rows, every alternative equally often in each position and right after each other
    one. count rows for an even count, twice as many for an odd one (each row then reversed)."""
    if count < 1:
        raise ValueError("at least one alternative")
    first = [0]
    low, high = 1, count - 1
    while len(first) < count:
        first.append(low)
        low += 1
        if len(first) < count:
            first.append(high)
            high -= 1
    rows = [[(item + shift) % count for item in first] for shift in range(count)]
    if count % 2:
        rows += [list(reversed(row)) for row in rows]
    return rows


def balanced_rounds(count: int, at_least: int = 4) -> int:
    """The fewest rounds, at least at_least, that go through the whole design a whole number of times."""
    length = len(williams_rows(count))
    return length * -(-at_least // length)


def turn_order(items: Sequence[_Item], round_no: int) -> list[_Item]:
    """items in the order of round round_no's turns."""
    rows = williams_rows(len(items))
    return [items[i] for i in rows[round_no % len(rows)]]
