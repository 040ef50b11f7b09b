"""AuthInterceptor on a tiny real gRPC server: admission, refusals, replays, and the caller's identity."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from pydantic import SecretStr

from silt.errors import NotFound, Unauthenticated, Unavailable
from silt.rpc.authority import CachedAuthority, CallKey
from silt.rpc.interceptor import Authenticated, AuthInterceptor, Require, Rule, current_principal, field
from silt.rpc.replay import ReplayCache
from silt.rpc.server import bind, build_server
from silt.rpc.signing import (
    ACCESS_KEY_HEADER,
    CLIENT_IP_HEADER,
    DATE_HEADER,
    NONCE_HEADER,
    SCOPE_HEADER,
    SIGNATURE_HEADER,
    Credentials,
    SigningInterceptor,
    day_of,
    derive_call_key,
    signed_channel,
)

AUDIENCE = "test"

SECRET = SecretStr("A" * 40)
ALICE = Credentials("AKIAALICEALICEALICE2", SECRET)
FLAKY = Credentials("AKIAFLAKYFLAKYFLAKY2", SECRET)
MALLORY = Credentials("AKIAMALLORYMALLORY02", SECRET)

RULES: dict[str, Rule] = {
    "/test.Svc/Echo": Require("ReadRepo", field("value")),
    "/test.Svc/Stream": Require("ReadRepo", field("value")),
    "/test.Svc/Upload": Authenticated(),
    "/test.Svc/Where": Authenticated(),
}


class FakeAuthority:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.sources: list[str] = []

    def call_key(self, access_key_id: str, day: str, audience: str) -> CallKey:
        self.asked.append(access_key_id)
        if access_key_id == FLAKY.access_key_id:
            raise Unavailable("auth is down")
        if access_key_id == MALLORY.access_key_id:
            return CallKey("mallory", derive_call_key(SECRET, day, audience))
        if access_key_id != ALICE.access_key_id:
            raise NotFound("no such key")
        return CallKey("alice", derive_call_key(SECRET, day, audience))

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        self.sources.append(source_ip)
        return [r.startswith("open-") for r in resources]


class Env:
    def __init__(self, clock_offset: float = 0.0) -> None:
        self.reached: list[str] = []
        self.authority = FakeAuthority()
        self.interceptor = AuthInterceptor(
            CachedAuthority(self.authority, ttl=60),
            RULES,
            max_skew_seconds=60,
            clock=lambda: time.time() + clock_offset,
            audience=AUDIENCE,
        )
        interceptor = self.interceptor
        self.server = build_server([interceptor])
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Svc", self._handlers())])
        self.address = f"127.0.0.1:{bind(self.server, '127.0.0.1:0')}"
        self.server.start()
        self.channels: list[grpc.Channel] = []

    def _handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        def echo(request: StringValue, context: Any) -> StringValue:
            self.reached.append("Echo")
            return StringValue(value=current_principal().user_id)

        def stream(request: StringValue, context: Any) -> Iterator[StringValue]:
            self.reached.append("Stream")
            yield StringValue(value=current_principal().user_id)
            yield StringValue(value=request.value)

        def where(request: StringValue, context: Any) -> StringValue:
            principal = current_principal()
            return StringValue(value=f"{principal.source_ip}|{principal.reported_ip}")

        def upload(requests: Iterator[StringValue], context: Any) -> StringValue:
            self.reached.append("Upload")
            return StringValue()

        unruled = grpc.unary_unary_rpc_method_handler(
            echo, request_deserializer=StringValue.FromString, response_serializer=StringValue.SerializeToString
        )
        return {
            "Echo": unruled,
            "Unruled": unruled,
            "Where": grpc.unary_unary_rpc_method_handler(
                where, request_deserializer=StringValue.FromString, response_serializer=StringValue.SerializeToString
            ),
            "Stream": grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=StringValue.FromString, response_serializer=StringValue.SerializeToString
            ),
            "Upload": grpc.stream_unary_rpc_method_handler(
                upload, request_deserializer=StringValue.FromString, response_serializer=StringValue.SerializeToString
            ),
        }

    def channel(self, credentials: Credentials | None, audience: str = AUDIENCE) -> grpc.Channel:
        if credentials is None:
            channel = grpc.insecure_channel(self.address)
        else:
            channel = signed_channel(self.address, credentials, audience=audience)
        self.channels.append(channel)
        return channel

    def echo(
        self,
        credentials: Credentials | None,
        value: str,
        method: str = "Echo",
        audience: str = AUDIENCE,
        metadata: Sequence[tuple[str, str]] | None = None,
    ) -> str:
        call = self.channel(credentials, audience).unary_unary(
            f"/test.Svc/{method}",
            request_serializer=StringValue.SerializeToString,
            response_deserializer=StringValue.FromString,
        )
        return call(StringValue(value=value), timeout=10, metadata=tuple(metadata) if metadata else None).value

    def close(self) -> None:
        for channel in self.channels:
            channel.close()
        self.server.stop(None)


@pytest.fixture
def env() -> Iterator[Env]:
    running = Env()
    yield running
    running.close()


def status(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code()


def test_admitted_call_sees_its_caller(env: Env) -> None:
    assert env.echo(ALICE, "open-1") == "alice"
    assert env.reached == ["Echo"]


def test_refusals_never_reach_the_handler(env: Env) -> None:
    wrong = Credentials(ALICE.access_key_id, SecretStr("B" * 40))
    unknown = Credentials("AKIAUNKNOWNUNKNOWN22", SECRET)
    assert status(lambda: env.echo(None, "open-1")) == grpc.StatusCode.UNAUTHENTICATED
    assert status(lambda: env.echo(wrong, "open-1")) == grpc.StatusCode.UNAUTHENTICATED
    assert status(lambda: env.echo(unknown, "open-1")) == grpc.StatusCode.UNAUTHENTICATED
    assert status(lambda: env.echo(ALICE, "closed-1")) == grpc.StatusCode.PERMISSION_DENIED
    assert status(lambda: env.echo(ALICE, "open-1", method="Unruled")) == grpc.StatusCode.PERMISSION_DENIED
    assert status(lambda: env.echo(FLAKY, "open-1")) == grpc.StatusCode.UNAVAILABLE
    assert env.reached == []


def test_streams_are_guarded_too(env: Env) -> None:
    stream = env.channel(ALICE).unary_stream(
        "/test.Svc/Stream",
        request_serializer=StringValue.SerializeToString,
        response_deserializer=StringValue.FromString,
    )
    assert [m.value for m in stream(StringValue(value="open-s"))] == ["alice", "open-s"]
    with pytest.raises(grpc.RpcError) as err:
        list(stream(StringValue(value="closed-s")))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    upload = env.channel(ALICE).stream_unary(
        "/test.Svc/Upload",
        request_serializer=StringValue.SerializeToString,
        response_deserializer=StringValue.FromString,
    )
    with pytest.raises(grpc.RpcError) as err:
        upload(iter([StringValue(value="x")]))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED  # streamed requests: refused, not open
    assert env.reached == ["Stream"]


@pytest.mark.parametrize("offset", [-3600.0, 3600.0])
def test_clock_skew_is_bounded(offset: float) -> None:
    skewed = Env(clock_offset=offset)
    try:
        assert status(lambda: skewed.echo(ALICE, "open-1")) == grpc.StatusCode.UNAUTHENTICATED
        assert skewed.reached == []
    finally:
        skewed.close()


def test_no_principal_outside_a_guarded_call() -> None:
    with pytest.raises(Unauthenticated):
        current_principal()


def test_calls_signed_for_another_audience_are_refused(env: Env) -> None:
    """A key signed for one service (its scope names it) is worthless to any other."""
    assert status(lambda: env.echo(ALICE, "open-1", audience="graveler")) == grpc.StatusCode.UNAUTHENTICATED
    assert env.reached == []


class _Recorder(grpc.UnaryUnaryClientInterceptor):
    """Keeps the metadata of every call, as someone on the network would see it."""

    def __init__(self) -> None:
        self.metadata: list[list[tuple[str, str]]] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.metadata.append(list(details.metadata or ()))
        return continuation(details, request)


def _recorded_channel(env: Env, recorder: _Recorder) -> grpc.Channel:
    """A channel signing as alice, whose recorder sits between the signer and the wire: it sees
    each call exactly as it is sent."""
    raw = grpc.intercept_channel(grpc.insecure_channel(env.address), recorder)
    channel = grpc.intercept_channel(raw, SigningInterceptor(ALICE, audience=AUDIENCE))
    env.channels.append(channel)
    return channel


def test_a_captured_call_sent_again_is_refused(env: Env) -> None:
    recorder = _Recorder()
    channel = _recorded_channel(env, recorder)
    call = channel.unary_unary(
        "/test.Svc/Echo", request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
    )
    assert call(StringValue(value="open-1"), timeout=10).value == "alice"
    captured = [(k, v) for k, v in recorder.metadata[0] if k.startswith("x-silt-")]
    assert len(captured) == 5
    assert status(lambda: env.echo(None, "open-1", metadata=captured)) == grpc.StatusCode.UNAUTHENTICATED
    assert env.reached == ["Echo"]
    # A new call (new nonce) of the same request goes through.
    assert env.echo(ALICE, "open-1") == "alice"
    assert env.reached == ["Echo", "Echo"]


def test_huge_key_ids_never_reach_the_authority(env: Env) -> None:
    """A made-up key id of any size is refused for its shape: no lookup, no cache entry."""
    recorder = _Recorder()
    channel = _recorded_channel(env, recorder)
    call = channel.unary_unary(
        "/test.Svc/Echo", request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
    )
    call(StringValue(value="open-1"), timeout=10)
    signed = [(k, v) for k, v in recorder.metadata[0] if k.startswith("x-silt-") and k != ACCESS_KEY_HEADER]
    assert len(signed) == 4
    for size in (19, 21, 1024, 4096, 8192):
        hostile = [(ACCESS_KEY_HEADER, "AKIA" + "X" * (size - 4)), *signed]
        # Past gRPC's soft metadata limit (8 KiB) gRPC itself may refuse the call first, at
        # random (RESOURCE_EXHAUSTED): either way the id never reaches the authority.
        refused = {grpc.StatusCode.UNAUTHENTICATED}
        if size >= 8192:
            refused.add(grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert status(lambda h=hostile: env.echo(None, "open-1", metadata=h)) in refused
    keys = env.interceptor.authority.keys
    assert env.authority.asked == [ALICE.access_key_id]
    assert len(keys.known) == 1 and len(keys.unknown) == 0


def test_a_key_flooding_the_replay_cache_locks_out_only_itself(env: Env) -> None:
    """Calls signed at the far edge of the clock window, more than a key may have remembered:
    that key's later calls are refused (its floor rose), another key's are admitted."""
    env.interceptor.replays = ReplayCache(60, max_entries=1_000, max_entries_per_key=20)
    ahead = SigningInterceptor(MALLORY, clock=lambda: time.time() + 55, audience=AUDIENCE)
    flood = grpc.intercept_channel(grpc.insecure_channel(env.address), ahead)
    env.channels.append(flood)
    call = flood.unary_unary(
        "/test.Svc/Echo", request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
    )
    for _ in range(21):
        assert call(StringValue(value="open-1"), timeout=10).value == "mallory"
    assert status(lambda: env.echo(MALLORY, "open-1")) == grpc.StatusCode.UNAUTHENTICATED
    for _ in range(15):  # (within alice's own limit of 20)
        assert env.echo(ALICE, "open-1") == "alice"


def test_calls_whose_signature_headers_cannot_be_valid_are_refused_before_their_request(env: Env) -> None:
    """The headers alone are checked before anything waits for the request (admission,
    silt/rpc/limits.py): none of these calls ever sends its request, and each is refused at once."""
    now = int(time.time())
    well_formed = {
        ACCESS_KEY_HEADER: ALICE.access_key_id,
        DATE_HEADER: str(now),
        SCOPE_HEADER: f"{day_of(now)}/{AUDIENCE}",
        NONCE_HEADER: "0" * 32,
        SIGNATURE_HEADER: "0" * 64,
    }
    malformed = {
        ACCESS_KEY_HEADER: "alice",
        DATE_HEADER: str(now - 3600),  # beyond the 60 s of skew
        SCOPE_HEADER: f"{day_of(now)}/graveler",
        NONCE_HEADER: "NONCE",
        SIGNATURE_HEADER: "0" * 63,
    }
    release = threading.Event()

    def never_sends() -> Iterator[StringValue]:
        release.wait(10)
        return
        yield StringValue()

    call = env.channel(None).stream_unary(
        "/test.Svc/Echo", request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
    )
    try:
        for header, value in malformed.items():
            metadata = tuple({**well_formed, header: value}.items())
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as refused:
                call(never_sends(), metadata=metadata, timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, header
            assert time.monotonic() - started < 1.0, f"{header}: the call waited for its request"
    finally:
        release.set()

    # Headers that pass are only a shape: the call is read, and its signature decides.
    def late() -> Iterator[StringValue]:
        time.sleep(0.2)  # the scenario: the request comes after the headers
        yield StringValue(value="open-1")

    with pytest.raises(grpc.RpcError) as forged:
        call(late(), metadata=tuple(well_formed.items()), timeout=5)
    assert forged.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "signature does not match" in (forged.value.details() or "")
    assert env.reached == []


def test_decisions_are_about_the_peer_address(env: Env) -> None:
    """A caller's own call is judged from where it came (policy conditions): the gRPC peer."""
    assert env.echo(ALICE, "open-1") == "alice"
    assert env.authority.sources == ["127.0.0.1"]
    assert env.echo(ALICE, "", method="Where") == "127.0.0.1|"


class _Rewriter(grpc.UnaryUnaryClientInterceptor):
    """Changes the client-address header after the call was signed, as someone on the way might."""

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = [(k, "10.0.0.1" if k == CLIENT_IP_HEADER else v) for k, v in details.metadata or ()]
        return continuation(details._replace(metadata=metadata), request)


def test_the_reported_client_address_is_signed_with_the_call(env: Env) -> None:
    reported = ((CLIENT_IP_HEADER, "127.0.0.2"),)
    assert env.echo(ALICE, "", method="Where", metadata=reported) == "127.0.0.1|127.0.0.2"
    # Not an address: reported as unknown, never as text a condition could misread.
    assert env.echo(ALICE, "", method="Where", metadata=[(CLIENT_IP_HEADER, "here")]) == "127.0.0.1|"
    raw = grpc.intercept_channel(grpc.insecure_channel(env.address), _Rewriter())
    channel = grpc.intercept_channel(raw, SigningInterceptor(ALICE, audience=AUDIENCE))
    env.channels.append(channel)
    call = channel.unary_unary(
        "/test.Svc/Where",
        request_serializer=StringValue.SerializeToString,
        response_deserializer=StringValue.FromString,
    )
    assert status(lambda: call(StringValue(value=""), timeout=10, metadata=reported)) == grpc.StatusCode.UNAUTHENTICATED
