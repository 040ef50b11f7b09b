"""The web UI's list of Silt's own policies (it offers no Edit for them) is setup's list."""

from __future__ import annotations

import re
from pathlib import Path

from services.auth.setup import SILT_POLICIES

POLICIES_PAGE = Path(__file__).parents[3] / "webui/src/pages/review/admin/policies.tsx"


def test_the_ui_knows_every_policy_setup_rewrites() -> None:
    source = POLICIES_PAGE.read_text()
    listed = re.search(r"SILT_POLICIES: ReadonlySet<string> = new Set\(\[(.*?)\]\)", source, re.S)
    assert listed is not None
    assert re.findall(r'"([^"]+)"', listed.group(1)) == list(SILT_POLICIES)
