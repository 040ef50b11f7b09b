"""S3 signatures checked by auth (services/auth/signatures.py), against the worked examples in
AWS's documentation, and the limits of what auth agrees to check."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from services.auth import signatures
from silt.errors import InvalidArgument

SECRET = SecretStr("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
WHEN = datetime(2013, 5, 24, 0, 0, 30, tzinfo=UTC)
# "Example: GET Object" of AWS's "Signature Calculations for the Authorization Header".
V4_STRING = (
    b"AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
    b"7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
)
V4_SIGNATURE = b"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
# "Example Object GET" of AWS's SigV2 documentation ("Signing and authenticating REST requests").
V2_STRING = b"GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg"
V2_SIGNATURE = b"qgk2+6Sv9/oM7G3qLEjTH1a1l1g="


def test_v4_returns_the_scope_key_for_a_matching_signature_only() -> None:
    key = signatures.verify_v4(SECRET, [V4_STRING], V4_SIGNATURE, "20130524", "us-east-1", "s3", WHEN)
    assert key == signatures.v4_signing_key(SECRET, "20130524", "us-east-1", "s3")
    wrong = SecretStr("x" * 40)
    assert signatures.verify_v4(wrong, [V4_STRING], V4_SIGNATURE, "20130524", "us-east-1", "s3", WHEN) is None


def test_v4_checks_only_request_strings_of_the_claimed_scope() -> None:
    """A key is handed out for a request's string to sign of that very scope, nothing else."""
    chunk = b"AWS4-HMAC-SHA256-PAYLOAD\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\nx\ny\nz"
    for strings, region in (([chunk], "us-east-1"), ([V4_STRING], "eu-west-1"), ([b"anything"], "us-east-1")):
        with pytest.raises(InvalidArgument):
            signatures.verify_v4(SECRET, strings, V4_SIGNATURE, "20130524", region, "s3", WHEN)


@pytest.mark.parametrize(
    ("day", "region", "service"),
    [("20130514", "us-east-1", "s3"), ("20130526", "us-east-1", "s3"), ("2013052x", "us-east-1", "s3"),
     ("20130524", "r" * 33, "s3"), ("20130524", "us-east-1", "s3/x")],
)  # fmt: skip
def test_v4_scopes_must_be_recent_and_short(day: str, region: str, service: str) -> None:
    with pytest.raises(InvalidArgument):
        signatures.check_v4_scope(day, region, service, WHEN)


def test_v2_is_the_hmac_of_the_secret() -> None:
    assert signatures.verify_v2(SECRET, [b"another form", V2_STRING], V2_SIGNATURE)
    assert not signatures.verify_v2(SECRET, [V2_STRING + b"x"], V2_SIGNATURE)


def test_what_auth_agrees_to_check_is_bounded() -> None:
    with pytest.raises(InvalidArgument):
        signatures.verify_v2(SECRET, [V2_STRING] * 5, V2_SIGNATURE)
    with pytest.raises(InvalidArgument):
        signatures.verify_v2(SECRET, [b"x" * (signatures.MAX_STRING_TO_SIGN_BYTES + 1)], V2_SIGNATURE)
    with pytest.raises(InvalidArgument):
        signatures.verify_v2(SECRET, [], V2_SIGNATURE)


def test_call_keys_are_for_yesterday_today_or_tomorrow_only() -> None:
    for day in ("20130523", "20130524", "20130525"):
        signatures.check_call_scope(day, "graveler", WHEN)
    for day, audience in (("20130522", "graveler"), ("20130526", "graveler"), ("20130524", "Graveler/x")):
        with pytest.raises(InvalidArgument):
            signatures.check_call_scope(day, audience, WHEN)


def test_call_keys_are_for_graveler_and_the_compactor_only() -> None:
    """Never for auth (its holder would sign IAM calls as anyone) nor for s3."""
    signatures.check_call_scope("20130524", "compactor", WHEN)
    for audience in ("auth", "s3", "gateway", ""):
        with pytest.raises(InvalidArgument, match="no call keys"):
            signatures.check_call_scope("20130524", audience, WHEN)


def test_v4_scopes_name_s3_or_the_catalogs_service_only() -> None:
    assert signatures.check_v4_scope("20130524", "us-east-1", "s3", WHEN) == "20130524/us-east-1/s3/aws4_request"
    assert signatures.check_v4_scope("20130524", "eu-west-1", "execute-api", WHEN).endswith("/execute-api/aws4_request")
    for service in ("iam", "sts", "S3", "s3x", "execute-apix"):
        with pytest.raises(InvalidArgument, match="is not 's3' or 'execute-api'"):
            signatures.check_v4_scope("20130524", "us-east-1", service, WHEN)
