"""A new user's first steps in Chromium: with no repository to see, the list offers a sample
repository, created through the form's "add sample data" option without a storage namespace;
then files dropped onto a directory listing upload one by one with progress bars, and the
listing shows them."""

from __future__ import annotations

import secrets

from playwright.sync_api import Page, expect

from tests.browser.conftest import SCREENSHOTS, RestApi, Ui


def _shot(page: Page, name: str) -> None:
    """The screenshot the feature is reviewed by, at test-output/ui/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_a_user_with_no_repositories_creates_the_sample(page: Page, ui: Ui, rest: RestApi) -> None:
    # Rights over repositories named fr-<tag>-* only: the shared stack's others stay out of sight.
    tag = secrets.token_hex(3)
    user, policy, name = f"newbie-{tag}", f"first-run-{tag}", f"fr-{tag}-sample"
    statement = [{"effect": "allow", "action": ["CreateRepo", "ReadRepo", "WriteRepo"], "resource": f"fr-{tag}-*"}]
    rest.ok("POST", "/auth/policies", {"id": policy, "statement": statement})
    creds = rest.create_user(name=user)
    rest.ok("PUT", f"/auth/users/{user}/policies/{policy}")
    ui.login(page, creds)

    first_run = page.get_by_test_id("first-run")
    expect(first_run).to_contain_text("No repositories yet")
    first_run.get_by_test_id("create-sample").click()
    form = page.get_by_test_id("create-repository")
    expect(form.get_by_label("Name", exact=True)).to_have_value("sample-repo")
    expect(form.get_by_label("Add sample data")).to_be_checked()
    # The server places repositories itself (GET /config), so the namespace may stay empty.
    expect(form.get_by_text("Storage namespace (optional)")).to_be_visible()
    form.get_by_label("Name", exact=True).fill(name)
    _shot(page, "first-run")
    form.get_by_role("button", name="Create").click()

    entries = page.get_by_test_id("entry")
    expect(entries).to_have_text(["README.md", "tables/"], timeout=30_000)
    commits = rest.ok("GET", f"/repositories/{name}/refs/main/commits")["results"]
    assert [c["message"] for c in commits][:2] == ["Add the orders of March", "Add customers and products"]
    pulls = rest.ok("GET", f"/repositories/{name}/pulls?status=open")["results"]
    assert [p["source_branch"] for p in pulls] == ["raise-prices"]


_DROP = """([files]) => {
  const transfer = new DataTransfer();
  for (const [name, text] of files) transfer.items.add(new File([text], name, { type: "text/plain" }));
  const zone = document.querySelector('[data-testid="drop-zone"]');
  zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: transfer, bubbles: true, cancelable: true }));
  zone.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
}"""


def test_files_dropped_on_the_listing_upload_with_progress(admin_page: Page, ui: Ui, rest: RestApi, repo: str) -> None:
    page = admin_page
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    expect(page.get_by_test_id("drop-zone")).to_be_visible()
    # Two files at once; the second large enough for progress events on the way.
    files = [["small.txt", "hello\n"], ["large.txt", "x" * 3_000_000]]
    page.evaluate(_DROP, [files])
    items = page.get_by_test_id("upload-item")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("small.txt")
    expect(items.nth(1).locator("progress")).to_be_visible()
    expect(page.locator('[data-testid="upload-item"][data-state="done"]')).to_have_count(2, timeout=30_000)
    expect(items.nth(1)).to_contain_text("uploaded")
    # The listing was refreshed with both.
    expect(page.get_by_test_id("entry")).to_have_text(["large.txt", "small.txt"])
    _shot(page, "upload-progress")
    listed = sorted(o["path"] for o in rest.ok("GET", f"/repositories/{repo}/refs/main/objects/ls")["results"])
    assert listed == ["large.txt", "small.txt"]

    # A refused file says why, beside it; the others still go up.
    rest.ok("PUT", f"/repositories/{repo}/settings/branch_protection", [{"pattern": "main"}])
    page.evaluate(_DROP, [[["blocked.txt", "no"]]])
    failed = page.locator('[data-testid="upload-item"][data-state="failed"]')
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("blocked.txt")
    expect(failed.locator(".upload-status")).not_to_be_empty()
