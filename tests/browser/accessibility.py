"""The accessibility check of the browser tests: axe-core (webui/node_modules/axe-core, the
engine browsers' own audit tools use) run in the page, WCAG 2.x A and AA rules.

Only violations axe rates serious or critical fail a test: those keep someone from using the
page at all (a control without a name, text that cannot be read against its background, a
form field without a label); moderate and minor ones are style advice.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

AXE = Path(__file__).resolve().parents[2] / "webui" / "node_modules" / "axe-core" / "axe.min.js"
FAILING_IMPACTS = ("serious", "critical")
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


@cache
def _axe_source() -> str:
    if not AXE.is_file():
        raise FileNotFoundError(f"{AXE} is missing: run `make ui` (npm ci --prefix webui)")
    return AXE.read_text()


def serious_violations(page: Page) -> list[str]:
    """The page's serious and critical violations, one line each: rule, impact, what it is
    about and the first few elements at fault."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # Evaluated by the browser's devtools protocol, which the UI's Content-Security-Policy
        # (no inline scripts, no eval) does not apply to, unlike a <script> tag.
        page.evaluate(_axe_source())
    result: dict[str, Any] = page.evaluate(
        "tags => window.axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})",
        TAGS,
    )
    found = []
    for violation in result["violations"]:
        if violation["impact"] not in FAILING_IMPACTS:
            continue
        targets = [" ".join(map(str, node["target"])) for node in violation["nodes"][:3]]
        found.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {targets}")
    return found


def assert_accessible(page: Page) -> None:
    violations = serious_violations(page)
    assert not violations, "accessibility violations:\n" + "\n".join(violations)
