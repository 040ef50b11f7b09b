"""User metadata values between HTTP headers and an entry, as S3 carries text that is not ASCII.

S3 reads a value's bytes as UTF-8 and decodes an RFC 2047 encoded word (`=?UTF-8?B?...?=`, the
form a client whose SDK refuses non-ASCII metadata sends) before storing it; it returns a
value that is not printable ASCII as one RFC 2047 encoded word, so that every HTTP library can
carry it. An entry holds the text itself: what the REST API shows, and what the same value
sent either way stores alike.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re

# An RFC 2047 encoded word: `=?charset?B|Q?text?=`.
_ENCODED_WORD = re.compile(r"=\?([^?\s*]+)(?:\*[^?\s]*)?\?([BbQq])\?([^?\s]*)\?=")
# The charsets an encoded word is decoded from (as codecs names them): what clients send. Not
# any codec Python has, which would let a header pick a slow or exotic decoder (punycode, ...).
_CHARSETS = frozenset(("utf-8", "ascii", "iso8859-1"))
# What a header value may hold as it is: visible ASCII, space and tab.
_PLAIN = re.compile(r"[\t\x20-\x7e]*")


def stored_value(sent: str) -> str:
    """The text of a value as it arrived (one char per byte, latin-1): its UTF-8 text, the
    bytes read as latin-1 when they are not UTF-8, and its encoded words decoded (a value with
    one that does not decode is kept as it came)."""
    try:
        text = sent.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        text = sent
    if "=?" not in text:
        return text
    try:
        return _decode_words(text)
    except (ValueError, LookupError, binascii.Error):
        return text


def header_value(text: str) -> str:
    """The header form of a stored value: itself when printable ASCII, else one encoded word
    of its UTF-8 bytes, as S3 answers (also a value that reads as an encoded word itself, so
    that decoding it gives back the text)."""
    if _PLAIN.fullmatch(text) is not None and _ENCODED_WORD.search(text) is None:
        return text
    return "=?UTF-8?B?" + base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii") + "?="


def _decode_words(text: str) -> str:
    """RFC 2047: each encoded word decoded, white space between two of them dropped."""
    out: list[str] = []
    end = 0
    for match in _ENCODED_WORD.finditer(text):
        between = text[end : match.start()]
        if not (end and between.isspace()):
            out.append(between)
        charset, encoding, payload = match.groups()
        if codecs.lookup(charset).name not in _CHARSETS:
            raise LookupError(f"not a charset user metadata is decoded from: {charset}")
        if encoding in "Bb":
            raw = base64.b64decode(payload, validate=True)
        else:
            raw = binascii.a2b_qp(payload.encode("ascii"), header=True)
        out.append(raw.decode(charset))
        end = match.end()
    out.append(text[end:])
    return "".join(out)
