"""What each CompactorService call needs: compacting a branch rewrites what its reads go
through, as a commit does, so it needs what committing needs; reading the state needs what
reading the branch needs (as graveler's table says for Commit and GetBranch, docs/design/auth.md)."""

from __future__ import annotations

from silt.iam_actions import READ_REPO, WRITE_REPO
from silt.rpc.interceptor import Require, Rule, repository_field

SERVICE = "silt.compactor.v1.CompactorService"

TABLE: dict[str, tuple[str, str]] = {
    "Compact": (WRITE_REPO, "repository"),
    "Trigger": (WRITE_REPO, "repository"),
    "GetStatus": (READ_REPO, "repository"),
}

RULES: dict[str, Rule] = {
    f"/{SERVICE}/{method}": Require(action, repository_field(name)) for method, (action, name) in TABLE.items()
}
