"""auth's REST API RPCs (VerifySecret, CreateSession, VerifySession): only the API's own
service user may ask, and the answers name a user, never a secret."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from pydantic import SecretStr

from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.launcher import SERVICE_KEYS_FILE
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.api.conftest import Api


def _service_key(api: Api, service: str) -> Credentials:
    key = json.loads((api.stack.stack.data_dir / SERVICE_KEYS_FILE).read_text())[service]
    return Credentials(key["access_key_id"], SecretStr(key["secret_access_key"]))


@pytest.fixture
def auth_as(api: Api) -> Iterator[dict[str, auth_pb2_grpc.AuthServiceStub]]:
    channels = {
        "api": signed_channel(api.stack.stack.endpoints["auth"], _service_key(api, "api")),
        "gateway": signed_channel(api.stack.stack.endpoints["auth"], _service_key(api, "gateway")),
        "reader": signed_channel(api.stack.stack.endpoints["auth"], api.stack.reader),
    }
    yield {name: auth_pb2_grpc.AuthServiceStub(channel) for name, channel in channels.items()}
    for channel in channels.values():
        channel.close()


def test_only_svc_api_may_verify_secrets_and_sessions(
    api: Api, auth_as: dict[str, auth_pb2_grpc.AuthServiceStub]
) -> None:
    reader = api.stack.reader
    secret = reader.secret_access_key.get_secret_value()
    verify = auth_pb2.VerifySecretRequest(access_key_id=reader.access_key_id, secret_access_key=secret)
    for who in ("gateway", "reader"):
        with pytest.raises(grpc.RpcError) as refused:
            auth_as[who].VerifySecret(verify)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as refused:
            auth_as[who].VerifySession(auth_pb2.VerifySessionRequest(token="x"))
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    ok = auth_as["api"].VerifySecret(verify)
    assert ok.valid and ok.user.id == "reader"
    # The last character changed (a secret may itself end in "x").
    other = "y" if secret.endswith("x") else "x"
    wrong = auth_pb2.VerifySecretRequest(access_key_id=reader.access_key_id, secret_access_key=secret[:-1] + other)
    assert not auth_as["api"].VerifySecret(wrong).valid
    session = auth_as["api"].CreateSession(
        auth_pb2.CreateSessionRequest(access_key_id=reader.access_key_id, secret_access_key=secret)
    )
    assert session.valid and secret not in session.token
    checked = auth_as["api"].VerifySession(auth_pb2.VerifySessionRequest(token=session.token))
    assert checked.valid and checked.user.id == "reader" and checked.access_key_id == reader.access_key_id
    assert checked.expires.seconds == session.expires.seconds


def test_deleting_the_key_ends_its_sessions(api: Api, auth_as: dict[str, auth_pb2_grpc.AuthServiceStub]) -> None:
    admin_channel = signed_channel(api.stack.stack.endpoints["auth"], api.stack.admin)
    admin = auth_pb2_grpc.AuthServiceStub(admin_channel)
    try:
        issued = admin.CreateCredentials(auth_pb2.CreateCredentialsRequest(user_id="reader"))
        key_id = issued.credential.access_key_id
        session = auth_as["api"].CreateSession(
            auth_pb2.CreateSessionRequest(access_key_id=key_id, secret_access_key=issued.secret_access_key)
        )
        assert auth_as["api"].VerifySession(auth_pb2.VerifySessionRequest(token=session.token)).valid
        admin.DeleteCredentials(auth_pb2.DeleteCredentialsRequest(user_id="reader", access_key_id=key_id))
        assert not auth_as["api"].VerifySession(auth_pb2.VerifySessionRequest(token=session.token)).valid
    finally:
        admin_channel.close()
