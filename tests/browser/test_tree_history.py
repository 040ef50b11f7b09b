"""Reviewing data in Chromium: a diff as a tree of folders (expand, collapse, totals, filter), a
path's history with its diff links, the last change of an object, a tag browsed read-only,
revert and cherry-pick from a commit's page, and copying a path's URIs."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import BrowserContext, Locator, Page, expect

from tests.browser.conftest import SCREENSHOTS, RestApi, Ui
from tests.support.gateway_stack import GatewayStack


def _put(s3: Any, repo: str, branch: str, key: str, body: bytes) -> None:
    s3.put_object(Bucket=repo, Key=f"{branch}/{key}", Body=body)


def _commit(rest: RestApi, repo: str, branch: str, message: str) -> dict[str, Any]:
    commit: dict[str, Any] = rest.ok("POST", f"/repositories/{repo}/branches/{branch}/commits", {"message": message})
    return commit


def _branch(rest: RestApi, repo: str, name: str, source: str = "main") -> None:
    response = rest.call("POST", f"/repositories/{repo}/branches", {"name": name, "source": source})
    assert response.status == 201, response.data


def _rows(page: Page) -> Locator:
    return page.get_by_test_id("compare-diff").locator("tbody tr")


def _query(link: Locator) -> dict[str, list[str]]:
    return parse_qs(urlsplit(link.get_attribute("href") or "").query)


def test_compare_shows_the_diff_as_a_tree_with_totals_and_a_filter(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    _put(s3, repo, "main", "top.txt", b"top")
    _put(s3, repo, "main", "data/x.txt", b"x")
    _commit(rest, repo, "main", "base")
    _branch(rest, repo, "dev")
    for key in ("data/2024/a.csv", "data/2024/b.csv", "data/2025/c.csv"):
        _put(s3, repo, "dev", key, b"1,2\n")
    _put(s3, repo, "dev", "data/x.txt", b"x changed")
    s3.delete_object(Bucket=repo, Key="dev/top.txt")
    _commit(rest, repo, "dev", "dev work")

    page.goto(ui.url(f"/repositories/{repo}/compare?base=main&compare=dev"))
    expect(page.get_by_test_id("tree-totals")).to_contain_text("5 changes: 3 added (12 B), 1 removed (3 B), 1 changed")
    expect(_rows(page)).to_have_count(2)
    data = page.get_by_test_id("tree-folder").filter(has_text="data/")
    expect(data).to_contain_text("+3 (12 B)")
    expect(data).to_contain_text("~1")

    page.get_by_role("button", name="Expand data/", exact=True).click()
    expect(_rows(page)).to_have_count(5)  # data/, 2024/, 2025/, x.txt, top.txt
    page.get_by_role("button", name="Expand data/2024/").click()
    expect(_rows(page)).to_have_count(7)
    link = page.get_by_test_id("tree-object").filter(has_text="a.csv").get_by_test_id("tree-object-link")
    # What dev changed since it left main, as the tree counts it (three-dot).
    assert _query(link) == {"left": ["main"], "right": ["dev"], "path": ["data/2024/a.csv"], "type": ["three_dot"]}
    assert urlsplit(link.get_attribute("href") or "").path == f"/ui/repositories/{repo}/diff"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "changes-tree.png"), full_page=True)

    page.get_by_role("button", name="Collapse data/", exact=True).click()
    expect(_rows(page)).to_have_count(2)

    page.get_by_test_id("tree-filter").fill("b.csv")
    expect(page.get_by_test_id("tree-totals")).to_contain_text("1 change: 1 added")
    expect(_rows(page)).to_have_count(1)
    page.get_by_role("button", name="Expand data/", exact=True).click()
    page.get_by_role("button", name="Expand data/2024/").click()
    expect(page.get_by_test_id("tree-object")).to_have_count(1)
    expect(page.get_by_test_id("tree-object")).to_contain_text("b.csv")
    ui.shot(page, "filtered")


def test_object_history_links_each_change_to_its_diff(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    commits = []
    for n, body in enumerate((b"one", b"two!", b"three")):
        _put(s3, repo, "main", "t/data.csv", body)
        commits.append(_commit(rest, repo, "main", f"version {n + 1}"))
        _put(s3, repo, "main", f"other-{n}.txt", b"o")
        _commit(rest, repo, "main", f"other {n}")

    # The listing and the object's page show the last change.
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main&path=t/"))
    expect(page.locator("tr", has_text="data.csv")).to_contain_text("version 3")
    page.goto(ui.url(f"/repositories/{repo}/object?ref=main&path=t/data.csv"))
    expect(page.get_by_test_id("last-change")).to_contain_text("version 3")
    page.get_by_test_id("history-link").click()

    rows = page.get_by_test_id("object-history").locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("version 3")
    expect(rows.nth(2)).to_contain_text("version 1")
    expect(rows.nth(0).get_by_test_id("stat-at")).to_contain_text("5 B")
    expect(rows.nth(1).get_by_test_id("stat-at")).to_contain_text("4 B")
    newest = rows.nth(0).get_by_test_id("diff-with-previous")
    third = commits[2]
    assert _query(newest) == {"left": [third["parents"][0]], "right": [third["id"]], "path": ["t/data.csv"]}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "object-history.png"), full_page=True)


def test_a_tag_is_browsed_read_only(admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str) -> None:
    page = admin_page
    _put(ui_stack.client(), repo, "main", "d/kept.txt", b"kept")
    _commit(rest, repo, "main", "tagged")
    rest.ok("POST", f"/repositories/{repo}/tags", {"id": "v1", "ref": "main"})
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=v1&path=d/"))
    expect(page.get_by_test_id("read-only")).to_contain_text("v1 is not a branch")
    expect(page.get_by_test_id("entry")).to_have_text(["kept.txt"])
    expect(page.get_by_role("button", name="Upload")).to_have_count(0)
    expect(page.get_by_role("button", name="Import")).to_have_count(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "browse-tag.png"), full_page=True)
    page.get_by_test_id("entry").click()
    expect(page.get_by_test_id("object-name")).to_have_text("kept.txt")
    expect(page.get_by_test_id("read-only")).to_be_visible()
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)


def test_revert_and_cherry_pick_from_the_commit_page(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    _put(s3, repo, "main", "base.txt", b"base")
    _commit(rest, repo, "main", "base")
    _branch(rest, repo, "dev")
    _branch(rest, repo, "guarded")
    _put(s3, repo, "main", "fix.txt", b"fix")
    fix = _commit(rest, repo, "main", "the fix")

    page.goto(ui.url(f"/repositories/{repo}/commits/{fix['id']}"))
    page.get_by_test_id("cherry-pick-button").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_contain_text("the fix")
    dialog.get_by_test_id("action-branch").select_option("dev")
    dialog.get_by_role("button", name="Cherry-pick").click()
    expect(page.get_by_test_id("commit-action-done")).to_contain_text("Cherry-picked onto dev")
    assert s3.get_object(Bucket=repo, Key="dev/fix.txt")["Body"].read() == b"fix"

    # A protected branch refuses: the dialog says so, names the rule, links to the settings, and
    # stays open; a revert the same.
    protected = rest.call("PUT", f"/repositories/{repo}/settings/branch_protection", [{"pattern": "guard*"}])
    assert protected.status == 204, protected.data
    for action, button in (("cherry-pick-button", "Cherry-pick"), ("revert-button", "Revert")):
        page.get_by_test_id(action).click()
        dialog.get_by_test_id("action-branch").select_option("guarded")
        # Named before anyone tries; the server's refusal is named the same way.
        expect(dialog.get_by_test_id("target-protected").get_by_test_id("protected-rule")).to_have_text("guard*")
        dialog.get_by_role("button", name=button).click()
        note = dialog.get_by_test_id("error-note")
        expect(note).to_contain_text("Refused by branch protection")
        expect(note.get_by_test_id("refusal-rule")).to_have_text("guard*")
        expect(note.get_by_test_id("refusal-settings")).to_have_attribute(
            "href", f"/ui/repositories/{repo}/settings#branch-protection"
        )
        ui.shot(page, f"{button}-refused")
        dialog.get_by_role("button", name="Cancel").click()

    page.get_by_test_id("revert-button").click()
    dialog.get_by_test_id("action-branch").select_option("main")
    dialog.get_by_role("button", name="Revert").click()
    expect(page.get_by_test_id("commit-action-done")).to_contain_text("Reverted onto main")
    listed = rest.ok("GET", f"/repositories/{repo}/refs/main/objects/ls")["results"]
    assert [entry["path"] for entry in listed] == ["base.txt"]


def test_copy_uris_of_an_object(
    admin_page: Page, context: BrowserContext, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page = admin_page
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=ui_stack.endpoint)
    _put(ui_stack.client(), repo, "main", "dir/file name.csv", b"a,b")
    page.goto(ui.url(f"/repositories/{repo}/object?ref=main&path=dir/file name.csv"))
    copies = page.get_by_test_id("object-name").locator("..").get_by_test_id("copy-uris")
    copies.get_by_test_id("copy-toggle").click()
    copies.get_by_test_id("copy-lakefs").click()
    expect(copies.get_by_role("status")).to_contain_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == f"lakefs://{repo}/main/dir/file name.csv"
    copies.get_by_test_id("copy-s3").click()
    assert page.evaluate("navigator.clipboard.readText()") == f"s3://{repo}/main/dir/file name.csv"
    copies.get_by_test_id("copy-http").click()
    assert page.evaluate("navigator.clipboard.readText()") == f"{ui_stack.endpoint}/{repo}/main/dir/file%20name.csv"
    # Escape closes the menu (focus is on the button just clicked) and gives focus back to its toggle.
    toggle = copies.get_by_test_id("copy-toggle")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("Escape")
    expect(copies.get_by_test_id("copy-http")).to_have_count(0)
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()
    # A click elsewhere closes it too.
    toggle.click()
    expect(copies.get_by_test_id("copy-http")).to_be_visible()
    page.get_by_test_id("object-name").click()
    expect(copies.get_by_test_id("copy-http")).to_have_count(0)
    # A listing row copies its own path; a closed menu is not in the page (one per row would be).
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main&path=dir/"))
    expect(page.get_by_test_id("copy-toggle").first).to_be_visible()
    expect(page.locator(".copy-menu")).to_have_count(0)
    row = page.locator("tr", has_text="file name.csv").get_by_test_id("copy-uris")
    row.get_by_test_id("copy-toggle").click()
    row.get_by_test_id("copy-s3").click()
    expect(row.get_by_role("status")).to_contain_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == f"s3://{repo}/main/dir/file name.csv"
