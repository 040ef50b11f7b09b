"""A running Silt: auth and graveler gRPC servers on one KV store, enforcing auth as in production."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from pydantic import SecretStr

from engine.features.history_events.manager import HistoryEvents
from engine.features.history_events.streams import StreamLimits
from engine.graveler import Graveler
from engine.open import open_graveler
from services.auth.authority import local_interceptor
from services.auth.model import IamModel
from services.auth.secrets import SecretBox
from services.auth.server import start as start_auth
from services.auth.setup import setup as run_setup
from services.graveler.permissions import RULES as GRAVELER_RULES
from services.graveler.server import start as start_graveler
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import auth_pb2_grpc as auth_grpc
from silt.block.local import LocalAdapter
from silt.config import AuthConfig, Config, CredentialsConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.kv import Store
from silt.rpc.interceptor import AuthInterceptor, remote_interceptor
from silt.rpc.signing import GRAVELER_AUDIENCE, Credentials, signed_channel
from tests.support.clock import ManualClock

# 32 random bytes, base64: the only form of key auth accepts (`openssl rand -base64 32`).
ENCRYPT_KEY = SecretStr("HQg+1A96j3CSJzyOeWVoVlMl+ODbGmjKAyOtOOeEvLw=")

# Every secret these tests were given, so that the log check knows what to look for.
ISSUED_SECRETS: set[str] = set()


def remember(secret: str) -> str:
    ISSUED_SECRETS.add(secret)
    return secret


def code_of(call: object) -> grpc.StatusCode:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def details_of(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except grpc.RpcError as exc:
        return exc.details() or ""
    raise AssertionError("the call succeeded")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Stack:
    store: Store
    model: IamModel
    graveler: Graveler
    ttl: float
    # The caches' clock: tests pass a TTL with pass_cache_ttl() instead of sleeping through it.
    clock: ManualClock
    admin: Credentials
    services: dict[str, Credentials]
    auth_address: str = ""
    graveler_address: str = ""
    _servers: list[grpc.Server] = field(default_factory=list)
    _channels: dict[tuple[str, Credentials | None], grpc.Channel] = field(default_factory=dict)
    _interceptors: list[AuthInterceptor] = field(default_factory=list)

    def pass_cache_ttl(self) -> None:
        """Every cached key and decision, in auth and in graveler, is stale from now on."""
        self.clock.advance(self.ttl + 0.1)

    def _channel(self, address: str, credentials: Credentials | None) -> grpc.Channel:
        cache_key = (address, credentials)
        if cache_key not in self._channels:
            self._channels[cache_key] = (
                signed_channel(address, credentials) if credentials else grpc.insecure_channel(address)
            )
        return self._channels[cache_key]

    def auth(self, credentials: Credentials | None) -> auth_grpc.AuthServiceStub:
        return auth_grpc.AuthServiceStub(self._channel(self.auth_address, credentials))

    def gv(self, credentials: Credentials | None) -> api_grpc.GravelerServiceStub:
        return api_grpc.GravelerServiceStub(self._channel(self.graveler_address, credentials))

    def new_user(self, groups: Iterable[str] = (), prefix: str = "user") -> tuple[str, Credentials]:
        admin = self.auth(self.admin)
        user_id = unique(prefix)
        admin.CreateUser(auth_api.CreateUserRequest(id=user_id))
        for group in groups:
            admin.AddGroupMember(auth_api.GroupMemberRequest(group_id=group, user_id=user_id))
        return user_id, self.new_key(user_id)

    def new_key(self, user_id: str) -> Credentials:
        issued = self.auth(self.admin).CreateCredentials(auth_api.CreateCredentialsRequest(user_id=user_id))
        remember(issued.secret_access_key)
        return Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))

    def new_repo(self, prefix: str = "repo") -> str:
        name = unique(prefix)
        self.gv(self.admin).CreateRepository(
            api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}")
        )
        return name

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        for server in self._servers:
            server.stop(None)
        for interceptor in self._interceptors:
            interceptor.close()
        self.graveler.close()


def start_stack(store: Store, data_dir: Path, ttl: float, streams: StreamLimits | None = None) -> Stack:
    """streams: graveler's WatchEvents bounds and re-authorization interval (default: production's)."""
    model = IamModel(store, SecretBox(ENCRYPT_KEY))
    result = run_setup(model)
    assert result is not None
    for key in (result.admin, *result.services.values()):
        remember(key.secret_access_key)

    def creds(key: object) -> Credentials:
        return Credentials(key.access_key_id, SecretStr(key.secret_access_key))  # type: ignore[attr-defined]

    graveler = open_graveler(store, LocalAdapter(data_dir))
    clock = ManualClock()
    services = {s: creds(k) for s, k in result.services.items()}
    stack = Stack(store, model, graveler, ttl, clock, creds(result.admin), services)
    auth_interceptor = local_interceptor(model, ttl, cache_clock=clock)
    auth_server, auth_port = start_auth(model, "127.0.0.1:0", [auth_interceptor])
    stack._servers.append(auth_server)
    stack._interceptors.append(auth_interceptor)
    stack.auth_address = f"127.0.0.1:{auth_port}"

    # Graveler reaches auth the way production does: configuration, and its own service key.
    service_key = stack.services["graveler"]
    config = Config(
        auth=AuthConfig(endpoint=stack.auth_address, cache_ttl_seconds=ttl),
        credentials=CredentialsConfig(
            access_key_id=service_key.access_key_id,
            secret_access_key=SecretStr(service_key.secret_access_key.get_secret_value()),
        ),
    )
    graveler_interceptor = remote_interceptor(config, GRAVELER_RULES, GRAVELER_AUDIENCE, cache_clock=clock)
    history = HistoryEvents(graveler.refs, streams=streams).start()
    graveler.on_close(history.close)  # its flusher writes to the store: stopped before it closes
    graveler_server, graveler_port = start_graveler(graveler, "127.0.0.1:0", [graveler_interceptor], history=history)
    stack._servers.append(graveler_server)
    stack._interceptors.append(graveler_interceptor)
    stack.graveler_address = f"127.0.0.1:{graveler_port}"
    return stack
