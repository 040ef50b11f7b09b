"""The request path's shortcuts give what the general code gives, for every input: percent-encoding
of a signed query or path, percent-decoding of a component, an entry's modification time."""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from datetime import UTC
from urllib.parse import quote, unquote, unquote_to_bytes

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from edge.core import sigv4
from edge.gateway.errors import S3Error
from edge.gateway.operations.common import entry_time
from edge.gateway.request import decode_component
from silt.graveler.v1 import model_pb2 as pb

# Every ASCII character, a few Latin-1 and wider ones, lone surrogates as latin-1 text cannot
# hold them, and the escapes.
ALPHABET = [chr(c) for c in range(128)] + ["é", "ÿ", "€", "😀", "\udc80", "%", "%2F", "%41", "%e2%82%ac", "%zz"]


def _texts(count: int) -> list[str]:
    rng = random.Random(20261130)
    texts = ["", "/", "a/b", "X-Amz-Algorithm", "AKIA/20261130/us-east-1/s3/aws4_request", "a b", "~-_.", "+"]
    texts += [c for c in ALPHABET]
    texts += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(count)]
    plain = string.ascii_letters + "-_.~/"
    texts += ["".join(rng.choice(plain) for _ in range(rng.randint(1, 30))) for _ in range(200)]
    return texts


def _same(shortcut: Callable[[str], str], general: Callable[[str], str], text: str) -> None:
    """shortcut(text) is general(text), or raises what general raises."""
    try:
        expected = general(text)
    except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot encode
        with pytest.raises(UnicodeEncodeError):
            shortcut(text)
        return
    assert shortcut(text) == expected, text


def test_signed_query_encoding_and_the_requoted_path_equal_urllibs() -> None:
    for text in _texts(5_000):
        _same(sigv4._encode, lambda t: quote(t, safe="-_.~"), text)
        _same(sigv4._requoted_path, lambda t: quote(unquote(t), safe="/~"), text)


def _decoded_in_general(text: str) -> str:
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    return unquote_to_bytes(raw).decode("utf-8")


def test_decoding_a_component_equals_the_general_decoding_or_refuses_as_it_does() -> None:
    for text in _texts(5_000):
        try:
            expected = _decoded_in_general(text)
        except UnicodeDecodeError:
            with pytest.raises(S3Error, match="not valid UTF-8"):
                decode_component(text)
            continue
        assert decode_component(text) == expected, text


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [
        (0, 0),
        (1, 999_999_999),
        (1_795_428_000, 123_456_789),
        (1_795_428_000, 999),
        (-1, 500_000_000),
        (-86_400 * 365, 1),
    ],
)
def test_an_entrys_time_is_what_the_timestamp_converts_to(seconds: int, nanos: int) -> None:
    stamp = Timestamp(seconds=seconds, nanos=nanos)
    entry = pb.Entry(last_modified=stamp)
    assert entry_time(entry) == stamp.ToDatetime(tzinfo=UTC)
    assert entry_time(entry).tzinfo is not None
    assert entry_time(pb.Entry()).timestamp() == 0
