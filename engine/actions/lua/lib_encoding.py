"""The decoding halves of `encoding/json` and `encoding/yaml`, and `encoding/base64`,
`encoding/hex`, `crypto/sha256`, `crypto/hmac`: Go's behaviour as lakeFS exposes it.

Decoding builds Python values first and Lua tables from them, so both are bounded before
they are built. JSON's input is sized against the memory left for Lua from a count of its
brackets, commas and quotes, a bound on the values it can hold (Python's decoder is C and
fast). YAML's loader is mostly Python: its node graph takes a few hundred bytes per node and
its time holds the GIL, so YAML documents are capped at MAX_YAML_BYTES either way.
Marshalling to YAML gets the value as JSON from the Lua encoder (lua_json.py).

Digests and HMACs are raw bytes, as in lakeFS (``hex.encode(sha256.digest(s))`` for hex).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from typing import Any

import yaml

from engine.actions.lua.bridge import BridgeError, Builder

MAX_YAML_BYTES = 256 * 1024

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_NOT_HEX = re.compile(rb"[^0-9a-fA-F]")
_NOT_URL_BASE64 = re.compile(rb"[^A-Za-z0-9_-]")


def _reject_constant(name: str) -> Any:
    # Go's decoder knows no NaN or Infinity; Python's accepts them.
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


def _decode_json(data: bytes) -> Any:
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except RecursionError:
        raise BridgeError("json: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, bad encodings, ints too long to convert
        raise BridgeError(f"json: {exc}") from None


def json_unmarshal(b: Builder, data: bytes) -> tuple[Any, ...]:
    containers = data.count(b"[") + data.count(b"{")
    values = data.count(b",") + containers + 1
    b.check_bytes(len(data) + 64 * containers + 16 * values + 24 * data.count(b'"'))
    return (b.value(_decode_json(data)),)


def _check_yaml_size(data: bytes) -> None:
    if len(data) > MAX_YAML_BYTES:
        raise BridgeError(f"yaml: documents are limited to {MAX_YAML_BYTES} bytes")


def yaml_unmarshal(b: Builder, data: bytes) -> tuple[Any, ...]:
    _check_yaml_size(data)
    try:
        # Go's decoder reads the first document of a stream.
        value = next(iter(yaml.load_all(data, Loader=_Loader)), None)
    except yaml.YAMLError as exc:
        raise BridgeError(f"yaml: {exc}") from None
    except RecursionError:
        raise BridgeError("yaml: nested too deeply") from None
    return (b.value(value),)


def yaml_from_json(b: Builder, data: bytes) -> tuple[Any, ...]:
    _check_yaml_size(data)
    text = yaml.dump(_decode_json(data), Dumper=_Dumper, sort_keys=True, allow_unicode=True, default_flow_style=False)
    return (b.text(text),)


def fix_utf8(b: Builder, data: bytes) -> tuple[Any, ...]:
    return (data.decode("utf-8", "replace").encode(),)


def _strip_newlines(data: bytes) -> bytes:
    # Go's decoders skip CR and LF anywhere in the input.
    return data.replace(b"\r", b"").replace(b"\n", b"")


def base64_encode(b: Builder, data: bytes) -> tuple[Any, ...]:
    b.check_bytes(len(data) * 4 // 3 + 4)
    return (base64.b64encode(data),)


def base64_decode(b: Builder, data: bytes) -> tuple[Any, ...]:
    try:
        return (base64.b64decode(_strip_newlines(data), validate=True),)
    except binascii.Error:
        raise BridgeError("illegal base64 data") from None


def base64_url_encode(b: Builder, data: bytes) -> tuple[Any, ...]:
    b.check_bytes(len(data) * 4 // 3 + 4)
    return (base64.urlsafe_b64encode(data).rstrip(b"="),)


def base64_url_decode(b: Builder, data: bytes) -> tuple[Any, ...]:
    data = _strip_newlines(data)
    # Python maps the URL alphabet onto the standard one before it validates, so "+" and "/"
    # would pass; Go's unpadded URL encoding has neither, nor padding.
    if _NOT_URL_BASE64.search(data):
        raise BridgeError("illegal base64 data")
    try:
        return (base64.b64decode(data + b"=" * (-len(data) % 4), altchars=b"-_", validate=True),)
    except binascii.Error:
        raise BridgeError("illegal base64 data") from None


def hex_encode(b: Builder, data: bytes) -> tuple[Any, ...]:
    b.check_bytes(len(data) * 2)
    return (data.hex().encode(),)


def hex_decode(b: Builder, data: bytes) -> tuple[Any, ...]:
    invalid = _NOT_HEX.search(data)
    if invalid:
        char = chr(data[invalid.start()])
        shown = f" {char!r}" if char.isprintable() else ""
        raise BridgeError(f"encoding/hex: invalid byte: U+{ord(char):04X}{shown}")
    if len(data) % 2:
        raise BridgeError("encoding/hex: odd length hex string")
    return (bytes.fromhex(data.decode()),)


def sha256(b: Builder, data: bytes) -> tuple[Any, ...]:
    return (hashlib.sha256(data).digest(),)


def hmac_sha256(b: Builder, message: bytes, key: bytes) -> tuple[Any, ...]:
    return (hmac.new(key, message, hashlib.sha256).digest(),)


def hmac_sha1(b: Builder, message: bytes, key: bytes) -> tuple[Any, ...]:
    return (hmac.new(key, message, hashlib.sha1).digest(),)


FUNCTIONS: dict[str, Callable[..., tuple[Any, ...]]] = {
    "encoding.json_unmarshal": json_unmarshal,
    "encoding.yaml_unmarshal": yaml_unmarshal,
    "encoding.yaml_from_json": yaml_from_json,
    "encoding.fix_utf8": fix_utf8,
    "encoding.base64_encode": base64_encode,
    "encoding.base64_decode": base64_decode,
    "encoding.base64_url_encode": base64_url_encode,
    "encoding.base64_url_decode": base64_url_decode,
    "encoding.hex_encode": hex_encode,
    "encoding.hex_decode": hex_decode,
    "crypto.sha256": sha256,
    "crypto.hmac_sha256": hmac_sha256,
    "crypto.hmac_sha1": hmac_sha1,
}
