"""One gateway stack (auth, graveler, gateway as processes) for the whole gateway suite."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.gateway_stack import GatewayStack, gateway_stack


@pytest.fixture(scope="session")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("gateway-stack")) as stack:
        yield stack


@pytest.fixture(scope="session")
def gw_sigv2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    """A stack that also accepts SigV2 (off by default), for the tests of SigV2 clients."""
    overrides = {"gateways": {"s3": {"sigv2_enabled": True}}}
    with gateway_stack(tmp_path_factory.mktemp("gateway-stack-sigv2"), overrides=overrides) as stack:
        yield stack


@pytest.fixture(scope="session")
def s3(gw: GatewayStack) -> Any:
    return gw.client()


@pytest.fixture
def bucket(s3: Any) -> str:
    """A fresh repository (with branch main) per test."""
    name = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=name)
    return name
