"""The web UI's shell, login, repositories and object browser, driven in Chromium: each flow as
a user does it, checked against what the API then holds."""

from __future__ import annotations

import io
import json
import secrets
import struct
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from playwright.sync_api import Dialog, Page, expect

from silt.graveler.v1 import graveler_pb2 as api
from tests.browser.conftest import PAGE_TIMEOUT_MS, RestApi, Ui
from tests.support.gateway_stack import GatewayStack

XSS_NAME = "<img src=x onerror=alert(1)>"
# Entries staged per StageEntries call when a test needs many objects listed.
STAGE_BATCH = 250


def _png(width: int, height: int) -> bytes:
    """A small solid PNG, written by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x2b\x5f\xb8" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _parquet() -> bytes:
    out = io.BytesIO()
    table = pa.table({"station": [f"st-{i}" for i in range(300)], "temp": [i / 10 for i in range(300)]})
    pq.write_table(table, out, row_group_size=150)
    return out.getvalue()


def _put(stack: GatewayStack, repo: str, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
    stack.client().put_object(Bucket=repo, Key=f"main/{key}", Body=body, ContentType=content_type)


def _no_dialogs(page: Page) -> list[str]:
    """Collects (and dismisses) any alert/confirm the page opens: none may open."""
    opened: list[str] = []

    def record(dialog: Dialog) -> None:
        opened.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    return opened


def test_login_survives_reload_and_logout_ends_it(page: Page, ui: Ui, ui_stack: GatewayStack) -> None:
    page.goto(ui.url("/"))
    expect(page.get_by_test_id("login-form")).to_be_visible()
    ui.shot(page, "login")
    page.get_by_label("Access key ID").fill(ui_stack.admin.access_key_id)
    page.get_by_label("Secret access key").fill("not-the-secret")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_test_id("error-note")).to_be_visible()
    ui.shot(page, "login-refused")
    ui.login(page, ui_stack.admin)
    expect(page.get_by_test_id("whoami")).to_have_text("admin")
    cookie = next(c for c in page.context.cookies() if c["name"] == "internal_auth_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    ui.shot(page, "signed-in")
    page.reload()
    expect(page.get_by_test_id("whoami")).to_have_text("admin")
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_test_id("login-form")).to_be_visible()
    page.reload()
    expect(page.get_by_test_id("login-form")).to_be_visible()
    ui.shot(page, "logged-out")


def test_create_search_and_delete_a_repository(admin_page: Page, ui: Ui, rest: RestApi) -> None:
    page = admin_page
    name = f"ui-create-{secrets.token_hex(3)}"
    other = rest.create_repo(f"ui-other-{secrets.token_hex(3)}")
    page.get_by_role("button", name="Create repository").click()
    form = page.get_by_test_id("create-repository")
    form.get_by_label("Name", exact=True).fill(name)
    form.get_by_label("Storage namespace").fill(f"local://{name}")
    form.get_by_label("Default branch").fill("trunk")
    ui.shot(page, "create-form")
    form.get_by_role("button", name="Create").click()
    table = page.get_by_test_id("repositories")
    expect(table.get_by_role("link", name=name, exact=True)).to_be_visible()
    assert rest.ok("GET", f"/repositories/{name}")["default_branch"] == "trunk"

    page.get_by_label("search repositories").fill("create")
    expect(table.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(table.get_by_role("link", name=other, exact=True)).to_have_count(0)
    ui.shot(page, "searched")

    page.get_by_role("button", name=f"delete {name}").click()
    dialog = page.get_by_test_id("confirm-dialog")
    confirm = dialog.get_by_role("button", name="Delete repository")
    expect(confirm).to_be_disabled()
    dialog.get_by_label("to confirm").fill(name[:-1])
    expect(confirm).to_be_disabled()
    dialog.get_by_label("to confirm").fill(name)
    ui.shot(page, "delete-confirm")
    confirm.click()
    expect(table.get_by_role("link", name=name, exact=True)).to_have_count(0)
    assert rest.call("GET", f"/repositories/{name}").status == 404
    ui.shot(page, "deleted")


def test_upload_browse_preview_download_and_delete(
    admin_page: Page, ui: Ui, rest: RestApi, repo: str, tmp_path: Path
) -> None:
    page = admin_page
    files = {
        "notes.txt": b"hello from the browser\nsecond line\n",
        "cities.csv": b'city,"population, 2020"\nOslo,"709,037"\nBergen,"285,911"\n',
        "pixel.png": _png(40, 20),
        "weather.parquet": _parquet(),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    page.get_by_role("button", name="Upload").click()
    form = page.get_by_test_id("upload-form")
    form.get_by_label("Files").set_input_files([str(tmp_path / name) for name in files])
    form.get_by_label("Into directory").fill("in/")
    ui.shot(page, "upload-form")
    form.get_by_role("button", name="Upload").click()
    expect(page.get_by_test_id("upload-form")).to_have_count(0)
    listed = [row["path"] for row in rest.ok("GET", f"/repositories/{repo}/refs/main/objects/ls")["results"]]
    assert sorted(listed) == sorted(f"in/{name}" for name in files)

    # The root shows the directory; the directory its files.
    entries = page.get_by_test_id("entry")
    expect(entries).to_have_text(["in/"])
    ui.shot(page, "root")
    entries.first.click()
    expect(entries).to_have_text(sorted(files))
    ui.shot(page, "directory")

    entries.filter(has_text="notes.txt").click()
    details = page.get_by_test_id("object-details")
    expect(details).to_contain_text(f"{len(files['notes.txt'])} bytes")
    expect(details).to_contain_text("Physical address")
    expect(page.get_by_test_id("preview-text")).to_contain_text("hello from the browser")
    ui.shot(page, "text")
    with page.expect_download() as download:
        page.get_by_test_id("download").click()
    assert Path(download.value.path()).read_bytes() == files["notes.txt"]

    page.go_back()
    entries.filter(has_text="cities.csv").click()
    csv = page.get_by_test_id("preview-csv")
    expect(csv.locator("th")).to_have_text(["city", "population, 2020"])
    expect(csv.locator("tbody tr").nth(1).locator("td")).to_have_text(["Bergen", "285,911"])
    ui.shot(page, "csv")

    page.go_back()
    entries.filter(has_text="pixel.png").click()
    image = page.get_by_test_id("preview-image").locator("img")
    expect(image).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 40", arg=image.element_handle())
    ui.shot(page, "image")

    page.go_back()
    entries.filter(has_text="weather.parquet").click()
    parquet = page.get_by_test_id("preview-parquet")
    expect(parquet).to_contain_text("First 100 of 300 rows (2 row groups)")
    expect(parquet.locator("table").nth(1).locator("tbody tr")).to_have_count(100)
    expect(parquet.locator("table").nth(1).locator("tbody tr").first.locator("td")).to_have_text(["st-0", "0"])
    ui.shot(page, "parquet")

    page.get_by_role("button", name="Delete").click()
    page.get_by_test_id("confirm-dialog").get_by_role("button", name="Delete object").click()
    expect(entries).to_have_text(sorted(set(files) - {"weather.parquet"}))
    assert rest.call("GET", f"/repositories/{repo}/refs/main/objects/stat?path=in/weather.parquet").status == 404
    ui.shot(page, "after-delete")


def test_page_through_a_directory_of_2500_objects(admin_page: Page, ui: Ui, ui_stack: GatewayStack, repo: str) -> None:
    page = admin_page
    keys = [f"many/{i:05d}.txt" for i in range(2_500)]
    # The paging is the UI's, over graveler's listing: one object's bytes go in through the S3
    # gateway, and the others are staged as copies of its entry, a batch of them per gRPC call
    # (a call for each cost this test more than its browser did: 2,500 signed calls, each
    # authorized and written on its own).
    _put(ui_stack, repo, keys[0], b"many")
    graveler = ui_stack.graveler
    stat = api.StatEntryRequest(repository=repo, ref="main", key=keys[0])
    written = graveler.StatEntry(stat, timeout=30).entry

    def stage(batch: list[str]) -> None:
        entries = [api.StagedEntry(key=key, entry=written) for key in batch]
        graveler.StageEntries(api.StageEntriesRequest(repository=repo, branch="main", entries=entries), timeout=60)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(stage, [keys[i : i + STAGE_BATCH] for i in range(1, len(keys), STAGE_BATCH)]))
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main&path=many/"))
    entries = page.get_by_test_id("entry")
    # A page of 1,000 rows renders in seconds on a loaded machine: each page gets the page wait.
    expect(entries).to_have_count(1_000, timeout=PAGE_TIMEOUT_MS)
    expect(entries.first).to_have_text("00000.txt")
    expect(page.get_by_test_id("page-info")).to_have_text("Page 1: 1000 entries, more on the next page")
    ui.shot(page, "page-1")
    page.get_by_test_id("next-page").click()
    expect(entries.first).to_have_text("01000.txt", timeout=PAGE_TIMEOUT_MS)
    expect(entries).to_have_count(1_000)
    page.get_by_test_id("next-page").click()
    expect(entries).to_have_count(500, timeout=PAGE_TIMEOUT_MS)
    expect(entries.last).to_have_text("02499.txt")
    expect(page.get_by_test_id("page-info")).to_have_text("Page 3: 500 entries")
    expect(page.get_by_test_id("next-page")).to_have_count(0)
    ui.shot(page, "page-3")
    # Back through the browser's history: the cursor is in the URL.
    page.go_back()
    expect(entries.first).to_have_text("01000.txt", timeout=PAGE_TIMEOUT_MS)


def test_a_hostile_object_name_is_shown_as_text(admin_page: Page, ui: Ui, ui_stack: GatewayStack, repo: str) -> None:
    page = admin_page
    dialogs = _no_dialogs(page)
    _put(ui_stack, repo, XSS_NAME, b"not a picture", "text/plain")
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    entry = page.get_by_test_id("entry")
    expect(entry).to_have_text(XSS_NAME)
    assert page.locator("img").count() == 0
    ui.shot(page, "listed")
    entry.click()
    expect(page.get_by_test_id("object-name")).to_have_text(XSS_NAME)
    expect(page.get_by_test_id("preview-text")).to_contain_text("not a picture")
    assert page.locator("img").count() == 0
    ui.shot(page, "details")
    assert dialogs == []


def test_an_uploaded_page_does_not_run_in_the_ui_origin(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page = admin_page
    dialogs = _no_dialogs(page)
    # Were it to run with the UI's origin and cookie, it would create a repository.
    attack = (
        "<html><body><h1>hostile</h1><script>document.title='ran';"
        "fetch('/api/v1/repositories',{method:'POST',headers:{'Content-Type':'application/json'},"
        f"body:JSON.stringify({{name:'{repo}-owned',storage_namespace:'local://{repo}-owned'}})}});"
        "alert('ran')</script></body></html>"
    )
    _put(ui_stack, repo, "evil.html", attack.encode(), "text/html")
    page.goto(ui.url(f"/repositories/{repo}/object?ref=main&path=evil.html"))
    expect(page.get_by_test_id("preview-text")).to_contain_text("<script>document.title='ran'")
    ui.shot(page, "as-text")
    # Opened directly, with the session cookie: served sandboxed, so no script runs.
    response = page.goto(ui_stack.endpoint + f"/api/v1/repositories/{repo}/refs/main/objects?path=evil.html")
    assert response is not None and response.headers["content-security-policy"] == "sandbox"
    expect(page.get_by_role("heading", name="hostile")).to_be_visible()
    ui.shot(page, "opened-directly")
    assert page.title() != "ran" and dialogs == []
    assert rest.call("GET", f"/repositories/{repo}-owned").status == 404


class _AttackerSite:
    """A page on another origin (another port of 127.0.0.1) that makes the victim's browser
    send state-changing requests to Silt as a forger can: a form upload (multipart, which the
    upload endpoint takes), a text/plain form carrying JSON, and a no-cors fetch."""

    def __init__(self, target: str, repo: str) -> None:
        upload = f"{target}/api/v1/repositories/{repo}/branches/main/objects?path=forged.txt"
        create_branch = f"{target}/api/v1/repositories/{repo}/branches"
        create_repo = f"{target}/api/v1/repositories"
        body = json.dumps({"name": f"{repo}-forged", "storage_namespace": f"local://{repo}-forged"})
        # enctype text/plain sends `name=value`: the name carries a JSON object up to the '='.
        page = f"""<!doctype html><html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="upload" method="POST" action="{upload}" enctype="multipart/form-data" target="sink1">
<textarea name="content">forged bytes</textarea></form>
<form id="branch" method="POST" action="{create_branch}" enctype="text/plain" target="sink2">
<input name='{{"name":"forged","source":"main","x":"' value='"}}'></form>
<script>
const sent = new Set();
function done(what) {{ sent.add(what); if (sent.size === 3) document.title = "sent"; }}
for (const sink of document.querySelectorAll("iframe")) sink.addEventListener("load", () => done(sink.name));
fetch("{create_repo}", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}}, body: {json.dumps(body)}}}).finally(() => done("fetch"));
document.getElementById("upload").submit();
document.getElementById("branch").submit();
</script></body></html>""".encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _AttackerSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def attacker(ui_stack: GatewayStack, repo: str) -> Iterator[_AttackerSite]:
    with _AttackerSite(ui_stack.endpoint, repo) as site:
        yield site


def test_a_forged_cross_site_post_changes_nothing(
    admin_page: Page, ui: Ui, rest: RestApi, repo: str, attacker: _AttackerSite
) -> None:
    page = admin_page
    assert attacker.url.split(":")[2] != ui.base.split(":")[2]  # another origin, same host
    # The same multipart upload from the UI's own origin, with the same cookie, is stored:
    # what stops the forgery is only where it comes from.
    status = page.evaluate(
        """repo => { const form = new FormData(); form.append("content", new Blob(["mine"]), "mine.txt");
             return fetch(`/api/v1/repositories/${repo}/branches/main/objects?path=mine.txt`,
                          {method: "POST", body: form}).then(r => r.status); }""",
        repo,
    )
    assert status == 201
    page.goto(attacker.url)
    expect(page).to_have_title("sent")
    ui.shot(page, "attacker-page")
    listed = [row["path"] for row in rest.ok("GET", f"/repositories/{repo}/refs/main/objects/ls")["results"]]
    assert listed == ["mine.txt"]
    branches = [b["id"] for b in rest.ok("GET", f"/repositories/{repo}/branches")["results"]]
    assert branches == ["main"]
    assert rest.call("GET", f"/repositories/{repo}-forged").status == 404


def test_browse_a_tag_with_the_ref_picker(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str
) -> None:
    page = admin_page
    _put(ui_stack, repo, "kept.txt", b"in the tag")
    _put(ui_stack, repo, "gone.txt", b"deleted after the tag")
    commit = rest.ok("POST", f"/repositories/{repo}/branches/main/commits", {"message": "two files"})
    rest.ok("POST", f"/repositories/{repo}/tags", {"id": "v1", "ref": commit["id"]})
    rest.call("DELETE", f"/repositories/{repo}/branches/main/objects?path=gone.txt")
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    entries = page.get_by_test_id("entry")
    expect(entries).to_have_text(["kept.txt"])
    expect(page.get_by_role("button", name="Upload")).to_be_visible()
    page.get_by_test_id("ref-picker").get_by_role("button").first.click()
    page.get_by_label("ref filter").fill("v")
    ui.shot(page, "picker")
    page.locator(".ref-group", has_text="Tags").get_by_role("button", name="v1").click()
    expect(entries).to_have_text(["gone.txt", "kept.txt"])
    expect(page.get_by_test_id("read-only")).to_contain_text("read-only: v1 is not a branch")
    expect(page.get_by_role("button", name="Upload")).to_have_count(0)
    assert "ref=v1" in page.url
    ui.shot(page, "tag")
    # Any commit id typed in, confirmed with Enter.
    page.get_by_test_id("ref-picker").get_by_role("button").first.click()
    page.get_by_label("ref filter").fill(commit["id"][:12])
    page.get_by_label("ref filter").press("Enter")
    expect(entries).to_have_text(["gone.txt", "kept.txt"])
    entries.filter(has_text="gone.txt").click()
    expect(page.get_by_test_id("preview-text")).to_contain_text("deleted after the tag")
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)
    ui.shot(page, "commit-object")


def test_a_user_without_rights_gets_a_not_allowed_page(page: Page, ui: Ui, rest: RestApi, repo: str) -> None:
    nobody = rest.create_user()  # in no group: no policy at all
    ui.login(page, nobody)
    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main"))
    error = page.get_by_test_id("error-page")
    expect(error.get_by_role("heading")).to_have_text("Not allowed")
    expect(error).to_contain_text(f"may not ReadObject on {repo}")  # the listing, refused first
    ui.shot(page, "not-allowed")


def test_a_reader_of_one_prefix_sees_only_it(
    page: Page, ui: Ui, rest: RestApi, ui_stack: GatewayStack, repo: str
) -> None:
    """A policy written in the UI's vocabulary of choice, lakeFS's: the repository (as lakeFS
    gives it to readers of some keys) and the keys below raw/. The object browser shows raw/
    only; a gold/ object opened by its address is refused."""
    _put(ui_stack, repo, "raw/a.txt", b"raw data\n", "text/plain")
    _put(ui_stack, repo, "gold/b.txt", b"gold data\n", "text/plain")
    refs = ["fs:ReadRepository", "fs:ReadBranch", "fs:ListBranches", "fs:ReadCommit", "fs:ListCommits"]
    refs += ["fs:ReadTag", "fs:ListTags", "fs:ListObjects"]
    arn = f"arn:lakefs:fs:::repository/{repo}"
    policy = f"raw-{secrets.token_hex(4)}"
    statements = [
        {"effect": "allow", "action": refs, "resource": arn},
        {"effect": "allow", "action": refs, "resource": arn + "/*"},
        {"effect": "allow", "action": ["fs:ReadObject", "fs:ListObjects"], "resource": arn + "/object/raw/*"},
    ]
    rest.ok("POST", "/auth/policies", {"id": policy, "statement": statements})
    reader = rest.create_user()
    rest.ok("PUT", f"/auth/users/{rest.ok('GET', '/user', creds=reader)['user']['id']}/policies/{policy}")
    ui.login(page, reader)

    page.goto(ui.url(f"/repositories/{repo}/objects"))  # the default branch, as the repository says
    entries = page.get_by_test_id("entry")
    expect(entries).to_have_text(["raw/"])
    ui.shot(page, "root-raw-only")
    entries.first.click()
    expect(entries).to_have_text(["a.txt"])
    entries.first.click()
    expect(page.get_by_test_id("preview-text")).to_contain_text("raw data")
    page.goto(ui.url(f"/repositories/{repo}/object?ref=main&path=gold/b.txt"))
    expect(page.get_by_test_id("error-page")).to_contain_text(f"may not ReadObject on {repo}/gold/b.txt")
    ui.shot(page, "gold-refused")
