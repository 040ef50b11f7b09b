"""The day-to-day pages a lakeFS user expects, in Chromium: a commit browsed and its id copied,
a directory's README.md rendered under its listing (safely), a branch's uncommitted changes
marked in the listing, a CSV diff that pairs rows on a detected key or their content (a deleted
row is one change), Silt's own groups and policies shown as system and kept, and the first-run
sample repository created with progress and errors shown."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any
from urllib.parse import quote

from playwright.sync_api import BrowserContext, Page, Route, expect

from tests.browser.conftest import RestApi, Ui
from tests.support.gateway_stack import GatewayStack

README = (
    b"# Shop data\n\nSee [the orders](tables/orders.csv) and **prices**.\n\n"
    b'<script>window.ran = 1</script>\n\n<img src=x onerror="window.ran = 2">\n'
)


def _put(stack: GatewayStack, repo: str, key: str, body: bytes, content_type: str = "text/plain") -> None:
    stack.client().put_object(Bucket=repo, Key=f"main/{key}", Body=body, ContentType=content_type)


def _commit(rest: RestApi, repo: str, message: str) -> dict[str, Any]:
    commit: dict[str, Any] = rest.ok("POST", f"/repositories/{repo}/branches/main/commits", {"message": message})
    return commit


def test_a_commit_is_browsed_and_copied_and_readmes_render_under_listings(
    admin_page: Page, context: BrowserContext, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=ui_stack.endpoint)
    _put(ui_stack, repo, "README.md", README, "text/markdown")
    _put(ui_stack, repo, "tables/README.md", b"## Tables\n\nOne CSV per table.\n", "text/markdown")
    _put(ui_stack, repo, "tables/orders.csv", b"order_id,qty\n1,2\n", "text/csv")
    commit = _commit(rest, repo, "the shop")
    # A later change: the commit's view must not show it.
    _put(ui_stack, repo, "later.txt", b"after the commit\n")
    _commit(rest, repo, "later")

    page.goto(ui.url(f"/repositories/{repo}/commits/{commit['id']}"))
    copy = page.get_by_test_id("copy-commit-id")
    expect(copy).to_have_attribute("data-value", commit["id"])
    copy.click()
    expect(page.get_by_role("status").filter(has_text="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == commit["id"]

    page.get_by_test_id("browse-at-commit").click()
    expect(page).to_have_url(ui.url(f"/repositories/{repo}/objects?ref={commit['id']}"))
    expect(page.get_by_test_id("read-only")).to_be_visible()
    expect(page.get_by_test_id("entry")).to_have_text(["README.md", "tables/"])
    readme = page.get_by_test_id("directory-readme")
    expect(readme.locator("h1")).to_have_text("Shop data")
    expect(readme.locator("strong")).to_have_text("prices")
    # The object's HTML is text, never markup: no script ran, no image was made.
    expect(readme).to_contain_text("<script>window.ran = 1</script>")
    expect(readme.locator("script, img")).to_have_count(0)
    assert page.evaluate("window.ran") is None
    # A relative link is the object at the same commit.
    link = readme.get_by_role("link", name="the orders")
    expect(link).to_have_attribute(
        "href", f"/ui/repositories/{repo}/object?ref={commit['id']}&path=tables%2Forders.csv"
    )
    ui.shot(page, "readme-at-commit")

    page.get_by_test_id("entry").filter(has_text="tables/").click()
    expect(page.get_by_test_id("directory-readme").locator("h2")).to_have_text("Tables")


def test_uncommitted_changes_are_marked_in_the_listing(
    admin_page: Page, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    for name in ("kept.csv", "edited.csv", "gone.csv", "dir/old.txt"):
        _put(ui_stack, repo, name, b"a,b\n1,2\n", "text/csv")
    _commit(rest, repo, "first")
    _put(ui_stack, repo, "edited.csv", b"a,b\n1,3\n", "text/csv")
    _put(ui_stack, repo, "new.csv", b"a,b\n", "text/csv")
    _put(ui_stack, repo, "dir/new.txt", b"x\n")
    assert rest.call("DELETE", f"/repositories/{repo}/branches/main/objects?path=gone.csv").status == 204

    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    rows = page.locator("[data-testid=directory] tbody tr")
    expect(page.get_by_test_id("change-mark")).to_have_count(4)
    for name, change in (("new.csv", "added"), ("edited.csv", "changed"), ("dir/", "prefix_changed")):
        mark = rows.filter(has=page.get_by_role("link", name=name, exact=True)).get_by_test_id("change-mark")
        expect(mark).to_have_attribute("data-change", change)
    kept = rows.filter(has=page.get_by_role("link", name="kept.csv", exact=True))
    expect(kept).to_have_count(1)
    expect(kept.get_by_test_id("change-mark")).to_have_count(0)
    removed = page.get_by_test_id("removed-entry")
    expect(removed).to_have_text("gone.csv removed")
    ui.shot(page, "uncommitted-marks")


def _diff_url(ui: Ui, repo: str, left: str, right: str, path: str, query: str = "") -> str:
    return ui.url(f"/repositories/{repo}/diff?left={left}&right={right}&path={quote(path, safe='')}{query}")


def test_a_csv_diff_pairs_rows_on_a_detected_key_or_their_content(
    admin_page: Page, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    cities = [b"oslo,7", b"lima,20", b"rome,15", b"kyiv,9"]
    people = [b"1,ann,10", b"2,bob,20", b"3,cy,30"]
    _put(ui_stack, repo, "cities.csv", b"\n".join([b"city,temp", *cities]) + b"\n", "text/csv")
    _put(ui_stack, repo, "people.csv", b"\n".join([b"person_id,name,score", *people]) + b"\n", "text/csv")
    before = _commit(rest, repo, "before")["id"]
    # One row deleted from each; bob's score changed.
    _put(ui_stack, repo, "cities.csv", b"\n".join([b"city,temp", cities[0], *cities[2:]]) + b"\n", "text/csv")
    _put(ui_stack, repo, "people.csv", b"person_id,name,score\n2,bob,25\n3,cy,30\n", "text/csv")
    after = _commit(rest, repo, "after")["id"]

    # No id-like column: rows pair on their content, and the deletion is one change.
    page.goto(_diff_url(ui, repo, before, after, "cities.csv"))
    counts = page.get_by_test_id("diff-counts")
    expect(counts).to_have_text("0 added 1 removed 0 changed 3 unchanged")
    expect(page.get_by_label("key column")).to_have_attribute("data-match", "content")
    expect(page.get_by_test_id("row-removed")).to_contain_text("lima")
    # By position, as asked: every row after the deleted one differs.
    page.get_by_label("key column").select_option(label="their position")
    expect(counts).to_have_text("0 added 1 removed 2 changed 1 unchanged")

    # person_id is unique on both sides: detected and used.
    page.goto(_diff_url(ui, repo, before, after, "people.csv"))
    picker = page.get_by_label("key column")
    expect(picker).to_have_attribute("data-match", "key")
    expect(picker.locator("option:checked")).to_have_text("a detected key: person_id")
    expect(counts).to_have_text("0 added 1 removed 1 changed 1 unchanged")
    expect(page.get_by_test_id("row-changed").locator("td.cell-changed")).to_have_text("20 25")
    ui.shot(page, "diff-detected-key")


def test_system_groups_and_policies_are_shown_apart_and_kept(admin_page: Page, ui: Ui, rest: RestApi) -> None:
    page = admin_page
    for path in ("/auth/groups/Services", "/auth/policies/CompactorCallVerifier"):
        refused = rest.call("DELETE", path)
        assert refused.status == 409, (path, refused.status, refused.data)
        assert "one of Silt's own (system)" in json.loads(refused.data)["message"]
    assert rest.ok("GET", "/auth/groups/Services")["system"] is True
    group = f"team-{secrets.token_hex(3)}"
    rest.ok("POST", "/auth/groups", {"id": group})
    assert "system" not in rest.ok("GET", f"/auth/groups/{group}")

    page.goto(ui.url("/admin/groups"))
    table = page.get_by_test_id("groups-table")
    services = table.locator("tr").filter(has=page.get_by_role("link", name="Services", exact=True))
    expect(services.get_by_test_id("system-badge")).to_have_text("system")
    expect(services.get_by_test_id("delete-group")).to_have_count(0)
    mine = table.locator("tr").filter(has=page.get_by_role("link", name=group, exact=True))
    expect(mine.get_by_test_id("delete-group")).to_be_visible()
    expect(mine.get_by_test_id("system-badge")).to_have_count(0)
    ui.shot(page, "system-groups")

    page.goto(ui.url("/admin/policies/CompactorCallVerifier"))
    expect(page.get_by_test_id("silt-policy-note")).to_contain_text("neither edited nor deleted")
    expect(page.get_by_test_id("policy-json")).to_be_visible()
    expect(page.get_by_test_id("delete-policy")).to_have_count(0)
    expect(page.get_by_test_id("edit-policy")).to_have_count(0)

    # The bindings setup keeps (the API answers 409 to undoing them) offer no Detach or Remove:
    # a badge says they are kept, its tooltip why; a binding of one's own stays removable.
    rest.ok("PUT", f"/auth/groups/{group}/policies/RepoReadAll")
    why = re.compile("again at every start")
    for path, bindings in (
        ("/admin/groups/Analysts", [("group-policies", "RepoReadAll", "detach-policy")]),
        ("/admin/groups/Services", [("group-members", "svc-gateway", "remove-member")]),
        (
            "/admin/users/svc-api",
            [("user-groups", "Services", "leave-group"), ("user-policies", "ApiActsForUsers", "detach-policy")],
        ),
    ):
        page.goto(ui.url(path))
        for listing, kept, control in bindings:
            link = page.get_by_role("link", name=kept, exact=True)
            row = page.get_by_test_id(listing).locator("tr").filter(has=link)
            expect(row.get_by_test_id("kept-by-setup")).to_have_attribute("title", why)
            expect(row.get_by_test_id(control)).to_have_count(0)
    ui.shot(page, "kept-bindings")
    page.goto(ui.url(f"/admin/groups/{group}"))
    row = page.get_by_test_id("group-policies").locator("tr").filter(has_text="RepoReadAll")
    expect(row.get_by_test_id("detach-policy")).to_be_visible()
    expect(row.get_by_test_id("kept-by-setup")).to_have_count(0)
    row.get_by_test_id("detach-policy").click()
    expect(page.get_by_test_id("group-policies")).to_contain_text("No policies attached.")


def test_the_first_run_sample_shows_progress_and_errors_and_lands_on_the_repository(
    page: Page, ui: Ui, rest: RestApi
) -> None:
    tag = secrets.token_hex(3)
    user, policy, name = f"first-{tag}", f"first-{tag}", f"fs-{tag}-sample"
    statement = [{"effect": "allow", "action": ["CreateRepo", "ReadRepo", "WriteRepo"], "resource": f"fs-{tag}-*"}]
    rest.ok("POST", "/auth/policies", {"id": policy, "statement": statement})
    creds = rest.create_user(name=user)
    rest.ok("PUT", f"/auth/users/{user}/policies/{policy}")
    ui.login(page, creds)

    held: list[Route] = []
    answers = iter(["refuse", "hold"])

    def creation(route: Route) -> None:
        if route.request.method != "POST":
            route.continue_()
        elif next(answers) == "refuse":
            route.fulfill(status=503, json={"message": "graveler did not answer within the request's deadline"})
        else:
            held.append(route)  # answered below, once the page has shown its progress

    page.route("**/api/v1/repositories", creation)
    page.get_by_test_id("first-run").get_by_test_id("create-sample").click()
    form = page.get_by_test_id("create-repository")
    form.get_by_label("Name", exact=True).fill(name)
    create = form.get_by_role("button", name="Create")
    create.click()
    # A failure is said, and the form can be sent again.
    expect(form.get_by_test_id("error-note")).to_contain_text("graveler did not answer")
    expect(create).to_be_enabled()
    create.click()
    progress = form.get_by_test_id("create-progress")
    expect(progress).to_contain_text("writing the sample")
    expect(form.get_by_role("button", name="Creating with sample data…")).to_be_disabled()
    assert len(held) == 1
    held[0].continue_()

    expect(page).to_have_url(ui.url(f"/repositories/{name}/objects?ref=main"), timeout=30_000)
    expect(page.get_by_test_id("entry")).to_have_text(["README.md", "tables/"])
    expect(page.get_by_test_id("directory-readme").locator("h1")).to_have_text("Sample repository")
    assert rest.ok("GET", f"/repositories/{name}")["id"] == name
