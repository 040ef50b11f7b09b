"""`make bench-presign`: a presigned GET (and PUT) of a large object through the local blockstore,
against the S3 gateway's own GET (and PUT) of the same bytes, one JSON object per line.

Auth, graveler and the gateway run as processes (tests/support/gateway_stack.py), on the local
blockstore. curl moves the bytes both ways, so that the ratio compares the servers, not the
clients: the gateway's GET and PUT are signed by curl's own SigV4; the presigned URLs come from
the REST API (statObject with presign=true, getPhysicalAddress with presign=true) before the
clock starts. The two take turns, and the best of N of each counts. Target: the presigned GET at
least 0.9 of the gateway's GET.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import requests

from bench.report import emit
from tests.support.gateway_stack import GatewayStack, gateway_stack

MIB = 1024 * 1024
BUCKET = "bench-presign"
TIMEOUT = 60


def curl(*args: str) -> tuple[float, dict[str, str]]:
    """Seconds curl took for one transfer, and the response's headers."""
    done = subprocess.run(
        ["curl", "-sS", "--fail", "-o", "/dev/null", "-D", "-", "-w", "\n%{time_total}", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    *head, took = done.stdout.rstrip("\n").split("\n")
    headers = {}
    for line in head:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return float(took), headers


def _api(gw: GatewayStack) -> requests.Session:
    session = requests.Session()
    session.auth = (gw.admin.access_key_id, gw.admin.secret_access_key.get_secret_value())
    return session


def _api_json(session: requests.Session, gw: GatewayStack, method: str, path: str, **kwargs: Any) -> Any:
    response = session.request(method, f"{gw.endpoint}/api/v1{path}", timeout=TIMEOUT, **kwargs)
    response.raise_for_status()
    return response.json()


def bench_large(gw: GatewayStack, workdir: Path, size_mib: int, rounds: int) -> None:
    path = workdir / "large.bin"
    with open(path, "wb") as f:
        block = os.urandom(MIB)
        for _ in range(size_mib):
            f.write(block)
    size = size_mib * MIB
    user = f"{gw.admin.access_key_id}:{gw.admin.secret_access_key.get_secret_value()}"
    sign = ["--aws-sigv4", f"aws:amz:{gw.region}:s3", "--user", user, "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    s3_url = f"{gw.endpoint}/{BUCKET}/main/large.bin"
    curl(*sign, "-T", str(path), s3_url)
    session = _api(gw)
    stat = _api_json(
        session,
        gw,
        "GET",
        f"/repositories/{BUCKET}/refs/main/objects/stat",
        params={"path": "large.bin", "presign": "true"},
    )
    presigned_get = stat["physical_address"]
    assert presigned_get.startswith(gw.endpoint + "/_silt/presigned/"), presigned_get

    gateway_gets, presigned_gets, gateway_puts, presigned_puts = [], [], [], []
    for n in range(rounds):
        gateway_gets.append(curl(*sign, s3_url)[0])
        presigned_gets.append(curl(presigned_get)[0])
        gateway_puts.append(curl(*sign, "-T", str(path), f"{gw.endpoint}/{BUCKET}/main/put-{n}.bin")[0])
        location = _api_json(
            session,
            gw,
            "GET",
            f"/repositories/{BUCKET}/branches/main/staging/backing",
            params={"path": f"up-{n}.bin", "presign": "true"},
        )
        took, headers = curl("-T", str(path), location["presigned_url"])
        presigned_puts.append(took)
        link = {
            "staging": {"physical_address": location["physical_address"]},
            "checksum": headers["etag"].strip('"'),
            "size_bytes": size,
        }
        _api_json(
            session,
            gw,
            "PUT",
            f"/repositories/{BUCKET}/branches/main/staging/backing",
            params={"path": f"up-{n}.bin"},
            json=link,
        )
    gateway_get, presigned = min(gateway_gets), min(presigned_gets)
    emit(f"presign.gateway_get_{size_mib}mib", size / gateway_get / MIB, "MiB/s", None)
    emit(f"presign.local_get_{size_mib}mib", size / presigned / MIB, "MiB/s", None)
    emit(f"presign.local_get_{size_mib}mib_vs_gateway_get", gateway_get / presigned, "ratio", 0.9)
    gateway_put, presigned_put = min(gateway_puts), min(presigned_puts)
    emit(f"presign.gateway_put_{size_mib}mib", size / gateway_put / MIB, "MiB/s", None)
    emit(f"presign.local_put_{size_mib}mib", size / presigned_put / MIB, "MiB/s", None)
    emit(f"presign.local_put_{size_mib}mib_vs_gateway_put", gateway_put / presigned_put, "ratio", None)
    path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--large-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2, help="gateways.s3.workers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="silt-bench-presign-") as tmp:
        workdir = Path(tmp)
        with gateway_stack(workdir / "stack", workers=args.workers) as gw:
            gw.client().create_bucket(Bucket=BUCKET)
            print(json.dumps({"note": f"{args.large_mib} MiB, best of {args.rounds}, {args.workers} workers"}))
            bench_large(gw, workdir, args.large_mib, args.rounds)


if __name__ == "__main__":
    main()
