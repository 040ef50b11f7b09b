"""What `blockstore.<type>.*pre_signed*` does to /config and to presign requests, and which Host
a local presigned URL may be built on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from starlette.requests import Request

from edge.api.errors import ApiError
from edge.api.objects.presign import Presigner
from edge.api.routes.setup import storage_config
from silt.block.local import LocalAdapter
from silt.config import Config

CREDENTIALS = {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}


def _config(**local: Any) -> Config:
    return Config.model_validate({"api": {"credentials": CREDENTIALS}, "blockstore": {"local": local}})


def _request(config: Config, host: bytes = b"silt.example:8000") -> Request:
    app = SimpleNamespace(state=SimpleNamespace(config=config))
    scope = {
        "type": "http",
        "scheme": "https",
        "headers": [(b"host", host)],
        "app": app,
        "path": "/",
        "query_string": b"",
    }
    return Request(scope)


@pytest.mark.parametrize(
    ("settings", "support", "support_ui"),
    [({}, True, True), ({"disable_pre_signed_ui": True}, True, False), ({"disable_pre_signed": True}, False, False)],
)
def test_config_reports_what_is_enabled(settings: dict[str, bool], support: bool, support_ui: bool) -> None:
    storage = storage_config(_request(_config(**settings)))
    assert (storage.pre_sign_support, storage.pre_sign_support_ui, storage.pre_sign_multipart_upload) == (
        support,
        support_ui,
        False,
    )


def test_presign_is_refused_when_turned_off(tmp_path: Any) -> None:
    signer = Presigner(_config(disable_pre_signed=True), LocalAdapter(tmp_path))
    with pytest.raises(ApiError, match=r"operation not supported.*blockstore\.local\.disable_pre_signed") as refused:
        signer.check_enabled()
    assert refused.value.status == 400


def test_local_urls_are_built_on_the_request_s_host_or_the_configured_endpoint(tmp_path: Any) -> None:
    config = _config()
    signer = Presigner(config, LocalAdapter(tmp_path))
    url = signer.sign_upload(_request(config), "local://ns", "data/x")
    assert url.url.startswith("https://silt.example:8000/_silt/presigned/local/ns/data/x?")
    for host in (b"evil.example/path", b"a@b", b"", b"x y"):
        with pytest.raises(ApiError, match="Host header") as refused:
            signer.sign_upload(_request(config, host), "local://ns", "data/x")
        assert refused.value.status == 400
    configured = _config(pre_signed_endpoint="https://public.example/")
    url = Presigner(configured, LocalAdapter(tmp_path)).sign_upload(
        _request(configured, b"a@b"), "local://ns", "data/x"
    )
    assert url.url.startswith("https://public.example/_silt/presigned/local/ns/data/x?")


def test_the_signing_key_follows_the_service_secret(tmp_path: Any) -> None:
    """Two processes with the same svc-api secret accept each other's URLs; another secret does not."""
    config = _config()
    url = Presigner(config, LocalAdapter(tmp_path)).sign_upload(_request(config), "local://ns", "data/x").url
    path, _, query = url.removeprefix("https://silt.example:8000").partition("?")
    assert (
        Presigner(_config(), LocalAdapter(tmp_path)).edge.verify(path, query.encode(), "PUT").address
        == "local://ns/data/x"
    )
    other = Config.model_validate(
        {"api": {"credentials": {**CREDENTIALS, "secret_access_key": "another-secret-of-forty-characters-long!!"}}}
    )
    with pytest.raises(ApiError) as refused:
        Presigner(other, LocalAdapter(tmp_path)).edge.verify(path, query.encode(), "PUT")
    assert refused.value.status == 403
