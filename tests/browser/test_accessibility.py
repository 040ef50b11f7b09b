"""The accessibility check (tests/browser/accessibility.py) on the pages no other test takes a
screenshot of: every screenshot a browser test takes runs the check too (Ui.shot), so the pages
those tests visit are covered where they are exercised."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.accessibility import assert_accessible, serious_violations
from tests.browser.conftest import Ui


def test_the_login_page_and_a_failed_login_are_accessible(page: Page, ui: Ui) -> None:
    page.goto(ui.url("/"))
    expect(page.get_by_label("Access key ID")).to_be_visible()
    assert_accessible(page)
    page.get_by_label("Access key ID").fill("AKIANOTAKEY")
    page.get_by_label("Secret access key").fill("not-a-secret")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert_accessible(page)


def test_a_missing_page_is_accessible(admin_page: Page, ui: Ui) -> None:
    admin_page.goto(ui.url("/repositories/no-such-repository-here/objects?ref=main"))
    expect(admin_page.get_by_text("no-such-repository-here").first).to_be_visible()
    assert_accessible(admin_page)


def test_the_check_finds_what_it_is_for(admin_page: Page, ui: Ui) -> None:
    """A control without a name and a field without a label, added to a real page, are reported:
    the check is not vacuous."""
    admin_page.goto(ui.url("/"))
    expect(admin_page.get_by_test_id("whoami")).to_be_visible()
    admin_page.evaluate(
        """() => {
            const main = document.querySelector('main') || document.body;
            main.insertAdjacentHTML('beforeend', '<button id="nameless"></button><input id="unlabelled" type="text">');
        }"""
    )
    found = "\n".join(serious_violations(admin_page))
    assert "button-name" in found and "#nameless" in found
    assert "label" in found and "#unlabelled" in found
