"""The repository-name rule, one for every layer: graveler refuses other names, the gateway
answers InvalidBucketName for them before asking anyone."""

from __future__ import annotations

import re

from silt.errors import InvalidArgument

# S3 bucket rules, minus dots: a repository is addressed as a bucket, also virtual-host style,
# where dots would break TLS wildcard certificates.
REPOSITORY_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


def is_repository_name(name: str) -> bool:
    return REPOSITORY_NAME.match(name or "") is not None


def validate_repository_name(name: str) -> str:
    if not is_repository_name(name):
        raise InvalidArgument(
            f"invalid repository name {name!r}: 3 to 63 characters of lowercase letters, digits and hyphens, "
            "starting and ending with a letter or digit"
        )
    return name
