"""lakeFS Actions in the web UI, driven in Chromium: a pre-commit webhook answered by a small HTTP
server of the test (200 for one branch's commits, 500 for another's) leaves a completed and a
failed run, which the Actions tab lists, the failed run's page shows with the hook's output, and
a commit's page links to; then a pull request's check (a Lua hook refusing a `bad.csv` on the
source) fails and blocks the merge a protection rule's required check guards, passes once the
file is gone, and passes again when re-run from the page."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import RestApi, Ui
from tests.support.gateway_stack import GatewayStack

ACCEPTED = "accepted"
REJECTED = "rejected"
REFUSAL = "refused by the test server"
CHECK = "Gate/no-bad-csv"

PR_ACTION = """\
name: Gate
on:
  pull-request:
hooks:
  - id: no-bad-csv
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local code, _ = lakefs.stat_object(action.repository_id, action.source_ref, "bad.csv")
        if code == 200 then error("bad.csv present") end
"""


class _Webhook(BaseHTTPRequestHandler):
    """Answers lakeFS's webhook call: 500 with a message for the REJECTED branch, 200 otherwise."""

    calls: list[dict[str, Any]]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        self.calls.append(payload)
        branch = payload.get("branch_id", "")
        status, body = (500, f"{REFUSAL}: branch {branch}") if branch == REJECTED else (200, f"accepted: {branch}")
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook server on 127.0.0.1 (a thread of the test): its URL and the payloads it got."""
    calls: list[dict[str, Any]] = []
    handler = type("Webhook", (_Webhook,), {"calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", calls
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _check_action(url: str) -> str:
    return f"""\
name: Check
on:
  pre-commit:
    branches: ["{ACCEPTED}", "{REJECTED}"]
hooks:
  - id: webhook
    type: webhook
    properties:
      url: "{url}"
"""


def _put(stack: GatewayStack, repo: str, branch: str, path: str, body: bytes) -> None:
    stack.client().put_object(Bucket=repo, Key=f"{branch}/{path}", Body=body)


def _commit(rest: RestApi, repo: str, branch: str, message: str) -> Any:
    return rest.call("POST", f"/repositories/{repo}/branches/{branch}/commits", {"message": message})


def _branch(rest: RestApi, repo: str, name: str, source: str = "main") -> None:
    created = rest.call("POST", f"/repositories/{repo}/branches", {"name": name, "source": source})
    assert created.status == 201, created.data


def _run_row(page: Page, branch: str) -> Locator:
    """The runs table's row of the (only) run of `branch`."""
    table = page.get_by_test_id("runs-table")
    return table.locator("tbody tr").filter(has=page.get_by_test_id("run-branch").get_by_text(branch, exact=True))


def _check(page: Page) -> Locator:
    return page.get_by_test_id("checks").get_by_test_id("check").filter(has_text=CHECK)


def _wait_for_check_of(rest: RestApi, repo: str, pull: str, commit: str, timeout: float = 10) -> None:
    """Until the pull request's check is of `commit` (the server saw the source's new head)."""
    deadline = time.monotonic() + timeout
    while True:
        checks = rest.ok("GET", f"/repositories/{repo}/pulls/{pull}").get("checks") or []
        if any(c["name"] == CHECK and c["commit_id"] == commit for c in checks):
            return
        assert time.monotonic() < deadline, f"no check of {commit}: {checks}"
        time.sleep(0.1)


def test_runs_hook_output_and_commit_link(
    admin_page: Page,
    ui: Ui,
    ui_stack: GatewayStack,
    rest: RestApi,
    repo: str,
    webhook: tuple[str, list[dict[str, Any]]],
) -> None:
    page = admin_page
    url, calls = webhook
    _put(ui_stack, repo, "main", "_lakefs_actions/check.yaml", _check_action(url).encode())
    assert _commit(rest, repo, "main", "add the check action").status == 201
    for branch in (ACCEPTED, REJECTED):
        _branch(rest, repo, branch)
        _put(ui_stack, repo, branch, "data.csv", f"id\n{branch}\n".encode())
    accepted = _commit(rest, repo, ACCEPTED, "accepted by the webhook")
    assert accepted.status == 201, accepted.data
    accepted_id = json.loads(accepted.data)["id"]
    refused = _commit(rest, repo, REJECTED, "refused by the webhook")
    assert refused.status >= 400, refused.data
    assert sorted(str(c.get("branch_id")) for c in calls) == [ACCEPTED, REJECTED]

    # The Actions tab lists both runs, newest first, with their statuses.
    page.goto(ui.url(f"/repositories/{repo}"))
    page.get_by_role("link", name="Actions", exact=True).click()
    expect(page.get_by_test_id("actions-page")).to_be_visible()
    expect(page.get_by_test_id("runs-table").locator("tbody tr")).to_have_count(2)
    expect(page.get_by_test_id("run-branch")).to_have_text([REJECTED, ACCEPTED])
    expect(_run_row(page, ACCEPTED).get_by_test_id("run-status")).to_have_text("completed")
    expect(_run_row(page, ACCEPTED).get_by_test_id("run-event")).to_have_text("pre-commit")
    expect(_run_row(page, REJECTED).get_by_test_id("run-status")).to_have_text("failed")
    expect(_run_row(page, REJECTED).get_by_test_id("run-status")).to_have_class(re.compile("outcome-failed"))
    ui.shot(page, "runs")

    # Filtered by branch.
    page.get_by_label("Branch").fill(ACCEPTED)
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(rf"[?&]branch={ACCEPTED}"))
    expect(page.get_by_test_id("run-branch")).to_have_text([ACCEPTED])
    page.get_by_test_id("runs-filter-clear").click()
    expect(page.get_by_test_id("run-branch")).to_have_text([REJECTED, ACCEPTED])

    # The failed run's page, its hook and the hook's output: the webhook's answer.
    _run_row(page, REJECTED).get_by_test_id("run-link").click()
    expect(page.get_by_test_id("run-page")).to_be_visible()
    expect(page.get_by_test_id("run-failed")).to_be_visible()
    hooks = page.get_by_test_id("hooks-table")
    expect(hooks.get_by_test_id("hook-id")).to_have_text(["webhook"])
    expect(hooks.get_by_test_id("hook-status")).to_have_text(["failed"])
    expect(hooks.get_by_test_id("hook-output")).to_have_count(0)
    hooks.get_by_test_id("hook-toggle").click()
    expect(hooks.get_by_test_id("hook-output")).to_contain_text(f"{REFUSAL}: branch {REJECTED}")
    ui.shot(page, "failed-run-output")
    hooks.get_by_test_id("hook-toggle").click()
    expect(hooks.get_by_test_id("hook-output")).to_have_count(0)

    # From the accepted commit's page to the runs of that commit.
    page.goto(ui.url(f"/repositories/{repo}/commits/{accepted_id}"))
    page.get_by_test_id("commit-actions-link").click()
    expect(page).to_have_url(re.compile(rf"/actions\?commit={accepted_id}$"))
    expect(page.get_by_test_id("runs-commit-filter")).to_contain_text(accepted_id[:12])
    expect(page.get_by_test_id("run-branch")).to_have_text([ACCEPTED])
    expect(page.get_by_test_id("run-commit")).to_have_text([accepted_id[:12]])
    expect(page.get_by_test_id("run-status")).to_have_text(["completed"])
    ui.shot(page, "runs-of-commit")


def _require_check_in_settings(page: Page, ui: Ui, repo: str) -> None:
    page.goto(ui.url(f"/repositories/{repo}/settings"))
    form = page.get_by_test_id("protection-form")
    form.get_by_test_id("add-rule").click()
    rule = form.get_by_test_id("protection-rule")
    rule.get_by_label("pattern").fill("main")
    rule.get_by_label("forbid direct writes").uncheck()
    rule.get_by_label("required checks").fill(f"  {CHECK} ,, ")
    form.get_by_test_id("save-protection").click()
    expect(form.get_by_test_id("protection-saved")).to_be_visible()
    page.reload()
    expect(page.get_by_test_id("protection-rule").get_by_label("required checks")).to_have_value(CHECK)
    ui.shot(page, "required-check")


def test_pull_request_checks(admin_page: Page, ui: Ui, ui_stack: GatewayStack, rest: RestApi, repo: str) -> None:
    page = admin_page
    _put(ui_stack, repo, "main", "_lakefs_actions/gate.yaml", PR_ACTION.encode())
    assert _commit(rest, repo, "main", "add the pull request gate").status == 201
    _require_check_in_settings(page, ui, repo)
    rules = rest.ok("GET", f"/repositories/{repo}/settings/branch_protection")
    assert [r.get("required_checks") for r in rules] == [[CHECK]]

    _branch(rest, repo, "topic")
    _put(ui_stack, repo, "topic", "bad.csv", b"id\n1\n")
    _put(ui_stack, repo, "topic", "good.csv", b"id\n2\n")
    assert _commit(rest, repo, "topic", "add files").status == 201
    pull = rest.ok(
        "POST",
        f"/repositories/{repo}/pulls",
        {"title": "Topic", "source_branch": "topic", "destination_branch": "main"},
    )["id"]

    # The check fails on the source's head and the merge is blocked, naming it.
    page.goto(ui.url(f"/repositories/{repo}/pulls/{pull}"))
    check = _check(page)
    expect(check.get_by_test_id("check-status")).to_have_text("failed")
    expect(check.get_by_test_id("check-required")).to_have_text("Required")
    head = rest.ok("GET", f"/repositories/{repo}/branches/topic")["commit_id"]
    expect(check.get_by_test_id("check-commit")).to_have_text(head[:12])
    expect(check.get_by_test_id("check-error")).to_contain_text("bad.csv present")
    expect(page.get_by_test_id("merge-blocked")).to_contain_text(CHECK)
    ui.shot(page, "check-failed")

    # Its run: the Lua error in the hook's output.
    check.get_by_test_id("check-run").click()
    expect(page.get_by_test_id("run-failed")).to_be_visible()
    page.get_by_test_id("hook-toggle").click()
    expect(page.get_by_test_id("hook-output")).to_contain_text("bad.csv present")
    ui.shot(page, "check-run-output")
    page.go_back()

    # The file gone from the source, its new head's check passes and the merge is free.
    ui_stack.client().delete_object(Bucket=repo, Key="topic/bad.csv")
    assert _commit(rest, repo, "topic", "drop bad.csv").status == 201
    head = rest.ok("GET", f"/repositories/{repo}/branches/topic")["commit_id"]
    _wait_for_check_of(rest, repo, pull, head)
    page.reload()
    check = _check(page)
    expect(check.get_by_test_id("check-status")).to_have_text("passed")  # polled while pending/running
    expect(check.get_by_test_id("check-commit")).to_have_text(head[:12])
    expect(check.get_by_test_id("check-error")).to_have_count(0)
    expect(page.get_by_test_id("merge-blocked")).to_have_count(0)
    ui.shot(page, "check-passed")

    # Re-run: back to pending (or running), then passed again without a reload.
    check.get_by_test_id("check-rerun").click()
    expect(check.get_by_test_id("check-status")).to_have_text(re.compile(r"^(pending|running)$"))
    ui.shot(page, "check-rerunning")
    expect(check.get_by_test_id("check-status")).to_have_text("passed")
    expect(page.get_by_test_id("merge-blocked")).to_have_count(0)

    # The runs of the pull request's checks are in the Actions tab too.
    page.get_by_role("link", name="Actions", exact=True).click()
    expect(page.get_by_test_id("run-event").first).to_have_text("pull-request")
    expect(page.get_by_test_id("run-status").first).to_have_text("completed")
    expect(page.get_by_test_id("run-status").filter(has_text="failed")).not_to_have_count(0)

    page.goto(ui.url(f"/repositories/{repo}/pulls/{pull}"))
    page.get_by_test_id("merge").click()
    expect(page.get_by_test_id("pull-status")).to_have_text("merged")
    ui.shot(page, "merged")
