"""Fixtures of the KV suites; `store` (one per driver) comes from tests/conftest.py."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def partition() -> bytes:
    """A partition no other test touches."""
    return b"p-" + uuid.uuid4().hex.encode()
