"""No dead ends in Chromium: a pull request that would conflict says so before Merge (the
conflicts listed as Compare lists them, Merge off until a strategy is chosen); a hook's refusal
of a commit names the hook's reason and links to its run, a protection rule's names the rule
and links to the settings; a user with no access is told so (no first-run offer, no
Administration link); a protected branch is marked before anyone uploads, and an upload the
rule refuses shows as failed with its cause, never as "the others were uploaded"."""

from __future__ import annotations

import re
import secrets

from playwright.sync_api import FilePayload, Page, expect

from tests.browser.conftest import RestApi, Ui
from tests.support.gateway_stack import GatewayStack

REFUSING_ACTION = """\
name: Gatekeeper
on:
  pre-commit:
    branches: ["guarded"]
  pre-merge:
    branches: ["guarded"]
hooks:
  - id: refuse
    type: lua
    properties:
      script: |
        error("commits to guarded need a ticket")
"""


def _put(stack: GatewayStack, repo: str, branch: str, path: str, body: bytes) -> None:
    stack.client().put_object(Bucket=repo, Key=f"{branch}/{path}", Body=body)


def _commit(rest: RestApi, repo: str, branch: str, message: str) -> None:
    rest.ok("POST", f"/repositories/{repo}/branches/{branch}/commits", {"message": message})


def _branch(rest: RestApi, repo: str, name: str) -> None:
    created = rest.call("POST", f"/repositories/{repo}/branches", {"name": name, "source": "main"})
    assert created.status == 201, created.data


def test_a_conflicting_pull_request_says_so_before_merge(
    admin_page: Page, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    _put(ui_stack, repo, "main", "weather.csv", b"day,temp\n1,10\n")
    _commit(rest, repo, "main", "weather")
    _branch(rest, repo, "fix")
    _put(ui_stack, repo, "fix", "weather.csv", b"day,temp\n1,11\n")
    _put(ui_stack, repo, "fix", "notes.txt", b"only on fix")
    _commit(rest, repo, "fix", "fix side")
    _put(ui_stack, repo, "main", "weather.csv", b"day,temp\n1,12\n")
    _commit(rest, repo, "main", "main side")
    pull = rest.ok(
        "POST", f"/repositories/{repo}/pulls", {"title": "t", "source_branch": "fix", "destination_branch": "main"}
    )

    # The API's check: the one key both sides changed differently, nothing merged.
    check = rest.ok("GET", f"/repositories/{repo}/refs/fix/merge/main/conflicts")
    assert check["mergeable"] is False
    assert check["conflicts"] == [{"path": "weather.csv", "source": "changed", "destination": "changed"}]

    page.goto(ui.url(f"/repositories/{repo}/pulls/{pull['id']}"))
    box = page.get_by_test_id("merge-box")
    conflicts = box.get_by_test_id("pull-conflicts")
    expect(conflicts).to_contain_text("would conflict on 1 path")
    expect(conflicts.get_by_test_id("conflict-row")).to_have_count(1)
    expect(conflicts.get_by_test_id("conflict-row")).to_contain_text("weather.csv")
    expect(conflicts).to_contain_text("source wins")  # the strategy hint
    expect(box.get_by_test_id("merge")).to_be_disabled()
    expect(box.get_by_test_id("merge-stopped")).to_contain_text("choose a strategy")
    expect(box).to_have_class(re.compile(r"\bconflicted\b"))
    ui.shot(page, "pull-would-conflict")
    # A strategy lets one side win: Merge is offered, and merges.
    box.get_by_test_id("merge-strategy").select_option("source-wins")
    expect(box.get_by_test_id("merge")).to_be_enabled()
    box.get_by_test_id("merge").click()
    expect(page.get_by_test_id("pull-status")).to_have_text("merged")
    expect(page.get_by_text("Something went wrong")).to_have_count(0)

    # A pull request with no conflict says that too.
    _branch(rest, repo, "clean")
    _put(ui_stack, repo, "clean", "other.txt", b"x")
    _commit(rest, repo, "clean", "other")
    clean = rest.ok(
        "POST", f"/repositories/{repo}/pulls", {"title": "c", "source_branch": "clean", "destination_branch": "main"}
    )
    page.goto(ui.url(f"/repositories/{repo}/pulls/{clean['id']}"))
    expect(page.get_by_test_id("merge-check")).to_have_attribute("data-mergeable", "true")
    expect(page.get_by_test_id("merge")).to_be_enabled()

    # Once merged, there is nothing to merge: Compare and a new pull request say so instead of
    # offering a Merge the API refuses ("no changes"); the pull request can still be closed.
    page.goto(ui.url(f"/repositories/{repo}/compare?base=main&compare=fix"))
    merge = page.get_by_test_id("merge-form")
    expect(merge.get_by_test_id("nothing-to-merge")).to_have_text("Nothing to merge: fix is already in main.")
    expect(merge.get_by_role("button", name="Merge")).to_be_disabled()
    ui.shot(page, "compare-nothing-to-merge")
    again = rest.ok(
        "POST", f"/repositories/{repo}/pulls", {"title": "again", "source_branch": "fix", "destination_branch": "main"}
    )
    page.goto(ui.url(f"/repositories/{repo}/pulls/{again['id']}"))
    expect(page.get_by_test_id("nothing-to-merge")).to_contain_text("fix is already in main")
    expect(page.get_by_test_id("merge")).to_be_disabled()
    page.get_by_test_id("close").click()
    expect(page.get_by_test_id("pull-status")).to_have_text("closed")


def test_refusals_name_their_cause_and_link_to_it(
    admin_page: Page, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    _put(ui_stack, repo, "main", "_lakefs_actions/gate.yaml", REFUSING_ACTION.encode())
    _commit(rest, repo, "main", "a hook refusing commits to guarded")
    _branch(rest, repo, "guarded")
    _put(ui_stack, repo, "guarded", "a.txt", b"a")

    # The hook's refusal: its reason, and a link to the run that refused.
    page.goto(ui.url(f"/repositories/{repo}/changes?ref=guarded"))
    form = page.get_by_test_id("commit-form")
    form.get_by_label("Commit message").fill("try")
    form.get_by_role("button", name="Commit changes").click()
    note = form.get_by_test_id("error-note")
    expect(note).to_contain_text("Refused by a pre-commit hook")
    expect(note).to_contain_text("commits to guarded need a ticket")
    expect(note).not_to_contain_text("Something went wrong")
    ui.shot(page, "hook-refusal")
    runs = rest.ok("GET", f"/repositories/{repo}/actions/runs", None)["results"]
    failed = [r for r in runs if r["branch"] == "guarded" and r["status"] == "failed"]
    assert len(failed) == 1
    note.get_by_test_id("refusal-run").click()
    expect(page).to_have_url(re.compile(rf"/actions/{failed[0]['run_id']}$"))
    expect(page.get_by_test_id("run-id")).to_have_text(failed[0]["run_id"])
    expect(page.get_by_test_id("run-page")).to_have_class(re.compile(r"\brun-failed\b"))

    # A merge the hook refuses says the same, where the merge was asked (the Compare page).
    reset = rest.call("PUT", f"/repositories/{repo}/branches/guarded", {"type": "reset"})
    assert reset.status == 204, reset.data  # a merge needs a clean destination
    _branch(rest, repo, "feature")
    _put(ui_stack, repo, "feature", "f.txt", b"f")
    _commit(rest, repo, "feature", "feature work")
    page.goto(ui.url(f"/repositories/{repo}/compare?base=guarded&compare=feature"))
    merge = page.get_by_test_id("merge-form")
    merge.get_by_role("button", name="Merge").click()
    note = merge.get_by_test_id("error-note")
    expect(note).to_contain_text("Refused by a pre-merge hook")
    expect(note).to_contain_text("commits to guarded need a ticket")
    expect(note.get_by_test_id("refusal-run")).to_have_attribute(
        "href", re.compile(rf"/repositories/{repo}/actions/\w+")
    )

    # A protection rule's refusal: the rule that matched, and the settings where it is. The rule
    # arrives while the page is open (opened afresh, the page offers neither: below).
    _put(ui_stack, repo, "main", "b.txt", b"b")
    page.goto(ui.url(f"/repositories/{repo}/changes?ref=main"))
    form = page.get_by_test_id("commit-form")
    expect(form).to_be_visible()
    page.get_by_role("button", name="Reset all changes").click()
    dialog = page.get_by_test_id("confirm-dialog")
    rest.ok("PUT", f"/repositories/{repo}/settings/branch_protection", [{"pattern": "ma*"}])
    dialog.get_by_role("button", name="Reset all").click()
    note = dialog.get_by_test_id("error-note")
    expect(note).to_contain_text("Refused by branch protection")
    expect(note.get_by_test_id("refusal-rule")).to_have_text("ma*")
    expect(note.get_by_test_id("refusal-settings")).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    form.get_by_label("Commit message").fill("direct")
    form.get_by_role("button", name="Commit changes").click()
    note = form.get_by_test_id("error-note")
    expect(note).to_contain_text("Refused by branch protection")
    expect(note.get_by_test_id("refusal-rule")).to_have_text("ma*")
    ui.shot(page, "protection-refusal")
    note.get_by_test_id("refusal-settings").click()
    expect(page.get_by_test_id("protection-form")).to_be_visible()

    # Opened afresh, no page offers what the rule refuses: each says why and links to the rule.
    page.goto(ui.url(f"/repositories/{repo}/changes?ref=main"))
    badge = page.get_by_test_id("branch-protected")
    expect(badge.get_by_test_id("protected-rule")).to_have_text("ma*")
    expect(page.get_by_test_id("changes-table")).to_contain_text("b.txt")
    expect(page.get_by_test_id("commit-form")).to_have_count(0)
    expect(page.get_by_role("button", name=re.compile("^Reset"))).to_have_count(0)
    ui.shot(page, "changes-protected")
    page.goto(ui.url(f"/repositories/{repo}/object?ref=main&path=b.txt"))
    badge = page.get_by_test_id("branch-protected")
    expect(badge).to_contain_text("no deletes here")
    expect(page.get_by_test_id("object-name")).to_have_text("b.txt")
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)
    ui.shot(page, "object-protected")
    badge.get_by_test_id("protection-settings").click()
    expect(page.get_by_test_id("protection-form")).to_be_visible()
    # The branches list offers no Delete the API would refuse: not for a protected branch, not
    # for the default one; each says why.
    rest.ok("PUT", f"/repositories/{repo}/settings/branch_protection", [{"pattern": "ma*"}, {"pattern": "guarded"}])
    page.goto(ui.url(f"/repositories/{repo}/branches"))
    table = page.get_by_test_id("branches-table")
    expect(table.get_by_test_id("branch-protected")).to_have_text("protected (guarded)")
    expect(table.get_by_role("button", name="Delete branch guarded")).to_have_count(0)
    expect(table.get_by_test_id("default-branch")).to_have_attribute("title", re.compile("cannot be deleted"))
    expect(table.get_by_role("button", name="Delete branch main")).to_have_count(0)
    expect(table.get_by_role("button", name="Delete branch feature")).to_be_visible()
    ui.shot(page, "branches-protected-and-default")


def test_a_user_without_access_is_told_so(page: Page, ui: Ui, rest: RestApi, repo: str) -> None:
    nobody = rest.create_user()
    assert rest.ok("GET", "/user/permissions", creds=nobody) == {"create_repository": False, "administer": False}
    ui.login(page, nobody)
    expect(page.get_by_test_id("no-access")).to_contain_text("no access to any repository")
    expect(page.get_by_test_id("first-run")).to_have_count(0)
    expect(page.get_by_test_id("create-sample")).to_have_count(0)
    expect(page.get_by_role("link", name="Administration")).to_have_count(0)
    ui.shot(page, "no-access")

    # A developer sees the repositories and no Administration; the admin sees both.
    developer = rest.create_user(group="Developers")
    assert rest.ok("GET", "/user/permissions", creds=developer)["administer"] is False
    assert rest.ok("GET", "/user/permissions")["administer"] is True
    page.get_by_role("button", name="Log out").click()
    ui.login(page, developer)
    expect(page.get_by_role("link", name=repo)).to_be_visible()
    expect(page.get_by_role("link", name="Administration")).to_have_count(0)


def test_a_protected_branch_is_marked_and_a_refused_upload_fails_visibly(
    admin_page: Page, ui: Ui, rest: RestApi, repo: str
) -> None:
    page = admin_page
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    page.get_by_role("button", name="Upload").click()
    form = page.get_by_test_id("upload-form")
    # The rule arrives while the form is open: the server refuses, the page says why.
    rest.ok("PUT", f"/repositories/{repo}/settings/branch_protection", [{"pattern": "main"}])
    name = f"up-{secrets.token_hex(3)}.csv"
    upload: FilePayload = {"name": name, "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"}
    form.locator("input[type=file]").set_input_files([upload])
    form.get_by_role("button", name="Upload").click()
    item = form.get_by_test_id("upload-item")
    expect(item).to_have_attribute("data-state", "failed")
    expect(item.get_by_test_id("upload-failed")).to_be_visible()
    expect(item.locator("progress")).to_have_count(0)
    expect(item.get_by_test_id("error-note")).to_contain_text("Refused by branch protection")
    expect(item.get_by_test_id("refusal-rule")).to_have_text("main")
    expect(form.get_by_test_id("upload-summary")).to_have_text("Nothing was uploaded: the file was refused.")
    expect(form).not_to_contain_text("the others were uploaded")
    ui.shot(page, "upload-refused")

    # Opened afresh, the branch is marked protected and upload is not offered.
    page.reload()
    badge = page.get_by_test_id("branch-protected")
    expect(badge).to_contain_text("main")
    expect(page.get_by_role("button", name="Upload")).to_have_count(0)
    expect(page.get_by_test_id("drop-zone")).to_have_count(0)
    ui.shot(page, "branch-protected")
