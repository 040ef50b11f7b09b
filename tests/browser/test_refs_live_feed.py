"""The live feed page of a branch, driven in Chromium: it subscribes to the branch's
server-sent history events (GET /api/v1/repositories/{repo}/branches/{branch}/events) and shows
each new event at the top without a reload; when the stream is refused it says so."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import RestApi, Ui
from tests.support.gateway_stack import GatewayStack

# The promise: a write shows in the open page within this long.
FEED_DELAY_MS = 2_000


def test_a_boto3_write_appears_in_the_open_page_without_reload(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page, s3 = admin_page, ui_stack.client()
    page.goto(ui.url(f"/repositories/{repo}/live?ref=main"))
    expect(page.get_by_test_id("feed-state")).to_contain_text("Live")
    ui.shot(page, "live-empty")
    url = page.url

    s3.put_object(Bucket=repo, Key="main/incoming/new.csv", Body=b"a,b\n1,2\n")
    written = page.get_by_test_id("feed-event").filter(has_text="incoming/new.csv")
    expect(written).to_contain_text("write", timeout=FEED_DELAY_MS)
    ui.shot(page, "live-write")

    commit = rest.ok("POST", f"/repositories/{repo}/branches/main/commits", {"message": "feed me"})
    newest = page.get_by_test_id("feed-event").first
    expect(newest).to_contain_text("feed me", timeout=FEED_DELAY_MS)
    expect(newest).to_contain_text(commit["id"][:12])

    # A reset and a merge into the branch.
    s3.put_object(Bucket=repo, Key="main/oops.txt", Body=b"oops")
    rest.ok("PUT", f"/repositories/{repo}/branches/main", {"type": "object", "path": "oops.txt"})
    expect(page.get_by_test_id("feed-event").first).to_contain_text("reset", timeout=FEED_DELAY_MS)
    created = rest.call("POST", f"/repositories/{repo}/branches", {"name": "dev", "source": "main"})
    assert created.status == 201, created.data
    s3.put_object(Bucket=repo, Key="dev/from-dev.txt", Body=b"dev")
    rest.ok("POST", f"/repositories/{repo}/branches/dev/commits", {"message": "dev work"})
    rest.ok("POST", f"/repositories/{repo}/refs/dev/merge/main", {"message": "bring dev in"})
    merged = page.get_by_test_id("feed-event").filter(has_text="bring dev in")
    expect(merged).to_contain_text("merge", timeout=FEED_DELAY_MS)
    # Events of other branches stay out of this branch's feed.
    expect(page.get_by_test_id("feed-event").filter(has_text="from-dev.txt")).to_have_count(0)
    ui.shot(page, "live-reset-merge")

    s3.delete_object(Bucket=repo, Key="main/incoming/new.csv")
    expect(page.get_by_test_id("feed-event").first).to_contain_text("delete", timeout=FEED_DELAY_MS)

    # Reads are many: shown only when asked for.
    s3.put_object(Bucket=repo, Key="main/read-me.txt", Body=b"r")
    expect(page.get_by_test_id("feed-event").filter(has_text="read-me.txt")).to_have_count(1, timeout=FEED_DELAY_MS)
    s3.get_object(Bucket=repo, Key="main/read-me.txt")["Body"].read()
    # A write after the read: once it shows, the read has arrived too, hidden.
    s3.put_object(Bucket=repo, Key="main/after-read.txt", Body=b"a")
    expect(page.get_by_test_id("feed-event").first).to_contain_text("after-read.txt", timeout=FEED_DELAY_MS)
    reads = page.locator("[data-testid=feed-event].event-read")
    expect(reads).to_have_count(0)
    page.get_by_label("Show reads").check()
    expect(reads.filter(has_text="read-me.txt")).to_have_count(1, timeout=FEED_DELAY_MS)
    ui.shot(page, "live-with-reads")
    assert page.url == url  # never reloaded nor navigated


def test_a_refused_stream_is_stated_on_the_page(admin_page: Page, ui: Ui, repo: str) -> None:
    page = admin_page
    page.goto(ui.url(f"/repositories/{repo}/live?ref=no-such-branch"))
    expect(page.get_by_test_id("feed-state")).to_contain_text("unavailable")
    ui.shot(page, "live-unavailable")
