"""Real S3 clients against the gateway: the AWS CLI, s3cmd (SigV4 and SigV2) and s3fs/fsspec.

They live in .venv-clients (`make clients`): their botocore pins conflict with ours.
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.gateway_stack import CLIENTS_BIN, GatewayStack

MIB = 1024 * 1024


def aws(gw: GatewayStack, *args: str) -> str:
    done = subprocess.run(
        [str(CLIENTS_BIN / "aws"), "--endpoint-url", gw.endpoint, *args],
        env=gw.client_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_aws_cli(gw: GatewayStack, s3: Any, bucket: str, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(24 * MIB))  # above the CLI's 8 MiB multipart threshold
    aws(gw, "s3", "cp", str(big), f"s3://{bucket}/main/big.bin")
    aws(gw, "s3", "cp", f"s3://{bucket}/main/big.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == big.read_bytes()

    tree = tmp_path / "tree"
    for rel in ("a.txt", "d/b.txt", "d/e/c.txt", "z z.txt"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(rel)
    aws(gw, "s3", "sync", str(tree), f"s3://{bucket}/main/tree/")
    listing = aws(gw, "s3", "ls", "--recursive", f"s3://{bucket}/main/tree/")
    # Lines are "<date> <time> <size> <key>"; keys may hold spaces.
    keys = sorted(line.split(None, 3)[3] for line in listing.splitlines() if line.strip())
    assert keys == ["main/tree/a.txt", "main/tree/d/b.txt", "main/tree/d/e/c.txt", "main/tree/z z.txt"]
    # A second sync has nothing to do.
    assert aws(gw, "s3", "sync", str(tree), f"s3://{bucket}/main/tree/").strip() == ""
    top = aws(gw, "s3", "ls", f"s3://{bucket}/")
    assert "PRE main/" in top

    # Each `aws` is an interpreter's start (seconds on a loaded machine): the low-level calls are
    # the ones the commands above make (cp's download heads the object, ls lists a prefix), and
    # `s3api put-object` is the checksums test's.
    aws(gw, "s3", "rm", "--recursive", f"s3://{bucket}/main/tree/")
    left = s3.list_objects_v2(Bucket=bucket, Prefix="main/")
    assert sorted(o["Key"] for o in left["Contents"]) == ["main/big.bin"]


def test_aws_cli_checksums_and_default_presigned_urls(gw: GatewayStack, s3: Any, bucket: str, tmp_path: Path) -> None:
    """The AWS CLI sends a CRC32 with every upload (botocore's when_supported default): checked,
    answered with checksum mode, never user metadata; a wrong one is BadDigest and stores
    nothing. Its presigned URLs are SigV2 unless configured otherwise, and work as they are."""
    source = tmp_path / "c.txt"
    source.write_bytes(b"checked by the CLI")
    aws(gw, "s3api", "put-object", "--bucket", bucket, "--key", "main/cli", "--body", str(source))
    head = s3.head_object(Bucket=bucket, Key="main/cli", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == base64.b64encode(zlib.crc32(source.read_bytes()).to_bytes(4, "big")).decode()
    assert head["Metadata"] == {}
    put = ["s3api", "put-object", "--bucket", bucket, "--key", "main/wrong", "--body", str(source)]
    wrong = subprocess.run(
        [str(CLIENTS_BIN / "aws"), "--endpoint-url", gw.endpoint, *put, "--checksum-crc32", "AAAAAA=="],
        env=gw.client_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wrong.returncode != 0 and "BadDigest" in wrong.stderr, wrong.stderr
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/wrong")["KeyCount"] == 0
    url = aws(gw, "s3", "presign", f"s3://{bucket}/main/cli", "--expires-in", "60").strip()
    assert "AWSAccessKeyId=" in url and "Signature=" in url, url  # SigV2, the CLI's default
    assert requests.get(url, timeout=30).content == b"checked by the CLI"


@pytest.mark.parametrize("signature_v2", [False, True], ids=["sigv4", "sigv2"])
def test_s3cmd(gw: GatewayStack, signature_v2: bool, tmp_path: Path) -> None:
    s3 = gw.client()
    bucket = f"s3cmd-{'v2' if signature_v2 else 'v4'}-{secrets.token_hex(4)}"
    s3.create_bucket(Bucket=bucket)
    host = gw.endpoint.removeprefix("http://")
    config = tmp_path / "s3cfg"
    config.write_text(
        "[default]\n"
        f"access_key = {gw.admin.access_key_id}\n"
        f"secret_key = {gw.admin.secret_access_key.get_secret_value()}\n"
        f"host_base = {host}\nhost_bucket = {host}\nbucket_location = {gw.region}\n"
        f"use_https = False\nsignature_v2 = {signature_v2}\n"
    )

    def s3cmd(*args: str) -> str:
        done = subprocess.run(
            [str(CLIENTS_BIN / "s3cmd"), "-c", str(config), *(["--signature-v2"] if signature_v2 else []), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    source = tmp_path / "f.txt"
    source.write_text("via s3cmd")
    s3cmd("put", str(source), f"s3://{bucket}/main/s3cmd/f.txt")
    assert s3.get_object(Bucket=bucket, Key="main/s3cmd/f.txt")["Body"].read() == b"via s3cmd"
    assert f"s3://{bucket}/main/s3cmd/f.txt" in s3cmd("ls", "-r", f"s3://{bucket}/main/")
    s3cmd("get", f"s3://{bucket}/main/s3cmd/f.txt", str(tmp_path / "g.txt"))
    assert (tmp_path / "g.txt").read_text() == "via s3cmd"
    s3cmd("del", f"s3://{bucket}/main/s3cmd/f.txt")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/s3cmd/")


def test_s3fs(gw: GatewayStack, s3: Any, bucket: str) -> None:
    script = f"""
import s3fs
fs = s3fs.S3FileSystem(key={gw.admin.access_key_id!r}, secret={gw.admin.secret_access_key.get_secret_value()!r},
                       client_kwargs={{"endpoint_url": {gw.endpoint!r}, "region_name": "us-east-1"}})
with fs.open("{bucket}/main/fs/a.csv", "wb") as f:
    f.write(b"x,y\\n1,2\\n")
fs.pipe("{bucket}/main/fs/sub/b.bin", b"b" * 1000)
assert fs.cat("{bucket}/main/fs/a.csv") == b"x,y\\n1,2\\n"
assert sorted(fs.ls("{bucket}/main/fs/")) == ["{bucket}/main/fs/a.csv", "{bucket}/main/fs/sub"]
assert fs.find("{bucket}/main/fs/") == ["{bucket}/main/fs/a.csv", "{bucket}/main/fs/sub/b.bin"]
assert fs.info("{bucket}/main/fs/sub/b.bin")["size"] == 1000
fs.rm("{bucket}/main/fs/", recursive=True)
fs.invalidate_cache()
assert fs.find("{bucket}/main/fs/") == []
print("ok")
"""
    done = subprocess.run(
        [str(CLIENTS_BIN / "python"), "-c", script], capture_output=True, text=True, timeout=120, env=gw.client_env()
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
