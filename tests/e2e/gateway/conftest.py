"""One gateway stack (auth, graveler, gateway as processes) for the whole gateway suite."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from edge.gateway.app import GatewayApp
from silt.config import load_config
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.in_process import served_in_process

# The stack's dependency checks, for its readiness endpoint (test_readiness.py): often, and a
# short timeout, so that a paused graveler shows within a second. Only /_silt/health/ready
# answers from them; nothing else the suite does with the stack depends on them.
HEALTH_INTERVAL_S = 0.3
HEALTH_TIMEOUT_S = 1.0


@pytest.fixture(scope="session")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    telemetry = {"health_check_interval_seconds": HEALTH_INTERVAL_S, "health_check_timeout_seconds": HEALTH_TIMEOUT_S}
    with gateway_stack(tmp_path_factory.mktemp("gateway-stack"), overrides={"telemetry": telemetry}) as stack:
        yield stack


OTHER_REGION = "eu-west-1"


@pytest.fixture(scope="session")
def gw_eu_sigv4_only(gw: GatewayStack) -> Iterator[GatewayStack]:
    """The stack behind a second gateway configured otherwise than the defaults, served in this
    process (the real app and Backend, against the stack's auth and graveler): region eu-west-1,
    and `gateways.s3.sigv2_enabled: false`. Settings that differ cost no stack of their own."""
    env = {
        **gw.stack._services["gateway"].env,
        "SILT_GATEWAYS_S3_SIGV2_ENABLED": "false",
        "SILT_GATEWAYS_S3_REGION": OTHER_REGION,
    }
    config = load_config(gw.stack.config_path, env=env)
    assert config.gateways.s3.sigv2_enabled is False and config.gateways.s3.region == OTHER_REGION
    with served_in_process(GatewayApp(config), "the in-process gateway to start") as endpoint:
        yield dataclasses.replace(gw, endpoint=endpoint, region=OTHER_REGION)


@pytest.fixture(scope="session")
def s3(gw: GatewayStack) -> Any:
    return gw.client()


@pytest.fixture
def bucket(s3: Any) -> str:
    """A fresh repository (with branch main) per test."""
    name = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=name)
    return name
