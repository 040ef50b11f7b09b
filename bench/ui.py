"""`make bench-ui`: the web UI's page times in Chromium (Playwright), one JSON object per line.

A repository with 240,000 objects staged on main (staged in process, as bench.api does: staging
is not what is measured), 1,000 of them in one directory. Measured, median of --rounds fresh
page loads each, signed in (the session cookie) and with the bundle cached as a returning user
has it:

- `load`: the navigation's loadEventEnd (the browser `load` event). Target 500 ms.
- `ready`: until the page shows its data (the listing's rows), which comes after `load` as the
  page calls the API. Also held to 500 ms.
- `listing_call`: of that, the API's `/objects/ls` call alone.

Pages: the repository page (its root directory on main), the 1,000-entry directory page, and a
pull request whose diff has 10,000 paths (target 1 s; the page shows its first 100 and the
merge status), and the compare page of a branch with 100,000 added objects in nested folders
(target 300 ms until the tree's totals and first folder show). Its first load builds the diff's
tree on the server (`..._cold`, one sample); later loads answer from the API's cache of
commit-to-commit trees (`..._warm`, the median of --rounds). Needs the bundle (`make ui`) and
Debian's chromium.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from bench.api import _graveler
from bench.graveler import entry_for, stage_in_process
from bench.report import emit
from edge.ui.app import DIST
from silt.graveler.v1 import model_pb2 as pb
from tests.support.gateway_stack import GatewayStack, gateway_stack

REPO = "bench-ui"
DIRECTORY = "dir1000/"
DIRECTORY_SIZE = 1_000
PULL_SOURCE = "pr-10k"
PULL_PATHS = 10_000
# The pull request's changes are a tree: ready once its first folder (with its totals) shows.
PULL_ROWS_SHOWN = 1
PULL_TARGET_S = 1.0
COMPARE_BRANCH = "cmp-100k"
COMPARE_TARGET_S = 0.3
CHROMIUM = "/usr/bin/chromium-headless-shell"  # what scripts/ensure-system-deps.sh installs, as the browser tests use
TARGET_S = 0.5
TIMEOUT_MS = 60_000


def _stage(gw: GatewayStack, count: int, compare_changes: int) -> str:
    """Stage the objects; return the id of a pull request whose diff has PULL_PATHS paths."""
    gw.client().create_bucket(Bucket=REPO)
    with _graveler(gw) as graveler:
        # The compared branch adds compare_changes keys (28 date= folders) to main's first commit.
        graveler.create_branch(REPO, COMPARE_BRANCH, "main")
        stage_in_process(graveler, REPO, COMPARE_BRANCH, compare_changes, offset=2 * count)
        graveler.commit(REPO, COMPARE_BRANCH, f"{compare_changes} new objects", committer="bench")
        # The pull request's source branches off main's first commit and changes PULL_PATHS keys.
        graveler.create_branch(REPO, PULL_SOURCE, "main")
        stage_in_process(graveler, REPO, PULL_SOURCE, PULL_PATHS, offset=count)
        graveler.commit(REPO, PULL_SOURCE, f"{PULL_PATHS} new objects", committer="bench")
        repo = graveler.refs.repository(REPO)
        pull = graveler.pulls.create(repo, f"{PULL_PATHS} paths", "bench", PULL_SOURCE, "main", "admin")
        stage_in_process(graveler, REPO, "main", count - DIRECTORY_SIZE)
        for i in range(DIRECTORY_SIZE):
            entry: pb.Entry = entry_for(i)
            graveler.stage_entry(REPO, "main", f"{DIRECTORY}part-{i:05d}.parquet", entry)
        return str(pull.id)


def _login(page: Page, gw: GatewayStack) -> None:
    page.goto(gw.endpoint + "/ui/")
    page.get_by_label("Access key ID").fill(gw.admin.access_key_id)
    page.get_by_label("Secret access key").fill(gw.admin.secret_access_key.get_secret_value())
    page.get_by_role("button", name="Log in").click()
    page.get_by_test_id("whoami").wait_for()


def _measure(page: Page, url: str, rows: int, row_id: str = "entry", call: str = "/objects/ls") -> tuple[float, ...]:
    """(load, ready, the data call) in seconds for one fresh navigation to url: ready when rows
    elements with data-testid row_id are shown; the data call is the slowest request with call
    in its URL."""
    page.goto("about:blank")
    page.goto(url, wait_until="load")
    page.wait_for_function(
        "([id, n]) => document.querySelectorAll(`[data-testid=${id}]`).length >= n",
        arg=[row_id, rows],
        timeout=TIMEOUT_MS,
    )
    ready_ms = page.evaluate("performance.now()")
    load_ms = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    call_ms = page.evaluate(
        "c => Math.max(...performance.getEntriesByType('resource')"
        ".filter(e => e.name.includes(c)).map(e => e.duration))",
        call,
    )
    return load_ms / 1000, ready_ms / 1000, call_ms / 1000


def bench_compare(page: Page, gw: GatewayStack, rounds: int, changes: int) -> None:
    """The compare page of `changes` added objects: cold (the server builds the tree) once, then warm."""
    url = f"{gw.endpoint}/ui/repositories/{REPO}/compare?base=main&compare={COMPARE_BRANCH}"
    name = f"ui.compare_{changes}_changes_page"
    cold = _measure(page, url, 1, "tree-folder", "/summary")
    emit(f"{name}_cold_ready", cold[1], "s", COMPARE_TARGET_S)
    emit(f"{name}_cold_summary_call", cold[2], "s", None)
    samples = [_measure(page, url, 1, "tree-folder", "/summary") for _ in range(rounds)]
    emit(f"{name}_warm_load", statistics.median(s[0] for s in samples), "s", COMPARE_TARGET_S)
    emit(f"{name}_warm_ready", statistics.median(s[1] for s in samples), "s", COMPARE_TARGET_S)
    emit(f"{name}_warm_summary_call", statistics.median(s[2] for s in samples), "s", None)


def bench_pages(gw: GatewayStack, rounds: int, pull_id: str, compare_changes: int, only_compare: bool = False) -> None:
    pages: dict[str, tuple[str, int, str, str, float]] = {
        "repository_page": (
            f"{gw.endpoint}/ui/repositories/{REPO}/objects?ref=main",
            2,
            "entry",
            "/objects/ls",
            TARGET_S,
        ),
        "directory_1000_page": (
            f"{gw.endpoint}/ui/repositories/{REPO}/objects?ref=main&path={DIRECTORY}",
            DIRECTORY_SIZE,
            "entry",
            "/objects/ls",
            TARGET_S,
        ),
        "pull_request_10000_paths_page": (
            f"{gw.endpoint}/ui/repositories/{REPO}/pulls/{pull_id}",
            PULL_ROWS_SHOWN,
            "tree-folder",
            "/diff",
            PULL_TARGET_S,
        ),
    }
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            _login(page, gw)
            if compare_changes:
                bench_compare(page, gw, rounds, compare_changes)
            for name, (url, rows, row_id, call, target) in ({} if only_compare else pages).items():
                _measure(page, url, rows, row_id, call)  # warm: the bundle cached, the connection open
                samples = [_measure(page, url, rows, row_id, call) for _ in range(rounds)]
                emit(f"ui.{name}_load", statistics.median(s[0] for s in samples), "s", target)
                emit(f"ui.{name}_ready", statistics.median(s[1] for s in samples), "s", target)
                # Of which the API's data call (what the page waits for after `load`).
                emit(f"ui.{name}_data_call", statistics.median(s[2] for s in samples), "s", None)
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=240_000, help="objects staged on main")
    parser.add_argument("--compare-changes", type=int, default=100_000, help="changes of the compared branch")
    parser.add_argument("--only-compare", action="store_true", help="measure the compare page only")
    parser.add_argument("--rounds", type=int, default=5, help="page loads per page; the median counts")
    args = parser.parse_args()
    if not (DIST / "index.html").is_file():
        parser.error(f"the web UI is not built ({DIST}): run `make ui`")
    with (
        tempfile.TemporaryDirectory(prefix="silt-bench-ui-") as tmp,
        gateway_stack(Path(tmp) / "stack") as gw,
    ):
        pull_id = _stage(gw, args.count, args.compare_changes)
        bench_pages(gw, args.rounds, pull_id, args.compare_changes, args.only_compare)


if __name__ == "__main__":
    main()
