"""How a request's signature reaches verification: auth checks it with the secret (which
never leaves auth), the gateway keeps SigV4's scoped key for a while, and made-up access key
ids cost nothing. Real boto3 clients against a real stack, counting auth's calls."""

from __future__ import annotations

import secrets
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from silt.free_ports import free_port
from silt.rpc.signing import Credentials
from tests.support.gateway_stack import GatewayStack, gateway_stack

# Longer than any test here takes: every repeated request finds the gateway's cache warm.
CACHE_TTL = 600.0


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayStack, int]]:
    """A stack whose auth serves Prometheus metrics, and a long cache TTL."""
    port = free_port()
    overrides = {"auth": {"metrics_listen_address": f"127.0.0.1:{port}", "cache_ttl_seconds": CACHE_TTL}}
    with gateway_stack(tmp_path_factory.mktemp("counted-stack"), overrides=overrides) as stack:
        yield stack, port


def _verifications(port: int) -> float:
    """How many VerifyS3Signature calls auth has answered."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "silt_grpc_server_handled_total" and sample.labels.get("method") == "VerifyS3Signature"
    )


def test_sigv4_costs_one_auth_call_per_key_and_scope(counted: tuple[GatewayStack, int]) -> None:
    gw, port = counted
    s3 = gw.client()
    before = _verifications(port)
    s3.create_bucket(Bucket="scoped")
    for i in range(10):
        s3.put_object(Bucket="scoped", Key=f"main/k{i}", Body=b"x" * i)
        assert s3.get_object(Bucket="scoped", Key=f"main/k{i}")["Body"].read() == b"x" * i
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "scoped", "Key": "main/k3"}, ExpiresIn=60)
    assert requests.get(url, timeout=30).content == b"xxx"
    assert _verifications(port) - before == 1
    # Another key is another question; a wrong secret for a known key and scope is refused
    # by the gateway itself, with the key it holds.
    reader = gw.client(gw.reader)
    reader.list_objects_v2(Bucket="scoped", Prefix="main/")
    assert _verifications(port) - before == 2
    forged = gw.client(Credentials(gw.admin.access_key_id, SecretStr("f" * 40)))
    with pytest.raises(Exception, match="SignatureDoesNotMatch"):
        forged.list_objects_v2(Bucket="scoped", Prefix="main/")
    assert _verifications(port) - before == 2


def test_sigv2_is_checked_by_auth_every_time(counted: tuple[GatewayStack, int]) -> None:
    gw, port = counted
    gw.client().create_bucket(Bucket="signed-v2")
    v2 = gw.client(signature_version="s3")
    before = _verifications(port)
    for i in range(3):
        v2.put_object(Bucket="signed-v2", Key=f"main/{i}", Body=b"two")
    assert _verifications(port) - before == 3


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _made_up_request(endpoint: str, session: requests.Session, size: int) -> requests.Response:
    key_id = secrets.token_hex(size // 2).upper()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={key_id}/{stamp[:8]}/us-east-1/s3/aws4_request, "
        f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={'0' * 64}"
    )
    headers = {"Authorization": authorization, "x-amz-date": stamp, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
    return session.get(f"{endpoint}/scoped/main/k1", headers=headers, timeout=30)


def test_made_up_key_ids_are_refused_at_once_and_kept_nowhere(counted: tuple[GatewayStack, int]) -> None:
    """5,000 random key ids as long as a header line allows (about 8 KiB): each is refused
    for its shape, auth never hears of them, the gateway keeps none of them, and the keys it
    had cached stay cached."""
    gw, port = counted
    s3 = gw.client()
    s3.create_bucket(Bucket="flooded")
    s3.put_object(Bucket="flooded", Key="main/k", Body=b"v")
    pid = gw.stack.pid("gateway")
    assert pid is not None
    verified = _verifications(port)
    rss = _rss_bytes(pid)

    def flood(count: int) -> set[tuple[int, bool]]:
        with requests.Session() as session:
            return {
                (reply.status_code, b"InvalidAccessKeyId" in reply.content)
                for reply in (_made_up_request(gw.endpoint, session, 7_900) for _ in range(count))
            }

    with ThreadPoolExecutor(4) as pool:
        answers = set().union(*pool.map(flood, [1_250] * 4))
    assert answers == {(403, True)}
    assert _verifications(port) == verified
    grown = _rss_bytes(pid) - rss
    # 5,000 ids of 8 KiB are 40 MB: a cache that kept them would grow by at least that (the
    # flood grew the gateway by 52 KiB when this was written).
    assert grown < 24 * 1024 * 1024, f"the gateway grew by {grown // 1024} KiB"
    assert s3.get_object(Bucket="flooded", Key="main/k")["Body"].read() == b"v"
    assert _verifications(port) == verified
