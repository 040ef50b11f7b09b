"""graveler.endpoint / compactor.endpoint / auth.endpoint: distinct from listen addresses, never a wildcard."""

from __future__ import annotations

import pytest

from silt.config import dialable_address, dialable_host, load_config
from silt.errors import ConfigError


@pytest.mark.parametrize(
    ("listen", "dial"),
    [
        ("0.0.0.0:8102", "127.0.0.1:8102"),
        ("[::]:9", "127.0.0.1:9"),
        (":7", "127.0.0.1:7"),
        ("10.0.0.5:8102", "10.0.0.5:8102"),
    ],
)
def test_a_wildcard_listen_address_is_dialled_on_this_machine(listen: str, dial: str) -> None:
    assert dialable_address(listen) == dial
    host, _, port = listen.rpartition(":")
    assert f"{dialable_host(host)}:{port}" == dial  # the launcher dials hosts alone by the same rule


def test_the_endpoint_defaults_to_the_dialable_listen_address() -> None:
    config = load_config(
        env={"SILT_GRAVELER_LISTEN_ADDRESS": "0.0.0.0:9000", "SILT_COMPACTOR_LISTEN_ADDRESS": "0.0.0.0:9001"}
    )
    assert config.graveler.endpoint == "127.0.0.1:9000"
    assert config.compactor.endpoint == "127.0.0.1:9001"


def test_an_explicit_endpoint_is_kept_apart_from_the_listen_address() -> None:
    config = load_config(
        env={"SILT_GRAVELER_LISTEN_ADDRESS": "0.0.0.0:8102", "SILT_GRAVELER_ENDPOINT": "graveler.silt.svc:8102"}
    )
    assert config.graveler.listen_address == "0.0.0.0:8102"
    assert config.graveler.dial_address == "graveler.silt.svc:8102"


@pytest.mark.parametrize("key", ["SILT_GRAVELER_ENDPOINT", "SILT_COMPACTOR_ENDPOINT", "SILT_AUTH_ENDPOINT"])
@pytest.mark.parametrize("wildcard", ["0.0.0.0:8102", "[::]:8102", ":8102", "*:8102"])
def test_a_wildcard_endpoint_is_refused(key: str, wildcard: str) -> None:
    with pytest.raises(ConfigError, match=r"endpoint .*not a wildcard listen address"):
        load_config(env={key: wildcard})


def test_an_endpoint_without_a_port_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"graveler\.endpoint"):
        load_config(env={"SILT_GRAVELER_ENDPOINT": "graveler.silt.svc"})
