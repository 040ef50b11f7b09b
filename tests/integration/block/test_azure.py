"""The Azure adapter beyond the conformance suite: its namespaces, its credentials, an unreachable
store, create-only writes, and presigned (SAS) URLs served by Azurite to a plain HTTP client."""

from __future__ import annotations

import io
import socket
import time

import pytest
import urllib3
from pydantic import SecretStr

from silt.block.azure import AzureAdapter
from silt.config import AzureBlockstoreConfig
from silt.errors import AlreadyExists, InvalidArgument, Unavailable
from tests.support.emulators import AZURITE_ACCOUNT, AZURITE_KEY, azure_blockstore_config
from tests.support.wait import wait_until

HTTP = urllib3.PoolManager(retries=False, timeout=30)
# Nothing listens there: port 9 (discard) is closed on a test machine.
CLOSED = "http://127.0.0.1:9"


def _cloud_adapter(**extra: object) -> AzureAdapter:
    config = AzureBlockstoreConfig(storage_account="myaccount", storage_access_key=SecretStr(AZURITE_KEY), **extra)  # type: ignore[arg-type]
    return AzureAdapter(config)


# --- namespaces --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "expected"),
    [
        ("https://myaccount.blob.core.windows.net/container", ("myaccount", "container", [])),
        ("https://myaccount.blob.core.windows.net/container/", ("myaccount", "container", [])),
        ("https://myaccount.blob.core.windows.net/my-container/a/b", ("myaccount", "my-container", ["a", "b"])),
        ("https://myaccount.blob.core.windows.net/c01/repo/", ("myaccount", "c01", ["repo"])),
    ],
)
def test_cloud_namespaces_name_account_container_and_prefix(namespace: str, expected: tuple[object, ...]) -> None:
    assert _cloud_adapter().parse_namespace(namespace) == expected


@pytest.mark.parametrize(
    "namespace",
    [
        "",
        "myaccount/container",
        "s3://bucket/p",
        "http://myaccount.blob.core.windows.net/container",  # not https
        "https://myaccount.blob.core.windows.net",  # no container
        "https://myaccount.blob.core.windows.net/",
        "https://blob.core.windows.net/container",  # no account
        "https://myaccount.example.com/container",  # another domain
        "https://MyAccount.blob.core.windows.net/container",  # account names are lower-case
        "https://my-account.blob.core.windows.net/container",
        "https://myaccount.blob.core.windows.net:443/container",
        "https://myaccount.blob.core.windows.net/Container",
        "https://myaccount.blob.core.windows.net/ab",  # containers have 3 to 63 characters
        "https://myaccount.blob.core.windows.net/a--b",
        "https://myaccount.blob.core.windows.net/container//p",
        "https://myaccount.blob.core.windows.net/container/p//",
        "https://myaccount.blob.core.windows.net/container/../p",
        "https://myaccount.blob.core.windows.net/container/.silt-uploads",
        "https://myaccount.blob.core.windows.net/container/p?sv=1",
        "https://myaccount.blob.core.windows.net/container/p#f",
        "http://127.0.0.1:10000/myaccount/container",  # emulator form without an emulator
    ],
)
def test_malformed_cloud_namespaces_are_refused(namespace: str) -> None:
    with pytest.raises(InvalidArgument):
        _cloud_adapter().parse_namespace(namespace)


def test_another_azure_cloud_has_its_own_domain() -> None:
    adapter = _cloud_adapter(domain="blob.core.chinacloudapi.cn")
    assert adapter.parse_namespace("https://myaccount.blob.core.chinacloudapi.cn/c0n/p") == ("myaccount", "c0n", ["p"])
    with pytest.raises(InvalidArgument):
        adapter.parse_namespace("https://myaccount.blob.core.windows.net/c0n/p")


def test_emulator_namespaces_are_path_style() -> None:
    adapter = AzureAdapter(azure_blockstore_config("http://127.0.0.1:10000/"))
    assert adapter.parse_namespace(f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}/mycontainer/repo1") == (
        AZURITE_ACCOUNT,
        "mycontainer",
        ["repo1"],
    )
    assert adapter.parse_namespace(f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}/mycontainer/") == (
        AZURITE_ACCOUNT,
        "mycontainer",
        [],
    )
    for bad in [
        f"http://127.0.0.1:10001/{AZURITE_ACCOUNT}/mycontainer",  # another endpoint
        f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}",
        "http://127.0.0.1:10000/mycontainer",
        f"https://{AZURITE_ACCOUNT}.blob.core.windows.net/mycontainer",  # the cloud form is not the emulator's
    ]:
        with pytest.raises(InvalidArgument):
            adapter.parse_namespace(bad)


def test_shared_key_credentials_reach_their_own_account_only() -> None:
    adapter = _cloud_adapter()
    with pytest.raises(InvalidArgument, match="not the configured account"):
        adapter.stat("https://otheraccount.blob.core.windows.net/container", "k")


# --- credentials -------------------------------------------------------------------


def _connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )


def test_credentials_come_from_the_connection_string_first() -> None:
    config = AzureBlockstoreConfig(
        connection_string=SecretStr(_connection_string(CLOSED)),
        storage_account="myaccount",
        storage_access_key=SecretStr("bm90IHRoZSBrZXk="),
        test_endpoint_url=CLOSED,
    )
    adapter = AzureAdapter(config)
    assert adapter.credential_kind == "connection_string"
    # The account is the connection string's, not storage_account.
    assert adapter.service_client(AZURITE_ACCOUNT).account_name == AZURITE_ACCOUNT
    with pytest.raises(InvalidArgument):
        adapter.service_client("myaccount")


def test_credentials_are_the_shared_key_without_a_connection_string() -> None:
    adapter = _cloud_adapter()
    assert adapter.credential_kind == "shared_key"
    assert adapter.service_client("myaccount").url.startswith("https://myaccount.blob.core.windows.net")


def test_without_keys_the_default_credential_reaches_any_account() -> None:
    adapter = AzureAdapter(AzureBlockstoreConfig(storage_account="myaccount"))
    assert adapter.credential_kind == "default"
    first = adapter.service_client("accountone")
    assert adapter.service_client("accountone") is first  # one client per account
    assert adapter.service_client("accounttwo").url.startswith("https://accounttwo.blob.core.windows.net")


def test_a_malformed_connection_string_is_a_config_error_without_its_text() -> None:
    from silt.errors import ConfigError

    secret = "AccountKey=c2VjcmV0;not a connection string"
    with pytest.raises(ConfigError) as caught:
        AzureAdapter(AzureBlockstoreConfig(connection_string=SecretStr(secret)))
    assert "c2VjcmV0" not in str(caught.value)


@pytest.mark.azure
def test_a_connection_string_reaches_azurite(azurite_server: str, azure_container: str) -> None:
    config = AzureBlockstoreConfig(
        connection_string=SecretStr(_connection_string(azurite_server)), test_endpoint_url=azurite_server
    )
    adapter = AzureAdapter(config, retries=0)
    namespace = f"{azurite_server}/{AZURITE_ACCOUNT}/{azure_container}/ns"
    adapter.put(namespace, "k", io.BytesIO(b"via connection string"))
    with adapter.get(namespace, "k") as reader:
        assert reader.read() == b"via connection string"


# --- an unreachable store ----------------------------------------------------------


def test_an_unreachable_store_is_unavailable_quickly() -> None:
    adapter = AzureAdapter(azure_blockstore_config(CLOSED), retries=0)
    namespace = f"{CLOSED}/{AZURITE_ACCOUNT}/container/ns"
    started = time.monotonic()
    for call in (
        lambda: adapter.stat(namespace, "k"),
        lambda: adapter.get(namespace, "k"),
        lambda: adapter.put(namespace, "k", io.BytesIO(b"x")),
        lambda: list(adapter.list_objects(namespace)),
    ):
        with pytest.raises(Unavailable) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message
        assert f"{AZURITE_ACCOUNT}/container" in message
        assert AZURITE_KEY not in message
    assert time.monotonic() - started < 10


# --- create-only writes ------------------------------------------------------------


@pytest.mark.azure
@pytest.mark.parametrize("size", [5, 9 * 1024 * 1024], ids=["one-request", "blocks"])
def test_put_if_absent_creates_once(
    azure_adapter: AzureAdapter, azurite_server: str, azure_container: str, size: int
) -> None:
    namespace = f"{azurite_server}/{AZURITE_ACCOUNT}/{azure_container}/ns"
    first = azure_adapter.put_if_absent(namespace, "once", io.BytesIO(b"a" * size), size)
    assert first.size == size
    with pytest.raises(AlreadyExists):
        azure_adapter.put_if_absent(namespace, "once", io.BytesIO(b"b" * size), size)
    with azure_adapter.get_range(namespace, "once", 0, 0) as reader:
        assert reader.read() == b"a"


# --- presigned URLs ----------------------------------------------------------------


@pytest.mark.azure
def test_presigned_urls_read_and_write_one_object(
    azure_adapter: AzureAdapter, azurite_server: str, azure_container: str
) -> None:
    namespace = f"{azurite_server}/{AZURITE_ACCOUNT}/{azure_container}/ns"
    azure_adapter.put(namespace, "data/a", io.BytesIO(b"hello presigned"))
    before = int(time.time())
    url = azure_adapter.presign(namespace, "data/a", "GET", 300, filename="a b.txt")
    assert before + 300 <= url.expires <= before + 302
    assert url.url.startswith(f"{azurite_server}/{AZURITE_ACCOUNT}/{azure_container}/ns/data/a?")
    assert "sig=" in url.url and "sp=r" in url.url
    got = HTTP.request("GET", url.url)
    assert got.status == 200 and got.data == b"hello presigned"
    assert 'filename="a b.txt"' in got.headers["Content-Disposition"]
    # The URL reads, and reads only that object.
    assert HTTP.request("PUT", url.url, body=b"x", headers={"x-ms-blob-type": "BlockBlob"}).status == 403
    assert HTTP.request("GET", url.url.replace("/data/a?", "/data/b?")).status == 403

    put = azure_adapter.presign(namespace, "data/b", "PUT", 300)
    stored = HTTP.request("PUT", put.url, body=b"uploaded", headers={"x-ms-blob-type": "BlockBlob"})
    assert stored.status == 201, stored.data
    with azure_adapter.get(namespace, "data/b") as reader:
        assert reader.read() == b"uploaded"
    assert HTTP.request("GET", put.url).status == 403
    # Create only: the URL cannot replace what it wrote, nor lease it (a lease would keep
    # garbage collection from deleting it).
    again = HTTP.request("PUT", put.url, body=b"replaced", headers={"x-ms-blob-type": "BlockBlob"})
    assert again.status in (403, 409), again.status
    lease = HTTP.request(
        "PUT", put.url + "&comp=lease", headers={"x-ms-lease-action": "acquire", "x-ms-lease-duration": "-1"}
    )
    assert lease.status == 403, lease.status
    with azure_adapter.get(namespace, "data/b") as reader:
        assert reader.read() == b"uploaded"
    azure_adapter.delete(namespace, "data/b")


@pytest.mark.azure
def test_expired_presigned_urls_are_refused(
    azure_adapter: AzureAdapter, azurite_server: str, azure_container: str
) -> None:
    namespace = f"{azurite_server}/{AZURITE_ACCOUNT}/{azure_container}/ns"
    azure_adapter.put(namespace, "soon", io.BytesIO(b"gone soon"))
    url = azure_adapter.presign(namespace, "soon", "GET", 1)
    # The signed expiry is whole seconds: the URL is refused within two, whenever in a second it was made.
    wait_until(lambda: HTTP.request("GET", url.url).status == 403, 10, "the presigned URL refused once expired")


@pytest.mark.parametrize("expires_in", [0, -1, 7 * 24 * 3600 + 1])
def test_presigned_url_lifetimes_are_bounded(expires_in: int) -> None:
    adapter = _cloud_adapter()
    with pytest.raises(InvalidArgument):
        adapter.presign("https://myaccount.blob.core.windows.net/container/ns", "k", "GET", expires_in)
    with pytest.raises(InvalidArgument):
        adapter.presign("https://myaccount.blob.core.windows.net/container/ns", "../k", "GET", 60)


def test_presigned_urls_are_made_locally_and_name_the_configured_endpoint() -> None:
    adapter = _cloud_adapter(pre_signed_endpoint="https://store.example.com")
    url = adapter.presign("https://myaccount.blob.core.windows.net/container/ns", "data/a b", "PUT", 7 * 24 * 3600)
    assert url.url.startswith("https://store.example.com/container/ns/data/a%20b?")
    assert "sp=c&" in url.url and "sig=" in url.url
    plain = _cloud_adapter().presign("https://myaccount.blob.core.windows.net/container/ns", "k", "GET", 60)
    assert plain.url.startswith("https://myaccount.blob.core.windows.net/container/ns/k?")


def test_a_store_that_never_answers_is_unavailable_after_the_read_timeout() -> None:
    # A listener that accepts connections and never answers: only the read timeout ends a call.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        adapter = AzureAdapter(azure_blockstore_config(endpoint), read_timeout=1.0, retries=0)
        started = time.monotonic()
        with pytest.raises(Unavailable):
            adapter.stat(f"{endpoint}/{AZURITE_ACCOUNT}/container/ns", "k")
        assert time.monotonic() - started < 10
