"""Typed errors shared by every Silt layer.

Drivers translate their own exceptions into these, so callers never depend on
sqlite3, cassandra-driver or botocore exception types.
"""

from __future__ import annotations


class SiltError(Exception):
    """Base of every error Silt raises on purpose."""


class NotFound(SiltError):
    """The key, object or entity does not exist."""


class AlreadyExists(SiltError):
    """The entity to create exists already."""


class PredicateFailed(SiltError):
    """A conditional write found a different current value than the caller expected."""


class InvalidArgument(SiltError):
    """The caller passed a value the operation cannot accept (bad key, bad range, ...)."""


class Unavailable(SiltError):
    """The backing store (KV database or object store) cannot answer right now.

    The operation may or may not have taken effect; callers retry idempotent operations
    and re-read before retrying conditional ones.
    """


class ConfigError(SiltError):
    """The configuration file or an environment override is invalid."""


class FailedPrecondition(SiltError):
    """The system is not in a state the operation requires (e.g. nothing to commit)."""


class Aborted(SiltError):
    """A lock-free operation lost its race too many times; retrying later may succeed."""
