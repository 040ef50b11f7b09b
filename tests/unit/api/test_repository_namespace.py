"""A repository created without a storage namespace: placed under the default prefix GET
/config reports, or refused in words when the server has none (nothing is asked of graveler)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import FastAPI

from edge.api.app import create_app
from edge.api.backend import Caller
from edge.api.context import Context, context
from edge.api.routes.setup import storage_config
from silt.config import Config
from tests.support.asgi import asgi_answer

CREDENTIALS = {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}


class _Backend:
    """Allows everything and fails any call to graveler: the refusal must come first."""

    async def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        return True

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("graveler must not be asked")


def _post(app: FastAPI, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One request through the ASGI app, without a server (no HTTP client library needed)."""
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    status, _, answer = asgi_answer(app, path, method="POST", body=raw, headers=headers)
    return status, json.loads(answer)


def _app(roots: list[str] | None) -> FastAPI:
    config = Config.model_validate(
        {"api": {"credentials": CREDENTIALS}, "graveler": {"allowed_namespace_roots": roots}}
    )
    app = create_app(config, fast_paths=False).app  # type: ignore[attr-defined]  # Observed wraps the FastAPI app
    assert isinstance(app, FastAPI)
    caller = Caller(user_id="admin", creation_date=0)
    app.dependency_overrides[context] = lambda: Context(_Backend(), caller)  # type: ignore[arg-type]
    return app


@pytest.mark.parametrize("body", [{"name": "sample"}, {"name": "sample", "storage_namespace": ""}])
def test_without_a_default_root_an_omitted_namespace_is_refused_in_words(body: dict[str, Any]) -> None:
    status, answer = _post(_app([]), "/api/v1/repositories", body)
    assert status == 400
    assert "storage_namespace is required" in answer["message"]


def test_config_reports_the_root_graveler_places_repositories_under() -> None:
    config = Config.model_validate({"api": {"credentials": CREDENTIALS}})
    request = type("R", (), {"app": type("A", (), {"state": type("S", (), {"config": config})})})()
    assert storage_config(request).default_namespace_prefix == "local://"
