"""User metadata values between HTTP headers and entries (edge/gateway/metadata_values.py)."""

from __future__ import annotations

from email.header import decode_header, make_header

import pytest

from edge.gateway.metadata_values import header_value, stored_value


def wire(text: str) -> str:
    """A value as the gateway reads it off the wire: its UTF-8 bytes, one char per byte."""
    return text.encode().decode("latin-1")


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("plain ascii", "plain ascii"),
        (wire("café ☕"), "café ☕"),  # UTF-8 bytes, as most clients send them
        ("Hello World\xe9", "Hello Worldé"),  # a latin-1 byte that is not UTF-8
        ("=?UTF-8?B?Y2Fmw6k=?=", "café"),
        ("=?utf-8?q?caf=C3=A9_au_lait?=", "café au lait"),
        ("=?UTF-8?B?Y2Fm?= =?UTF-8?B?w6k=?=", "café"),  # white space between two words goes
        ("a =?UTF-8?B?Y2Fmw6k=?= b", "a café b"),
        ("=?UTF-8*en?Q?a?=", "a"),  # RFC 2231 language
        # Not well-formed: kept as sent rather than losing what the client meant.
        ("=?UTF-8?B?!!!?=", "=?UTF-8?B?!!!?="),
        ("=?no-such-charset?B?Y2Fmw6k=?=", "=?no-such-charset?B?Y2Fmw6k=?="),
        ("=?UTF-8?B?/w==?=", "=?UTF-8?B?/w==?="),  # decodes to bytes that are not UTF-8
        ("=?base64?B?Y2Fmw6k=?=", "=?base64?B?Y2Fmw6k=?="),  # a codec that is not a charset
        # Charsets clients send are decoded; any other codec is not chosen by a header.
        ("=?ISO-8859-1?Q?caf=E9?=", "café"),
        ("=?us-ascii?Q?cafe?=", "cafe"),
        ("=?punycode?Q?caf-dma?=", "=?punycode?Q?caf-dma?="),
        ("=?utf-16?B?//5jAGEAZgDpAA==?=", "=?utf-16?B?//5jAGEAZgDpAA==?="),
        ("1+1=?2", "1+1=?2"),
        ("", ""),
    ],
)
def test_stored_value(sent: str, stored: str) -> None:
    assert stored_value(sent) == stored


@pytest.mark.parametrize(
    ("stored", "header"),
    [
        ("plain ascii", "plain ascii"),
        ("tab\tkept", "tab\tkept"),
        ("café", "=?UTF-8?B?Y2Fmw6k=?="),
        ("\x04mymeta", "=?UTF-8?B?BG15bWV0YQ==?="),
        # Text that reads as an encoded word is encoded too, so that decoding gives it back.
        ("=?UTF-8?B?Y2Fmw6k=?=", "=?UTF-8?B?PT9VVEYtOD9CP1kyRm13Nms9Pz0=?="),
    ],
)
def test_header_value(stored: str, header: str) -> None:
    assert header_value(stored) == header
    assert header.isascii()
    assert str(make_header(decode_header(header))) == stored or header == stored


@pytest.mark.parametrize("text", ["café ☕", "日本語", "Hello Worldé", "=?UTF-8?Q?x?="])
def test_a_stored_value_round_trips(text: str) -> None:
    assert stored_value(header_value(text)) == text
