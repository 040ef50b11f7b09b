"""Pull requests and branch protection in the web UI, driven in Chromium as two users: a
developer opens a pull request, an admin asks for changes, then comments and approves, the
developer merges. Protection is set on the settings page and refuses a direct S3 PUT and an
unapproved merge, and the pull request page says why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError
from playwright.sync_api import Browser, Page, expect

from silt.rpc.signing import Credentials
from tests.browser.conftest import PAGE_TIMEOUT_MS, RestApi, Ui
from tests.support.gateway_stack import GatewayStack

PROTECTED = "cannot write to protected branch"


@pytest.fixture
def second_page(browser: Browser) -> Iterator[Page]:
    """A page in a cookie jar of its own, for the second user of a test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, f"script errors in the page: {errors}"


def _protect_main_in_settings(page: Page, ui: Ui, repo: str) -> None:
    page.goto(ui.url(f"/repositories/{repo}/settings"))
    form = page.get_by_test_id("protection-form")
    expect(form.get_by_text("No branch is protected.")).to_be_visible()
    form.get_by_test_id("add-rule").click()
    rule = form.get_by_test_id("protection-rule")
    rule.get_by_label("pattern").fill("main")
    expect(rule.get_by_label("forbid direct writes")).to_be_checked()
    rule.get_by_label("required approvals").fill("1")
    form.get_by_test_id("save-protection").click()
    expect(form.get_by_test_id("protection-saved")).to_be_visible()
    ui.shot(page, "settings-protection-saved")
    # What was saved is what a reload shows.
    page.reload()
    rule = page.get_by_test_id("protection-rule")
    expect(rule.get_by_label("pattern")).to_have_value("main")
    expect(rule.get_by_label("required approvals")).to_have_value("1")


def _create_branch(rest: RestApi, repo: str, name: str, creds: Credentials | None = None) -> None:
    # The answer is the new branch's commit id as text, not JSON.
    created = rest.call("POST", f"/repositories/{repo}/branches", {"name": name, "source": "main"}, creds=creds)
    assert created.status == 201, created.data


def _developer_commits_on_a_branch(rest: RestApi, stack: GatewayStack, repo: str, dev: Credentials) -> None:
    _create_branch(rest, repo, "feature", dev)
    s3 = stack.client(dev)
    s3.put_object(Bucket=repo, Key="feature/data/new.csv", Body=b"id,value\n1,a\n")
    rest.ok("POST", f"/repositories/{repo}/branches/feature/commits", {"message": "add new.csv"}, creds=dev)


def _expect_pull_changes(page: Page, paths: list[str]) -> None:
    """The pull request's changes tree holds exactly these objects (its data/ folder opened)."""
    diff = page.get_by_test_id("pull-diff")
    diff.get_by_role("button", name="Expand data/", exact=True).click()
    objects = diff.get_by_test_id("tree-object")
    expect(objects).to_have_count(len(paths))
    for index, path in enumerate(paths):
        expect(objects.nth(index)).to_have_attribute("data-path", path)


def test_two_user_review_flow_with_protection(
    page: Page, second_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    dev = rest.create_user(group="Developers")
    dev_id = rest.ok("GET", "/user", creds=dev)["user"]["id"]
    admin = second_page
    ui.login(admin, ui_stack.admin)
    _protect_main_in_settings(admin, ui, repo)

    # A direct S3 PUT to the protected branch is refused, for the developer as for anyone.
    _developer_commits_on_a_branch(rest, ui_stack, repo, dev)
    with pytest.raises(ClientError) as refused:
        ui_stack.client(dev).put_object(Bucket=repo, Key="main/direct.csv", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert PROTECTED in refused.value.response["Error"]["Message"]

    # The developer opens the pull request in the UI.
    ui.login(page, dev)
    page.goto(ui.url(f"/repositories/{repo}/pulls"))
    expect(page.get_by_test_id("pulls-table").get_by_text("No open pull requests.")).to_be_visible()
    ui.shot(page, "pulls-empty")
    page.get_by_test_id("new-pull").click()
    page.get_by_label("Source branch").fill("feature")
    page.get_by_label("Destination branch").fill("main")
    page.get_by_label("Title").fill("Add new.csv <b>not bold</b>")
    page.get_by_label("Description").fill("One new file.\nPlease review.")
    ui.shot(page, "pull-create")
    page.get_by_test_id("pull-create-submit").click()
    expect(page.get_by_test_id("pull-page")).to_be_visible()
    expect(page.get_by_test_id("pull-title")).to_have_text("Add new.csv <b>not bold</b>")
    pull_url = page.url
    _expect_pull_changes(page, ["data/new.csv"])
    # Why the merge is blocked, from the API's fields, before anyone tries.
    expect(page.get_by_test_id("approvals")).to_have_text("0 of 1 required approval(s)")
    expect(page.get_by_test_id("merge-blocked")).to_contain_text("0 of 1 required approval(s)")
    expect(page.get_by_test_id("review-form")).to_have_count(0)  # authors cannot review their own
    # Merging anyway is refused by the server, and the page shows its reason.
    page.get_by_test_id("merge").click()
    note = page.get_by_test_id("merge-box").get_by_test_id("error-note")
    expect(note).to_contain_text("Refused by branch protection")
    expect(note).to_contain_text(PROTECTED)
    ui.shot(page, "merge-refused-without-approval")

    # The admin asks for changes: that blocks the merge too, and says who.
    admin.goto(pull_url)
    expect(admin.get_by_test_id("pull-author")).to_have_text(dev_id)
    admin.get_by_label("Review note (optional)").fill("Needs a header check")
    admin.get_by_test_id("request-changes").click()
    expect(admin.get_by_test_id("review")).to_contain_text("requested changes")
    expect(admin.get_by_test_id("merge-blocked")).to_contain_text("changes requested by admin")
    ui.shot(admin, "admin-requested-changes")
    # Then comments and approves.
    admin.get_by_label("Add a comment").fill("Checked: the header is right. <script>alert(1)</script>")
    admin.get_by_test_id("comment-submit").click()
    expect(admin.get_by_test_id("comment-body")).to_have_text("Checked: the header is right. <script>alert(1)</script>")
    admin.get_by_test_id("approve").click()
    expect(admin.get_by_test_id("review")).to_contain_text("approved")
    expect(admin.get_by_test_id("approvals")).to_have_text("1 of 1 required approval(s)")
    expect(admin.get_by_test_id("merge-blocked")).to_have_count(0)
    ui.shot(admin, "admin-approved")

    # The developer sees the conversation and merges.
    page.reload()
    expect(page.get_by_test_id("comment-author")).to_have_text("admin")
    expect(page.get_by_test_id("merge-blocked")).to_have_count(0)
    page.get_by_test_id("merge").click()
    expect(page.get_by_test_id("pull-status")).to_have_text("merged")
    merged = page.get_by_test_id("merged-commit").inner_text().strip()
    ui.shot(page, "merged")

    # The merged commit heads the destination's history and the object is there.
    log = rest.ok("GET", f"/repositories/{repo}/refs/main/commits?amount=1", creds=dev)
    assert log["results"][0]["id"] == merged
    assert log["results"][0]["parents"][1] == rest.ok("GET", f"/repositories/{repo}/branches/feature")["commit_id"]
    body = ui_stack.client(dev).get_object(Bucket=repo, Key="main/data/new.csv")["Body"].read()
    assert body == b"id,value\n1,a\n"
    # Once merged, the pull request's diff is the merge commit's against the destination before.
    _expect_pull_changes(page, ["data/new.csv"])
    # The same in the destination's pages: its history, the commit page, the object browser.
    page.get_by_test_id("merged-commit").click()
    expect(page.get_by_test_id("commit-id")).to_have_text(merged)
    ui.shot(page, "merged-commit-page")
    page.goto(ui.url(f"/repositories/{repo}/commits?ref=main"))
    expect(page.get_by_test_id("history-page")).to_contain_text(f"Merge pull request {pull_url.rsplit('/', 1)[1]}")
    expect(page.get_by_test_id("history-page")).to_contain_text(merged[:12])
    ui.shot(page, "destination-history")
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main&path=data/"))
    expect(page.get_by_text("new.csv", exact=True)).to_be_visible()
    ui.shot(page, "destination-objects")
    # The list shows it under "merged", no longer under "open".
    page.goto(ui.url(f"/repositories/{repo}/pulls?status=merged"))
    expect(page.get_by_test_id("pull-link")).to_have_text(["Add new.csv <b>not bold</b>"])
    page.get_by_test_id("status-open").click()
    expect(page.get_by_test_id("pulls-table").get_by_text("No open pull requests.")).to_be_visible()
    ui.shot(page, "pulls-open-empty-after-merge")


def test_close_and_reopen_and_list_by_status(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page = admin_page
    _create_branch(rest, repo, "topic")
    ui_stack.client().put_object(Bucket=repo, Key="topic/a.txt", Body=b"a")
    rest.ok("POST", f"/repositories/{repo}/branches/topic/commits", {"message": "a"})
    ids = [
        rest.ok(
            "POST",
            f"/repositories/{repo}/pulls",
            {"title": f"pull {n}", "source_branch": "topic", "destination_branch": "main"},
        )["id"]
        for n in range(3)
    ]
    page.goto(ui.url(f"/repositories/{repo}/pulls/{ids[1]}"))
    expect(page.get_by_test_id("approvals")).to_contain_text("requires none")
    page.get_by_test_id("close").click()
    expect(page.get_by_test_id("pull-status")).to_have_text("closed")
    ui.shot(page, "closed")
    page.goto(ui.url(f"/repositories/{repo}/pulls?status=open"))
    expect(page.get_by_test_id("pull-link")).to_have_text(["pull 0", "pull 2"])
    page.get_by_test_id("status-closed").click()
    expect(page.get_by_test_id("pull-link")).to_have_text(["pull 1"])
    ui.shot(page, "closed-list")
    page.get_by_test_id("pull-link").click()
    page.get_by_test_id("reopen").click()
    expect(page.get_by_test_id("pull-status")).to_have_text("open")
    page.goto(ui.url(f"/repositories/{repo}/pulls?status=open"))
    expect(page.get_by_test_id("pull-link")).to_have_text(["pull 0", "pull 1", "pull 2"])


def test_gc_rules_in_settings(admin_page: Page, ui: Ui, rest: RestApi, repo: str) -> None:
    page = admin_page
    page.goto(ui.url(f"/repositories/{repo}/settings"))
    form = page.get_by_test_id("gc-form")
    expect(form.get_by_text("No GC rules are set")).to_be_visible()
    form.get_by_label("Default retention (days)").fill("30")
    form.get_by_test_id("add-gc-branch").click()
    row = form.get_by_test_id("gc-branch")
    row.get_by_label("branch").fill("main")
    row.get_by_label("retention days").fill("90")
    form.get_by_test_id("save-gc").click()
    expect(form.get_by_test_id("gc-status")).to_have_text("Saved.")
    ui.shot(page, "gc-saved")
    assert rest.ok("GET", f"/repositories/{repo}/settings/gc_rules") == {
        "default_retention_days": 30,
        "branches": [{"branch_id": "main", "retention_days": 90}],
    }
    # A branch named twice is the API's 400, shown next to the form; nothing changes.
    form.get_by_test_id("add-gc-branch").click()
    form.get_by_test_id("gc-branch").nth(1).get_by_label("branch").fill("main")
    form.get_by_test_id("save-gc").click()
    expect(form.get_by_test_id("error-note")).to_be_visible()
    ui.shot(page, "gc-refused")
    page.reload()
    expect(page.get_by_test_id("gc-branch").get_by_label("retention days")).to_have_value("90")
    page.get_by_test_id("delete-gc").click()
    expect(page.get_by_test_id("gc-form").get_by_text("No GC rules are set")).to_be_visible()
    assert rest.call("GET", f"/repositories/{repo}/settings/gc_rules").status == 404


def test_conflicting_merge_names_paths_and_a_strategy_resolves_it(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page = admin_page
    s3 = ui_stack.client()
    _create_branch(rest, repo, "topic")
    s3.put_object(Bucket=repo, Key="topic/same.txt", Body=b"topic side")
    rest.ok("POST", f"/repositories/{repo}/branches/topic/commits", {"message": "topic side"})
    s3.put_object(Bucket=repo, Key="main/same.txt", Body=b"main side")
    rest.ok("POST", f"/repositories/{repo}/branches/main/commits", {"message": "main side"})
    created = rest.ok(
        "POST",
        f"/repositories/{repo}/pulls",
        {"title": "clash", "source_branch": "topic", "destination_branch": "main"},
    )
    page.goto(ui.url(f"/repositories/{repo}/pulls/{created['id']}"))
    # Checked before anyone presses Merge: the conflict is listed and Merge is off without a strategy.
    conflicts = page.get_by_test_id("merge-box").get_by_test_id("pull-conflicts")
    expect(conflicts.get_by_test_id("conflict-row")).to_contain_text("same.txt")
    expect(page.get_by_test_id("merge")).to_be_disabled()
    expect(page.get_by_test_id("pull-status")).to_have_text("open")
    ui.shot(page, "conflict")
    page.get_by_test_id("merge-strategy").select_option("source-wins")
    page.get_by_test_id("merge").click()
    expect(page.get_by_test_id("pull-status")).to_have_text("merged")
    ui.shot(page, "merged-source-wins")
    assert s3.get_object(Bucket=repo, Key="main/same.txt")["Body"].read() == b"topic side"


def test_protection_rules_saved_meanwhile_are_not_overwritten(
    admin_page: Page, ui: Ui, rest: RestApi, repo: str
) -> None:
    page = admin_page
    page.goto(ui.url(f"/repositories/{repo}/settings"))
    form = page.get_by_test_id("protection-form")
    expect(form.get_by_text("No branch is protected.")).to_be_visible()
    # Someone else protects a branch after the page read the rules.
    saved = rest.call("PUT", f"/repositories/{repo}/settings/branch_protection", [{"pattern": "release-*"}])
    assert saved.status == 204, saved.data
    form.get_by_test_id("add-rule").click()
    form.get_by_label("pattern").fill("main")
    form.get_by_test_id("save-protection").click()
    expect(form.get_by_test_id("error-note")).to_contain_text("changed since they were read")
    expect(form.get_by_test_id("changed-meanwhile")).to_be_visible()
    expect(form.get_by_test_id("protection-saved")).to_have_count(0)
    ui.shot(page, "concurrent-change-refused")
    rules = rest.ok("GET", f"/repositories/{repo}/settings/branch_protection")
    assert [r["pattern"] for r in rules] == ["release-*"]
    # Discarding reloads what is stored; saving on top of it then works.
    form.get_by_role("button", name="Discard changes").click()
    expect(page.get_by_test_id("protection-rule").get_by_label("pattern")).to_have_value("release-*")
    page.get_by_test_id("add-rule").click()
    page.get_by_test_id("protection-rule").nth(1).get_by_label("pattern").fill("main")
    page.get_by_test_id("save-protection").click()
    expect(page.get_by_test_id("protection-saved")).to_be_visible()
    rules = rest.ok("GET", f"/repositories/{repo}/settings/branch_protection")
    assert [r["pattern"] for r in rules] == ["release-*", "main"]
