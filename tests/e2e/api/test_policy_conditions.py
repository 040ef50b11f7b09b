"""Policy conditions on the source address (lakeFS's IpAddress / NotIpAddress on SourceIp) with
real servers and real clients bound to loopback aliases: 127.0.0.1, 127.0.0.2 and 127.0.0.3, the
last one configured as a trusted proxy (`gateways.trusted_proxies`).

Every way in is judged from the client's address: the REST API (Basic credentials, a login
session's cookie, IAM calls made for the caller), the S3 gateway (boto3, and a presigned URL
fetched later), a trusted proxy's X-Forwarded-For, and a gRPC caller (as the CLI calls graveler),
judged by its peer address."""

from __future__ import annotations

import json
import secrets
from functools import cache
from typing import Any

import grpc
import lakefs_sdk
import pytest
import urllib3
from botocore.exceptions import ClientError
from botocore.httpsession import URLLib3Session
from pydantic import SecretStr

from edge.api.context import SESSION_COOKIE
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.api.conftest import TRUSTED_PROXY, Api
from tests.support.gateway_stack import GatewayStack

INSIDE, OUTSIDE, PROXY = "127.0.0.2", "127.0.0.1", TRUSTED_PROXY
FROM_INSIDE = {"IpAddress": {"SourceIp": [f"{INSIDE}/32"]}}
BODY = b"inside only"
# lakeFS's actions for all of a repository (fs:* alone leaves out pull requests and the rules).
REPOSITORY = ["fs:*", "pr:*", "retention:*", "branches:*"]


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> GatewayStack:
    """The suite's stack (fixture `api`; here `api` names graveler's messages): it trusts
    PROXY's X-Forwarded-For, and auth's caches keep a key for a second."""
    suite: Api = request.getfixturevalue("api")
    return suite.stack


def _admin_sdk(stack: GatewayStack) -> lakefs_sdk.ApiClient:
    admin = stack.admin
    config = lakefs_sdk.Configuration(
        host=stack.endpoint + "/api/v1",
        username=admin.access_key_id,
        password=admin.secret_access_key.get_secret_value(),
    )
    return lakefs_sdk.ApiClient(config)


@pytest.fixture(scope="module")
def repo(stack: GatewayStack) -> str:
    """A repository with object `a` on main, made by the admin (no conditions) from 127.0.0.1."""
    name = f"r-{secrets.token_hex(4)}"
    creation = lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
    lakefs_sdk.RepositoriesApi(_admin_sdk(stack)).create_repository(creation)
    stack.client().put_object(Bucket=name, Key="main/a", Body=BODY)
    return name


def _user(stack: GatewayStack, *statements: dict[str, Any]) -> Credentials:
    """A user whose only policy is statements (lakeFS's shape), made through the REST API."""
    auth = lakefs_sdk.AuthApi(_admin_sdk(stack))
    user_id, policy_id = f"u-{secrets.token_hex(4)}", f"p-{secrets.token_hex(4)}"
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    auth.create_policy(lakefs_sdk.Policy.from_dict({"id": policy_id, "statement": list(statements)}))
    auth.attach_policy_to_user(user_id, policy_id)
    issued = auth.create_credentials(user_id)
    return Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))


@cache
def _pool(source: str) -> urllib3.PoolManager:
    """HTTP from one loopback address."""
    return urllib3.PoolManager(source_address=(source, 0), retries=False, timeout=30)


def _basic(creds: Credentials) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def _rest(
    stack: GatewayStack, source: str, path: str, headers: dict[str, str], method: str = "GET", body: Any = None
) -> urllib3.BaseHTTPResponse:
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers = {**headers, "Content-Type": "application/json"}
    return _pool(source).request(method, f"{stack.endpoint}/api/v1{path}", headers=headers, body=data)


class _BoundSession(URLLib3Session):
    """botocore's HTTP session, connecting from one local address."""

    def __init__(self, source: str, **kwargs: Any) -> None:
        self._source = source  # read by the pool manager made in __init__
        super().__init__(**kwargs)

    def _get_pool_manager_kwargs(self, **extra_kwargs: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = super()._get_pool_manager_kwargs(source_address=(self._source, 0), **extra_kwargs)
        return kwargs


def _s3(stack: GatewayStack, creds: Credentials, source: str, forwarded_for: str | None = None) -> Any:
    """boto3 at the gateway from source; forwarded_for: the X-Forwarded-For a proxy adds to the
    signed request on its way."""
    client = stack.client(creds)
    client._endpoint.http_session = _BoundSession(source, timeout=30)
    if forwarded_for is not None:

        def forward(request: Any, **_: Any) -> None:
            request.headers["X-Forwarded-For"] = forwarded_for

        client.meta.events.register("before-send.s3", forward)
    return client


def _s3_refused(call: Any) -> None:
    with pytest.raises(ClientError) as refused:
        call()
    assert refused.value.response["Error"]["Code"] == "AccessDenied"


def test_an_allow_limited_to_one_address_at_the_rest_api(stack: GatewayStack, repo: str) -> None:
    user = _basic(_user(stack, {"effect": "allow", "action": REPOSITORY, "resource": "*", "condition": FROM_INSIDE}))
    object_path = f"/repositories/{repo}/refs/main/objects?path=a"
    inside = _rest(stack, INSIDE, object_path, user)
    assert inside.status == 200 and inside.data == BODY
    assert _rest(stack, INSIDE, f"/repositories/{repo}", user).status == 200
    for path in (object_path, f"/repositories/{repo}", f"/repositories/{repo}/refs/main/objects/ls"):
        refused = _rest(stack, OUTSIDE, path, user)
        assert refused.status == 403, (path, refused.data)
        assert json.loads(refused.data)["message"]
    # The repository list shows what the caller may read from where it is.
    # (By its prefix: the suite's stack holds other tests' repositories, more than a page.)
    listed = json.loads(_rest(stack, INSIDE, f"/repositories?prefix={repo}", user).data)["results"]
    assert repo in [r["id"] for r in listed]
    assert json.loads(_rest(stack, OUTSIDE, f"/repositories?prefix={repo}", user).data)["results"] == []
    assert json.loads(_rest(stack, OUTSIDE, "/repositories", user).data)["results"] == []
    # Presigning is judged when asked: the URL is issued only inside.
    assert _rest(stack, OUTSIDE, f"/repositories/{repo}/refs/main/objects/stat?path=a&presign=true", user).status == 403


def test_an_allow_limited_to_one_address_at_the_s3_gateway(stack: GatewayStack, repo: str) -> None:
    creds = _user(stack, {"effect": "allow", "action": REPOSITORY, "resource": "*", "condition": FROM_INSIDE})
    inside, outside = _s3(stack, creds, INSIDE), _s3(stack, creds, OUTSIDE)
    assert inside.get_object(Bucket=repo, Key="main/a")["Body"].read() == BODY
    assert [o["Key"] for o in inside.list_objects_v2(Bucket=repo, Prefix="main/")["Contents"]] == ["main/a"]
    inside.put_object(Bucket=repo, Key="main/b", Body=b"b")
    _s3_refused(lambda: outside.get_object(Bucket=repo, Key="main/a"))
    _s3_refused(lambda: outside.list_objects_v2(Bucket=repo, Prefix="main/"))
    _s3_refused(lambda: outside.put_object(Bucket=repo, Key="main/c", Body=b"c"))
    # A presigned URL is a signed request like any other: judged from where it is used.
    url = inside.generate_presigned_url("get_object", Params={"Bucket": repo, "Key": "main/a"}, ExpiresIn=300)
    used_inside = _pool(INSIDE).request("GET", url)
    assert used_inside.status == 200 and used_inside.data == BODY
    used_outside = _pool(OUTSIDE).request("GET", url)
    assert used_outside.status == 403 and b"AccessDenied" in used_outside.data


def test_a_deny_with_not_ip_address(stack: GatewayStack, repo: str) -> None:
    creds = _user(
        stack,
        {"effect": "allow", "action": REPOSITORY, "resource": "*"},
        {
            "effect": "deny",
            "action": REPOSITORY,
            "resource": "*",
            "condition": {"NotIpAddress": {"SourceIp": [INSIDE]}},
        },
    )
    path = f"/repositories/{repo}/refs/main/objects?path=a"
    assert _rest(stack, INSIDE, path, _basic(creds)).status == 200
    assert _rest(stack, OUTSIDE, path, _basic(creds)).status == 403
    assert _s3(stack, creds, INSIDE).get_object(Bucket=repo, Key="main/a")["Body"].read() == BODY
    _s3_refused(lambda: _s3(stack, creds, OUTSIDE).get_object(Bucket=repo, Key="main/a"))
    # The proxy's own address is outside too when it names no client.
    _s3_refused(lambda: _s3(stack, creds, PROXY).get_object(Bucket=repo, Key="main/a"))


def test_a_login_session_is_judged_by_each_request_s_address(stack: GatewayStack, repo: str) -> None:
    creds = _user(stack, {"effect": "allow", "action": REPOSITORY, "resource": "*", "condition": FROM_INSIDE})
    login = {"access_key_id": creds.access_key_id, "secret_access_key": creds.secret_access_key.get_secret_value()}
    # Logging in needs no permission: from anywhere, as the UI's login page.
    token = json.loads(_rest(stack, OUTSIDE, "/auth/login", {}, "POST", login).data)["token"]
    cookie = {"Cookie": f"{SESSION_COOKIE}={token}"}
    assert _rest(stack, INSIDE, f"/repositories/{repo}", cookie).status == 200
    assert _rest(stack, OUTSIDE, f"/repositories/{repo}", cookie).status == 403
    assert _rest(stack, OUTSIDE, f"/repositories/{repo}", {"Authorization": f"Bearer {token}"}).status == 403


def test_iam_calls_made_for_the_caller_are_judged_from_its_address(stack: GatewayStack) -> None:
    """The API makes IAM calls to auth for the caller (x-silt-acting-user) and reports where the
    caller is with them: auth judges the user from there, not from the API's own address."""
    creds = _user(stack, {"effect": "allow", "action": ["auth:*"], "resource": "*", "condition": FROM_INSIDE})
    inside = _rest(stack, INSIDE, "/auth/users", _basic(creds))
    assert inside.status == 200, inside.data
    refused = _rest(stack, OUTSIDE, "/auth/users", _basic(creds))
    assert refused.status == 403, refused.data


def test_a_trusted_proxy_names_the_client_and_nobody_else_does(stack: GatewayStack, repo: str) -> None:
    creds = _user(stack, {"effect": "allow", "action": REPOSITORY, "resource": "*", "condition": FROM_INSIDE})
    path = f"/repositories/{repo}"

    def through(source: str, forwarded_for: str | None) -> int:
        headers = _basic(creds) | ({"X-Forwarded-For": forwarded_for} if forwarded_for is not None else {})
        return _rest(stack, source, path, headers).status

    assert through(PROXY, INSIDE) == 200
    # Another peer's header is ignored: the peer is the client.
    assert through(OUTSIDE, INSIDE) == 403
    # Read from the right: the nearest address the proxy did not add is the client's.
    assert through(PROXY, f"{INSIDE}, {OUTSIDE}") == 403
    assert through(PROXY, f"{OUTSIDE}, {INSIDE}") == 200
    # Without the header the proxy itself is the client; with garbage the client is unknown.
    assert through(PROXY, None) == 403
    assert through(PROXY, "somewhere") == 403
    # The S3 gateway on the same port reads it the same way.
    assert _s3(stack, creds, PROXY, forwarded_for=INSIDE).get_object(Bucket=repo, Key="main/a")["Body"].read() == BODY
    _s3_refused(lambda: _s3(stack, creds, OUTSIDE, forwarded_for=INSIDE).get_object(Bucket=repo, Key="main/a"))


def test_grpc_callers_are_judged_by_their_peer_address(stack: GatewayStack, repo: str) -> None:
    """As the CLI calls graveler: the gRPC peer's address (here 127.0.0.1, graveler's listener)."""
    from_here = _user(
        stack,
        {
            "effect": "allow",
            "action": ["ReadRepo"],
            "resource": repo,
            "condition": {"IpAddress": {"SourceIp": [OUTSIDE]}},
        },
    )
    from_elsewhere = _user(
        stack, {"effect": "allow", "action": ["ReadRepo"], "resource": repo, "condition": FROM_INSIDE}
    )
    target = stack.stack.endpoints["graveler"]
    with signed_channel(target, from_here) as here, signed_channel(target, from_elsewhere) as elsewhere:
        request = api.GetRepositoryRequest(name=repo)
        assert api_grpc.GravelerServiceStub(here).GetRepository(request, timeout=30).name == repo
        with pytest.raises(grpc.RpcError) as refused:
            api_grpc.GravelerServiceStub(elsewhere).GetRepository(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_conditions_are_validated_and_read_back(stack: GatewayStack) -> None:
    admin = _basic(stack.admin)
    bad: dict[str, Any] = {
        "id": f"p-{secrets.token_hex(4)}",
        "statement": [
            {
                "effect": "allow",
                "action": REPOSITORY,
                "resource": "*",
                "condition": {"IpAddress": {"SourceIp": ["10.0.0.0/33"]}},
            }
        ],
    }
    refused = _rest(stack, OUTSIDE, "/auth/policies", admin, "POST", bad)
    assert refused.status == 400
    assert "'10.0.0.0/33' is not an IPv4 or IPv6 address or CIDR block" in json.loads(refused.data)["message"]
    good = {
        **bad,
        "statement": [
            {**bad["statement"][0], "condition": {"IpAddress": {"SourceIp": ["10.0.0.0/8", "2001:db8::/32"]}}}
        ],
    }
    assert _rest(stack, OUTSIDE, "/auth/policies", admin, "POST", good).status == 201
    read = json.loads(_rest(stack, OUTSIDE, f"/auth/policies/{good['id']}", admin).data)
    assert read["statement"][0]["condition"] == {"IpAddress": {"SourceIp": ["10.0.0.0/8", "2001:db8::/32"]}}
