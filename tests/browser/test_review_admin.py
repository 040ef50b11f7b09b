"""The administration pages in Chromium: an admin creates a user, a credential (its secret shown
once, gone after a reload, and working), a group with that user as a member and a policy
attached to it; a developer gets "Not allowed" pages from the API's 403."""

from __future__ import annotations

import json
import secrets

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.browser.conftest import RestApi, Ui, choose
from tests.support.wait import wait_until


def test_admin_creates_user_credential_group_and_policy(
    admin_page: Page, context: BrowserContext, ui: Ui, rest: RestApi
) -> None:
    page = admin_page
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    user = f"ann-{secrets.token_hex(3)}"
    group = f"team-{secrets.token_hex(3)}"
    policy = f"read-all-{secrets.token_hex(3)}"

    page.get_by_role("link", name="Administration").click()
    expect(page.get_by_test_id("users-table")).to_contain_text("admin")
    page.get_by_test_id("create-user").get_by_label("New user ID").fill(user)
    page.get_by_test_id("create-user").get_by_role("button", name="Create user").click()
    expect(page.get_by_test_id("users-table").get_by_role("link", name=user)).to_be_visible()
    ui.shot(page, "users")

    page.get_by_test_id("users-table").get_by_role("link", name=user).click()
    expect(page.get_by_test_id("user-id")).to_have_text(user)
    page.get_by_test_id("create-credentials").click()
    shown = page.get_by_test_id("new-secret")
    expect(shown).to_be_visible()
    key_id = page.get_by_test_id("new-access-key-id").input_value()
    secret = page.get_by_test_id("new-secret-value").input_value()
    assert key_id and len(secret) >= 20
    page.get_by_test_id("copy-secret").click()
    expect(shown.get_by_text("Copied to the clipboard.")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == secret
    expect(page.get_by_test_id("credentials-table").get_by_test_id("access-key-id")).to_have_text([key_id])
    ui.shot(page, "credential-created")
    # Shown once: after a reload the key is listed, its secret nowhere on the page.
    page.reload()
    expect(page.get_by_test_id("credentials-table").get_by_test_id("access-key-id")).to_have_text([key_id])
    expect(page.get_by_test_id("new-secret")).to_have_count(0)
    assert secret not in page.content()
    ui.shot(page, "credential-after-reload")
    # The secret that was shown is the real one.
    created = Credentials(key_id, SecretStr(secret))
    assert rest.ok("GET", "/user", creds=created)["user"]["id"] == user

    page.get_by_role("link", name="Groups").click()
    create = page.get_by_test_id("create-group")
    create.get_by_label("New group ID").fill(group)
    create.get_by_label("Description").fill("Readers of everything")
    create.get_by_role("button", name="Create group").click()
    page.get_by_test_id("groups-table").get_by_role("link", name=group).click()
    choose(page, "add-member", "User", user, "Add member")
    expect(page.get_by_test_id("group-members").get_by_role("link", name=user)).to_be_visible()
    ui.shot(page, "group-with-member")

    page.get_by_role("link", name="Policies").click()
    page.get_by_test_id("new-policy").click()
    editor = page.get_by_test_id("policy-editor")
    editor.get_by_label("Policy ID").fill(policy)
    document = {"statement": [{"effect": "allow", "action": ["ReadRepo"], "resource": "*"}]}
    editor.get_by_label("Document").fill(json.dumps(document))
    editor.get_by_test_id("save-policy").click()
    expect(page.get_by_test_id("policy-id")).to_have_text(policy)
    viewed = json.loads(page.get_by_test_id("policy-json").inner_text())
    assert viewed["statement"][0]["effect"] == "allow" and viewed["statement"][0]["resource"] == "*"
    ui.shot(page, "policy")
    # Invalid JSON is caught before any call; an unknown action is the API's 400, shown as such.
    page.get_by_test_id("edit-as-new").click()
    editor = page.get_by_test_id("policy-editor")
    expect(editor.get_by_label("Policy ID")).to_have_value(f"{policy}-copy")
    editor.get_by_label("Document").fill("{not json")
    expect(editor.get_by_test_id("policy-problems")).to_contain_text("not valid JSON")
    expect(editor.get_by_test_id("save-policy")).to_be_disabled()
    editor.get_by_label("Document").fill(
        json.dumps({"statement": [{"effect": "allow", "action": ["NoSuchThing"], "resource": "*"}]})
    )
    editor.get_by_test_id("save-policy").click()
    expect(editor.get_by_test_id("error-note")).to_contain_text("NoSuchThing")
    ui.shot(page, "policy-refused")

    page.goto(ui.url(f"/admin/groups/{group}"))
    choose(page, "attach-group-policy", "Policy", policy, "Attach policy")
    expect(page.get_by_test_id("group-policies").get_by_role("link", name=policy)).to_be_visible()
    ui.shot(page, "group-with-policy")

    # What the pages show is what the API holds.
    members = rest.ok("GET", f"/auth/groups/{group}/members")["results"]
    assert [m["id"] for m in members] == [user]
    attached = rest.ok("GET", f"/auth/groups/{group}/policies")["results"]
    assert [p["id"] for p in attached] == [policy]
    assert [g["id"] for g in rest.ok("GET", f"/auth/users/{user}/groups")["results"]] == [group]

    # Deleting the credential ends it.
    page.goto(ui.url(f"/admin/users/{user}"))
    page.get_by_test_id("delete-credentials").click()
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Delete access key").click()
    expect(page.get_by_test_id("credentials-table").get_by_text("No credentials.")).to_be_visible()
    # Services cache key answers for auth.cache_ttl_seconds (1 s on this stack): refused after that.
    wait_until(
        lambda: rest.call("GET", "/user", creds=created).status == 401,
        timeout=30,
        message="the deleted access key to be refused",
        interval=0.1,
    )


@pytest.mark.parametrize("path", ["/admin", "/admin/groups", "/admin/policies", "/admin/users/admin"])
def test_non_admin_is_not_allowed(page: Page, ui: Ui, rest: RestApi, path: str) -> None:
    developer = rest.create_user(group="Developers")
    ui.login(page, developer)
    page.goto(ui.url(path))
    error = page.get_by_test_id("error-page")
    expect(error.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(error.locator(".error-message")).not_to_be_empty()
    # The API's refusal, and no control of the page behind it.
    expect(page.get_by_test_id("create-user")).to_have_count(0)
    expect(page.get_by_test_id("users-table")).to_have_count(0)
    assert "Traceback" not in page.content()
    ui.shot(page, "not-allowed")
