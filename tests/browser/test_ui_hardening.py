"""What the UI keeps to itself: the login page follows `next` only to paths of the UI, and an
object's physical address is shown to administrators only (the REST API returns it to every
reader, as lakeFS's stat does)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import RestApi, Ui
from tests.support.gateway_stack import GatewayStack

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("target", ["https://example.com/x", "//example.com/x", "/api/v1/user", "javascript:alert(1)"])
def test_login_next_outside_the_ui_goes_home(page: Page, ui: Ui, ui_stack: GatewayStack, target: str) -> None:
    page.goto(ui.url("/login") + "?next=" + target.replace("/", "%2F").replace(":", "%3A"))
    page.get_by_label("Access key ID").fill(ui_stack.admin.access_key_id)
    page.get_by_label("Secret access key").fill(ui_stack.admin.secret_access_key.get_secret_value())
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_test_id("whoami")).to_have_text("admin")
    expect(page).to_have_url(ui.url("/"))
    expect(page.get_by_test_id("error-note")).to_have_count(0)


def test_login_next_inside_the_ui_is_followed(page: Page, ui: Ui, ui_stack: GatewayStack) -> None:
    page.goto(ui.url("/login") + "?next=%2Fui%2Fadmin%2Fgroups")
    page.get_by_label("Access key ID").fill(ui_stack.admin.access_key_id)
    page.get_by_label("Secret access key").fill(ui_stack.admin.secret_access_key.get_secret_value())
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(ui.url("/admin/groups"))


def test_object_preview_shows_the_physical_address_to_admins_only(
    page: Page, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    ui_stack.client().put_object(Bucket=repo, Key="main/notes.txt", Body=b"hello", ContentType="text/plain")
    reader = rest.create_user(group="Analysts")
    object_page = ui.url(f"/repositories/{repo}/object?ref=main&path=notes.txt")
    ui.login(page, reader)
    page.goto(object_page)
    details = page.get_by_test_id("object-details")
    expect(details).to_contain_text("5 bytes")
    expect(page.get_by_test_id("preview-text")).to_contain_text("hello")
    expect(details).not_to_contain_text("Physical address")
    page.get_by_role("button", name="Log out").click()
    ui.login(page, ui_stack.admin)
    page.goto(object_page)
    expect(page.get_by_test_id("object-details")).to_contain_text("Physical address")
