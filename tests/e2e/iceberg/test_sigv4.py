"""SigV4-signed catalog requests: pyiceberg with `rest.sigv4-enabled` (the access key and secret
sign every request, no token), and requests signed by botocore's SigV4Auth over raw HTTP to show
what is refused: a wrong secret, a body other than the signed one, an old date, another region."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import ForbiddenError, NoSuchTableError, UnauthorizedError

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import api_call
from tests.e2e.iceberg.test_catalog import SCHEMA, rows

REGION = "us-east-1"  # the e2e stack's gateway region


def _admin_keys(stack: Stack) -> tuple[str, str]:
    assert stack.admin is not None
    return stack.admin.access_key_id, stack.admin.secret_access_key.get_secret_value()


def _signed_catalog(stack: Stack, key: str, secret: str, uri: str = "", **properties: str) -> Catalog:
    """pyiceberg signing each request with key and secret (its default signing name,
    execute-api); the same key reads and writes the data files through the gateway's S3."""
    endpoint = stack.endpoints["gateway"]
    return load_catalog(
        f"sigv4-{secrets.token_hex(3)}",
        **{
            "type": "rest",
            "uri": uri or f"{endpoint}/iceberg/api",
            "rest.sigv4-enabled": "true",
            "rest.signing-region": REGION,
            "client.access-key-id": key,
            "client.secret-access-key": secret,
            "client.region": REGION,
            "s3.endpoint": endpoint,
            **properties,
        },
    )


def test_pyiceberg_with_sigv4_creates_appends_and_reads(stack: Stack, repo: str) -> None:
    key, secret = _admin_keys(stack)
    catalog = _signed_catalog(stack, key, secret, warehouse=f"{repo}.main")
    # A nested namespace: its levels travel as `db%1Feu` in the path, which the signature
    # covers encoded once more (AWS's rule for services other than S3).
    catalog.create_namespace("db")
    catalog.create_namespace("db.eu")
    assert catalog.list_namespaces("db") == [("db", "eu")]
    table = catalog.create_table("db.eu.events", SCHEMA)
    table.append(rows(0, 7))
    loaded = catalog.load_table("db.eu.events")
    assert loaded.scan().to_arrow().num_rows == 7
    assert catalog.list_tables("db.eu") == [("db", "eu", "events")]
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.eu.missing")
    # lakeFS's relative form of the URI: signed over the path the client sent.
    relative = _signed_catalog(
        stack, key, secret, uri=f"{stack.endpoints['gateway']}/iceberg/relative_to/{repo}.main/api"
    )
    assert relative.list_tables("db.eu") == [("db", "eu", "events")]


def test_pyiceberg_with_a_wrong_secret_is_unauthorized(stack: Stack) -> None:
    key, _ = _admin_keys(stack)
    with pytest.raises(UnauthorizedError, match="SignatureDoesNotMatch"):
        _signed_catalog(stack, key, "not-the-secret-" + secrets.token_hex(8))


def test_a_signer_is_authorized_as_a_bearer_user_is(stack: Stack, repo: str) -> None:
    """A user without catalog rights signs correctly and is refused by authorization (403)."""
    user = f"ice-{secrets.token_hex(4)}"
    assert api_call(stack, "POST", "/auth/users", {"id": user}).status == 201
    issued = api_call(stack, "POST", f"/auth/users/{user}/credentials").json()
    catalog = _signed_catalog(stack, issued["access_key_id"], issued["secret_access_key"], warehouse=f"{repo}.main")
    with pytest.raises(ForbiddenError, match=user):
        catalog.create_namespace("db")


class _JavaStyle(SigV4Auth):
    """As Iceberg Java's signer (the AWS SDK v2 with a SHA-256 checksum) signs: it sends
    x-amz-content-sha256 as the body's hash in base64, and ends the canonical request with it
    in hex."""

    def canonical_request(self, request: AWSRequest) -> str:
        text: str = super().canonical_request(request)
        return f"{text.rpartition(chr(10))[0]}\n{self.payload(request)}"


def _signed(
    stack: Stack,
    method: str,
    path: str,
    body: bytes = b"",
    region: str = REGION,
    signer: type[SigV4Auth] = SigV4Auth,
    headers: dict[str, str] | None = None,
) -> AWSRequest:
    key, secret = _admin_keys(stack)
    request = AWSRequest(
        method=method,
        url=f"{stack.endpoints['gateway']}/iceberg/api{path}",
        data=body,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    signer(Credentials(key, secret), "execute-api", region).add_auth(request)
    return request


def _send(request: AWSRequest, body: bytes | None = None) -> tuple[int, Any]:
    response = urllib3.request(
        request.method,
        request.url,
        body=request.body if body is None else body,
        headers=dict(request.headers),
        retries=False,
        timeout=30,
    )
    return response.status, json.loads(response.data or b"null")


def _refused(answer: tuple[int, Any], reason: str) -> None:
    status, body = answer
    assert status == 401, body
    assert body["error"]["code"] == 401 and body["error"]["type"] == "NotAuthorizedException", body
    assert reason in body["error"]["message"], body


def test_raw_signed_requests_bind_body_date_and_region(stack: Stack, repo: str) -> None:
    body = json.dumps({"namespace": [repo, "main", "raw"], "properties": {}}).encode()
    request = _signed(stack, "POST", "/v1/namespaces", body)
    # Another body under the same signature (botocore signs the body's hash without sending it).
    tampered = json.dumps({"namespace": [repo, "main", "other"], "properties": {}}).encode()
    _refused(_send(request, tampered), "SignatureDoesNotMatch")
    assert _send(request) == (200, {"namespace": [repo, "main", "raw"], "properties": {}})

    # x-amz-content-sha256, when sent, is the body's hash: not another's, not UNSIGNED-PAYLOAD.
    other = hashlib.sha256(tampered).hexdigest()
    _refused(_send(_signed(stack, "POST", "/v1/namespaces", body, headers={"x-amz-content-sha256": other})), "SHA256")
    unsigned = _signed(stack, "POST", "/v1/namespaces", body, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    _refused(_send(unsigned), "SHA256")
    java = json.dumps({"namespace": [repo, "main", "java"], "properties": {}}).encode()
    in_base64 = base64.b64encode(hashlib.sha256(java).digest()).decode()
    java_style = _signed(
        stack, "POST", "/v1/namespaces", java, signer=_JavaStyle, headers={"x-amz-content-sha256": in_base64}
    )
    assert _send(java_style)[0] == 200
    _refused(_send(java_style, tampered), "SHA256")

    # A request signed 20 minutes ago (a replay of a captured one) is outside the clock window.
    old = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=20)
    with mock.patch("botocore.auth.get_current_datetime", return_value=old):
        stale = _signed(stack, "GET", f"/v1/namespaces?parent={repo}%1Fmain")
    _refused(_send(stale), "RequestTimeTooSkewed")
    fresh = _signed(stack, "GET", f"/v1/namespaces?parent={repo}%1Fmain")
    assert _send(fresh) == (
        200,
        {"namespaces": [[repo, "main", "java"], [repo, "main", "raw"]], "next-page-token": None},
    )

    _refused(_send(_signed(stack, "GET", "/v1/config", region="eu-north-9")), "region")
    # No signature at all: the catalog's own 401, as for a missing token.
    missing = urllib3.request("GET", f"{stack.endpoints['gateway']}/iceberg/api/v1/config", retries=False)
    assert missing.status == 401 and missing.json()["error"]["type"] == "NotAuthorizedException"
