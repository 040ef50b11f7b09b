"""The local blockstore's presigned URLs (local_urls.py) and the addresses getPhysicalAddress hands
out (objects/link_addresses.py): what passes, what is refused, with a clock the tests move."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

import pytest

from edge.api.errors import ApiError
from edge.api.objects.edge_urls import EdgeUrls
from edge.api.objects.link_addresses import LINK_VALIDITY_SECONDS, LinkAddresses
from edge.core.asgi import Dispatcher
from silt.block.external import SourceVersion

KEY = b"k" * 32
ORIGIN = "http://127.0.0.1:8000"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _request_of(url: str) -> tuple[str, bytes]:
    """(path, query) as the ASGI server hands them to the app: the path percent-decoded."""
    parts = urlsplit(url)
    return unquote(parts.path), parts.query.encode()


def _refused(urls: EdgeUrls, url: str, method: str = "GET") -> str:
    with pytest.raises(ApiError) as refused:
        urls.verify(*_request_of(url), method)
    assert refused.value.status == 403
    return refused.value.message


@pytest.mark.parametrize("key", ["data/0a1b", "dir with space/ä ö/x?y#z%41", "a/b+c/&d=e"])
def test_a_url_allows_its_method_on_its_object(key: str) -> None:
    clock = Clock()
    urls = EdgeUrls(KEY, clock)
    address = f"local://repo-ns/{key}"
    url = urls.sign(ORIGIN, address, "GET", 900, filename="résumé.pdf")
    assert url.url.startswith(ORIGIN + "/_silt/presigned/local/repo-ns/") and url.expires == int(NOW) + 900
    grant = urls.verify(*_request_of(url.url), "GET")
    assert (grant.address, grant.method, grant.filename) == (address, "GET", "résumé.pdf")
    assert urls.verify(*_request_of(url.url), "HEAD").method == "GET"  # HEAD tells less than GET
    assert "allows GET only" in _refused(urls, url.url, "PUT")
    put = urls.sign(ORIGIN, address, "PUT", 60)
    assert urls.verify(*_request_of(put.url), "PUT").method == "PUT"
    for other in ("GET", "HEAD", "DELETE"):
        assert "allows PUT only" in _refused(urls, put.url, other)


def test_a_url_expires() -> None:
    clock = Clock()
    urls = EdgeUrls(KEY, clock)
    url = urls.sign(ORIGIN, "local://ns/data/x", "GET", 60).url
    clock.now = NOW + 59
    urls.verify(*_request_of(url), "GET")
    clock.now = NOW + 60
    assert "expired" in _refused(urls, url)
    # Lifetimes are kept to 1 second .. 7 days.
    assert urls.sign(ORIGIN, "local://ns/data/x", "GET", 10**9).expires == int(clock.now) + 7 * 24 * 3600


def test_any_change_to_a_url_is_refused() -> None:
    urls = EdgeUrls(KEY, Clock())
    url = urls.sign(ORIGIN, "local://ns/data/x", "GET", 900, filename="x.csv").url
    signature = re.search(r"X-Silt-Signature=([^&]+)", url)
    assert signature is not None
    flipped = ("A" if signature.group(1)[0] != "A" else "B") + signature.group(1)[1:]
    changed = [
        url.replace(signature.group(1), flipped),
        url.replace("/ns/data/x", "/ns/data/y"),
        url.replace("/ns/", "/ns2/"),
        url.replace("X-Silt-Method=GET", "X-Silt-Method=PUT"),
        url.replace("X-Silt-Expires=", "X-Silt-Expires=9"),
        url.replace("x.csv", "x.html"),
        re.sub(r"&X-Silt-Filename=[^&]+", "", url),
        url + "&X-Silt-Method=GET",  # a parameter twice
        url + "&extra=1",
        url.split("?")[0],
        url.replace("X-Silt-Expires=", "X-Silt-Expires=12345678901234"),
        url + "&X-Silt-Filename=" + "a" * 5000,
    ]
    for bad in changed:
        _refused(urls, bad)
    assert "signature" in _refused(EdgeUrls(b"another key" * 3, Clock()), url)


def test_an_imported_object_s_url_carries_the_version_its_reads_must_find() -> None:
    urls = EdgeUrls(KEY, Clock())
    version = SourceVersion(12, "0123abcd", 1_700_000_000_123_456_789)
    for address in ("local:///mnt/landing/a b.csv", "s3://landing/exports/a.csv"):
        url = urls.sign(ORIGIN, address, "GET", 60, version=version).url
        grant = urls.verify(*_request_of(url), "GET")
        assert (grant.address, grant.version) == (address, version)
        for changed in ("X-Silt-Size=12", "X-Silt-ETag=0123abcd", "X-Silt-Mtime=1700000000123456789"):
            name, value = changed.split("=")
            _refused(urls, url.replace(changed, f"{name}={value[:-1]}0"))
            _refused(urls, url.replace("&" + changed, "").replace(changed + "&", ""))
        assert urls.verify(*_request_of(urls.sign(ORIGIN, address, "GET", 60).url), "GET").version is None
    with pytest.raises(ValueError, match="not an object's address"):
        urls.sign(ORIGIN, "data/relative", "GET", 60)


def test_an_imported_object_s_url_carries_the_stores_version_of_it() -> None:
    urls = EdgeUrls(KEY, Clock())
    version = SourceVersion(12, "0123abcd", 0, "1795717416425233")  # a GCS generation
    address = "gs://landing/exports/a.csv"
    url = urls.sign(ORIGIN, address, "GET", 60, version=version).url
    assert urls.verify(*_request_of(url), "GET").version == version
    changed = "X-Silt-Source-Version=1795717416425233"
    assert changed in url
    _refused(urls, url.replace(changed, "X-Silt-Source-Version=1795717416425234"))
    _refused(urls, url.replace("&" + changed, "").replace(changed + "&", ""))
    # A URL made without one still verifies, and says it has none.
    plain = urls.sign(ORIGIN, address, "GET", 60, version=SourceVersion(12, "0123abcd", 0)).url
    assert "Source-Version" not in plain
    assert urls.verify(*_request_of(plain), "GET").version == SourceVersion(12, "0123abcd", 0)


def test_link_addresses_are_bound_to_repository_branch_and_path() -> None:
    clock = Clock()
    links = LinkAddresses(KEY, clock)
    address = links.issue("repo", "main", "dir/a.csv")
    assert re.fullmatch(r"data/[0-9a-f]{32}\.\d+\.[A-Za-z0-9_-]{43}", address)
    assert address != links.issue("repo", "main", "dir/a.csv")  # every address is new
    links.check("repo", "main", "dir/a.csv", address)
    for names in (("repo2", "main", "dir/a.csv"), ("repo", "dev", "dir/a.csv"), ("repo", "main", "dir/b.csv")):
        with pytest.raises(ApiError, match="invalid address signature"):
            links.check(*names, address)
    base, issued, signature = address.rsplit(".", 2)
    other_last = "1" if base.endswith("0") else "0"  # another name, whatever the random one ends with
    for forged in (f"{base}.{int(issued) + 1}.{signature}", f"{base[:-1]}{other_last}.{issued}.{signature}", base):
        with pytest.raises(ApiError, match="link address invalid") as refused:
            links.check("repo", "main", "dir/a.csv", forged)
        assert refused.value.status == 400
    with pytest.raises(ApiError, match="invalid address signature"):
        LinkAddresses(b"other" * 8, clock).check("repo", "main", "dir/a.csv", address)
    clock.now = NOW + LINK_VALIDITY_SECONDS
    links.check("repo", "main", "dir/a.csv", address)
    clock.now = NOW + LINK_VALIDITY_SECONDS + 1
    with pytest.raises(ApiError, match="link address expired"):
        links.check("repo", "main", "dir/a.csv", address)


def test_a_link_address_has_one_spelling() -> None:
    """Another spelling of a genuine address (a leading zero in its time, other spare bits in its
    signature's last base64 character) names another file: refused, though it decodes alike."""
    links = LinkAddresses(KEY, Clock())
    address = links.issue("repo", "main", "a.csv")
    base, issued, signature = address.rsplit(".", 2)
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    # 32 bytes in 43 characters: the last carries 4 bits and 2 spare ones.
    respelled = next(c for c in last if c != signature[-1] and last.index(c) >> 2 == last.index(signature[-1]) >> 2)
    for other in (f"{base}.0{issued}.{signature}", f"{base}.{issued}.{signature[:-1]}{respelled}"):
        with pytest.raises(ApiError, match="link address invalid"):
            links.check("repo", "main", "a.csv", other)
    links.check("repo", "main", "a.csv", address)


def test_the_edge_sends_presigned_paths_to_the_api_app() -> None:
    async def s3(*_: object) -> None: ...

    async def api(*_: object) -> None: ...

    dispatcher = Dispatcher(s3, api)
    path = "/_silt/presigned/local/ns/data/x"
    assert dispatcher.pick({"path": path, "headers": [(b"authorization", b"Basic YTpi")]}) is api
    assert dispatcher.pick({"path": path, "headers": [], "query_string": b"X-Silt-Method=GET"}) is api
    # Signed the AWS way it is S3 whatever the path; without the API the gateway answers.
    signed = {"path": path, "headers": [(b"authorization", b"AWS4-HMAC-SHA256 Credential=x")]}
    assert dispatcher.pick(signed) is s3
    assert Dispatcher(s3, None).pick({"path": path, "headers": []}) is s3
