"""What the connection saw of a request's body that ASGI's messages cannot say.

ASGI ends every body with `more_body: False`, whether the client sent all of it, half-closed
inside it (a chunked body has no length to tell that by), or sent bytes past its
Content-Length (which the HTTP parser refuses only after the body has ended). The edge
process's HTTP protocol (edge/gateway/protocol.py) records those in a BodyEnd per request;
the S3 gateway's and the REST API's body readers ask `body_end(scope)` before they accept a body
as whole. It travels in the scope's `extensions`, where ASGI has a server offer what the
protocol itself does not carry, under one name known only to this module.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

_EXTENSION = "silt.body_end"


@dataclass
class BodyEnd:
    declared: bool = False  # the head declared a non-zero Content-Length
    overrun: bool = False  # bytes past that length arrived before the answer
    cut: bool = False  # the client half-closed inside the body


def track_body(scope: MutableMapping[str, Any], declared: bool) -> BodyEnd:
    """The server's side: a BodyEnd for this request's body, offered to the app in its scope."""
    end = BodyEnd(declared=declared)
    extensions = scope.get("extensions")
    if not isinstance(extensions, dict):
        extensions = scope["extensions"] = {}
    extensions[_EXTENSION] = end
    return end


def body_end(scope: MutableMapping[str, Any]) -> BodyEnd:
    """The app's side: what the server recorded of this request's body; under another server
    (or in a test calling the app directly) a BodyEnd that never reports anything."""
    end = (scope.get("extensions") or {}).get(_EXTENSION)
    return end if isinstance(end, BodyEnd) else BodyEnd()
