"""The part layout kept with a multipart object, for GET/HEAD ?partNumber=."""

from __future__ import annotations

import pytest

from edge.gateway.operations.objects import decode_part_sizes, encode_part_sizes


@pytest.mark.parametrize(
    ("sizes", "encoded"),
    [
        ([7], "0x0+7"),
        ([5, 5, 5, 2], "3x5+2"),
        ([5, 5], "1x5+5"),
        ([5, 6, 2], "5,6,2"),
        ([8] * 10_000, "9999x8+8"),
    ],
)
def test_part_sizes_round_trip(sizes: list[int], encoded: str) -> None:
    assert encode_part_sizes(sizes) == encoded
    assert decode_part_sizes(encoded) == sizes
