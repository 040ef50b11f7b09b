"""The web UI shares the gateway's port: an unsigned browser `GET /` goes to the UI and UI paths
are served with its headers, while every signed S3 request, `GET /` included, stays S3."""

from __future__ import annotations

from typing import Any

import urllib3

from edge.ui.app import SECURITY_HEADERS
from tests.support.gateway_stack import GatewayStack

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def _get(gw: GatewayStack, path: str, **headers: str) -> urllib3.BaseHTTPResponse:
    return urllib3.request("GET", gw.endpoint + path, headers=headers, redirect=False, retries=False, timeout=30)


def test_a_browser_opening_the_endpoint_is_sent_to_the_ui(gw: GatewayStack) -> None:
    response = _get(gw, "/", Accept=BROWSER_ACCEPT)
    assert response.status == 302 and response.headers["Location"] == "/ui/"
    page = _get(gw, "/ui/repositories/x/objects", Accept=BROWSER_ACCEPT)
    # 200 with the bundle built, 503 naming `make ui` without: the UI's answer either way.
    assert page.status in (200, 503) and page.headers["Content-Type"].startswith("text/html")
    for name, value in SECURITY_HEADERS.items():
        assert page.headers[name] == value
    if page.status == 503:
        assert b"make ui" in page.data


def test_s3_requests_are_unaffected(gw: GatewayStack, s3: Any, bucket: str) -> None:
    # ListBuckets is a signed GET /: still S3's XML, whatever the client accepts.
    listed = s3.list_buckets()
    assert bucket in [b["Name"] for b in listed["Buckets"]]
    s3.put_object(Bucket=bucket, Key="main/ui/index.html", Body=b"data, not the UI")
    got = s3.get_object(Bucket=bucket, Key="main/ui/index.html")
    assert got["Body"].read() == b"data, not the UI"
    # An unsigned GET / that does not ask for a page is S3's anonymous refusal, not a redirect.
    refused = _get(gw, "/", Accept="*/*")
    assert refused.status == 403 and refused.headers["Content-Type"].startswith("application/xml")
