"""No service reads a user's secret: signatures are checked in auth, and services get only
derived keys, each for its own audience. Through real gRPC servers."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor
from google.protobuf.wrappers_pb2 import StringValue
from pydantic import SecretStr

from services.auth.setup import ADMINS
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as pb
from silt.auth.v1.auth_pb2_grpc import AuthServiceStub
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.rpc.signing import Credentials, SigningInterceptor, derive_call_key, signed_channel
from tests.integration.auth.support import ISSUED_SECRETS, Stack, code_of, details_of, unique

OK = grpc.StatusCode.OK
DENIED = grpc.StatusCode.PERMISSION_DENIED
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def _today(offset: int = 0) -> str:
    return (datetime.now(UTC) + timedelta(days=offset)).strftime("%Y%m%d")


def _key_request(key_id: str, audience: str, day: str = "") -> auth_api.GetCallSigningKeyRequest:
    return auth_api.GetCallSigningKeyRequest(access_key_id=key_id, day=day or _today(), audience=audience)


def test_reading_a_secret_is_no_longer_possible(stack: Stack) -> None:
    """The call that handed any user's secret to every service user (GetCredentialSecret) is
    gone: whoever holds the gateway's key cannot become admin with it."""
    gateway = stack.services["gateway"]
    channel = signed_channel(stack.auth_address, gateway, audience="auth")
    try:
        # GetCredentialSecretRequest was {string access_key_id = 1}: the same wire bytes.
        read = channel.unary_unary(
            "/silt.auth.v1.AuthService/GetCredentialSecret",
            request_serializer=StringValue.SerializeToString,
            response_deserializer=lambda raw: raw,
        )
        call = lambda: read(StringValue(value=stack.admin.access_key_id), timeout=10)  # noqa: E731
        assert code_of(call) == grpc.StatusCode.UNIMPLEMENTED
    finally:
        channel.close()
    assert "auth:ReadSecret" not in a.ALL_ACTIONS


def _fields_named_secret(message: Descriptor, seen: set[str]) -> Iterator[str]:
    if message.full_name in seen:
        return
    seen.add(message.full_name)
    for field in message.fields:
        if "secret" in field.name:
            yield f"{message.full_name}.{field.name}"
        if field.message_type is not None:
            yield from _fields_named_secret(field.message_type, seen)


def test_only_calls_issuing_a_key_answer_with_a_secret() -> None:
    service = auth_api.DESCRIPTOR.services_by_name["AuthService"]
    found = {
        method.name: sorted(_fields_named_secret(method.output_type, set()))
        for method in service.methods
        if list(_fields_named_secret(method.output_type, set()))
    }
    # Both answer the secret of the key the call itself issues, never one stored before.
    assert found == {
        "CreateCredentials": ["silt.auth.v1.CreateCredentialsResponse.secret_access_key"],
        "SetupAdmin": ["silt.auth.v1.SetupAdminResponse.secret_access_key"],
    }


def _sigv4(secret: str, scope_date: str, text: bytes) -> tuple[bytes, bytes]:
    key = ("AWS4" + secret).encode()
    for part in (scope_date, "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key, hmac.new(key, text, hashlib.sha256).hexdigest().encode()


def _v4_string(day: str) -> bytes:
    digest = hashlib.sha256(b"GET\n/bucket/key\n\nhost:h\n\nhost\nUNSIGNED-PAYLOAD").hexdigest()
    return f"AWS4-HMAC-SHA256\n{day}T120000Z\n{day}/us-east-1/s3/aws4_request\n{digest}".encode()


def _v4_request(key_id: str, text: bytes, signature: bytes, day: str) -> auth_api.VerifyS3SignatureRequest:
    return auth_api.VerifyS3SignatureRequest(
        access_key_id=key_id,
        version=auth_api.S3_SIGNATURE_VERSION_V4,
        strings_to_sign=[text],
        signature=signature,
        date=day,
        region="us-east-1",
        service="s3",
    )


def test_the_gateway_learns_who_signed_and_the_scope_key_never_the_secret(stack: Stack) -> None:
    user_id, user = stack.new_user(prefix="s3user")
    secret = user.secret_access_key.get_secret_value()
    gateway = stack.auth(stack.services["gateway"])
    day = _today()
    text = _v4_string(day)
    key, signature = _sigv4(secret, day, text)

    reply = gateway.VerifyS3Signature(_v4_request(user.access_key_id, text, signature, day))
    assert (reply.valid, reply.user_id, reply.signing_key) == (True, user_id, key)
    forged = gateway.VerifyS3Signature(_v4_request(user.access_key_id, text, b"0" * 64, day))
    assert (forged.valid, forged.user_id, forged.signing_key) == (False, "", b"")

    v2_text = b"GET\n\n\n1700000000\n/bucket/key"
    v2_signature = base64.b64encode(hmac.new(secret.encode(), v2_text, hashlib.sha1).digest())
    v2 = auth_api.VerifyS3SignatureRequest(
        access_key_id=user.access_key_id,
        version=auth_api.S3_SIGNATURE_VERSION_V2,
        strings_to_sign=[b"another form", v2_text],
        signature=v2_signature,
    )
    assert gateway.VerifyS3Signature(v2).user_id == user_id
    for answer in (reply, forged, gateway.VerifyS3Signature(v2)):
        assert not any(s.encode() in answer.SerializeToString() for s in ISSUED_SECRETS)

    unknown = _v4_request("AKIAUNKNOWNUNKNOWN24", text, signature, day)
    assert code_of(lambda: gateway.VerifyS3Signature(unknown)) == grpc.StatusCode.NOT_FOUND
    hostile = _v4_request("AKIA" + "X" * 8188, text, signature, day)
    assert code_of(lambda: gateway.VerifyS3Signature(hostile)) == grpc.StatusCode.INVALID_ARGUMENT
    old_day = _today(-30)
    stale = _v4_request(
        user.access_key_id, _v4_string(old_day), _sigv4(secret, old_day, _v4_string(old_day))[1], old_day
    )
    assert code_of(lambda: gateway.VerifyS3Signature(stale)) == grpc.StatusCode.INVALID_ARGUMENT


def test_auth_checks_s3_signatures_scoped_to_s3_only(stack: Stack) -> None:
    """A SigV4 signature scoped to another service (iam, sts) is not an S3 request's (nor the
    Iceberg catalog's, scoped to execute-api): auth refuses to check it, so no key for that
    scope is ever handed out."""
    _, user = stack.new_user(prefix="s3user")
    gateway = stack.auth(stack.services["gateway"])
    day = _today()
    for service in ("iam", "sts", "S3"):
        text = _v4_string(day).replace(b"/s3/", f"/{service}/".encode())
        key = ("AWS4" + user.secret_access_key.get_secret_value()).encode()
        for part in (day, "us-east-1", service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        request = _v4_request(user.access_key_id, text, hmac.new(key, text, hashlib.sha256).hexdigest().encode(), day)
        request.service = service
        call = lambda r=request: gateway.VerifyS3Signature(r)  # noqa: E731
        assert code_of(call) == INVALID, service
        assert "is not 's3' or 'execute-api'" in details_of(call)


def test_catalog_signatures_are_verified_for_the_api_only(stack: Stack) -> None:
    """A SigV4 signature scoped to execute-api (the Iceberg catalog's, served by the REST API)
    is verified for the API's user, and for it alone; an S3 signature for the gateway's alone."""
    user_id, user = stack.new_user(prefix="catalog")
    day = _today()
    text = _v4_string(day).replace(b"/s3/", b"/execute-api/")
    key = ("AWS4" + user.secret_access_key.get_secret_value()).encode()
    for part in (day, "us-east-1", "execute-api", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    catalog = _v4_request(user.access_key_id, text, hmac.new(key, text, hashlib.sha256).hexdigest().encode(), day)
    catalog.service = "execute-api"
    api_auth, gateway = stack.auth(stack.services["api"]), stack.auth(stack.services["gateway"])
    reply = api_auth.VerifyS3Signature(catalog)
    assert (reply.valid, reply.user_id, reply.signing_key) == (True, user_id, key)
    assert code_of(lambda: gateway.VerifyS3Signature(catalog)) == DENIED
    s3_text = _v4_string(day)
    s3 = _v4_request(
        user.access_key_id, s3_text, _sigv4(user.secret_access_key.get_secret_value(), day, s3_text)[1], day
    )
    assert gateway.VerifyS3Signature(s3).valid
    assert code_of(lambda: api_auth.VerifyS3Signature(s3)) == DENIED


def test_call_keys_are_derived_per_day_and_audience(stack: Stack) -> None:
    _, user = stack.new_user(prefix="caller")
    graveler = stack.auth(stack.services["graveler"])
    reply = graveler.GetCallSigningKey(_key_request(user.access_key_id, "graveler"))
    assert reply.signing_key == derive_call_key(user.secret_access_key, _today(), "graveler")
    assert user.secret_access_key.get_secret_value().encode() not in reply.SerializeToString()
    tomorrow = graveler.GetCallSigningKey(_key_request(user.access_key_id, "graveler", _today(1)))
    assert tomorrow.signing_key != reply.signing_key
    for day in (_today(-2), _today(2), "2025-1-1"):
        call = lambda d=day: graveler.GetCallSigningKey(_key_request(user.access_key_id, "graveler", d))  # noqa: E731
        assert code_of(call) == grpc.StatusCode.INVALID_ARGUMENT
    missing = lambda: graveler.GetCallSigningKey(_key_request("AKIAUNKNOWNUNKNOWN25", "graveler"))  # noqa: E731
    assert code_of(missing) == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("service", "allowed"),
    [("graveler", {"graveler"}), ("compactor", {"compactor"}), ("gateway", {a.S3_AUDIENCE})],
)
def test_a_service_gets_keys_for_its_own_audience_only(stack: Stack, service: str, allowed: set[str]) -> None:
    """A compromised graveler can forge calls to graveler, not to auth or the compactor; a
    compromised gateway, S3 requests only. Keys for calls to auth, or call keys for `s3`, go
    to nobody."""
    me = stack.auth(stack.services[service])
    _, victim = stack.new_user(prefix="victim")
    for audience in ("graveler", "compactor"):
        call = lambda x=audience: me.GetCallSigningKey(_key_request(victim.access_key_id, x))  # noqa: E731
        assert code_of(call) == (OK if audience in allowed else DENIED), audience
    for audience in ("auth", a.S3_AUDIENCE, "nonexistent"):
        call = lambda x=audience: me.GetCallSigningKey(_key_request(victim.access_key_id, x))  # noqa: E731
        assert code_of(call) == INVALID, audience
        assert "no call keys for audience" in details_of(call)
    day = _today()
    text = _v4_string(day)
    _, signature = _sigv4(victim.secret_access_key.get_secret_value(), day, text)
    s3 = lambda: me.VerifyS3Signature(_v4_request(victim.access_key_id, text, signature, day))  # noqa: E731
    assert code_of(s3) == (OK if a.S3_AUDIENCE in allowed else DENIED)
    if a.S3_AUDIENCE not in allowed:
        assert a.audience_resource(a.S3_AUDIENCE) in details_of(s3)


class _Forger(SigningInterceptor):
    """Signs calls with a call key it was handed, as if it held that key's secret."""

    def __init__(self, access_key_id: str, key: bytes) -> None:
        super().__init__(Credentials(access_key_id, SecretStr("unknown")))
        self._handed = key

    def _key(self, day: str, audience: str) -> bytes:
        return self._handed


def _power_user(stack: Stack) -> tuple[str, Credentials]:
    """The finding's user: "Allow * *, Deny iam:* *", so it holds auth:* through the wildcard."""
    user_id, creds = stack.new_user(prefix="power")
    admin = stack.auth(stack.admin)
    policy_id = unique("PowerUser")
    statements = [
        pb.Statement(effect=pb.EFFECT_ALLOW, actions=["*"], resources=["*"]),
        pb.Statement(effect=pb.EFFECT_DENY, actions=["iam:*"], resources=["*"]),
    ]
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=statements))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    return user_id, creds


def _groups_of(stack: Stack, user_id: str) -> list[str]:
    reply = stack.auth(stack.admin).ListUserGroups(auth_api.ListUserGroupsRequest(user_id=user_id))
    return [g.id for g in reply.groups]


def test_a_wildcard_user_cannot_fetch_the_admins_key_for_auth_and_sign_iam_calls(stack: Stack) -> None:
    """The finding's exploit: a user allowed `*` but denied iam:* fetched the admin's call key
    for audience `auth` and signed AddGroupMember(Admins, itself) as the admin."""
    user_id, creds = _power_user(stack)
    me = stack.auth(creds)
    join = auth_api.GroupMemberRequest(group_id=ADMINS, user_id=user_id)
    assert code_of(lambda: me.AddGroupMember(join)) == DENIED
    for audience in ("auth", a.S3_AUDIENCE):
        call = lambda x=audience: me.GetCallSigningKey(_key_request(stack.admin.access_key_id, x))  # noqa: E731
        assert code_of(call) == INVALID, audience
    # Nor for graveler or the compactor: `*` never allows auth:VerifySignature.
    for audience in ("graveler", "compactor"):
        call = lambda x=audience: me.GetCallSigningKey(_key_request(stack.admin.access_key_id, x))  # noqa: E731
        assert code_of(call) == DENIED, audience
        assert a.VERIFY_SIGNATURE in details_of(call)
    day = _today()
    text = _v4_string(day)
    _, signature = _sigv4(stack.admin.secret_access_key.get_secret_value(), day, text)
    s3 = lambda: me.VerifyS3Signature(_v4_request(stack.admin.access_key_id, text, signature, day))  # noqa: E731
    assert code_of(s3) == DENIED

    # Had it got a key by other means: one derived for any audience but auth's own is refused
    # by auth, so no key it can be handed signs a call to auth.
    for audience in ("graveler", "compactor", a.S3_AUDIENCE):
        handed = derive_call_key(stack.admin.secret_access_key, day, audience)
        channel = grpc.intercept_channel(
            grpc.insecure_channel(stack.auth_address), _Forger(stack.admin.access_key_id, handed)
        )
        try:
            forged = lambda c=channel: AuthServiceStub(c).AddGroupMember(join, timeout=10)  # noqa: E731
            assert code_of(forged) == grpc.StatusCode.UNAUTHENTICATED, audience
        finally:
            channel.close()
    assert ADMINS not in _groups_of(stack, user_id)


def test_only_the_verifier_service_users_get_call_keys(stack: Stack) -> None:
    """An administrator (Allow * *, no Deny) is refused call keys and S3 verification too, and
    auth's decision API says so: only a statement naming auth:VerifySignature allows it, and
    only setup writes one (the verifier presets of svc-graveler, svc-compactor, svc-gateway)."""
    _, victim = stack.new_user(prefix="victim")
    admin = stack.auth(stack.admin)
    for audience in ("graveler", "compactor"):
        call = lambda x=audience: admin.GetCallSigningKey(_key_request(victim.access_key_id, x))  # noqa: E731
        assert code_of(call) == DENIED, audience
    day = _today()
    text = _v4_string(day)
    _, signature = _sigv4(victim.secret_access_key.get_secret_value(), day, text)
    s3 = lambda: admin.VerifyS3Signature(_v4_request(victim.access_key_id, text, signature, day))  # noqa: E731
    assert code_of(s3) == DENIED
    verifiers = {"graveler": "graveler", "compactor": "compactor", "gateway": a.S3_AUDIENCE}
    for user_id in ("admin", *(f"svc-{service}" for service in verifiers)):
        for audience in ("auth", "graveler", "compactor", a.S3_AUDIENCE):
            request = auth_api.AuthorizeRequest(
                user_id=user_id, action=a.VERIFY_SIGNATURE, resource=a.audience_resource(audience)
            )
            expected = verifiers.get(user_id.removeprefix("svc-")) == audience
            assert admin.Authorize(request).allowed == expected, (user_id, audience)


class _Recorder(grpc.UnaryUnaryClientInterceptor):
    """Keeps each call's metadata as it leaves the client: what a listener on the wire sees."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, str]]]] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.calls.append((details.method, [(k, v) for k, v in details.metadata or () if k.startswith("x-silt-")]))
        return continuation(details, request)


def test_a_captured_mutating_call_sent_again_is_refused(stack: Stack) -> None:
    """Someone who captured a DeleteBranch cannot delete the branch again after it was re-created."""
    repo = stack.new_repo()
    admin = stack.gv(stack.admin)
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    recorder = _Recorder()
    # Signer outermost, recorder next to the wire: it sees the call exactly as it is sent.
    raw = grpc.intercept_channel(grpc.insecure_channel(stack.graveler_address), recorder)
    channel = grpc.intercept_channel(raw, SigningInterceptor(stack.admin))
    delete = api.DeleteBranchRequest(repository=repo, name="feature")
    try:
        api_grpc.GravelerServiceStub(channel).DeleteBranch(delete)
    finally:
        channel.close()
    [(method, captured)] = recorder.calls
    assert method.endswith("/DeleteBranch") and len(captured) == 5
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))

    unsigned = api_grpc.GravelerServiceStub(stack._channel(stack.graveler_address, None))
    replay = lambda: unsigned.DeleteBranch(delete, metadata=tuple(captured))  # noqa: E731
    assert code_of(replay) == grpc.StatusCode.UNAUTHENTICATED
    assert "replayed" in details_of(replay)
    branches = admin.ListBranches(api.ListBranchesRequest(repository=repo)).branches
    assert "feature" in [b.name for b in branches]


def test_huge_key_ids_cost_graveler_and_auth_nothing(stack: Stack) -> None:
    """Made-up key ids are refused for their shape by graveler's interceptor and by auth
    itself: nothing is looked up, nothing is cached."""
    repo = stack.new_repo()
    interceptors = {i.audience: i for i in stack._interceptors}
    before = {name: (len(i.authority.keys.known), len(i.authority.keys.unknown)) for name, i in interceptors.items()}
    for size in (19, 21, 1024, 4096):
        fake = Credentials("AKIA" + "Z" * (size - 4), stack.admin.secret_access_key)
        call = lambda f=fake: stack.gv(f).GetRepository(api.GetRepositoryRequest(name=repo))  # noqa: E731
        assert code_of(call) == grpc.StatusCode.UNAUTHENTICATED
        assert "malformed access key id" in details_of(call)
    after = {name: (len(i.authority.keys.known), len(i.authority.keys.unknown)) for name, i in interceptors.items()}
    assert after == before
    graveler = stack.auth(stack.services["graveler"])
    hostile = lambda: graveler.GetCallSigningKey(_key_request("A" * 1024, "graveler"))  # noqa: E731
    assert code_of(hostile) == grpc.StatusCode.INVALID_ARGUMENT
