"""Reviewing data in Chromium: a changed object's diff followed from a commit and a compare view
(a CSV's rows by position and by key, a Parquet file's schema and rows, a text's lines), SQL over an object with
paged results, and a Markdown README rendered."""

from __future__ import annotations

import io
import shutil
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import SCREENSHOTS, RestApi, Ui
from tests.support.gateway_stack import GatewayStack


def _put(stack: GatewayStack, repo: str, key: str, body: bytes, content_type: str) -> None:
    stack.client().put_object(Bucket=repo, Key=f"main/{key}", Body=body, ContentType=content_type)


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _shot(ui: Ui, page: Page, name: str) -> None:
    """The test's numbered screenshot, and a copy under a stable name in test-output/ui/."""
    shutil.copyfile(ui.shot(page, name), SCREENSHOTS / f"{name}.png")


def _tree_object(page: Page, path: str) -> Locator:
    """The diff link of one changed object in a changes tree (its folders expanded)."""
    return page.locator(f'[data-testid="tree-object"][data-path="{path}"]').get_by_test_id("tree-object-link")


def test_diffs_followed_from_a_compare_and_a_commit(
    admin_page: Page, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    _put(ui_stack, repo, "t/people.csv", b"id,name,score\n1,ann,10\n2,bob,20\n3,cy,30\n", "text/csv")
    before = pa.table({"id": [1, 2, 3], "temp": pa.array([10, 20, 30], pa.int32()), "city": ["a", "b", "c"]})
    _put(ui_stack, repo, "t/weather.parquet", _parquet(before), "application/octet-stream")
    _put(ui_stack, repo, "src/job.py", b"import os\n\n# run it\ndef main():\n    return 1\n", "text/x-python")
    rest.ok("POST", f"/repositories/{repo}/branches/main/commits", {"message": "first"})
    assert rest.call("POST", f"/repositories/{repo}/branches", {"name": "before", "source": "main"}).status == 201
    _put(ui_stack, repo, "t/people.csv", b"id,name,score\n2,bob,25\n1,ann,10\n4,dee,40\n", "text/csv")
    after = pa.table({"id": [1, 2, 4], "temp": pa.array([10.0, 21.5, 40.0]), "wind": [1, 2, 3]})
    _put(ui_stack, repo, "t/weather.parquet", _parquet(after), "application/octet-stream")
    job = b"import os\nimport sys\n\n# run it\ndef main():\n    return 2\n"
    _put(ui_stack, repo, "src/job.py", job, "text/x-python")
    commit = rest.ok("POST", f"/repositories/{repo}/branches/main/commits", {"message": "second"})

    # From the compare view: the CSV, by position as asked, then on its key column.
    page.goto(ui.url(f"/repositories/{repo}/compare?base=before&compare=main"))
    page.get_by_role("button", name="Expand t/", exact=True).click()
    _tree_object(page, "t/people.csv").click()
    page.get_by_label("key column").select_option(label="their position")
    expect(page.get_by_test_id("diff-counts")).to_contain_text("3 changed")
    page.get_by_label("key column").select_option(label="key column id")
    counts = page.get_by_test_id("diff-counts")
    expect(counts).to_contain_text("1 added")
    expect(counts).to_contain_text("1 removed")
    expect(counts).to_contain_text("1 changed")
    changed = page.get_by_test_id("row-changed")
    expect(changed.locator("td.cell-changed")).to_have_text("20 25")
    expect(page.get_by_test_id("row-added")).to_contain_text("dee")
    expect(page.get_by_test_id("row-removed")).to_contain_text("cy")
    _shot(ui, page, "object-diff-csv")

    # From the commit's page: the Parquet file and the text.
    page.goto(ui.url(f"/repositories/{repo}/commits/{commit['id']}"))
    page.get_by_role("button", name="Expand t/", exact=True).click()
    _tree_object(page, "t/weather.parquet").click()
    schema = page.get_by_test_id("schema-change")
    expect(schema).to_contain_text("added wind BIGINT")
    expect(schema).to_contain_text("removed city VARCHAR")
    expect(schema).to_contain_text("type changed temp INTEGER → DOUBLE")
    page.get_by_label("key column").select_option(label="key column id")
    expect(page.get_by_test_id("row-added")).to_contain_text("40.0")
    expect(page.get_by_test_id("diff-metadata")).to_contain_text(commit["id"][:12])
    _shot(ui, page, "object-diff-parquet")

    # From a pull request (main into before): what main changed since it left before.
    proposal = {"title": "t", "source_branch": "main", "destination_branch": "before"}
    pull = rest.ok("POST", f"/repositories/{repo}/pulls", proposal)
    page.goto(ui.url(f"/repositories/{repo}/pulls/{pull['id']}"))
    page.get_by_test_id("pull-diff").get_by_role("button", name="Expand src/", exact=True).click()
    _tree_object(page, "src/job.py").click()
    text = page.get_by_test_id("text-diff")
    added, removed = text.get_by_test_id("line-added"), text.get_by_test_id("line-removed")
    expect(added.locator("td.line-text")).to_have_text(["+ import sys", "+     return 2"])
    expect(removed.locator("td.line-text")).to_have_text(["-     return 1"])
    expect(removed.locator("td.line-number").first).to_have_text("5")
    _shot(ui, page, "object-diff-text")


def test_query_an_object_and_page_its_results(admin_page: Page, ui: Ui, ui_stack: GatewayStack, repo: str) -> None:
    page = admin_page
    table = pa.table({"id": list(range(250)), "city": [f"city {i % 5}" for i in range(250)]})
    _put(ui_stack, repo, "cities.parquet", _parquet(table), "application/octet-stream")
    page.goto(ui.url(f"/repositories/{repo}/object?ref=main&path=cities.parquet"))
    page.get_by_test_id("query-object").click()
    page.get_by_label("SQL", exact=True).fill("SELECT id, city FROM data WHERE id >= 20 ORDER BY id")
    page.get_by_role("button", name="Run").click()
    info = page.get_by_test_id("query-info")
    expect(info).to_have_text("Rows 1 to 100 of 230")
    rows = page.get_by_test_id("query-table").locator("tbody tr")
    expect(rows).to_have_count(100)
    expect(rows.first.locator("td")).to_have_text(["20", "city 0"])
    page.get_by_role("button", name="Next page").click()
    expect(info).to_have_text("Rows 101 to 200 of 230")
    expect(rows.first.locator("td")).to_have_text(["120", "city 0"])
    _shot(ui, page, "query")

    page.get_by_label("SQL", exact=True).fill("SELECT * FROM read_csv('/etc/passwd')")
    page.get_by_role("button", name="Run").click()
    expect(page.get_by_test_id("error-note")).to_contain_text("disabled by configuration")
    _shot(ui, page, "query-refused")


def test_a_markdown_readme_is_rendered_and_its_raw_text_kept(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    readme = (
        b"# Weather data\n\nDaily **temperatures**, see [the docs](https://example.com/docs).\n\n"
        b"- one\n- two\n\n<script>window.ran = 1</script>\n\n[bad](javascript:window.ran=2)\n\n```sql\nSELECT 1\n```\n"
    )
    _put(ui_stack, repo, "README.md", readme, "text/markdown")
    page.goto(ui.url(f"/repositories/{repo}/object?ref=main&path={quote('README.md')}"))
    rendered = page.get_by_test_id("preview-markdown")
    expect(rendered.locator("h1")).to_have_text("Weather data")
    expect(rendered.locator("strong")).to_have_text("temperatures")
    expect(rendered.locator("li")).to_have_text(["one", "two"])
    expect(rendered.get_by_role("link", name="the docs")).to_have_attribute("href", "https://example.com/docs")
    expect(rendered.locator("pre code")).to_have_text("SELECT 1\n")
    # Raw HTML shows as text, and a javascript: link is no link.
    expect(rendered).to_contain_text("<script>window.ran = 1</script>")
    expect(rendered.locator("script")).to_have_count(0)
    expect(rendered.locator("a[href^='javascript']")).to_have_count(0)
    assert page.evaluate("window.ran") is None
    _shot(ui, page, "markdown")
    page.get_by_role("button", name="Raw").click()
    expect(page.get_by_test_id("preview-text")).to_contain_text("# Weather data")
