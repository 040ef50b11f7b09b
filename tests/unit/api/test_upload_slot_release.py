"""An upload's slot is held while its body arrives, not while its entry is staged: once the body
is in and checked, the slot is given back, so a slow graveler cannot fill the slots with uploads
that have finished sending."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from edge.api.backend import Backend, UploadLimits
from edge.api.errors import ApiError
from edge.api.objects.write import UploadBody
from silt.block.adapter import PutResult
from silt.config import Config

CREDENTIALS = {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, n: int) -> bytes:
        out, self._data = self._data[:n], self._data[n:]
        return out


def _one_slot(tmp_path: Path) -> Backend:
    """An API backend with a single upload slot."""
    config = Config.model_validate(
        {"api": {"credentials": CREDENTIALS}, "blockstore": {"type": "local", "local": {"path": str(tmp_path)}}}
    )
    backend = Backend(config)
    backend.upload_limits = UploadLimits(in_flight=1)
    return backend


def test_the_slot_is_given_back_once_the_body_is_in(tmp_path: Path) -> None:
    async def run() -> None:
        backend = _one_slot(tmp_path)
        try:
            with backend.upload_slot() as received:
                with pytest.raises(ApiError) as full, backend.upload_slot():
                    pass
                assert full.value.status == 503
                body = UploadBody(_Bytes(b"abc"), 3, "text/plain", received)
                assert await body.read(3) == b"abc"
                await body.finish(PutResult(3, "etag"))
                with backend.upload_slot():  # another upload starts while this one stages
                    pass
            with backend.upload_slot(), pytest.raises(ApiError), backend.upload_slot():  # given back once only
                pass
        finally:
            await backend.close()

    asyncio.run(run())


def test_a_body_longer_than_declared_keeps_its_slot_until_the_request_ends(tmp_path: Path) -> None:
    async def run() -> None:
        backend = _one_slot(tmp_path)
        try:
            with backend.upload_slot() as received:
                body = UploadBody(_Bytes(b"abcd"), 3, "text/plain", received)
                await body.read(3)
                with pytest.raises(ApiError):
                    await body.finish(PutResult(3, "etag"))
                with pytest.raises(ApiError), backend.upload_slot():
                    pass
            with backend.upload_slot():
                pass
        finally:
            await backend.close()

    asyncio.run(run())
