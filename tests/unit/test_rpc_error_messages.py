"""Status messages stay under gRPC's trailer limit whatever a client named."""

from __future__ import annotations

from urllib.parse import quote

from silt.errors import InvalidArgument
from silt.rpc.errors import MAX_DETAILS_BYTES, details_of


def test_short_messages_are_kept_whole() -> None:
    assert details_of(InvalidArgument("invalid branch name 'x'")) == "invalid branch name 'x'"


def test_long_messages_are_cut_below_the_trailer_limit() -> None:
    for name in ("k" * 1_100_000, "é" * 600_000, "\U0001f600" * 300_000):
        details = details_of(InvalidArgument(f"invalid branch name {name!r}"))
        assert details.startswith("invalid branch name '")
        assert details.endswith("… (message truncated)")
        assert len(details.encode()) <= MAX_DETAILS_BYTES + 30
        # gRPC percent-encodes the message into its grpc-message trailer; peers refuse 16 KiB.
        assert len(quote(details)) < 8 * 1024
