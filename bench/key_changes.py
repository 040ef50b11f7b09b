"""What checking the keys a merge changes costs (silt/changed_keys.py): a merge of 10,000 added
keys through graveler's gRPC API, by a writer without object rules (the common case: no per-key
work) and by a writer with an object Deny that none of the keys matches (every key is listed
and matched), one JSON object per line, the median of `--rounds` merges each.

Auth and graveler run as processes, as in production, and each merge is signed by its user.
The source branch is built in-process on the same files (staging 10,000 keys by RPC would
dominate the run); each round merges it into a new branch made from main.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from bench.report import emit
from engine.open import open_graveler
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import auth_pb2_grpc as auth_grpc
from silt.auth.v1 import model_pb2 as auth_pb
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.launcher import Stack
from silt.rpc.signing import Credentials, signed_channel

REPO = "bench-keys"


def _user(auth: auth_grpc.AuthServiceStub, name: str, statements: list[auth_pb.Statement]) -> Credentials:
    auth.CreateUser(auth_api.CreateUserRequest(id=name))
    auth.CreatePolicy(auth_api.CreatePolicyRequest(id=f"{name}-policy", statements=statements))
    auth.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=f"{name}-policy", user_id=name))
    issued = auth.CreateCredentials(auth_api.CreateCredentialsRequest(user_id=name))
    return Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    allow = auth_pb.Statement(effect=auth_pb.EFFECT_ALLOW, actions=["ReadRepo", "WriteRepo"], resources=[REPO])
    deny = auth_pb.Statement(
        effect=auth_pb.EFFECT_DENY, actions=["WriteObject", "DeleteObject"], resources=[f"{REPO}/secret/*"]
    )
    with tempfile.TemporaryDirectory(prefix="silt-bench-") as tmp:
        workdir = Path(tmp)
        with Stack(workdir, ports={"auth": 0, "graveler": 0}, services=["auth", "graveler"], log_level="WARN") as s:
            assert s.admin is not None
            admin_auth = signed_channel(s.endpoints["auth"], s.admin)
            auth = auth_grpc.AuthServiceStub(admin_auth)
            users = {"plain": _user(auth, "plain", [allow]), "narrowed": _user(auth, "narrowed", [allow, deny])}
            channels = {name: signed_channel(s.endpoints["graveler"], creds) for name, creds in users.items()}
            admin = signed_channel(s.endpoints["graveler"], s.admin)
            stub = api_grpc.GravelerServiceStub(admin)
            stub.CreateRepository(api.CreateRepositoryRequest(name=REPO, storage_namespace=f"local://{REPO}"))
            stub.CreateBranch(api.CreateBranchRequest(repository=REPO, name="feature", source_ref="main"))
            kv = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / "metadata.db"))))
            graveler = open_graveler(kv, LocalAdapter(workdir / "data"))
            try:
                for i in range(args.keys):
                    entry = pb.Entry(physical_address=f"data/{i:08d}", size=10, etag=f"{i:032x}")
                    graveler.stage_entry(REPO, "feature", f"open/part-{i:08d}.parquet", entry)
            finally:
                graveler.close()
                kv.close()
            stub.Commit(api.CommitRequest(repository=REPO, branch="feature", message=f"{args.keys} keys"))

            def merge_as(name: str, round_: int) -> float:
                target = f"{name}-{round_}"
                stub.CreateBranch(api.CreateBranchRequest(repository=REPO, name=target, source_ref="main"))
                merge: Callable[..., api.MergeResponse] = api_grpc.GravelerServiceStub(channels[name]).Merge
                request = api.MergeRequest(repository=REPO, source_ref="feature", destination_branch=target)
                started = time.perf_counter()
                merged = merge(request)
                elapsed = time.perf_counter() - started
                assert merged.commit.id and not merged.conflicts
                return elapsed

            try:
                for name in users:
                    merge_as(name, -1)  # warm: caches of scopes, ranges, connections
                times: dict[str, list[float]] = {name: [] for name in users}
                for round_ in range(args.rounds):
                    for name in users:
                        times[name].append(merge_as(name, round_))
                for name, samples in times.items():
                    median_ms = statistics.median(samples) * 1000
                    emit(f"graveler.merge_{args.keys // 1000}k_keys.{name}", median_ms, "ms", None, digits=2)
            finally:
                for channel in (*channels.values(), admin, admin_auth):
                    channel.close()


if __name__ == "__main__":
    main()
