"""Typed errors across a real gRPC server: the server maps them (ErrorMappingInterceptor), the
client decodes them (error_from_rpc), and NotFound's `what` survives in the standard rich status,
as does a KeysRefused (a user's object-scoped refusal, not the caller's credentials')."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, cast

import grpc
import grpc.aio
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from google.rpc import error_details_pb2, status_pb2

from edge.api.errors import from_graveler
from edge.gateway.backend import s3_error
from silt.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    KeysRefused,
    NotFound,
    OutcomeUnknown,
    PermissionDenied,
    ProtectedBranch,
    ResourceExhausted,
    SiltError,
    Unauthenticated,
    Unavailable,
)
from silt.rpc.errors import STATUS_DETAILS_KEY, error_from_rpc
from silt.rpc.server import bind, build_server

# What the handler raises, by request value.
RAISES: dict[str, SiltError] = {
    "repository": NotFound("repository 'r' not found", what="repository"),
    "object": NotFound("object 'k' not found", what="object"),
    "upload": NotFound("upload 'u' not found", what="upload"),
    "branch": NotFound("branch 'b' not found", what="branch"),
    "credential": NotFound("access key AKIA not found", what="credential"),
    "unsaid": NotFound("something not found"),
    "exists": AlreadyExists("branch 'b' already exists"),
    "invalid": InvalidArgument("bad name"),
    "precondition": FailedPrecondition("nothing to commit"),
    "aborted": Aborted("lost the race"),
    "unavailable": Unavailable("KV is down"),
    "unknown": OutcomeUnknown("cassandra: apply: outcome unknown, the write may or may not have been applied"),
    "denied": PermissionDenied("may not"),
    "protected": ProtectedBranch(
        "cannot write to protected branch: 'main', delete is not allowed (rule 'ma*', 'main')",
        branch="main",
        rules=("ma*", "main"),
    ),
    "keys": KeysRefused("user u may not WriteObject on r/k, which merging would change"),
    "unauthenticated": Unauthenticated("who are you"),
    "exhausted": ResourceExhausted("too many requests"),
}


class Server:
    def __init__(self) -> None:
        self.server = build_server()

        def fail(request: StringValue, context: Any) -> StringValue:
            raise RAISES[request.value]

        def fail_streaming(request: StringValue, context: Any) -> Iterator[StringValue]:
            yield StringValue(value="first")
            raise RAISES[request.value]

        handlers = {
            "Fail": grpc.unary_unary_rpc_method_handler(
                fail, request_deserializer=StringValue.FromString, response_serializer=StringValue.SerializeToString
            ),
            "FailStreaming": grpc.unary_stream_rpc_method_handler(
                fail_streaming,
                request_deserializer=StringValue.FromString,
                response_serializer=StringValue.SerializeToString,
            ),
        }
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Errors", handlers)])
        self.address = f"127.0.0.1:{bind(self.server, '127.0.0.1:0')}"
        self.server.start()
        self.channel = grpc.insecure_channel(self.address)

    def failure(self, value: str) -> grpc.RpcError:
        call = self.channel.unary_unary(
            "/test.Errors/Fail",
            request_serializer=StringValue.SerializeToString,
            response_deserializer=StringValue.FromString,
        )
        with pytest.raises(grpc.RpcError) as err:
            call(StringValue(value=value), timeout=10)
        return err.value

    def close(self) -> None:
        self.channel.close()
        self.server.stop(None)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.close()


def trailers_of(err: grpc.RpcError) -> dict[str, str | bytes]:
    # A failed call's error is also its grpc.Call, which holds the trailing metadata.
    return {key: value for key, value in cast(grpc.Call, err).trailing_metadata() or ()}


@pytest.mark.parametrize("value", sorted(RAISES))
def test_every_error_comes_back_as_its_own_type_and_message(server: Server, value: str) -> None:
    raised = RAISES[value]
    decoded = error_from_rpc(server.failure(value))
    assert type(decoded) is type(raised)
    assert str(decoded) == str(raised)
    if isinstance(raised, NotFound):
        assert isinstance(decoded, NotFound) and decoded.what == raised.what
    if isinstance(raised, ProtectedBranch):
        assert isinstance(decoded, ProtectedBranch)
        assert (decoded.branch, decoded.rules) == (raised.branch, raised.rules)


def test_what_travels_as_standard_rich_status(server: Server) -> None:
    """Any gRPC client (grpcio-status, Go's status.FromError) reads the same trailer."""
    trailer = trailers_of(server.failure("object"))[STATUS_DETAILS_KEY]
    assert isinstance(trailer, bytes)
    status = status_pb2.Status.FromString(trailer)
    assert status.code == grpc.StatusCode.NOT_FOUND.value[0]
    assert status.message == "object 'k' not found"
    info = error_details_pb2.ResourceInfo()
    assert len(status.details) == 1 and status.details[0].Unpack(info)
    assert info.resource_type == "object"
    # No rich status when there is nothing to add.
    assert STATUS_DETAILS_KEY not in trailers_of(server.failure("unsaid"))


def test_a_refused_key_is_the_users_403_at_the_rest_api_not_a_credentials_problem(server: Server) -> None:
    """The REST API calls graveler as its own user: a PERMISSION_DENIED is a deployment problem
    (503), unless it is a KeysRefused about the user the API named (403, its message)."""
    refused = from_graveler(error_from_rpc(server.failure("keys")), "graveler")
    assert (refused.status, refused.message) == (403, str(RAISES["keys"]))
    assert from_graveler(error_from_rpc(server.failure("denied")), "graveler").status == 503


def test_a_protection_refusal_is_lakefs_403_with_its_rules_typed(server: Server) -> None:
    """Decided by the rich status's type, not the text: lakeFS's sentence alone as the message,
    the branch and the matching rules as a field of the JSON error."""
    refused = from_graveler(error_from_rpc(server.failure("protected")), "graveler")
    assert (refused.status, refused.message) == (403, "cannot write to protected branch")
    assert refused.extra == {"branch_protection": {"branch": "main", "rules": ["ma*", "main"]}}
    # A plain PERMISSION_DENIED saying the same words is still the API's credentials refused.
    lookalike = PermissionDenied("cannot write to protected branch: 'main'")
    assert from_graveler(lookalike, "graveler").status == 503


def test_streaming_errors_carry_what(server: Server) -> None:
    call: Any = server.channel.unary_stream(
        "/test.Errors/FailStreaming",
        request_serializer=StringValue.SerializeToString,
        response_deserializer=StringValue.FromString,
    )
    with pytest.raises(grpc.RpcError) as err:
        list(call(StringValue(value="branch"), timeout=10))
    decoded = error_from_rpc(err.value)
    assert isinstance(decoded, NotFound) and decoded.what == "branch"


def test_unreachable_server_is_unavailable() -> None:
    with grpc.insecure_channel("127.0.0.1:1") as channel:
        call: Any = channel.unary_unary("/test.Errors/Fail", request_serializer=StringValue.SerializeToString)
        with pytest.raises(grpc.RpcError) as err:
            call(StringValue(value="x"), timeout=5)
    assert isinstance(error_from_rpc(err.value), Unavailable)


async def _aio_failure(address: str, value: str) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(
            "/test.Errors/Fail",
            request_serializer=StringValue.SerializeToString,
            response_deserializer=StringValue.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(StringValue(value=value), timeout=10)
        return err.value


@pytest.mark.parametrize(
    ("value", "default", "s3_code"),
    [
        ("repository", "NoSuchKey", "NoSuchBucket"),
        ("object", "NoSuchBucket", "NoSuchKey"),
        ("upload", "NoSuchKey", "NoSuchUpload"),
        ("branch", "NoSuchBucket", "NoSuchBucket"),  # a kind without an S3 code of its own: the caller's
        ("branch", "NoSuchKey", "NoSuchKey"),
        ("unsaid", "NoSuchKey", "NoSuchKey"),
        ("unavailable", "NoSuchKey", "ServiceUnavailable"),
        ("unknown", "NoSuchKey", "ServiceUnavailable"),
        ("aborted", "NoSuchKey", "ServiceUnavailable"),
        ("exhausted", "NoSuchKey", "SlowDown"),
        ("invalid", "NoSuchKey", "InvalidArgument"),
        ("denied", "NoSuchKey", "AccessDenied"),
        ("protected", "NoSuchKey", "AccessDenied"),
    ],
)
def test_gateway_maps_the_decoded_error(server: Server, value: str, default: str, s3_code: str) -> None:
    err = asyncio.run(_aio_failure(server.address, value))
    s3 = s3_error(error_from_rpc(err), default)
    assert s3.code == s3_code
    expected_what = RAISES[value].what if isinstance(RAISES[value], NotFound) else None  # type: ignore[attr-defined]
    assert getattr(s3, "what", None) == expected_what


def test_overload_unavailability_and_unknown_outcomes_are_told_apart_by_type(server: Server) -> None:
    """Graveler's three kinds of "not now", by status code and rich-status type, never by text or
    time: shedding load (RESOURCE_EXHAUSTED: S3 SlowDown, REST 429), a dependency down
    (UNAVAILABLE: 503 ServiceUnavailable) and a write left in doubt (UNAVAILABLE typed
    outcome-unknown: 503 too, and an OutcomeUnknown to graveler's own clients)."""
    overloaded, down, unknown = (error_from_rpc(server.failure(v)) for v in ("exhausted", "unavailable", "unknown"))
    assert isinstance(overloaded, ResourceExhausted)
    assert type(down) is Unavailable
    assert isinstance(unknown, OutcomeUnknown)
    assert (s3_error(overloaded).code, s3_error(down).code, s3_error(unknown).code) == (
        "SlowDown",
        "ServiceUnavailable",
        "ServiceUnavailable",
    )
    statuses = [from_graveler(error, "graveler").status for error in (overloaded, down, unknown)]
    assert statuses == [429, 503, 503]


def test_a_conditional_write_that_may_stand_is_answered_503_not_s3s_409() -> None:
    """S3's 409 ConditionalRequestConflict says the write did not happen; a conditional write a
    commit overtook while another writer's value became current may stand: 503, retryable."""
    error = s3_error(Aborted("raced"), failed_precondition="PreconditionFailed")
    assert (error.code, error.status) == ("ServiceUnavailable", 503)
