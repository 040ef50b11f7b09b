"""Browser tests of the web UI: one running stack (auth, graveler, the gateway serving S3, the
REST API and the UI on one port) and one Chromium for the whole session, a fresh browser context
(cookies) and page per test, and helpers to sign in, create users and save screenshots (each
one also checked for accessibility).

The bundle must be built first (`make ui`, or by hand: `npm ci --prefix webui && node
webui/build.mjs`); the `built_ui` fixture fails with that instruction when it is not.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright
from pydantic import SecretStr

from edge.ui.app import DIST
from silt.rpc.signing import Credentials
from tests.browser.accessibility import assert_accessible
from tests.support.gateway_stack import GatewayStack, gateway_stack

# Chromium's old headless shell, what Playwright itself runs for headless Chromium: Debian's full
# browser in its headless mode also ran its own UI's renderer and a busier browser process, 148
# CPU-seconds over the browser tests against 91 (and 201 s against 171 s, the directory alone).
CHROMIUM = "/usr/bin/chromium-headless-shell"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "ui"
# Every wait of a page (selectors, navigation) gives up after this long.
PAGE_TIMEOUT_MS = 15_000
# A shot on a busy machine takes a while.
SCREENSHOT_TIMEOUT_MS = 60_000


@dataclass
class RestApi:
    """Raw REST API calls, Basic-authenticated (as the admin unless told otherwise)."""

    stack: GatewayStack
    http: urllib3.PoolManager = field(default_factory=urllib3.PoolManager)

    def call(
        self, method: str, path: str, body: Any = None, creds: Credentials | None = None, **kwargs: Any
    ) -> urllib3.BaseHTTPResponse:
        creds = creds or self.stack.admin
        headers = urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")
        if body is not None:
            headers["Content-Type"] = "application/json"
            kwargs["body"] = json.dumps(body).encode()
        return self.http.request(
            method, self.stack.endpoint + "/api/v1" + path, headers=headers, retries=False, timeout=30, **kwargs
        )

    def ok(self, method: str, path: str, body: Any = None, creds: Credentials | None = None) -> Any:
        """The JSON answer of a call that must succeed."""
        response = self.call(method, path, body, creds)
        assert 200 <= response.status < 300, (method, path, response.status, response.data[:500])
        return json.loads(response.data) if response.data else None

    def create_repo(self, name: str | None = None, branch: str = "main") -> str:
        name = name or f"r-{secrets.token_hex(4)}"
        self.ok(
            "POST", "/repositories", {"name": name, "storage_namespace": f"local://{name}", "default_branch": branch}
        )
        return name

    def create_user(self, group: str | None = None, name: str | None = None) -> Credentials:
        """A new user (in `group`: Admins, Developers, Analysts...) and its credentials."""
        user = name or f"u-{secrets.token_hex(4)}"
        self.ok("POST", "/auth/users", {"id": user})
        if group:
            self.ok("PUT", f"/auth/groups/{group}/members/{user}")
        issued = self.ok("POST", f"/auth/users/{user}/credentials")
        return Credentials(issued["access_key_id"], SecretStr(issued["secret_access_key"]))


@dataclass
class Ui:
    """The UI's address and the per-test screenshot folder."""

    base: str
    shots: Path
    count: int = 0

    def url(self, path: str = "/") -> str:
        """The browser URL of a UI path ("/repositories/x/objects?ref=main")."""
        return self.base + "/ui" + path

    def shot(self, page: Page, name: str) -> Path:
        """Saves a screenshot of the page as NN-name.png in this test's folder: the viewport, as a
        user sees the page, not the whole scrolled length (a full-page shot of a 1,000-row listing
        is a 30,000-pixel image whose rendering cost the browser tests a third of their time)."""
        self.count += 1
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{self.count:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
        page.screenshot(path=str(path), full_page=False, timeout=SCREENSHOT_TIMEOUT_MS)
        if page.url.startswith(self.base + "/ui"):
            # Every page a test looks at is checked as it is (tests/browser/accessibility.py);
            # not the pages a test serves itself (an attacker's) or raw objects.
            assert_accessible(page)
        return path

    def login(self, page: Page, creds: Credentials) -> None:
        """Signs in through the login form and waits for the signed-in shell."""
        page.goto(self.url("/"))
        page.get_by_label("Access key ID").fill(creds.access_key_id)
        page.get_by_label("Secret access key").fill(creds.secret_access_key.get_secret_value())
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_test_id("whoami")).to_be_visible()


def choose(page: Page, test_id: str, label: str, name: str, button: str) -> None:
    """Picks `name` from an id picker (admin pages: a searchable list, not a typed id) and acts."""
    picker = page.get_by_test_id(test_id)
    picker.get_by_label(label, exact=True).fill(name)
    picker.get_by_role("option", name=name, exact=True).click()
    picker.get_by_role("button", name=button).click()


@pytest.fixture(scope="session")
def built_ui() -> Path:
    if not (DIST / "index.html").is_file():
        pytest.fail(f"the web UI is not built ({DIST}): run `make ui` (npm ci --prefix webui && node webui/build.mjs)")
    return DIST


@pytest.fixture(scope="session")
def ui_landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the stack imports from (docs/import.md), for the Import dialog."""
    return tmp_path_factory.mktemp("ui-landing")


@pytest.fixture(scope="session")
def ui_stack(tmp_path_factory: pytest.TempPathFactory, built_ui: Path, ui_landing: Path) -> Iterator[GatewayStack]:
    overrides = {
        "blockstore": {"local": {"import_enabled": True, "allowed_external_prefixes": [str(ui_landing)]}},
        # The webhook receiver is a thread of the test on 127.0.0.1: opted in (off by default).
        "actions": {"webhook": {"allow_private": True}},
        # Auth's caches keep a key for a second rather than five: a test of a deleted key being
        # refused waits that long.
        "auth": {"cache_ttl_seconds": 1.0},
    }
    with gateway_stack(tmp_path_factory.mktemp("ui-stack"), overrides=overrides) as stack:
        yield stack


@pytest.fixture(scope="session")
def rest(ui_stack: GatewayStack) -> RestApi:
    return RestApi(ui_stack)


class _Chromium:
    """The run's one Chromium, started by the first browser test and stopped as soon as the last
    one is over (not at the end of the session): Playwright's sync API keeps an event loop
    running on the main thread, and the tests collected after these call asyncio.run."""

    def __init__(self) -> None:
        self._running = ExitStack()
        self._browser: Browser | None = None

    def get(self) -> Browser:
        if self._browser is None:
            playwright = self._running.enter_context(sync_playwright())
            # --no-sandbox: the tests run as root, where Chromium's sandbox cannot start.
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=60_000)
            self._running.callback(browser.close)
            self._browser = browser
        return self._browser

    def stop(self) -> None:
        self._browser = None
        self._running.close()  # the browser, then Playwright


_CHROMIUM = _Chromium()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield  # the test's own fixtures (its context and page) are closed first
    here = Path(__file__).parent
    if nextitem is None or not nextitem.path.is_relative_to(here):
        _CHROMIUM.stop()


# Playwright's expectations give up after 5 s by default; the stack shares a loaded machine (a
# table diff's first preview starts its sandbox there), so they wait as long as the page's other
# waits do. An expectation that holds returns at once; only a failing one waits this long.
PLAYWRIGHT_DEFAULT_EXPECT_MS = 5_000


@pytest.fixture(autouse=True)
def patient_expectations() -> Iterator[None]:
    expect.set_options(timeout=PAGE_TIMEOUT_MS)
    yield
    expect.set_options(timeout=PLAYWRIGHT_DEFAULT_EXPECT_MS)


@pytest.fixture
def browser() -> Browser:
    """The run's one Chromium (see _Chromium)."""
    return _CHROMIUM.get()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh cookie jar per test: no test inherits another's session."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    page = context.new_page()
    # A test fails on any script error in the UI, not only on what it looks for.
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    assert not errors, f"script errors in the page: {errors}"


@pytest.fixture
def ui(ui_stack: GatewayStack, request: pytest.FixtureRequest) -> Ui:
    shots = SCREENSHOTS / re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)
    shutil.rmtree(shots, ignore_errors=True)  # only this run's pages, numbered from 01
    return Ui(ui_stack.endpoint, shots)


@pytest.fixture
def admin_page(page: Page, ui: Ui, ui_stack: GatewayStack) -> Page:
    """A page signed in as the admin."""
    ui.login(page, ui_stack.admin)
    return page


@pytest.fixture
def repo(rest: RestApi) -> str:
    """A fresh repository (default branch main) per test."""
    return rest.create_repo()
