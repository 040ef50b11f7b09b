"""What `blockstore.<type>.*pre_signed*` does to /config and to presign requests, and which Host
a local presigned URL may be built on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from starlette.requests import Request

from edge.api.errors import ApiError
from edge.api.objects.presign import Presigner, presigned_multipart_offered
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
    ("settings", "support", "support_ui", "multipart"),
    [
        ({}, True, True, True),
        ({"disable_pre_signed_ui": True}, True, False, True),
        ({"disable_pre_signed_multipart": True}, True, True, False),
        ({"disable_pre_signed": True}, False, False, False),
    ],
)
def test_config_reports_what_is_enabled(
    settings: dict[str, bool], support: bool, support_ui: bool, multipart: bool
) -> None:
    storage = storage_config(_request(_config(**settings)))
    assert (storage.pre_sign_support, storage.pre_sign_support_ui, storage.pre_sign_multipart_upload) == (
        support,
        support_ui,
        multipart,
    )


@pytest.mark.parametrize(
    ("blockstore", "multipart"),
    [
        ({"type": "s3"}, True),
        ({"type": "s3", "s3": {"disable_pre_signed_multipart": True}}, False),
        ({"type": "s3", "s3": {"disable_pre_signed": True}}, False),
        # Their adapters cannot take a part from a URL (edge/api/objects/presign.py).
        ({"type": "azure", "azure": {"storage_account": "a", "storage_access_key": "a2V5"}}, False),
        ({"type": "gs"}, False),
    ],
)
def test_presigned_multipart_is_offered_by_s3_and_local_only(blockstore: dict[str, Any], multipart: bool) -> None:
    config = Config.model_validate({"blockstore": blockstore})
    assert presigned_multipart_offered(config) is multipart


def test_presigned_multipart_is_refused_as_lakefs_refuses_it_when_off(tmp_path: Any) -> None:
    signer = Presigner(_config(disable_pre_signed_multipart=True), LocalAdapter(tmp_path))
    with pytest.raises(ApiError, match="presign multipart upload API is not supported") as refused:
        signer.check_multipart_enabled()
    assert refused.value.status == 501
    Presigner(_config(), LocalAdapter(tmp_path)).check_multipart_enabled()


def test_a_local_part_url_puts_that_part_only(tmp_path: Any) -> None:
    """The part's upload and number are signed: changed, or left off to make an object's PUT URL
    of it, the URL is refused."""
    config = _config()
    signer = Presigner(config, LocalAdapter(tmp_path))
    url = signer.sign_part(_request(config), "local://ns", "data/x", "upload-1", 7).url
    path, _, query = url.removeprefix("https://silt.example:8000").partition("?")
    grant = signer.edge.verify(path, query.encode(), "PUT")
    assert grant.address == "local://ns/data/x" and grant.part is not None
    assert (grant.part.upload_id, grant.part.number) == ("upload-1", 7)
    for changed in (
        query.replace("X-Silt-Part-Number=7", "X-Silt-Part-Number=8"),
        query.replace("X-Silt-Upload-Id=upload-1", "X-Silt-Upload-Id=upload-2"),
        "&".join(p for p in query.split("&") if not p.startswith(("X-Silt-Upload-Id", "X-Silt-Part-Number"))),
    ):
        assert changed != query
        with pytest.raises(ApiError) as refused:
            signer.edge.verify(path, changed.encode(), "PUT")
        assert refused.value.status == 403
    with pytest.raises(ApiError) as refused:
        signer.edge.verify(path, query.encode(), "GET")
    assert refused.value.status == 403


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
