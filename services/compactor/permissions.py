"""What each CompactorService call needs: compacting a branch rewrites what its reads go
through, as a commit does, so it needs what committing needs; reading the state needs what
reading the branch needs (graveler's table, docs/design/auth.md)."""

from __future__ import annotations

from services.graveler.permissions import TABLE as GRAVELER_TABLE
from silt.rpc.interceptor import Require, Rule, repository_field

SERVICE = "silt.compactor.v1.CompactorService"

TABLE: dict[str, tuple[str, str]] = {
    "Compact": GRAVELER_TABLE["Commit"],
    "Trigger": GRAVELER_TABLE["Commit"],
    "GetStatus": GRAVELER_TABLE["GetBranch"],
}

RULES: dict[str, Rule] = {
    f"/{SERVICE}/{method}": Require(action, repository_field(name)) for method, (action, name) in TABLE.items()
}
