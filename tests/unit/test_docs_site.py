"""The manual (mkdocs.yml over docs/) builds in strict mode, so a broken internal link or anchor
fails `make test`, and the README, its front page, stays short and links only to pages that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250


def test_the_manual_builds_strict(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        # Not --quiet: it drops the warnings below errors, and strict mode then counts none of
        # them (broken anchors went unnoticed so).
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    # The manual is opened from disk (file://), where a link to a directory shows a directory
    # listing: every page's links must name files.
    not_files = {
        f"{page.relative_to(site)} -> {href}"
        for page in site.rglob("*.html")
        if page.name != "404.html"  # served only by a web server, for a missing page
        for href in re.findall(r'href="([^"#?]+)', page.read_text())
        if "://" not in href and not href.startswith(("mailto:", "data:"))
        if not (page.parent / href).resolve().is_file()
    }
    assert not not_files, sorted(not_files)[:20]


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the manual (docs/) holds the rest"


def test_the_readme_links_into_docs_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)", text)
    missing = [target for target in targets if not (ROOT / target).is_file()]
    assert not missing, f"README.md links to missing files: {missing}"
