"""A secret string that no repr, log line or error message shows, without pydantic.

The `silt` CLI signs its calls with the user's secret key and must start fast: importing
pydantic for its ``SecretStr`` alone cost about a quarter of `silt repo list`'s CPU. ``Secret``
is the CLI's (silt/client.py); ``SecretValue`` is what signing reads (silt/rpc/signing.py), so
the services' and the tests' ``pydantic.SecretStr`` still fits wherever a secret is taken.
"""

from __future__ import annotations

import hmac
from typing import Protocol


class SecretValue(Protocol):
    """Anything holding a secret string: ``Secret``, ``pydantic.SecretStr``."""

    def get_secret_value(self) -> str: ...


class Secret:
    """A string shown as ``**********``; ``get_secret_value()`` is the only way to read it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')" if self._value else "Secret('')"

    def __str__(self) -> str:
        return "**********" if self._value else ""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)

    def __len__(self) -> int:
        return len(self._value)
