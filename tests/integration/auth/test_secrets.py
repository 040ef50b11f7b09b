"""No secret in clear: not in the KV store, not in logs, reprs or error messages."""

from __future__ import annotations

import base64
import logging

import pytest
from pydantic import SecretStr

from services.auth.secrets import SecretBox
from silt.auth.v1 import auth_pb2 as api
from silt.config import load_config
from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import model_pb2 as gpb
from silt.rpc.signing import Credentials
from tests.integration.auth.support import ENCRYPT_KEY, ISSUED_SECRETS, Stack, details_of, remember


def test_kv_values_hold_no_secret_in_clear(stack: Stack) -> None:
    stack.new_user(["Developers"])
    stack.new_user(["Analysts"])
    assert len(ISSUED_SECRETS) >= 5  # setup's keys and these
    entries = list(stack.store.scan(stack.model.partition))
    blob = b"\n".join(e.key + b"\0" + e.value for e in entries)
    for secret in ISSUED_SECRETS:
        assert secret.encode() not in blob
        assert base64.b64encode(secret.encode()) not in blob
    assert ENCRYPT_KEY.get_secret_value().encode() not in blob
    sealed = [e for e in entries if e.key.startswith(b"iam/credentials/")]
    assert len(sealed) >= 5


def test_a_full_session_logs_no_secret(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    user_id, creds = stack.new_user(["Developers"], prefix="logged")
    repo = stack.new_repo()
    stack.gv(creds).StageEntry(
        gapi.StageEntryRequest(repository=repo, branch="main", key="k", entry=gpb.Entry(physical_address="p"))
    )
    stack.gv(creds).Commit(gapi.CommitRequest(repository=repo, branch="main", message="m"))
    wrong = Credentials(creds.access_key_id, SecretStr(remember("W" * 40)))
    message = details_of(lambda: stack.gv(wrong).GetRepository(gapi.GetRepositoryRequest(name=repo)))
    denied = details_of(lambda: stack.auth(creds).CreateUser(api.CreateUserRequest(id="nope")))
    stack.auth(stack.admin).DeleteCredentials(
        api.DeleteCredentialsRequest(user_id=user_id, access_key_id=creds.access_key_id)
    )
    assert caplog.records, "the session logged nothing: this test would prove nothing"
    shown = caplog.text + message + denied
    for secret in ISSUED_SECRETS:
        assert secret not in shown


def test_reprs_hide_secrets() -> None:
    secret = remember("S" * 40)
    assert secret not in repr(Credentials("AKIAAAAAAAAAAAAAAAAA", SecretStr(secret)))
    assert ENCRYPT_KEY.get_secret_value() not in repr(SecretBox(ENCRYPT_KEY))
    config = load_config(
        env={
            "SILT_AUTH_ENCRYPT_SECRET_KEY": ENCRYPT_KEY.get_secret_value(),
            "SILT_CREDENTIALS_SECRET_ACCESS_KEY": secret,
        }
    )
    assert secret not in repr(config) and ENCRYPT_KEY.get_secret_value() not in repr(config)
    assert secret not in config.model_dump_json()
