"""S3 errors: the code, HTTP status and message an S3 client expects, rendered as S3's XML body."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape

from edge.core.s3_errors import CODES, S3Error

__all__ = ["CODES", "S3Error", "error_body"]

# Characters XML 1.0 cannot carry, even as character references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: str) -> str:
    """Client text echoed into an error (a bucket name, a header value): escaped, and with the
    characters XML cannot hold replaced, so that the client can still parse the error."""
    return escape(_NOT_XML.sub("\ufffd", value))


def error_body(error: S3Error, resource: str, request_id: str) -> bytes:
    extra = "".join(f"<{k}>{_text(v)}</{k}>" for k, v in error.extra.items())
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{error.code}</Code><Message>{_text(error.message)}</Message>"
        f"<Resource>{_text(resource)}</Resource>{extra}<RequestId>{request_id}</RequestId></Error>"
    ).encode("utf-8", "replace")
