"""`python -m bench.auth`: what authentication and authorization cost per call, one JSON object per line.

* ``auth.authorize.cached`` — a decision served by the interceptor's cache (the hot path);
  target: well under 1 ms.
* ``auth.admission.cached`` — everything the interceptor does before a handler runs, with
  warm caches: read the metadata, hash the request, check the HMAC signature, decide.
* ``auth.authorize.uncached_local_kv`` — a decision computed from the `local` KV store
  (what a cache miss costs inside auth).
* ``auth.graveler_call.p{50,99}_{with,without}_auth`` — a GetRepository round trip over gRPC,
  with graveler asking a real auth service (warm caches), and with no interceptor at all;
  ``auth.graveler_call.p99_added_by_auth`` — the difference of the p99s; target ≤ 1 ms.
* ``auth.authorized_calls_per_second.{1,8}_clients`` — authorized GetRepository calls per second.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import grpc
from pydantic import SecretStr

from bench.report import emit, p99
from engine.open import open_graveler
from services.auth.authority import LocalAuthority, local_interceptor
from services.auth.model import IamModel
from services.auth.secrets import SecretBox
from services.auth.server import start as start_auth
from services.auth.setup import DEVELOPERS, setup
from services.graveler.permissions import RULES
from services.graveler.server import start as start_graveler
from silt import iam_actions as a
from silt.block.local import LocalAdapter
from silt.config import AuthConfig, Config, CredentialsConfig, DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.kv import open_store
from silt.rpc.authority import CachedAuthority
from silt.rpc.interceptor import AuthInterceptor, remote_interceptor
from silt.rpc.signing import (
    ACCESS_KEY_HEADER,
    DATE_HEADER,
    GRAVELER_AUDIENCE,
    NONCE_HEADER,
    SCOPE_HEADER,
    SIGNATURE_HEADER,
    Credentials,
    day_of,
    derive_call_key,
    payload_digest,
    sign,
    signed_channel,
)

METHOD = "/silt.graveler.v1.GravelerService/GetRepository"


def per_call_us(count: int, body: Callable[[], object]) -> float:
    started = time.perf_counter()
    for _ in range(count):
        body()
    return (time.perf_counter() - started) / count * 1e6


class _Metadatum(NamedTuple):
    key: str
    value: str


def run(workdir: Path, count: int, calls: int) -> None:
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / "kv.db"))))
    model = IamModel(store, SecretBox(SecretStr("h-Ha9f77tfRzLv484y7UIHGuADgj68xfXqzGMjS3srM")))
    keys = setup(model, services=["graveler"])
    assert keys is not None
    model.create_user("dev")
    model.add_member(DEVELOPERS, "dev")
    issued = model.create_credentials("dev")
    dev = Credentials(issued.credential.access_key_id, issued.secret)
    admin = Credentials(keys.admin.access_key_id, SecretStr(keys.admin.secret_access_key))

    # In-process: the interceptor's own work, caches warm.
    cached = CachedAuthority(LocalAuthority(model), ttl=3600)
    cached.allowed("dev", a.READ_REPO, "bench-repo")
    emit(
        "auth.authorize.cached",
        per_call_us(count, lambda: cached.allowed("dev", a.READ_REPO, "bench-repo")),
        "us",
        1000,
    )

    interceptor = AuthInterceptor(cached, RULES, audience=GRAVELER_AUDIENCE)
    request = api.GetRepositoryRequest(name="bench-repo")
    now = int(time.time())
    date, scope = str(now), f"{day_of(now)}/{GRAVELER_AUDIENCE}"
    key = derive_call_key(dev.secret_access_key, day_of(now), GRAVELER_AUDIENCE)

    def signed_metadata() -> list[_Metadatum]:
        # Every call has its own nonce: the interceptor refuses one it has seen (a replay).
        nonce = secrets.token_hex(16)
        signature = sign(key, date, scope, nonce, METHOD, dev.access_key_id, payload_digest(request))
        return [
            _Metadatum(ACCESS_KEY_HEADER, dev.access_key_id),
            _Metadatum(DATE_HEADER, date),
            _Metadatum(SCOPE_HEADER, scope),
            _Metadatum(NONCE_HEADER, nonce),
            _Metadatum(SIGNATURE_HEADER, signature),
        ]

    rule = RULES[METHOD]
    interceptor._admit(METHOD, signed_metadata(), request, rule)
    calls_metadata = iter([signed_metadata() for _ in range(count)])
    admission = per_call_us(count, lambda: interceptor._admit(METHOD, next(calls_metadata), request, rule))
    emit("auth.admission.cached", admission, "us", 1000)

    uncached = LocalAuthority(model)
    emit(
        "auth.authorize.uncached_local_kv",
        per_call_us(max(count // 100, 10), lambda: uncached.allowed_many("dev", a.READ_REPO, ["bench-repo"])) / 1000,
        "ms",
        None,
    )

    # Over the network: graveler asking a real auth service.
    graveler = open_graveler(store, LocalAdapter(workdir / "data"))
    auth_server, auth_port = start_auth(model, "127.0.0.1:0", [local_interceptor(model, 60)])
    service = keys.services["graveler"]
    config = Config(
        auth=AuthConfig(endpoint=f"127.0.0.1:{auth_port}", cache_ttl_seconds=60),
        credentials=CredentialsConfig(
            access_key_id=service.access_key_id, secret_access_key=SecretStr(service.secret_access_key)
        ),
    )
    guarded = remote_interceptor(config, RULES, GRAVELER_AUDIENCE)
    servers: list[Any] = [auth_server]
    try:
        with_auth, port = start_graveler(graveler, "127.0.0.1:0", [guarded])
        without_auth, open_port = start_graveler(graveler, "127.0.0.1:0")
        servers += [with_auth, without_auth]
        admin_stub = api_grpc.GravelerServiceStub(signed_channel(f"127.0.0.1:{port}", admin))
        admin_stub.CreateRepository(api.CreateRepositoryRequest(name="bench-repo", storage_namespace="local://bench"))
        stubs = {
            "with_auth": api_grpc.GravelerServiceStub(signed_channel(f"127.0.0.1:{port}", dev)),
            "without_auth": api_grpc.GravelerServiceStub(grpc.insecure_channel(f"127.0.0.1:{open_port}")),
        }
        samples: dict[str, list[float]] = {name: [] for name in stubs}
        for stub in stubs.values():
            stub.GetRepository(request)  # warm: connection, secret and decision caches
        # Interleaved, so that both variants see the same machine from moment to moment.
        for _ in range(calls):
            for name, stub in stubs.items():
                started = time.perf_counter()
                stub.GetRepository(request)
                samples[name].append((time.perf_counter() - started) * 1000)
        for name, taken in samples.items():
            emit(f"auth.graveler_call.p50_{name}", statistics.median(taken), "ms", None)
            emit(f"auth.graveler_call.p99_{name}", p99(taken), "ms", None)
        added = p99(samples["with_auth"]) - p99(samples["without_auth"])
        emit("auth.graveler_call.p99_added_by_auth", added, "ms", 1.0)
        emit("auth.authorized_calls_per_second.1_client", 1000 / statistics.mean(samples["with_auth"]), "calls/s", None)
        clients = 8
        guarded_stub = stubs["with_auth"]
        with ThreadPoolExecutor(clients) as pool:
            started = time.perf_counter()
            list(pool.map(lambda _: guarded_stub.GetRepository(request), range(calls * 2)))
            elapsed = time.perf_counter() - started
        emit(f"auth.authorized_calls_per_second.{clients}_clients", calls * 2 / elapsed, "calls/s", None)
    finally:
        for server in servers:
            server.stop(None)
        guarded.close()
        graveler.close()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200_000, help="in-process iterations")
    parser.add_argument("--calls", type=int, default=2_000, help="gRPC round trips per variant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="silt-bench-auth-") as tmp:
        run(Path(tmp), args.count, args.calls)


if __name__ == "__main__":
    main()
