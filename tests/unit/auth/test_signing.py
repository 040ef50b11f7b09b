"""Scoped call keys: per day and audience, unrelated to SigV4's keys, and the audience of a method."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from pydantic import SecretStr

from silt.rpc.signing import audience_of, day_of, derive_call_key, sign

SECRET = SecretStr("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")


def _sigv4_key(secret: str, *parts: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in parts:
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def test_keys_differ_by_day_and_audience_and_from_sigv4() -> None:
    keys = {
        derive_call_key(SECRET, day, audience)
        for day in ("20250101", "20250102")
        for audience in ("auth", "graveler", "compactor")
    }
    assert len(keys) == 6
    # A SigV4 key whose region and service spell a call scope is still another key.
    assert _sigv4_key(SECRET.get_secret_value(), "20250101", "graveler", "silt2_request", "aws4_request") not in keys
    assert SECRET.get_secret_value().encode() not in keys


def test_the_audience_is_the_silt_package_of_the_method() -> None:
    assert audience_of("/silt.graveler.v1.GravelerService/GetRepository") == "graveler"
    assert audience_of("/silt.auth.v1.AuthService/WhoAmI") == "auth"
    with pytest.raises(ValueError):
        audience_of("/grpc.health.v1.Health/Check")


def test_the_day_is_the_utc_day_of_the_date() -> None:
    assert day_of(0) == "19700101"
    assert day_of(86_399) == "19700101" and day_of(86_400) == "19700102"


def _signature(acting: str, client_ip: str) -> str:
    return sign(b"k" * 32, "1795910400", "20261128/auth", "n" * 32, "/m", "AKIA", "d" * 64, acting, client_ip)


def test_the_acting_user_and_the_client_address_cannot_stand_for_each_other() -> None:
    # A user name that spells the client-address field, or one with a line break, signs other
    # bytes than the field it imitates.
    assert _signature("", "10.1.2.3") != _signature("client-ip=10.1.2.3", "")
    assert _signature("", "10.1.2.3") != _signature("client-ip=8:10.1.2.3", "")
    assert _signature("alice", "") != _signature("", "alice")
    assert _signature("a\nclient-ip=1:b", "") != _signature("a", "b")
    assert len({_signature(a, c) for a in ("", "a", "a\n") for c in ("", "a", "\na")}) == 9
