"""lakeFS Actions through lakeFS's own SDK against the real stack: action files on a branch,
webhooks to a real HTTP server the test runs, Lua hooks, every event type, 412 refusals that
leave staging as it was, runs in the API and the CLI, a hanging hook that holds up no other
repository, webhook targets refused, and pull request checks that gate a merge."""

from __future__ import annotations

import json
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from click.testing import CliRunner
from lakefs_sdk.exceptions import ApiException

from cli.common import State
from cli.main import cli
from silt.client import Client, Settings
from tests.e2e.api.conftest import Api, json_post


@dataclass
class Receiver:
    """A webhook server: /ok answers 200, /fail 500 with a body, /hang never in time."""

    port: int = 0
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def received(self, event_type: str, repository: str) -> list[dict[str, Any]]:
        with self.lock:
            return [
                p for _, p in self.calls if p.get("event_type") == event_type and p.get("repository_id") == repository
            ]

    def wait_for(self, event_type: str, repository: str, timeout: float = 15.0, **fields: Any) -> dict[str, Any]:
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            got = [p for p in self.received(event_type, repository) if all(p.get(k) == v for k, v in fields.items())]
            if got:
                return got[-1]
            time.sleep(0.05)
        raise AssertionError(f"no {event_type} webhook for {repository} ({fields}) within {timeout} s")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload = json.loads(body or b"{}")
            with state.lock:
                state.calls.append((self.path, payload))
            if self.path.startswith("/hang"):
                state.release.wait(10)
            status, text = (
                (500, b"rejected: schema mismatch in the new data") if self.path.startswith("/fail") else (200, b"ok")
            )
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()


def _upload(client: lakefs_sdk.ApiClient, repo: str, branch: str, path: str, data: bytes) -> None:
    with tempfile.NamedTemporaryFile() as local:  # the SDK uploads a file by its path
        local.write(data)
        local.flush()
        lakefs_sdk.ObjectsApi(client).upload_object(repo, branch, path, content=local.name)


def _commit(client: lakefs_sdk.ApiClient, repo: str, branch: str, message: str = "change", **kw: Any) -> str:
    creation = lakefs_sdk.CommitCreation(message=message, **kw)
    return str(lakefs_sdk.CommitsApi(client).commit(repo, branch, creation).id)


def _action(repo_client: lakefs_sdk.ApiClient, repo: str, name: str, text: str, branch: str = "main") -> str:
    """Upload an action file and commit it on branch (its own hooks may run on that commit)."""
    _upload(repo_client, repo, branch, f"_lakefs_actions/{name}.yaml", text.encode())
    return _commit(repo_client, repo, branch, f"add action {name}")


def _webhook_action(name: str, events: list[str], url: str, branches: list[str] | None = None, **extra: str) -> str:
    on = "\n".join(
        f"  {e}:" + (f"\n    branches: {json.dumps(branches)}" if branches and not e.endswith("-tag") else "")
        for e in events
    )
    props = "".join(f"\n      {k}: {v}" for k, v in extra.items())
    return f"""name: {name}
on:
{on}
hooks:
  - id: hook_{name.replace(" ", "_")}
    type: webhook
    properties:
      url: "{url}"{props}
"""


def _refused(call: Callable[[], Any]) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 412, (caught.value.status, caught.value.body)
    message: str = json.loads(caught.value.body)["message"]
    return message


def _runs(api: Api, repo: str, query: str = "") -> list[dict[str, Any]]:
    response = api.request("GET", f"/repositories/{repo}/actions/runs{query}")
    assert response.status == 200, response.data
    results: list[dict[str, Any]] = json.loads(response.data)["results"]
    return results


def test_a_rejecting_pre_commit_webhook_answers_412_with_its_output_and_leaves_staging(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, receiver: Receiver
) -> None:
    _action(client, repo, "gate", _webhook_action("gate", ["pre-commit"], receiver.url("/fail"), ["feature-*"]))
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="feature-a", source="main"))
    _upload(client, repo, "feature-a", "data/a.csv", b"a,b\n1,2\n")

    message = _refused(lambda: _commit(client, repo, "feature-a", "new data", metadata={"owner": "etl"}))
    assert "pre-commit hook aborted" in message
    assert "gate" in message and "500" in message
    assert "rejected: schema mismatch" in message  # the hook's own output
    # Nothing committed, the staged object still there and still uncommitted.
    diff = lakefs_sdk.BranchesApi(client).diff_branch(repo, "feature-a")
    assert [d.path for d in diff.results] == ["data/a.csv"]
    head = lakefs_sdk.BranchesApi(client).get_branch(repo, "feature-a").commit_id
    assert head == lakefs_sdk.BranchesApi(client).get_branch(repo, "main").commit_id
    payload = receiver.wait_for("pre-commit", repo)
    assert payload["branch_id"] == "feature-a"
    assert payload["source_ref"] == "feature-a"
    assert payload["commit_message"] == "new data"
    assert payload["commit_metadata"] == {"owner": "etl"}
    assert payload["action_name"] == "gate" and payload["hook_id"] == "hook_gate"

    # The run is listed, failed, with the hook's output; main (no matching glob) commits freely.
    runs = _runs(api, repo, "?branch=feature-a")
    assert [(r["event_type"], r["status"]) for r in runs] == [("pre-commit", "failed")]
    run_id = runs[0]["run_id"]
    hooks = json.loads(api.request("GET", f"/repositories/{repo}/actions/runs/{run_id}/hooks").data)["results"]
    assert [(h["action"], h["hook_id"], h["status"]) for h in hooks] == [("gate", "hook_gate", "failed")]
    output = api.request("GET", f"/repositories/{repo}/actions/runs/{run_id}/hooks/{hooks[0]['hook_run_id']}/output")
    assert output.status == 200 and b"rejected: schema mismatch" in output.data
    _upload(client, repo, "main", "other.txt", b"x")
    _commit(client, repo, "main")


def test_a_hooks_output_is_kept_short_and_read_only_with_read_action_output(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, receiver: Receiver
) -> None:
    _action(client, repo, "gate", _webhook_action("gate", ["pre-commit"], receiver.url("/fail"), ["feature-*"]))
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="feature-b", source="main"))
    _upload(client, repo, "feature-b", "data/b.csv", b"b\n")
    _refused(lambda: _commit(client, repo, "feature-b"))
    [run] = _runs(api, repo, "?branch=feature-b")
    hooks_path = f"/repositories/{repo}/actions/runs/{run['run_id']}/hooks"
    output_path = f"{hooks_path}/0000_0000/output"

    # The admin (holding ReadActionOutput) reads the answer's status line and body, no headers.
    output = api.request("GET", output_path)
    assert output.status == 200
    text = output.data.decode()
    assert "Response:\nHTTP/1.0 500 Internal Server Error\n\nrejected: schema mismatch" in text
    assert "Server:" not in text and "Date:" not in text and "Content-Length" not in text

    # A reader of the repository sees the run and its hook's status, not the answer.
    reader = api.stack.reader
    as_reader = urllib3.make_headers(basic_auth=f"{reader.access_key_id}:{reader.secret_access_key.get_secret_value()}")
    listed = api.request("GET", f"/repositories/{repo}/actions/runs?branch=feature-b", headers=as_reader)
    assert listed.status == 200 and json.loads(listed.data)["results"][0]["status"] == "failed"
    hooks = api.request("GET", hooks_path, headers=as_reader)
    assert hooks.status == 200 and json.loads(hooks.data)["results"][0]["status"] == "failed"
    withheld = api.request("GET", output_path, headers=as_reader)
    assert withheld.status == 403, withheld.data
    assert "ReadActionOutput" in json.loads(withheld.data)["message"]
    assert b"schema mismatch" not in withheld.data


def test_an_accepting_webhook_lets_the_commit_through_and_post_hooks_get_the_payload(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, receiver: Receiver
) -> None:
    text = _webhook_action("audit", ["pre-commit", "post-commit"], receiver.url("/ok"), query_params="{team: data}")
    _action(client, repo, "audit", text)
    _upload(client, repo, "main", "x.txt", b"x")
    commit_id = _commit(client, repo, "main", "add x", metadata={"k": "v"})
    post = receiver.wait_for("post-commit", repo, commit_id=commit_id)
    assert post["source_ref"] == commit_id
    assert post["branch_id"] == "main"
    assert post["commit_message"] == "add x"
    assert post["commit_metadata"]["k"] == "v"
    assert post["committer"] == "admin"
    assert post["repository_id"] == repo
    assert post["pre_run_id"]
    assert post["event_time"].endswith("Z")
    # The pre-commit run names the commit it let through; both runs are listed by commit.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        by_commit = _runs(api, repo, f"?commit={commit_id}")
        if len(by_commit) == 2:
            break
        time.sleep(0.05)
    assert sorted(r["event_type"] for r in by_commit) == ["post-commit", "pre-commit"]
    assert all(r["status"] == "completed" for r in by_commit)
    run = json.loads(api.request("GET", f"/repositories/{repo}/actions/runs/{post['pre_run_id']}").data)
    assert run["event_type"] == "pre-commit" and run["commit_id"] == commit_id
    sdk_runs = lakefs_sdk.ActionsApi(client).list_repository_runs(repo, commit=commit_id)
    assert {r.event_type for r in sdk_runs.results} == {"pre-commit", "post-commit"}


def test_every_event_type_runs_its_hooks_with_lakefs_fields(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, receiver: Receiver
) -> None:
    events = [
        f"{when}-{what}"
        for what in (
            "commit",
            "merge",
            "create-branch",
            "delete-branch",
            "create-tag",
            "delete-tag",
            "revert",
            "cherry-pick",
        )
        for when in ("pre", "post")
    ]
    _action(client, repo, "all", _webhook_action("all", events, receiver.url("/ok")))
    branches, commits, tags, refs = (
        lakefs_sdk.BranchesApi(client),
        lakefs_sdk.CommitsApi(client),
        lakefs_sdk.TagsApi(client),
        lakefs_sdk.RefsApi(client),
    )
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    _upload(client, repo, "dev", "a.txt", b"a")
    dev_commit = _commit(client, repo, "dev", "on dev")
    merged = refs.merge_into_branch(repo, "dev", "main").reference
    branches.revert_branch(repo, "main", lakefs_sdk.RevertCreation(ref=merged, parent_number=1))
    branches.cherry_pick(repo, "main", lakefs_sdk.CherryPickCreation(ref=dev_commit))
    tags.create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    tags.delete_tag(repo, "v1")
    branches.delete_branch(repo, "dev")
    assert commits  # the SDK's commit path is covered by _commit above

    for event in events:
        receiver.wait_for(event, repo)
    pre_merge = receiver.received("pre-merge", repo)[-1]
    assert pre_merge["branch_id"] == "main" and pre_merge["merge_source"] == "dev"
    assert pre_merge["source_ref"] == dev_commit
    post_merge = receiver.received("post-merge", repo)[-1]
    assert post_merge["commit_id"] == merged
    create = receiver.received("pre-create-branch", repo)[-1]
    assert create["branch_id"] == "dev" and create["source_ref"] == "main" and create["commit_id"]
    tag = receiver.received("post-create-tag", repo)[-1]
    assert tag["tag_id"] == "v1" and tag["commit_id"] and "branch_id" not in tag
    assert receiver.received("pre-delete-branch", repo)[-1]["branch_id"] == "dev"
    assert receiver.received("post-revert", repo)[-1]["branch_id"] == "main"
    assert receiver.received("post-cherry-pick", repo)[-1]["commit_id"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len({r["event_type"] for r in _runs(api, repo)}) < len(events):
        time.sleep(0.05)
    assert {r["event_type"] for r in _runs(api, repo)} >= set(events)


def test_a_rejecting_pre_merge_hook_stops_the_merge(
    client: lakefs_sdk.ApiClient, repo: str, receiver: Receiver
) -> None:
    _action(client, repo, "merge-gate", _webhook_action("merge-gate", ["pre-merge"], receiver.url("/fail"), ["main"]))
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    _upload(client, repo, "dev", "b.txt", b"b")
    _commit(client, repo, "dev")
    _upload(client, repo, "main", "staged-on-main.txt", b"s")
    before = lakefs_sdk.BranchesApi(client).get_branch(repo, "main").commit_id
    message = _refused(lambda: lakefs_sdk.RefsApi(client).merge_into_branch(repo, "dev", "main"))
    assert "pre-merge hook aborted" in message and "schema mismatch" in message
    assert lakefs_sdk.BranchesApi(client).get_branch(repo, "main").commit_id == before
    diff = lakefs_sdk.BranchesApi(client).diff_branch(repo, "main")
    assert [d.path for d in diff.results] == ["staged-on-main.txt"]


LUA_NO_CSV = """name: no csv
on:
  pre-merge:
    branches: ["main"]
hooks:
  - id: no_csv
    type: lua
    properties:
      args:
        suffix: ".csv"
      script: |
        local lakefs = require("lakefs")
        local code, diff = lakefs.diff_refs(action.repository_id, action.branch_id, action.source_ref)
        if code ~= 200 then error("diff failed: " .. tostring(code)) end
        for _, change in ipairs(diff.results) do
          print(change.type .. " " .. change.path)
          if change.path:sub(-#args.suffix) == args.suffix then
            error("csv files are not allowed: " .. change.path)
          end
        end
"""


def test_a_lua_hook_reads_the_diff_and_fails_the_merge(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    _action(client, repo, "lua", LUA_NO_CSV)
    branches = lakefs_sdk.BranchesApi(client)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="good", source="main"))
    _upload(client, repo, "good", "table/part-0.parquet", b"P")
    _commit(client, repo, "good")
    lakefs_sdk.RefsApi(client).merge_into_branch(repo, "good", "main")

    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="bad", source="main"))
    _upload(client, repo, "bad", "table/raw.csv", b"a,b")
    _commit(client, repo, "bad")
    message = _refused(lambda: lakefs_sdk.RefsApi(client).merge_into_branch(repo, "bad", "main"))
    assert "csv files are not allowed: table/raw.csv" in message
    failed = [r for r in _runs(api, repo) if r["status"] == "failed"]
    run_id = failed[0]["run_id"]
    output = api.request("GET", f"/repositories/{repo}/actions/runs/{run_id}/hooks/0000_0000/output")
    assert b"added table/raw.csv" in output.data


def test_an_invalid_action_file_fails_the_operation_naming_the_file(client: lakefs_sdk.ApiClient, repo: str) -> None:
    _upload(
        client, repo, "main", "_lakefs_actions/broken.yaml", b"name: broken\non:\n  pre-commit:\nhooks:\n  - id: xy\n"
    )
    message = _refused(lambda: _commit(client, repo, "main"))
    assert "_lakefs_actions/broken.yaml" in message and "type" in message


def test_webhooks_to_metadata_addresses_are_refused(client: lakefs_sdk.ApiClient, repo: str) -> None:
    text = _webhook_action("ssrf", ["pre-commit"], "http://169.254.169.254/latest/meta-data/")
    _upload(client, repo, "main", "_lakefs_actions/ssrf.yaml", text.encode())
    message = _refused(lambda: _commit(client, repo, "main"))
    assert "169.254.169.254" in message and "not an allowed" in message


def test_a_hanging_hook_times_out_without_holding_other_repositories(
    client: lakefs_sdk.ApiClient, receiver: Receiver
) -> None:
    repos = []
    for _ in range(2):
        name = f"r-{secrets.token_hex(5)}"
        lakefs_sdk.RepositoriesApi(client).create_repository(
            lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
        )
        repos.append(name)
    slow, other = repos
    hang = _webhook_action("slow", ["pre-commit"], receiver.url("/hang"), timeout="5s")
    _upload(client, slow, "main", "_lakefs_actions/slow.yaml", hang.encode())
    outcome: dict[str, Any] = {}

    def commit_slow() -> None:
        started = time.monotonic()
        try:
            _commit(client, slow, "main")
        except ApiException as exc:
            outcome["status"], outcome["body"] = exc.status, exc.body
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=commit_slow)
    thread.start()
    receiver.wait_for("pre-commit", slow, timeout=10)  # the slow hook is now hanging
    started = time.monotonic()
    for n in range(5):
        _upload(client, other, "main", f"f{n}", b"x")
        _commit(client, other, "main", f"c{n}")
    # The five commits were done while the other repository's hook still hung.
    assert thread.is_alive(), time.monotonic() - started
    thread.join(30)
    assert outcome["status"] == 412 and "timed out" in outcome["body"], outcome
    assert 4.5 < outcome["seconds"] < 20, outcome


CHECK = """name: quality
on:
  pull-request:
    branches: ["main"]
hooks:
  - id: no_bad
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local code, _ = lakefs.stat_object(action.repository_id, action.source_ref, "bad.csv")
        if code == 200 then error("bad.csv is present") end
        print("checked " .. action.source_ref)
"""


def _pull(api: Api, repo: str, pull_id: str) -> dict[str, Any]:
    response = api.request("GET", f"/repositories/{repo}/pulls/{pull_id}")
    assert response.status == 200, response.data
    pull: dict[str, Any] = json.loads(response.data)
    return pull


def _settled(api: Api, repo: str, pull_id: str, head: str, timeout: float = 15.0) -> dict[str, Any]:
    ends = time.monotonic() + timeout
    while True:
        pull = _pull(api, repo, pull_id)
        checks = pull["checks"]
        if checks and all(c["status"] in ("passed", "failed") and c["commit_id"] == head for c in checks):
            return pull
        assert time.monotonic() < ends, pull
        time.sleep(0.05)


def test_a_required_pull_request_check_blocks_the_merge_until_it_passes_and_reruns_on_push(
    api: Api, client: lakefs_sdk.ApiClient, repo: str
) -> None:
    _action(client, repo, "quality", CHECK)
    response = api.request(
        "PUT",
        f"/repositories/{repo}/settings/branch_protection",
        body=json.dumps([{"pattern": "main", "required_checks": ["quality/no_bad"]}]).encode(),
        headers={**_admin_headers(api), "Content-Type": "application/json"},
    )
    assert response.status == 204, response.data
    branches = lakefs_sdk.BranchesApi(client)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="feature", source="main"))
    _upload(client, repo, "feature", "bad.csv", b"x")
    _upload(client, repo, "feature", "good.parquet", b"x")
    # The author rewrites the check on the source branch to always pass: checks are the
    # destination's, so this changes nothing.
    _upload(
        client,
        repo,
        "feature",
        "_lakefs_actions/quality.yaml",
        CHECK.replace('error("bad.csv is present")', "").encode(),
    )
    head = _commit(client, repo, "feature")
    pulls = lakefs_sdk.PullsApi(client)
    pull_id = pulls.create_pull_request(
        repo, lakefs_sdk.PullRequestCreation(title="data", source_branch="feature", destination_branch="main")
    ).id

    pull = _settled(api, repo, pull_id, head)
    assert pull["required_checks"] == ["quality/no_bad"]
    [check] = pull["checks"]
    assert (check["name"], check["status"]) == ("quality/no_bad", "failed")
    assert "bad.csv is present" in check["error"] and check["run_id"]
    assert "quality/no_bad" in pull["merge_blocked_reason"]
    with pytest.raises(ApiException) as refused:
        pulls.merge_pull_request(repo, pull_id)
    assert refused.value.status == 403
    # A direct merge into a branch that requires checks is refused too.
    with pytest.raises(ApiException) as direct:
        lakefs_sdk.RefsApi(client).merge_into_branch(repo, "feature", "main")
    assert direct.value.status == 403

    # A push that fixes the data re-runs the check, which passes on the new head.
    lakefs_sdk.ObjectsApi(client).delete_object(repo, "feature", "bad.csv")
    fixed = _commit(client, repo, "feature", "remove bad.csv")
    pull = _settled(api, repo, pull_id, fixed)
    assert pull["checks"][0]["status"] == "passed" and pull["merge_blocked_reason"] == ""

    # A re-run goes back to pending and passes again; then the merge goes through.
    rerun = json_post(api, f"/repositories/{repo}/pulls/{pull_id}/checks/rerun", {"name": "quality/no_bad"})
    assert rerun.status == 202, rerun.data
    assert json.loads(rerun.data)["checks"][0]["status"] in ("pending", "running", "passed")
    first_run = pull["checks"][0]["run_id"]
    ends = time.monotonic() + 15
    while True:
        pull = _settled(api, repo, pull_id, fixed)
        if pull["checks"][0]["run_id"] != first_run:
            break
        assert time.monotonic() < ends
        time.sleep(0.05)
    assert pull["checks"][0]["status"] == "passed"
    unknown = json_post(api, f"/repositories/{repo}/pulls/{pull_id}/checks/rerun", {"name": "nope/none"})
    assert unknown.status == 404
    merged = pulls.merge_pull_request(repo, pull_id)
    assert merged.reference


CHECK_SCRIPT = b"""local lakefs = require("lakefs")
local code, _ = lakefs.stat_object(action.repository_id, action.source_ref, "bad.csv")
if code == 200 then error("bad.csv is present") end
"""
SCRIPTED_CHECK = """name: scripted
on:
  pull-request:
    branches: ["main"]
hooks:
  - id: no_bad
    type: lua
    properties:
      script_path: scripts/check.lua
"""


def test_a_pull_request_cannot_rewrite_the_script_its_required_check_runs(
    api: Api, client: lakefs_sdk.ApiClient, repo: str
) -> None:
    _upload(client, repo, "main", "scripts/check.lua", CHECK_SCRIPT)
    _action(client, repo, "scripted", SCRIPTED_CHECK)
    response = api.request(
        "PUT",
        f"/repositories/{repo}/settings/branch_protection",
        body=json.dumps([{"pattern": "main", "required_checks": ["scripted/no_bad"]}]).encode(),
        headers={**_admin_headers(api), "Content-Type": "application/json"},
    )
    assert response.status == 204, response.data
    branches = lakefs_sdk.BranchesApi(client)
    pulls = lakefs_sdk.PullsApi(client)
    outcomes: dict[str, tuple[str, str]] = {}
    # The control PR adds the bad data only; the other also rewrites the script the check runs
    # (the action file itself is untouched) to pass whatever the data.
    for branch, script in (("control", None), ("rewritten", b'print("all good")\n')):
        branches.create_branch(repo, lakefs_sdk.BranchCreation(name=branch, source="main"))
        _upload(client, repo, branch, "bad.csv", b"x")
        if script is not None:
            _upload(client, repo, branch, "scripts/check.lua", script)
        head = _commit(client, repo, branch)
        pull_id = pulls.create_pull_request(
            repo, lakefs_sdk.PullRequestCreation(title=branch, source_branch=branch, destination_branch="main")
        ).id
        pull = _settled(api, repo, pull_id, head)
        [check] = pull["checks"]
        outcomes[branch] = (check["status"], check["error"])
        assert "scripted/no_bad" in pull["merge_blocked_reason"], (branch, pull)
        with pytest.raises(ApiException) as refused:
            pulls.merge_pull_request(repo, pull_id)
        assert refused.value.status == 403, branch
    for branch, (status, error) in outcomes.items():
        assert status == "failed" and "bad.csv is present" in error, (branch, status, error)
    with pytest.raises(ApiException) as missing:  # neither merged into main
        lakefs_sdk.ObjectsApi(client).stat_object(repo, "main", "bad.csv")
    assert missing.value.status == 404


def _admin_headers(api: Api) -> dict[str, str]:
    import urllib3

    admin = api.stack.admin
    return dict(urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}"))


def test_runs_are_listed_by_the_cli(api: Api, client: lakefs_sdk.ApiClient, repo: str, receiver: Receiver) -> None:
    _action(client, repo, "cli", _webhook_action("cli", ["pre-commit"], receiver.url("/ok")))
    _upload(client, repo, "main", "c.txt", b"c")
    commit_id = _commit(client, repo, "main")
    endpoints = api.stack.stack.endpoints
    settings = Settings(
        endpoints["graveler"], endpoints["auth"], api.stack.endpoint, "us-east-1", api.stack.admin, "test"
    )
    runner = CliRunner()
    listed = runner.invoke(
        cli,
        ["--json", "actions", "runs", "list", f"lakefs://{repo}", "--commit", commit_id],
        obj=State(_client=Client(settings)),
    )
    assert listed.exit_code == 0, listed.output
    # The JSON is the standard output; a warning logged meanwhile goes to the standard error,
    # which Click's result.output interleaves with it.
    runs = json.loads(listed.stdout)
    assert [r["event_type"] for r in runs] == ["pre-commit"] and runs[0]["commit_id"] == commit_id
    described = runner.invoke(
        cli, ["actions", "runs", "describe", f"lakefs://{repo}", runs[0]["run_id"]], obj=State(_client=Client(settings))
    )
    assert described.exit_code == 0, described.output
    assert "cli / hook_cli: completed" in described.output and "Response" in described.output
    as_json = runner.invoke(
        cli,
        ["--json", "actions", "runs", "describe", f"lakefs://{repo}", runs[0]["run_id"]],
        obj=State(_client=Client(settings)),
    )
    (hook,) = json.loads(as_json.stdout)["hooks"]
    output = runner.invoke(
        cli,
        ["cat-hook-output", f"lakefs://{repo}", runs[0]["run_id"], hook["hook_run_id"]],
        obj=State(_client=Client(settings)),
    )
    assert output.exit_code == 0, output.output
    assert output.output.startswith(f"Repository: lakefs://{repo}\n") and hook["output"] in output.output


def test_an_import_runs_the_branchs_commit_hooks(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, receiver: Receiver
) -> None:
    gate = _webhook_action("import-gate", ["pre-commit"], receiver.url("/fail"), ["imports-*"])
    _action(client, repo, "import-gate", gate)
    _action(client, repo, "import-audit", _webhook_action("import-audit", ["post-commit"], receiver.url("/ok")))
    for branch in ("imports-refused", "landing"):
        lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name=branch, source="main"))

    def imported(branch: str) -> dict[str, Any]:
        started = json_post(
            api, f"/repositories/{repo}/branches/{branch}/import", {"paths": [], "commit": {"message": "import"}}
        )
        assert started.status == 202, started.data
        import_id = json.loads(started.data)["id"]
        ends = time.monotonic() + 15
        while True:
            status = json.loads(
                api.request("GET", f"/repositories/{repo}/branches/{branch}/import?id={import_id}").data
            )
            if status["completed"] or status.get("error"):
                return status
            assert time.monotonic() < ends, status
            time.sleep(0.05)

    refused = imported("imports-refused")
    assert not refused["completed"] and "pre-commit hook aborted" in refused["error"]["message"]
    done = imported("landing")
    assert done["completed"], done
    receiver.wait_for("post-commit", repo, branch_id="landing", commit_id=done["commit"]["id"])


READING_HOOK = """name: reader
on:
  pre-commit:
  pre-create-branch:
  pre-create-tag:
  pre-delete-tag:
hooks:
  - id: read
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local code, listing = lakefs.list_objects(action.repository_id, "main", "", "", "")
        print("list " .. code)
        for _, o in ipairs(listing.results) do print("listed " .. o.path) end
        for _, path in ipairs({"raw/a", "gold/b"}) do
          local status, _ = lakefs.get_object(action.repository_id, "main", path)
          print("get " .. path .. " " .. status)
        end
"""


def _outputs(api: Api, repo: str, event_type: str, count: int) -> list[list[str]]:
    """The output lines of the first hook of each of event_type's runs, oldest first, once there
    are count of them."""
    ends = time.monotonic() + 10
    while len(runs := [r for r in _runs(api, repo) if r["event_type"] == event_type]) < count:
        assert time.monotonic() < ends, runs
        time.sleep(0.05)
    runs.sort(key=lambda r: r["run_id"], reverse=True)  # run ids count down in nanoseconds
    return [
        api.request("GET", f"/repositories/{repo}/actions/runs/{r['run_id']}/hooks/0000_0000/output")
        .data.decode()
        .splitlines()
        for r in runs
    ]


def test_a_lua_hook_reads_only_what_the_user_who_fired_the_event_may_read(
    api: Api, client: lakefs_sdk.ApiClient, repo: str
) -> None:
    """lakeFS's Lua client acts as the user who triggered the action: a user allowed `raw/*`
    only commits and creates a branch, and the hooks those run list `raw/` only and are refused
    `gold/b` (403, as the REST API refuses that user); the admin's hooks read both; a tag made
    and deleted by a writer whose reads a Deny narrows runs hooks that read as that writer."""
    from tests.e2e.api.test_object_policies import REPO_ARN, _user_with_policy

    for path, data in (("raw/a", b"raw a"), ("gold/b", b"gold b")):
        _upload(client, repo, "main", path, data)
    _action(client, repo, "reader", READING_HOOK)
    objects = f"{REPO_ARN}{repo}/object/raw/*"
    user, _ = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["fs:ReadObject", "fs:WriteObject", "fs:ListObjects"], "resource": objects},
            {"effect": "allow", "action": ["fs:CreateCommit"], "resource": f"{REPO_ARN}{repo}/branch/main"},
            {"effect": "allow", "action": ["fs:CreateBranch"], "resource": f"{REPO_ARN}{repo}/branch/u-*"},
        ],
    )
    _upload(user.sdk, repo, "main", "raw/u", b"by u")
    _commit(user.sdk, repo, "main", "u's commit")
    lakefs_sdk.BranchesApi(user.sdk).create_branch(repo, lakefs_sdk.BranchCreation(name="u-dev", source="main"))
    # A writer of the repository whose reads a Deny narrows tags (and untags) after the admin.
    writer, _ = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": repo},
            {"effect": "deny", "action": ["ReadObject"], "resource": f"{repo}/gold/*"},
        ],
    )
    for tagger in (client, writer.sdk):
        lakefs_sdk.TagsApi(tagger).create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
        lakefs_sdk.TagsApi(tagger).delete_tag(repo, "v1")

    admin_commit, user_commit = _outputs(api, repo, "pre-commit", 2)
    everything = ["list 200", "listed _lakefs_actions/reader.yaml", "listed gold/b", "listed raw/a"]
    assert admin_commit == [*everything, "get raw/a 200", "get gold/b 200"]
    narrowed = ["list 200", "listed raw/a", "listed raw/u", "get raw/a 200", "get gold/b 403"]
    assert user_commit == narrowed
    assert _outputs(api, repo, "pre-create-branch", 1) == [narrowed]
    for event_type in ("pre-create-tag", "pre-delete-tag"):
        by_admin, by_writer = _outputs(api, repo, event_type, 2)
        assert by_admin == [*everything, "listed raw/u", "get raw/a 200", "get gold/b 200"], (event_type, by_admin)
        assert by_writer == [
            "list 200",
            "listed _lakefs_actions/reader.yaml",
            "listed raw/a",
            "listed raw/u",
            "get raw/a 200",
            "get gold/b 403",
        ], (event_type, by_writer)
