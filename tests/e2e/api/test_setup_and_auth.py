"""GET /healthcheck, /config, /user; login and logout; who may call what (Basic, Bearer,
cookie, nothing), through lakefs-sdk and raw HTTP."""

from __future__ import annotations

import json
import re

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ApiException

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api


def _basic(access_key_id: str, secret: str) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{access_key_id}:{secret}")


def _json_error(response: urllib3.BaseHTTPResponse, status: int) -> str:
    assert response.status == status, response.data
    assert response.headers["content-type"].startswith("application/json")
    body = json.loads(response.data)
    assert set(body) == {"message"} and body["message"], body
    message: str = body["message"]
    return message


def test_healthcheck_needs_no_credentials(api: Api) -> None:
    response = api.request("GET", "/healthcheck", headers={})
    assert response.status == 204 and response.data == b""


def test_config_names_the_lakefs_api_version_and_the_storage(client: lakefs_sdk.ApiClient) -> None:
    config = lakefs_sdk.ConfigApi(client).get_config()
    assert config.version_config is not None and config.storage_config is not None
    assert re.fullmatch(r"\d+\.\d+\.\d+", config.version_config.version or "")
    assert config.version_config.version_context and "silt" in config.version_config.version_context
    storage = config.storage_config
    assert storage.blockstore_type == "local"
    assert storage.pre_sign_support is True and storage.pre_sign_support_ui is True
    assert storage.import_support is False
    assert storage.default_namespace_prefix == "local://"
    assert re.match(storage.blockstore_namespace_validity_regex, storage.blockstore_namespace_example)


def test_current_user_is_the_caller(api: Api, client: lakefs_sdk.ApiClient) -> None:
    assert lakefs_sdk.AuthApi(client).get_current_user().user.id == "admin"
    assert lakefs_sdk.AuthApi(api.sdk(api.stack.reader)).get_current_user().user.id == "reader"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Digest username=admin"},
        {"Cookie": "internal_auth_session=forged.token"},
    ],
    ids=["none", "malformed-basic", "bad-bearer", "other-scheme", "bad-cookie"],
)
def test_requests_without_valid_credentials_are_401_json(api: Api, headers: dict[str, str]) -> None:
    _json_error(api.request("GET", "/repositories", headers=headers), 401)


def test_a_wrong_secret_or_an_unknown_key_is_401(api: Api) -> None:
    admin = api.stack.admin
    _json_error(api.request("GET", "/user", headers=_basic(admin.access_key_id, "wrong-secret")), 401)
    _json_error(api.request("GET", "/user", headers=_basic("AKIAUNKNOWN000000000", "x" * 40)), 401)
    _json_error(api.request("GET", "/user", headers=_basic(admin.access_key_id, "x" * 5000)), 401)
    wrong = Credentials(admin.access_key_id, type(admin.secret_access_key)("nope"))
    with pytest.raises(ApiException) as failed:
        lakefs_sdk.AuthApi(api.sdk(wrong)).get_current_user()
    assert failed.value.status == 401


def test_login_gives_a_token_usable_as_bearer_and_cookie_and_logout_drops_the_cookie(api: Api) -> None:
    reader = api.stack.reader
    login = lakefs_sdk.AuthApi(api.sdk(reader)).login(
        lakefs_sdk.LoginInformation(
            access_key_id=reader.access_key_id, secret_access_key=reader.secret_access_key.get_secret_value()
        )
    )
    assert login.token and login.token_expiration
    bearer = api.request("GET", "/user", headers={"Authorization": f"Bearer {login.token}"})
    assert bearer.status == 200 and json.loads(bearer.data)["user"]["id"] == "reader"
    # The cookie the login set, as a browser would send it back.
    raw = api.request(
        "POST",
        "/auth/login",
        headers={"Content-Type": "application/json"},
        body=json.dumps(
            {"access_key_id": reader.access_key_id, "secret_access_key": reader.secret_access_key.get_secret_value()}
        ),
    )
    cookie = raw.headers["set-cookie"]
    assert "internal_auth_session=" in cookie and "HttpOnly" in cookie
    session = cookie.split(";", 1)[0]
    by_cookie = api.request("GET", "/user", headers={"Cookie": session})
    assert by_cookie.status == 200 and json.loads(by_cookie.data)["user"]["id"] == "reader"
    logout = api.request("POST", "/auth/logout", headers={"Cookie": session, "Origin": api.stack.endpoint})
    assert logout.status == 204
    assert 'internal_auth_session=""' in logout.headers["set-cookie"] or "Max-Age=0" in logout.headers["set-cookie"]
    # A tampered token is refused.
    _json_error(api.request("GET", "/user", headers={"Authorization": f"Bearer {login.token[:-2]}xx"}), 401)


def test_login_with_a_wrong_secret_is_401(api: Api) -> None:
    body = json.dumps({"access_key_id": api.stack.reader.access_key_id, "secret_access_key": "wrong"})
    response = api.request("POST", "/auth/login", headers={"Content-Type": "application/json"}, body=body)
    _json_error(response, 401)
    assert "set-cookie" not in response.headers


def test_a_reader_may_list_and_read_but_not_write(api: Api, repo: str) -> None:
    reader = api.sdk(api.stack.reader)
    names = [r.id for r in lakefs_sdk.RepositoriesApi(reader).list_repositories(amount=1000).results]
    assert repo in names
    assert lakefs_sdk.RepositoriesApi(reader).get_repository(repo).id == repo
    with pytest.raises(ApiException) as failed:
        lakefs_sdk.BranchesApi(reader).create_branch(repo, lakefs_sdk.BranchCreation(name="nope", source="main"))
    assert failed.value.status == 403 and json.loads(failed.value.body)["message"]
    with pytest.raises(ApiException) as failed:
        lakefs_sdk.RepositoriesApi(reader).delete_repository(repo)
    assert failed.value.status == 403
    with pytest.raises(ApiException) as failed:
        creation = lakefs_sdk.RepositoryCreation(name="reader-repo", storage_namespace="local://reader-repo")
        lakefs_sdk.RepositoriesApi(reader).create_repository(creation)
    assert failed.value.status == 403
