"""The repository-name rule, one for every layer: graveler refuses other names, the gateway
answers InvalidBucketName for them before asking anyone."""

from __future__ import annotations

import re

from silt.errors import InvalidArgument

# S3's bucket rules, as a repository is addressed as a bucket: 3 to 63 characters, labels of
# lowercase letters, digits and hyphens joined by single dots, each label starting and ending
# with a letter or digit, and not an IPv4 address. As on S3, a dotted name is best used path
# style: virtual-host style, it does not match a wildcard TLS certificate.
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
REPOSITORY_NAME = re.compile(rf"(?=[a-z0-9.-]{{3,63}}\Z){_LABEL}(?:\.{_LABEL})*\Z")
_IPV4_FORM = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+\Z")


def is_repository_name(name: str) -> bool:
    return REPOSITORY_NAME.match(name or "") is not None and _IPV4_FORM.match(name) is None


def validate_repository_name(name: str) -> str:
    if not is_repository_name(name):
        raise InvalidArgument(
            f"invalid repository name {name!r}: 3 to 63 characters of lowercase letters, digits, hyphens and "
            "single dots, each dot-separated part starting and ending with a letter or digit, not an IP address"
        )
    return name
