"""The S3 client's timestamp parser: a fast path for listings' ISO 8601 UTC times that answers
exactly what botocore's own parser answers, for every spelling an S3 response can carry."""

from __future__ import annotations

import botocore.utils
import pytest

from silt.block.s3 import _timestamp


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-25T20:00:00.000Z",  # ListObjectsV2's LastModified
        "2026-11-25T20:00:00Z",
        "2026-11-25T20:00:00.123456Z",
        "2026-11-25T20:00:00+02:00",
        "2026-11-25T20:00:00",  # no zone: botocore's reading, not a guess
        "Wed, 25 Nov 2026 20:00:00 GMT",  # an HTTP date header
        "1700000000",  # epoch seconds
        "1700000000.5",
        "20261125",  # digits are epoch seconds to botocore, not a basic ISO date
    ],
)
def test_every_spelling_parses_as_botocore_parses_it(value: str) -> None:
    ours, theirs = _timestamp(value), botocore.utils.parse_timestamp(value)
    assert ours == theirs and ours.utcoffset() == theirs.utcoffset()


def test_a_malformed_time_is_botocores_error() -> None:
    with pytest.raises(ValueError):
        _timestamp("2026-13-45T99:00:00Z")
