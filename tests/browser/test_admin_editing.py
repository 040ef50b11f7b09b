"""Administration in Chromium beyond creating things: a policy edited in place (the page's own
checks first, then the API's word), a policy attached and a member added by choosing from a
searchable list, Silt's own policies offered for copying but not editing, service accounts
listed apart from people, and signing out everywhere (for oneself, and by an admin for someone
else), seen from a second browser."""

from __future__ import annotations

import json
import secrets

from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import PAGE_TIMEOUT_MS, SCREENSHOTS, RestApi, Ui, choose


def _shot(page: Page, name: str) -> None:
    """The screenshot the feature is reviewed by, at test-output/ui/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_admin_edits_a_policy_and_attaches_it_from_a_list(admin_page: Page, ui: Ui, rest: RestApi) -> None:
    page = admin_page
    tag = secrets.token_hex(3)
    policy, user, group = f"edit-me-{tag}", f"pia-{tag}", f"crew-{tag}"
    rest.ok(
        "POST",
        "/auth/policies",
        {"id": policy, "statement": [{"effect": "allow", "action": ["ReadRepo"], "resource": "*"}]},
    )
    rest.ok("POST", "/auth/users", {"id": user})
    rest.ok("POST", "/auth/groups", {"id": group})

    page.goto(ui.url(f"/admin/policies/{policy}"))
    page.get_by_test_id("edit-policy").click()
    editor = page.get_by_test_id("policy-editor")
    document = editor.get_by_label("Document")
    # The page's own checks, as one types: the save waits until they pass.
    document.fill(json.dumps({"statement": [{"effect": "permit", "action": [], "resource": "r-*"}]}))
    problems = editor.get_by_test_id("policy-problems")
    expect(problems).to_contain_text('"effect" must be "allow" or "deny"')
    expect(problems).to_contain_text('"action" must be a non-empty list')
    expect(editor.get_by_test_id("save-policy")).to_be_disabled()
    # Well-formed but unknown to the API: its 400, in its words.
    document.fill(
        json.dumps({"statement": [{"effect": "allow", "action": ["ReadRepo", "NoSuchAction"], "resource": "r-*"}]})
    )
    expect(problems).to_have_count(0)
    editor.get_by_test_id("save-policy").click()
    expect(editor.get_by_test_id("error-note")).to_contain_text("NoSuchAction")
    _shot(page, "policy-editor")
    document.fill(
        json.dumps({"statement": [{"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": "r-*"}]})
    )
    editor.get_by_test_id("save-policy").click()
    expect(page.get_by_test_id("policy-editor")).to_have_count(0)
    expect(page.get_by_test_id("policy-json")).to_contain_text("WriteRepo")
    stored = rest.ok("GET", f"/auth/policies/{policy}")["statement"]
    assert stored == [{"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": "r-*"}]

    # Attach it to the user by searching the list: only ids the list offers can be chosen.
    page.goto(ui.url(f"/admin/users/{user}"))
    picker = page.get_by_test_id("attach-user-policy")
    expect(picker.get_by_role("button", name="Attach policy")).to_be_disabled()
    picker.get_by_label("Policy", exact=True).fill(f"edit-me-{tag[:2]}")
    expect(picker.get_by_role("option", name=policy, exact=True)).to_be_visible()
    choose(page, "attach-user-policy", "Policy", policy, "Attach policy")
    expect(page.get_by_test_id("user-policies").get_by_role("link", name=policy)).to_be_visible()
    choose(page, "add-to-group", "Group", group, "Add to group")
    expect(page.get_by_test_id("user-groups").get_by_role("link", name=group)).to_be_visible()
    assert [p["id"] for p in rest.ok("GET", f"/auth/users/{user}/policies")["results"]] == [policy]
    assert [m["id"] for m in rest.ok("GET", f"/auth/groups/{group}/members")["results"]] == [user]

    # Silt's own policies are rewritten by setup at every start: no Edit, and the page says why.
    page.goto(ui.url("/admin/policies/RepoReadAll"))
    expect(page.get_by_test_id("silt-policy-note")).to_contain_text("create a new policy")
    expect(page.get_by_test_id("edit-policy")).to_have_count(0)
    expect(page.get_by_test_id("edit-as-new")).to_be_visible()


def test_service_accounts_are_listed_apart_from_people(admin_page: Page, ui: Ui) -> None:
    page = admin_page
    page.goto(ui.url("/admin/users"))
    services = page.get_by_test_id("services-table")
    expect(services.get_by_role("link", name="svc-api")).to_be_visible()
    expect(services.get_by_role("link", name="svc-graveler")).to_be_visible()
    people = page.get_by_test_id("users-table")
    expect(people.get_by_role("link", name="admin", exact=True)).to_be_visible()
    expect(people.get_by_role("link", name="svc-api")).to_have_count(0)
    expect(services.get_by_role("link", name="admin", exact=True)).to_have_count(0)
    ui.shot(page, "people-and-services")


def _second_browser(browser: Browser, ui: Ui, creds: object) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    ui.login(page, creds)  # type: ignore[arg-type]
    return page


def test_sign_out_everywhere_ends_the_other_browsers_session(
    page: Page, browser: Browser, ui: Ui, rest: RestApi
) -> None:
    creds = rest.create_user(group="Developers")
    ui.login(page, creds)
    other = _second_browser(browser, ui, creds)
    bystander_creds = rest.create_user(group="Developers")
    bystander = _second_browser(browser, ui, bystander_creds)
    try:
        page.get_by_test_id("logout-everywhere").click()
        page.get_by_test_id("confirm-dialog").get_by_role("button", name="Sign out everywhere").click()
        expect(page.get_by_role("button", name="Log in")).to_be_visible()
        # The other browser's cookie is refused on its next request: back to the sign-in page.
        other.reload()
        expect(other.get_by_role("button", name="Log in")).to_be_visible()
        # Another user's session is untouched.
        bystander.reload()
        expect(bystander.get_by_test_id("whoami")).to_be_visible()
    finally:
        other.context.close()
        bystander.context.close()


def test_admin_signs_a_user_out_everywhere(admin_page: Page, browser: Browser, ui: Ui, rest: RestApi) -> None:
    user = f"leaver-{secrets.token_hex(3)}"
    creds = rest.create_user(group="Developers", name=user)
    theirs = _second_browser(browser, ui, creds)
    try:
        admin_page.goto(ui.url(f"/admin/users/{user}"))
        admin_page.get_by_test_id("revoke-sessions").click()
        admin_page.get_by_test_id("confirm-dialog").get_by_role("button", name="Sign out everywhere").click()
        expect(admin_page.get_by_test_id("sessions-revoked")).to_be_visible()
        theirs.reload()
        expect(theirs.get_by_role("button", name="Log in")).to_be_visible()
        # The admin's own session goes on.
        admin_page.reload()
        expect(admin_page.get_by_test_id("whoami")).to_have_text("admin")
    finally:
        theirs.context.close()
