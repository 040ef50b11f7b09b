"""auth's decisions as each front end of the edge answers them: one policy in the edge's core
(EdgeClient.allowed / allowed_many), the error in each front end's own terms."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from edge.api.backend import Backend as ApiBackend
from edge.api.errors import ApiError
from edge.gateway.backend import Backend as GatewayBackend
from edge.gateway.errors import S3Error
from silt.config import Config
from silt.errors import InvalidArgument, SiltError, Unavailable
from silt.key_scope import KeyScope
from silt.rpc.authority import AioCachedAuthority


class Auth:
    """auth's remote decisions: the error the test sets, else everything allowed; counts calls."""

    def __init__(self, error: SiltError | None = None) -> None:
        self.error = error
        self.calls = 0

    async def allowed_many(
        self, user_id: str, action: str, resources: Sequence[str], source_ip: str = ""
    ) -> list[bool]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return [True for _ in resources]

    async def key_scope(
        self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = ""
    ) -> KeyScope:
        # Object actions as the repository's: every key or none.
        return KeyScope(repository, every_key=(await self.allowed_many(user_id, action, [repository]))[0])


def _run(tmp_path: Path, make: Any, auth: Auth, body: Callable[[Any], Awaitable[None]]) -> None:
    """body(backend) with a backend made by make (a front end's Backend) deciding through auth."""
    config = Config.model_validate(
        {
            "blockstore": {"type": "local", "local": {"path": str(tmp_path)}},
            "credentials": {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "secret"},
        }
    )

    async def run() -> None:
        backend = make(config)
        backend.authority = AioCachedAuthority(auth)
        try:
            await body(backend)
        finally:
            await backend.close()

    asyncio.run(run())


def _s3(error: Exception) -> tuple[object, str]:
    assert isinstance(error, S3Error)
    return error.code, error.message


def _lakefs(error: Exception) -> tuple[object, str]:
    assert isinstance(error, ApiError)
    return error.status, error.message


@pytest.mark.parametrize(
    ("make", "answer", "expected"),
    [
        (GatewayBackend, _s3, ("ServiceUnavailable", "auth: auth is down")),
        (ApiBackend, _lakefs, (503, "auth: auth is down")),
    ],
)
def test_auth_not_deciding_is_answered_in_each_front_ends_terms(
    tmp_path: Path, make: Any, answer: Callable[[Exception], tuple[object, str]], expected: tuple[object, str]
) -> None:
    async def body(backend: Any) -> None:
        with pytest.raises(Exception) as one:
            await backend.allowed("alice", "ReadRepo", "repo")
        with pytest.raises(Exception) as many:
            await backend.allowed_many("alice", "ReadRepo", ["repo", "other"])
        assert answer(one.value) == answer(many.value) == expected

    _run(tmp_path, make, Auth(Unavailable("auth is down")), body)


def test_the_api_answers_a_resource_auth_refuses_400(tmp_path: Path) -> None:
    async def body(backend: ApiBackend) -> None:
        with pytest.raises(ApiError) as invalid:
            await backend.allowed("alice", "ReadRepo", "repo")
        assert (invalid.value.status, invalid.value.message) == (400, "no such resource")

    _run(tmp_path, ApiBackend, Auth(InvalidArgument("no such resource")), body)


@pytest.mark.parametrize("make", [GatewayBackend, ApiBackend])
def test_no_resources_asks_auth_nothing(tmp_path: Path, make: Any) -> None:
    auth = Auth()

    async def body(backend: Any) -> None:
        assert await backend.allowed_many("alice", "ReadRepo", []) == []
        assert await backend.allowed_many("alice", "ReadRepo", ["repo"]) == [True]
        assert auth.calls == 1

    _run(tmp_path, make, auth, body)
