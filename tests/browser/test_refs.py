"""The web UI's refs pages, driven in Chromium: uncommitted changes with commit and reset,
history and a commit's page, branches, tags, compare and merge with conflicts, and a read-only
user refused on every write control."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import RestApi, Ui
from tests.support.gateway_stack import GatewayStack

# The refs pages ask the API for this many rows at a time (webui/src/pages/refs/model.ts).
PAGE_SIZE = 50


def _put(s3: Any, repo: str, branch: str, key: str, body: bytes) -> None:
    s3.put_object(Bucket=repo, Key=f"{branch}/{key}", Body=body)


def _commit(rest: RestApi, repo: str, branch: str, message: str, allow_empty: bool = False) -> dict[str, Any]:
    body = {"message": message, "allow_empty": allow_empty}
    commit: dict[str, Any] = rest.ok("POST", f"/repositories/{repo}/branches/{branch}/commits", body)
    return commit


def _branch(rest: RestApi, repo: str, name: str, source: str = "main") -> None:
    # Answered as text (the new branch's commit id), which RestApi.ok would read as JSON.
    response = rest.call("POST", f"/repositories/{repo}/branches", {"name": name, "source": source})
    assert response.status == 201, response.data


def _head(rest: RestApi, repo: str, branch: str) -> str:
    head: str = rest.ok("GET", f"/repositories/{repo}/branches/{branch}")["commit_id"]
    return head


def _rows(page: Page, test_id: str) -> Locator:
    return page.get_by_test_id(test_id).locator("tbody tr")


def _row(page: Page, test_id: str, text: str) -> Locator:
    return _rows(page, test_id).filter(has_text=text)


def test_commit_with_metadata_and_reset_from_the_changes_page(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    for key in ("keep.csv", "drop.csv", "dir/one.txt"):
        _put(s3, repo, "main", key, b"x,y\n1,2\n")
    page.goto(ui.url(f"/repositories/{repo}/changes?ref=main"))
    expect(_rows(page, "changes-table")).to_have_count(3)
    ui.shot(page, "changes")

    page.get_by_role("button", name="Reset drop.csv").click()
    expect(_rows(page, "changes-table")).to_have_count(2)
    expect(_row(page, "changes-table", "drop.csv")).to_have_count(0)
    ui.shot(page, "after-reset")

    page.get_by_label("Commit message").fill("load the keep table")
    page.get_by_role("button", name="Add metadata").click()
    page.get_by_label("metadata key").fill("owner")
    page.get_by_label("metadata value").fill("data-team")
    page.get_by_role("button", name="Commit changes").click()
    expect(page.get_by_test_id("committed")).to_contain_text("load the keep table")
    expect(page.get_by_text("No uncommitted changes.")).to_be_visible()
    ui.shot(page, "committed")

    head = rest.ok("GET", f"/repositories/{repo}/commits/main")
    assert head["message"] == "load the keep table" and head["metadata"] == {"owner": "data-team"}
    listed = rest.ok("GET", f"/repositories/{repo}/refs/main/objects/ls")["results"]
    assert [entry["path"] for entry in listed] == ["dir/one.txt", "keep.csv"]

    # Reset everything, after saying yes.
    _put(s3, repo, "main", "late.txt", b"late")
    _put(s3, repo, "main", "later.txt", b"later")
    page.reload()
    expect(_rows(page, "changes-table")).to_have_count(2)
    page.get_by_role("button", name="Reset all changes").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_contain_text("Reset all uncommitted changes on main?")
    ui.shot(page, "reset-all-confirm")
    dialog.get_by_role("button", name="Reset all").click()
    expect(page.get_by_text("No uncommitted changes.")).to_be_visible()
    assert rest.ok("GET", f"/repositories/{repo}/branches/main/diff")["results"] == []


def test_history_pages_through_the_log_and_a_commit_page_shows_its_diff(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    _put(s3, repo, "main", "changed.txt", b"before")
    _put(s3, repo, "main", "removed.txt", b"bye")
    base = _commit(rest, repo, "main", "base data")
    for n in range(PAGE_SIZE):
        _commit(rest, repo, "main", f"empty {n}", allow_empty=True)
    _put(s3, repo, "main", "changed.txt", b"after!")
    s3.delete_object(Bucket=repo, Key="main/removed.txt")
    _put(s3, repo, "main", "added/new.txt", b"new")
    last = _commit(rest, repo, "main", "the interesting one")
    total = PAGE_SIZE + 3  # and the repository's first commit

    page.goto(ui.url(f"/repositories/{repo}/commits?ref=main"))
    expect(_rows(page, "commit-log")).to_have_count(PAGE_SIZE)
    expect(_rows(page, "commit-log").first).to_contain_text("the interesting one")
    ui.shot(page, "history-first-page")
    page.get_by_test_id("load-more").click()
    expect(_rows(page, "commit-log")).to_have_count(total)
    expect(page.get_by_test_id("load-more")).to_have_count(0)
    expect(_row(page, "commit-log", "base data")).to_have_count(1)
    ui.shot(page, "history-all")

    _rows(page, "commit-log").first.get_by_role("link").click()
    expect(page.get_by_test_id("commit-id")).to_have_text(last["id"])
    diff = _rows(page, "commit-diff")
    # A tree: the folder added/ with its count, expanded to show what it holds.
    expect(diff).to_have_count(3)
    expect(diff.nth(0)).to_contain_text("added/")
    expect(diff.nth(0)).to_contain_text("+1")
    page.get_by_role("button", name="Expand added/").click()
    expect(diff).to_have_count(4)
    expect(diff.nth(1)).to_contain_text("added")
    expect(diff.nth(1)).to_contain_text("new.txt")
    expect(diff.nth(2)).to_contain_text("changed")
    expect(diff.nth(2)).to_contain_text("changed.txt")
    expect(diff.nth(3)).to_contain_text("removed")
    expect(diff.nth(3)).to_contain_text("removed.txt")
    ui.shot(page, "commit-page")

    # The parent is a link to its own page; the base commit's diff is what it added.
    page.get_by_test_id("commit-parents").get_by_role("link").click()
    expect(page.get_by_test_id("commit-id")).to_have_text(last["parents"][0])
    expect(page.get_by_text("This commit changes nothing.")).to_be_visible()
    page.goto(ui.url(f"/repositories/{repo}/commits/{base['id']}"))
    expect(_rows(page, "commit-diff")).to_have_count(2)
    ui.shot(page, "base-commit")


def test_branch_created_from_a_tag_then_deleted(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    _put(s3, repo, "main", "v1.txt", b"one")
    tagged = _commit(rest, repo, "main", "version one")
    rest.ok("POST", f"/repositories/{repo}/tags", {"id": "v1", "ref": "main"})
    _put(s3, repo, "main", "v2.txt", b"two")
    _commit(rest, repo, "main", "version two")

    page.goto(ui.url(f"/repositories/{repo}/branches"))
    expect(_row(page, "branches-table", "main")).to_contain_text("version two")
    page.get_by_label("New branch name").fill("from-v1")
    page.get_by_label("From (branch, tag or commit)").fill("v1")
    page.get_by_role("button", name="Create branch").click()
    created = _row(page, "branches-table", "from-v1")
    expect(created).to_contain_text(tagged["id"][:12])
    expect(created).to_contain_text("version one")
    ui.shot(page, "branch-created")
    assert _head(rest, repo, "from-v1") == tagged["id"]

    created.get_by_role("button", name="Delete branch from-v1").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_contain_text("Delete branch from-v1?")
    ui.shot(page, "branch-delete-confirm")
    dialog.get_by_role("button", name="Delete branch").click()
    expect(_row(page, "branches-table", "from-v1")).to_have_count(0)
    ui.shot(page, "branch-deleted")
    assert rest.call("GET", f"/repositories/{repo}/branches/from-v1").status == 404


def test_tag_created_and_deleted(admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str) -> None:
    page = admin_page
    _put(ui_stack.client(), repo, "main", "data.txt", b"data")
    commit = _commit(rest, repo, "main", "tag me")

    page.goto(ui.url(f"/repositories/{repo}/tags"))
    expect(page.get_by_text("No tags.")).to_be_visible()
    page.get_by_label("New tag name").fill("release-1")
    page.get_by_role("button", name="Create tag").click()
    row = _row(page, "tags-table", "release-1")
    expect(row).to_contain_text(commit["id"][:12])
    expect(row).to_contain_text("tag me")
    ui.shot(page, "tag-created")
    assert rest.ok("GET", f"/repositories/{repo}/tags/release-1")["commit_id"] == commit["id"]

    # A second tag of the same name is refused with the API's message.
    page.get_by_label("New tag name").fill("release-1")
    page.get_by_role("button", name="Create tag").click()
    expect(page.get_by_test_id("create-tag").get_by_test_id("error-note")).to_contain_text("tag already exists")

    row.get_by_role("button", name="Delete tag release-1").click()
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Delete tag").click()
    expect(page.get_by_text("No tags.")).to_be_visible()
    ui.shot(page, "tag-deleted")
    assert rest.call("GET", f"/repositories/{repo}/tags/release-1").status == 404


def test_compare_then_merge_with_a_message(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    _put(s3, repo, "main", "a.txt", b"a")
    _put(s3, repo, "main", "b.txt", b"b")
    _commit(rest, repo, "main", "base")
    _branch(rest, repo, "dev")
    _put(s3, repo, "dev", "a.txt", b"a changed")
    s3.delete_object(Bucket=repo, Key="dev/b.txt")
    _put(s3, repo, "dev", "c.txt", b"c")
    dev_head = _commit(rest, repo, "dev", "dev work")["id"]

    page.goto(ui.url(f"/repositories/{repo}/compare?base=main&compare=dev"))
    diff = _rows(page, "compare-diff")
    expect(diff).to_have_count(3)
    expect(_row(page, "compare-diff", "a.txt")).to_contain_text("changed")
    expect(_row(page, "compare-diff", "b.txt")).to_contain_text("removed")
    expect(_row(page, "compare-diff", "c.txt")).to_contain_text("added")
    ui.shot(page, "compare")

    page.get_by_label("Merge message").fill("ship dev")
    page.get_by_role("button", name="Merge", exact=True).click()
    expect(page.get_by_test_id("merged")).to_be_visible()
    expect(page.get_by_text("No differences.")).to_be_visible()
    ui.shot(page, "merged")
    merged = rest.ok("GET", f"/repositories/{repo}/commits/main")
    assert merged["message"] == "ship dev" and merged["parents"][1] == dev_head

    # The pickers choose the refs: swapping to another base reloads the comparison.
    page.get_by_test_id("base-picker").get_by_role("button").click()
    page.get_by_role("button", name="dev", exact=True).click()
    expect(page).to_have_url(ui.url(f"/repositories/{repo}/compare?base=dev&compare=dev"))
    expect(page.get_by_text("No differences.")).to_be_visible()


def _iceberg_table(s3: Any, repo: str, branch: str, name: str, snapshots: int, column: str) -> None:
    """A table as the Iceberg catalog stores it (its pointer and one metadata file), written
    through S3: `snapshots` appends of 10 rows each, one column named `column` (field id 1)."""
    key = f"db/{name}/metadata/{snapshots:05d}-{column}.metadata.json"
    metadata = {
        "format-version": 2,
        "table-uuid": f"00000000-0000-0000-0000-{len(name):012d}",
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": column, "type": "long"}]}],
        "current-snapshot-id": snapshots,
        "snapshots": [
            {"snapshot-id": n, "timestamp-ms": n, "summary": {"operation": "append", "added-records": "10"}}
            for n in range(1, snapshots + 1)
        ],
    }
    _put(s3, repo, branch, key, json.dumps(metadata).encode())
    _put(s3, repo, branch, f"db/{name}/_iceberg_table.json", json.dumps({"metadata-key": key}).encode())


def test_compare_shows_the_iceberg_tables_changed(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    page.goto(ui.url(f"/repositories/{repo}/compare?base=main&compare=main"))
    expect(page.get_by_text("No differences.")).to_be_visible()
    expect(page.get_by_test_id("table-changes")).to_have_count(0)  # no table, no section
    _iceberg_table(s3, repo, "main", "events", 1, "name")
    _commit(rest, repo, "main", "a table")
    _branch(rest, repo, "dev")
    _iceberg_table(s3, repo, "dev", "events", 3, "label")
    _iceberg_table(s3, repo, "dev", "fresh", 1, "id")
    _commit(rest, repo, "dev", "two appends and a rename; a new table")

    page.goto(ui.url(f"/repositories/{repo}/compare?base=main&compare=dev"))
    tables = _rows(page, "table-changes")
    expect(tables).to_have_count(2)
    expect(_row(page, "table-changes", "db.events")).to_contain_text("changed")
    expect(_row(page, "table-changes", "db.events")).to_contain_text("+2")
    expect(_row(page, "table-changes", "db.events")).to_contain_text("+20 \u22120")
    expect(_row(page, "table-changes", "db.events")).to_contain_text("renamed name → label")
    expect(_row(page, "table-changes", "db.fresh")).to_contain_text("added")
    ui.shot(page, "compare-tables")


def test_merge_conflicts_are_listed_per_path(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    # A name holding the API message's separator, and one that must stay text.
    odd = ["a.txt", "b, c.txt", "<img src=x onerror=alert(1)>.txt"]
    for key in odd:
        _put(s3, repo, "main", key, b"base")
    _commit(rest, repo, "main", "base")
    _branch(rest, repo, "dev")
    for branch in ("main", "dev"):
        for key in odd:
            _put(s3, repo, branch, key, branch.encode())
        _commit(rest, repo, branch, f"{branch} edits")
    main_head = _head(rest, repo, "main")

    page.goto(ui.url(f"/repositories/{repo}/compare?base=main&compare=dev"))
    page.get_by_role("button", name="Merge", exact=True).click()
    conflicts = page.get_by_test_id("conflicts")
    expect(conflicts.get_by_test_id("conflict-row")).to_have_count(3)
    for key in odd:
        expect(conflicts.get_by_test_id("conflict-row").filter(has_text=key)).to_contain_text("changed")
    ui.shot(page, "conflicts")
    assert _head(rest, repo, "main") == main_head

    page.get_by_label("Strategy").select_option("source-wins")
    page.get_by_role("button", name="Merge", exact=True).click()
    expect(page.get_by_test_id("merged")).to_be_visible()
    expect(page.get_by_test_id("conflicts")).to_have_count(0)
    ui.shot(page, "merged-source-wins")
    body = s3.get_object(Bucket=repo, Key=f"main/{odd[1]}")["Body"].read()
    assert body == b"dev"


def _refused(scope: Locator) -> None:
    """The API's refusal shown as a readable note: "Not allowed", the API's words, no trace."""
    note = scope.get_by_test_id("error-note")
    expect(note).to_contain_text("Not allowed")
    expect(note).to_contain_text("may not")
    expect(note).not_to_contain_text("Traceback")


def test_a_read_only_user_is_refused_every_write_with_a_clear_message(
    page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    s3 = ui_stack.client()
    _put(s3, repo, "main", "base.txt", b"base")
    _commit(rest, repo, "main", "base")
    _branch(rest, repo, "dev")
    rest.ok("POST", f"/repositories/{repo}/tags", {"id": "v1", "ref": "main"})
    _put(s3, repo, "dev", "dev.txt", b"dev")
    _commit(rest, repo, "dev", "dev work")
    _put(s3, repo, "main", "pending.txt", b"uncommitted")
    before = {name: _head(rest, repo, name) for name in ("main", "dev")}
    ui.login(page, ui_stack.reader)

    # Changes: the reader sees them, and cannot commit or reset.
    page.goto(ui.url(f"/repositories/{repo}/changes?ref=main"))
    expect(_rows(page, "changes-table")).to_have_count(1)
    page.get_by_label("Commit message").fill("not mine to make")
    page.get_by_role("button", name="Commit changes").click()
    _refused(page.get_by_test_id("commit-form"))
    page.get_by_role("button", name="Reset pending.txt").click()
    _refused(page.get_by_test_id("reset-result"))
    page.get_by_role("button", name="Reset all changes").click()
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Reset all").click()
    _refused(page.get_by_test_id("confirm-dialog"))
    ui.shot(page, "changes-refused")
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Cancel").click()

    # Branches: create and delete.
    page.goto(ui.url(f"/repositories/{repo}/branches"))
    page.get_by_label("New branch name").fill("mine")
    page.get_by_role("button", name="Create branch").click()
    _refused(page.get_by_test_id("create-branch"))
    _row(page, "branches-table", "dev").get_by_role("button", name="Delete branch dev").click()
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Delete branch").click()
    _refused(page.get_by_test_id("confirm-dialog"))
    ui.shot(page, "branches-refused")
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Cancel").click()

    # Tags: create and delete.
    page.goto(ui.url(f"/repositories/{repo}/tags"))
    page.get_by_label("New tag name").fill("mine")
    page.get_by_role("button", name="Create tag").click()
    _refused(page.get_by_test_id("create-tag"))
    _row(page, "tags-table", "v1").get_by_role("button", name="Delete tag v1").click()
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Delete tag").click()
    _refused(page.get_by_test_id("confirm-dialog"))
    ui.shot(page, "tags-refused")
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Cancel").click()

    # Compare: the diff is readable, the merge refused.
    page.goto(ui.url(f"/repositories/{repo}/compare?base=main&compare=dev"))
    expect(_rows(page, "compare-diff")).to_have_count(1)
    page.get_by_role("button", name="Merge", exact=True).click()
    _refused(page.get_by_test_id("merge-form"))
    ui.shot(page, "merge-refused")

    assert {name: _head(rest, repo, name) for name in ("main", "dev")} == before
    assert rest.call("GET", f"/repositories/{repo}/branches/mine").status == 404
    assert rest.call("GET", f"/repositories/{repo}/tags/{quote('v1')}").status == 200
    assert len(rest.ok("GET", f"/repositories/{repo}/branches/main/diff")["results"]) == 1
