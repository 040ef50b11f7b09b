"""The Import dialog of the object browser: a directory imported in place, its progress and its
commit, and a refused source's message, in Chromium."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.conftest import RestApi, Ui


def test_import_a_directory_from_the_objects_view(admin_page: Page, ui: Ui, rest: RestApi, ui_landing: Path) -> None:
    page = admin_page
    source = ui_landing / "exports"
    for name in ("2024/a.csv", "2024/b.csv", "readme.txt"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(f"{name}\n")
    repo = rest.create_repo()
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    page.get_by_role("button", name="Import").click()
    dialog = page.get_by_test_id("import-dialog")
    dialog.get_by_label("Source").fill("local:///etc/")
    dialog.get_by_role("button", name="Import").click()
    expect(dialog.get_by_test_id("error-note")).to_contain_text("allowed_external_prefixes")

    dialog.get_by_label("Source").fill(f"local://{source}/")
    dialog.get_by_label("Destination prefix").fill("lake/")
    dialog.get_by_label("Commit message").fill("import from the UI")
    dialog.get_by_role("button", name="Import").click()
    expect(dialog.get_by_test_id("import-status")).to_contain_text("Imported 3 objects: commit")
    ui.shot(page, "import-done")
    dialog.get_by_role("button", name="Close").click()
    expect(page.get_by_test_id("entry")).to_have_text(["lake/"])
    log = rest.ok("GET", f"/repositories/{repo}/refs/main/commits")
    assert log["results"][0]["message"] == "import from the UI"
    stat = rest.ok("GET", f"/repositories/{repo}/refs/main/objects/stat?path=lake/2024/a.csv")
    assert stat["physical_address"] == f"local://{source}/2024/a.csv"
