"""The id of the S3 request being served, carried across processes and into log lines.

The gateway assigns it (and returns it as ``x-amz-request-id``); gRPC calls made on its
behalf carry it as metadata, and the receiving service's interceptor makes it current for
the handler, so graveler's and auth's log lines about that request name it too.
"""

from __future__ import annotations

import contextvars
import logging

METADATA_KEY = "x-silt-request-id"
MAX_LENGTH = 64

current: contextvars.ContextVar[str | None] = contextvars.ContextVar("silt_request_id", default=None)


def sanitize(value: str) -> str | None:
    """An id as received from another process: bounded, printable, or nothing."""
    value = value[:MAX_LENGTH]
    return value if value.isascii() and value.isprintable() and value else None


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` (or None) to every record, for the formatters."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current.get()
        return True
