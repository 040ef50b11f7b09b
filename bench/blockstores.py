"""`make bench-blockstores`: Silt on each object store against that store's own SDK, in one run.

For each store with a real server here — S3 (moto_server), Azure Blob Storage (Azurite) and
Google Cloud Storage (fake-gcs-server) — a stack (auth, graveler, the S3 gateway) is started on
that blockstore, and the same operations are timed twice: through Silt with boto3 (what a user
of the S3 gateway runs), and straight at the store with its own SDK (boto3, azure-storage-blob,
google-cloud-storage). Each figure is the ratio Silt / SDK of the rates (higher is better):

* 4 KiB PUT and GET: COUNT objects by 8 client threads, each thread with its own client;
* 256 MiB PUT and GET: one object, streamed (a file on disk up, discarded bytes down).

Each client runs with its SDK's defaults, as a user's program would: boto3's PutObject for small
objects and its managed transfer (8 MiB parts, 10 threads) for the large one, against Silt and
moto_server alike; azure-storage-blob's upload_blob and
download_blob, google-cloud-storage's upload_from_file and a chunked download.

The emulators themselves are most of what both sides wait for, so the ratios say what Silt
adds on top of a store, not how fast the store is. One JSON object per line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.processes import cpu_seconds, process_tree
from bench.report import emit
from tests.support.emulators import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    azure_blockstore_config,
    gs_blockstore_config,
    start_azurite,
    start_fake_gcs,
    stop_emulator,
)
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.moto import ACCESS_KEY_ID, SECRET_ACCESS_KEY, moto_client, start_moto_server

KIB = 1024
MIB = 1024 * KIB
SMALL = 4 * KIB
THREADS = 8
CHUNK = 8 * MIB
TARGET_SMALL = 0.7
TARGET_LARGE = 0.9


@dataclass
class Store:
    """One object store: how Silt is configured for it, and its SDK's own PUT and GET."""

    name: str
    overrides: dict[str, Any]
    put: Callable[[str, Any, int], None]  # key, file-like, size
    get: Callable[[str], int]  # key -> bytes read (and discarded)


def _silt_ops(stack: GatewayStack, bucket: str) -> tuple[Callable[[str, Any, int], None], Callable[[str], int]]:
    local = threading.local()

    def client() -> Any:
        if not hasattr(local, "s3"):
            local.s3 = stack.client()
        return local.s3

    def put(key: str, body: Any, size: int) -> None:
        if size <= SMALL:
            client().put_object(Bucket=bucket, Key=f"main/{key}", Body=body.read())
        else:
            client().upload_fileobj(body, bucket, f"main/{key}")

    def get(key: str) -> int:
        response = client().get_object(Bucket=bucket, Key=f"main/{key}")
        return _drain(response["Body"])

    return put, get


def _drain(stream: Any) -> int:
    total = 0
    while chunk := stream.read(CHUNK):
        total += len(chunk)
    return total


def _s3_store(endpoint: str) -> Store:
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    moto_client(endpoint).create_bucket(Bucket=bucket)
    local = threading.local()

    def client() -> Any:
        if not hasattr(local, "s3"):
            local.s3 = moto_client(endpoint)
        return local.s3

    def put(key: str, body: Any, size: int) -> None:
        if size <= SMALL:
            client().put_object(Bucket=bucket, Key=f"direct/{key}", Body=body.read())
        else:
            client().upload_fileobj(body, bucket, f"direct/{key}")

    def get(key: str) -> int:
        return _drain(client().get_object(Bucket=bucket, Key=f"direct/{key}")["Body"])

    overrides = {
        "blockstore": {
            "type": "s3",
            "s3": {
                "endpoint_url": endpoint,
                "force_path_style": True,
                "credentials": {"access_key_id": ACCESS_KEY_ID, "secret_access_key": SECRET_ACCESS_KEY},
            },
        },
        "graveler": {"allowed_namespace_roots": [f"s3://{bucket}/"]},
        "gateways": {"s3": {"storage_namespace_template": f"s3://{bucket}/{{repo}}"}},
    }
    return Store("s3", overrides, put, get)


def _azure_store(endpoint: str) -> Store:
    from azure.storage.blob import BlobServiceClient

    container = f"bench-{uuid.uuid4().hex[:12]}"
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )
    service = BlobServiceClient.from_connection_string(connection)
    service.create_container(container)
    blobs = service.get_container_client(container)

    def put(key: str, body: Any, size: int) -> None:
        blobs.upload_blob(f"direct/{key}", body, length=size, overwrite=True)

    def get(key: str) -> int:
        total = 0
        for chunk in blobs.download_blob(f"direct/{key}").chunks():
            total += len(chunk)
        return total

    config = azure_blockstore_config(endpoint)
    overrides = {
        "blockstore": {
            "type": "azure",
            "azure": {
                "storage_account": config.storage_account,
                "storage_access_key": AZURITE_KEY,
                "test_endpoint_url": endpoint,
            },
        },
        "graveler": {"allowed_namespace_roots": [f"{endpoint}/{AZURITE_ACCOUNT}/{container}/"]},
        "gateways": {"s3": {"storage_namespace_template": f"{endpoint}/{AZURITE_ACCOUNT}/{container}/{{repo}}"}},
    }
    return Store("azure", overrides, put, get)


def _gs_store(endpoint: str) -> Store:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    bucket_name = f"bench-{uuid.uuid4().hex[:12]}"
    client = storage.Client(
        project="silt-bench", credentials=AnonymousCredentials(), client_options=ClientOptions(api_endpoint=endpoint)
    )
    bucket = client.create_bucket(bucket_name)

    def put(key: str, body: Any, size: int) -> None:
        bucket.blob(f"direct/{key}", chunk_size=CHUNK if size > CHUNK else None).upload_from_file(body, size=size)

    def get(key: str) -> int:
        blob = bucket.blob(f"direct/{key}", chunk_size=CHUNK)
        with blob.open("rb") as stream:
            return _drain(stream)

    config = gs_blockstore_config(endpoint)
    overrides = {
        "blockstore": {"type": "gs", "gs": {"endpoint_url": endpoint, "project": config.project}},
        "graveler": {"allowed_namespace_roots": [f"gs://{bucket_name}/"]},
        "gateways": {"s3": {"storage_namespace_template": f"gs://{bucket_name}/{{repo}}"}},
    }
    return Store("gs", overrides, put, get)


@dataclass
class SmallRun:
    """Rates of one side's 4 KiB phase, and CPU milliseconds per request of the processes watched."""

    puts: float
    gets: float
    put_cpu_ms: dict[str, float]
    get_cpu_ms: dict[str, float]


def _small_rates(
    put: Callable[[str, Any, int], None], get: Callable[[str], int], count: int, cpu: Callable[[], dict[str, float]]
) -> SmallRun:
    """Rates of `count` 4 KiB objects by THREADS threads; `cpu` reads CPU seconds used so far
    by the processes to account for (the store's server; Silt's services)."""
    body = os.urandom(SMALL)
    keys = [f"small/{uuid.uuid4().hex}" for _ in range(count)]

    def per_request(before: dict[str, float]) -> dict[str, float]:
        return {name: (used - before[name]) * 1000 / count for name, used in cpu().items()}

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda k: put(k, io.BytesIO(body), SMALL), keys[:THREADS]))  # warm connections
        before, started = cpu(), time.perf_counter()
        list(pool.map(lambda k: put(k, io.BytesIO(body), SMALL), keys))
        puts = count / (time.perf_counter() - started)
        put_cpu = per_request(before)
        before, started = cpu(), time.perf_counter()
        sizes = list(pool.map(get, keys))
        gets = count / (time.perf_counter() - started)
        get_cpu = per_request(before)
    assert all(size == SMALL for size in sizes)
    return SmallRun(puts, gets, put_cpu, get_cpu)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds a process and its children alive now have used."""
    return sum(cpu_seconds(one) for one in process_tree(pid))


def _large_rates(
    put: Callable[[str, Any, int], None], get: Callable[[str], int], path: Path, size: int
) -> tuple[float, float]:
    """(MiB/s up, MiB/s down) of one object of `size` bytes."""
    key = f"large/{uuid.uuid4().hex}"
    with open(path, "rb") as body:
        started = time.perf_counter()
        put(key, body, size)
        up = size / MIB / (time.perf_counter() - started)
    started = time.perf_counter()
    got = get(key)
    down = size / MIB / (time.perf_counter() - started)
    assert got == size
    return up, down


@contextlib.contextmanager
def _servers(names: list[str], tmp: Path) -> Iterator[tuple[dict[str, str], dict[str, int]]]:
    """Each store's endpoint, and its server's process id."""
    processes = []
    endpoints: dict[str, str] = {}
    pids: dict[str, int] = {}
    try:
        if "s3" in names:
            process, endpoints["s3"] = start_moto_server(tmp / "moto.log")
            processes.append(process)
            pids["s3"] = process.pid
        if "azure" in names:
            process, endpoints["azure"] = start_azurite(tmp / "azurite.log")
            processes.append(process)
            pids["azure"] = process.pid
        if "gs" in names:
            process, endpoints["gs"] = start_fake_gcs(tmp / "fake-gcs.log")
            processes.append(process)
            pids["gs"] = process.pid
        yield endpoints, pids
    finally:
        for process in processes:
            stop_emulator(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="s3,azure,gs", help="comma-separated: s3, azure, gs")
    parser.add_argument("--count", type=int, default=1000, help="4 KiB objects per side")
    parser.add_argument("--large-mib", type=int, default=256, help="size of the large object, MiB; 0: none")
    parser.add_argument("--workers", type=int, default=2, help="gateway worker processes (as bench-gateway)")
    args = parser.parse_args()
    names = [name.strip() for name in args.stores.split(",") if name.strip()]
    makers = {"s3": _s3_store, "azure": _azure_store, "gs": _gs_store}
    size = args.large_mib * MIB
    with tempfile.TemporaryDirectory(prefix="silt-bench-blockstores-") as tmp_name:
        tmp = Path(tmp_name)
        large = tmp / "large.bin"
        with open(large, "wb") as out:
            for _ in range(args.large_mib):
                out.write(os.urandom(MIB))
        with _servers(names, tmp) as (endpoints, pids):
            for name in names:
                store = makers[name](endpoints[name])
                with gateway_stack(tmp / f"stack-{name}", workers=args.workers, overrides=store.overrides) as stack:
                    bucket = f"bench-{name}"
                    stack.client().create_bucket(Bucket=bucket)
                    silt_put, silt_get = _silt_ops(stack, bucket)

                    def cpu() -> dict[str, float]:
                        used = {"store": _cpu_seconds(pids[name])}  # noqa: B023 (called within the loop)
                        for service in ("gateway", "graveler"):
                            pid = stack.stack.pid(service)
                            used[service] = _cpu_seconds(pid) if pid is not None else 0.0
                        return used

                    sdk_small = _small_rates(store.put, store.get, args.count, cpu)
                    silt_small = _small_rates(silt_put, silt_get, args.count, cpu)
                    if size:
                        sdk_large = _large_rates(store.put, store.get, large, size)
                        silt_large = _large_rates(silt_put, silt_get, large, size)
                for op in ("put", "get"):
                    sdk, silt = getattr(sdk_small, f"{op}s"), getattr(silt_small, f"{op}s")
                    emit(f"blockstores.{name}.4kib_{op}_per_s_sdk", sdk, "ops/s", None, 1)
                    emit(f"blockstores.{name}.4kib_{op}_per_s_silt", silt, "ops/s", None, 1)
                    emit(f"blockstores.{name}.4kib_{op}_ratio", silt / sdk, "ratio", TARGET_SMALL)
                    # Where the CPU goes per request: the store's server on each side, Silt's services.
                    sdk_cpu, silt_cpu = getattr(sdk_small, f"{op}_cpu_ms"), getattr(silt_small, f"{op}_cpu_ms")
                    emit(f"blockstores.{name}.4kib_{op}_store_cpu_ms_sdk", sdk_cpu["store"], "ms", None)
                    emit(f"blockstores.{name}.4kib_{op}_store_cpu_ms_silt", silt_cpu["store"], "ms", None)
                    # The gateway's share holds the adapter's SDK; graveler's is the same on every store.
                    emit(f"blockstores.{name}.4kib_{op}_gateway_cpu_ms", silt_cpu["gateway"], "ms", None)
                    emit(f"blockstores.{name}.4kib_{op}_graveler_cpu_ms", silt_cpu["graveler"], "ms", None)
                if not size:
                    continue
                for op, sdk, silt in (("put", sdk_large[0], silt_large[0]), ("get", sdk_large[1], silt_large[1])):
                    emit(f"blockstores.{name}.{args.large_mib}mib_{op}_mib_per_s_sdk", sdk, "MiB/s", None, 1)
                    emit(f"blockstores.{name}.{args.large_mib}mib_{op}_mib_per_s_silt", silt, "MiB/s", None, 1)
                    emit(f"blockstores.{name}.{args.large_mib}mib_{op}_ratio", silt / sdk, "ratio", TARGET_LARGE)


if __name__ == "__main__":
    main()
