"""`silt migrate lakefs`: a repository with branches, tags, merges and a revert, served by a
second Silt through lakeFS's REST API only, brought into this Silt with its history, zero-copy.

Two stacks share one moto S3: the source, a stack of this module's, keeps its namespaces under
SOURCE_ROOT, in the landing bucket's exports/ that the target, the e2e tests' stack on S3
(tests/e2e/conftest.py s3_stack), allows entries to name (graveler.allowed_import_prefixes).
The migration is killed part-way and run again: it ends with every commit recorded once.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.e2e.conftest import S3_LANDING, Silt
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.moto import moto_client, s3_blockstore_overrides

SOURCE_PREFIX = "exports/migrate-source/"
SOURCE_ROOT = f"s3://{S3_LANDING}/{SOURCE_PREFIX}"
REPO = "weather"
# Objects of the first commit: more than two pages of the source's listings (cli/lakefs_migration:
# 1,000 a page) and ten StageEntries batches of the target's (256 each), so that the migration
# pages and batches as it does at any size. (10,000 made the test take five times as long and
# reached no path these do not.)
OBJECTS = 2_500
# Commits on each line of the history: enough that the migration is killed (at KILL_AFTER
# recorded) with more left than done, and that writes and deletions are replayed on each branch
# several times over. (Twice as many, 50 commits, took twice as long and reached no path these
# do not.)
MAIN_DAYS, DEV_CHANGES, FEATURE_STEPS, LATE_ON_MAIN = 7, 7, 5, 3
KILL_AFTER = 10
REAL_OBJECTS = {f"real/{n}.csv": f"city,celsius\nOslo,{n}\n".encode() * (n + 1) for n in range(5)}

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def _s3_overrides(moto: str, root: str, imports: list[str]) -> dict[str, Any]:
    return {
        "blockstore": s3_blockstore_overrides(moto),
        "graveler": {"allowed_namespace_roots": [root], "allowed_import_prefixes": imports},
        "gateways": {"s3": {"storage_namespace_template": root + "{repo}"}},
    }


@pytest.fixture(scope="module")
def store(moto_server: str) -> Any:
    return moto_client(moto_server)


@pytest.fixture(scope="module")
def target(s3_stack: GatewayStack) -> GatewayStack:
    """The e2e tests' stack on S3 (a stack of this module's cost three starts of the services):
    its repositories' namespaces are in S3_DATA, and it may import from S3_LANDING's exports/."""
    return s3_stack


@pytest.fixture(scope="module")
def source(moto_server: str, target: GatewayStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    # After the target: its fixture makes the landing bucket.
    overrides = _s3_overrides(moto_server, SOURCE_ROOT, [])
    with gateway_stack(tmp_path_factory.mktemp("migrate-source"), overrides=overrides) as stack:
        yield stack


def _entry(key: str, version: int) -> pb.Entry:
    """Metadata of an object the source's namespace is said to hold (only REAL_OBJECTS have bytes)."""
    etag = hashlib.md5(f"{key}@{version}".encode()).hexdigest()
    return pb.Entry(
        physical_address=f"data/fake/{etag}",
        size=100 + version + len(key),
        etag=etag,
        last_modified=Timestamp(seconds=1_700_000_000 + version),
        content_type="text/csv",
        metadata={"version": str(version)},
    )


def _stage(stack: GatewayStack, branch: str, entries: dict[str, pb.Entry]) -> None:
    items = [api.StagedEntry(key=key, entry=entry) for key, entry in entries.items()]
    batches = [items[i : i + 256] for i in range(0, len(items), 256)]
    with ThreadPoolExecutor(4) as pool:
        list(
            pool.map(
                lambda batch: stack.graveler.StageEntries(
                    api.StageEntriesRequest(repository=REPO, branch=branch, entries=batch), timeout=60
                ),
                batches,
            )
        )


def _commit(stack: GatewayStack, branch: str, message: str, **metadata: str) -> str:
    made = stack.graveler.Commit(
        api.CommitRequest(repository=REPO, branch=branch, message=message, metadata=metadata), timeout=60
    )
    return str(made.id)


def _history(stack: GatewayStack) -> None:
    """3 branches, 2 tags, 27 commits, 2,500 objects, a merge, a revert, and uncommitted changes."""
    g = stack.graveler
    g.CreateRepository(api.CreateRepositoryRequest(name=REPO, storage_namespace=SOURCE_ROOT + REPO))
    gateway = stack.client()
    for key, body in REAL_OBJECTS.items():
        gateway.put_object(Bucket=REPO, Key=f"main/{key}", Body=body)
    _stage(stack, "main", {f"station-{n % 40:02d}/day-{n:05d}.csv": _entry(f"{n}", 1) for n in range(OBJECTS)})
    _commit(stack, "main", "the backfill", source="backfill")
    for n in range(MAIN_DAYS):
        _stage(stack, "main", {f"station-{n:02d}/day-{n:05d}.csv": _entry(f"{n}", 2), f"daily/{n}.csv": _entry("d", n)})
        _commit(stack, "main", f"main day {n}")
    g.CreateBranch(api.CreateBranchRequest(repository=REPO, name="dev", source_ref="main"))
    for n in range(DEV_CHANGES):
        g.DeleteEntry(api.DeleteEntryRequest(repository=REPO, branch="dev", key=f"daily/{n}.csv"))
        _stage(stack, "dev", {f"dev/{n}.csv": _entry("dev", n)})
        _commit(stack, "dev", f"dev change {n}", ticket=f"DATA-{n}")
    g.CreateTag(api.CreateTagRequest(repository=REPO, id="v1", ref="main"))
    g.CreateBranch(api.CreateBranchRequest(repository=REPO, name="feature", source_ref="dev"))
    for n in range(FEATURE_STEPS):
        _stage(stack, "feature", {f"feature/{n}.csv": _entry("feature", n)})
        _commit(stack, "feature", f"feature step {n}")
    _stage(stack, "dev", {"dev/after-feature.csv": _entry("after", 1)})
    _commit(stack, "dev", "dev after feature branched")
    for n in range(LATE_ON_MAIN):
        _stage(stack, "main", {f"late/{n}.csv": _entry("late", n)})
        _commit(stack, "main", f"main late {n}")
    g.Merge(api.MergeRequest(repository=REPO, source_ref="feature", destination_branch="dev", message="merge feature"))
    g.Revert(api.RevertRequest(repository=REPO, branch="main", ref="main~2", message="revert a late change"))
    g.CreateTag(api.CreateTagRequest(repository=REPO, id="v2", ref="dev"))
    # Uncommitted on dev: one written, one deleted.
    _stage(stack, "dev", {"dev/uncommitted.csv": _entry("u", 1)})
    g.DeleteEntry(api.DeleteEntryRequest(repository=REPO, branch="dev", key="dev/0.csv"))


def _listing(stack: GatewayStack, repo: str, ref: str) -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    after = ""
    while True:
        page = stack.graveler.ListEntries(
            api.ListEntriesRequest(repository=repo, ref=ref, after=after, amount=10_000), timeout=60
        )
        found += [(item.key, item.entry.size, item.entry.etag) for item in page.items]
        if not page.has_more:
            return found
        after = page.items[-1].key


def _changes(stack: GatewayStack, repo: str, left: str, right: str) -> list[tuple[str, int, str, int, str]]:
    """What right changed against left: (key, type, and the right side's size and etag)."""
    found: list[tuple[str, int, str, int, str]] = []
    after = ""
    while True:
        request = api.DiffRequest(repository=repo, left_ref=left, right_ref=right, after=after, amount=1000)
        page = stack.graveler.Diff(request, timeout=60)
        found += [(i.key, i.type, i.right.etag, i.right.size, i.right.content_type) for i in page.items]
        if not page.has_more:
            return found
        after = page.items[-1].key


def _log(stack: GatewayStack, repo: str, ref: str) -> list[Any]:
    commits: list[Any] = []
    after = ""
    while True:
        page = stack.graveler.Log(api.LogRequest(repository=repo, ref=ref, after=after, amount=1000), timeout=60)
        commits += list(page.commits)
        if not page.next_after:
            return commits
        after = page.next_after


def _cli_env(source: GatewayStack, target: GatewayStack) -> dict[str, str | None]:
    return {
        **target.stack.env_for_clients(),
        "LAKECTL_SERVER_ENDPOINT_URL": source.endpoint,
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": source.admin.access_key_id,
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": source.admin.secret_access_key.get_secret_value(),
        "SILT_PROGRESS_INTERVAL_SECONDS": "0",
    }


def _mapped_lines(ledger: Path) -> int:
    if not ledger.exists():
        return 0
    return sum(1 for line in ledger.read_text().splitlines() if '"mapped"' in line)


def test_a_repository_migrates_with_its_history_zero_copy_and_resumes_after_a_kill(
    source: GatewayStack, target: GatewayStack, store: Any, tmp_path: Path
) -> None:
    _history(source)
    before = {o["Key"] for o in _source_objects(store)}
    silt = Silt(_cli_env(source, target), tmp_path)
    ledger = tmp_path / "weather.jsonl"
    args = ["migrate", "lakefs", "--repository", REPO, "--to", "weather-moved", "--ledger", str(ledger)]

    # Killed part-way: a real process, SIGKILLed once it has recorded some commits.
    killed = subprocess.Popen(
        [sys.executable, "-m", "cli.main", *args, "--no-progress"],
        env=silt.process_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while _mapped_lines(ledger) < KILL_AFTER and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert killed.poll() is None, f"the migration ended before it could be killed: {killed.communicate()}"
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)
    recorded_before_kill = _mapped_lines(ledger)

    resumed = silt.proc(*args, "--json")
    report = json.loads(resumed.out)
    every_commit = {c.id for branch in ("main", "dev", "feature") for c in _log(source, REPO, branch)}
    assert report["commits"] == len(every_commit) and report["branches"] == 3 and report["tags"] == 2
    assert report["recorded_now"] <= report["commits"] - recorded_before_kill + 1
    assert report["objects"] >= OBJECTS and report["uncommitted_changes"] == 2

    mapping = dict(line.split("\t") for line in Path(report["mapping"]).read_text().splitlines())
    assert len(mapping) == report["commits"] and len(set(mapping.values())) == len(mapping)

    # Every commit: the same listing (path, size, checksum), committer, message, metadata, date and
    # parents. A listing is the root's listing plus the changes of each commit on the way, so
    # the roots are compared whole and every other commit by its changes against its first parent.
    for source_id, target_id in mapping.items():
        original = source.graveler.GetCommit(api.GetCommitRequest(repository=REPO, commit_id=source_id))
        moved = target.graveler.GetCommit(api.GetCommitRequest(repository="weather-moved", commit_id=target_id))
        if not original.parents:  # the source's root is the target's own initial commit
            assert _listing(source, REPO, source_id) == _listing(target, "weather-moved", target_id)
            continue
        first = original.parents[0]
        changed = _changes(source, REPO, first, source_id)
        assert changed == _changes(target, "weather-moved", mapping[first], target_id), original.message
        assert (moved.committer, moved.message, dict(moved.metadata)) == (
            original.committer,
            original.message,
            dict(original.metadata),
        )
        assert moved.creation_date.seconds == original.creation_date.seconds
        assert list(moved.parents) == [mapping[p] for p in original.parents]

    # Branch heads and tags through the map, their listings whole; each branch's history once.
    for branch in ("main", "dev", "feature"):
        head = source.graveler.GetBranch(api.GetBranchRequest(repository=REPO, name=branch)).commit_id
        moved_head = target.graveler.GetBranch(api.GetBranchRequest(repository="weather-moved", name=branch))
        assert moved_head.commit_id == mapping[head], branch
        assert _listing(source, REPO, head) == _listing(target, "weather-moved", moved_head.commit_id), branch
        moved_history = [c.id for c in _log(target, "weather-moved", moved_head.commit_id)]
        assert len(moved_history) == len(set(moved_history)), f"a commit twice in {branch}'s history"
        assert sorted(mapping[c.id] for c in _log(source, REPO, head)) == sorted(moved_history), branch
    for tag in ("v1", "v2"):
        tagged = source.graveler.GetTag(api.GetTagRequest(repository=REPO, id=tag)).commit_id
        assert (
            target.graveler.GetTag(api.GetTagRequest(repository="weather-moved", id=tag)).commit_id == mapping[tagged]
        )
    merge = next(c for c in _log(target, "weather-moved", "dev") if c.message == "merge feature")
    assert len(merge.parents) == 2
    # The uncommitted changes are staged on the target's dev.
    assert _listing(target, "weather-moved", "dev") == _listing(source, REPO, "dev")
    branches = target.graveler.ListBranches(api.ListBranchesRequest(repository="weather-moved", amount=100))
    assert sorted(b.name for b in branches.branches) == ["dev", "feature", "main"]

    # Zero-copy: the bytes are read where they were; nothing was written to the source's storage.
    gateway = target.client()
    for key, body in REAL_OBJECTS.items():
        assert gateway.get_object(Bucket="weather-moved", Key=f"main/{key}")["Body"].read() == body
    assert {o["Key"] for o in _source_objects(store)} == before

    # Run again, it has nothing left to record and changes nothing.
    again = json.loads(silt.proc(*args, "--json").out)
    assert again["recorded_now"] == 0 and again["commits"] == report["commits"]


def test_a_migration_refuses_a_target_it_did_not_create(
    source: GatewayStack, target: GatewayStack, tmp_path: Path
) -> None:
    source.graveler.CreateRepository(api.CreateRepositoryRequest(name="small"))
    target.graveler.CreateRepository(api.CreateRepositoryRequest(name="taken"))
    silt = Silt(_cli_env(source, target), tmp_path)
    ledger = str(tmp_path / "taken.jsonl")
    refused = silt("migrate", "lakefs", "-r", "small", "--to", "taken", "--ledger", ledger, "--no-progress", ok=False)
    assert refused.code != 0 and "'taken'" in refused.err and "already exists" in refused.err
    ledger = str(tmp_path / "missing.jsonl")
    missing = silt("migrate", "lakefs", "-r", "no-such-repo", "--ledger", ledger, "--no-progress", ok=False)
    assert missing.code != 0 and "no-such-repo" in missing.err and "404" in missing.err


def _source_objects(store: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for page in store.get_paginator("list_objects_v2").paginate(Bucket=S3_LANDING, Prefix=SOURCE_PREFIX):
        found += page.get("Contents", [])
    return found


def test_users_groups_memberships_and_policies_come_across(
    source: GatewayStack, target: GatewayStack, tmp_path: Path
) -> None:
    import lakefs_sdk

    def auth_api(stack: GatewayStack) -> Any:
        creds = stack.admin
        configuration = lakefs_sdk.Configuration(
            host=stack.endpoint + "/api/v1",
            username=creds.access_key_id,
            password=creds.secret_access_key.get_secret_value(),
        )
        return lakefs_sdk.AuthApi(lakefs_sdk.ApiClient(configuration))

    src, dst = auth_api(source), auth_api(target)
    source.graveler.CreateRepository(api.CreateRepositoryRequest(name="iam-source"))
    src.create_user(lakefs_sdk.UserCreation(id="alice"))
    src.create_group(lakefs_sdk.GroupCreation(id="forecasters"))
    src.add_group_membership("forecasters", "alice")
    reads = ["fs:Read*", "fs:List*", "branches:GetBranchProtectionRules", "retention:GetGarbageCollectionRules"]
    statement = {"effect": "allow", "action": [*reads, "pr:ListPullRequests", "pr:ReadPullRequest"], "resource": "*"}
    src.create_policy(lakefs_sdk.Policy.from_dict({"id": "ReadEverything", "statement": [statement]}))
    src.attach_policy_to_group("forecasters", "ReadEverything")
    src.attach_policy_to_user("alice", "ReadEverything")

    silt = Silt(_cli_env(source, target), tmp_path)
    ledger = str(tmp_path / "iam.jsonl")
    args = [
        "migrate",
        "lakefs",
        "--repository",
        "iam-source",
        "--to",
        "iam-moved",
        "--ledger",
        ledger,
        "--iam",
        "--json",
    ]
    report = json.loads(silt(*args).out)
    # Silt's own service user and its policy exist on both sides: nothing of the test's is refused.
    assert not [line for line in report["iam"]["refused"] if "alice" in line or "forecasters" in line]
    assert not [line for line in report["iam"]["refused"] if "ReadEverything" in line]
    assert report["iam"]["users"] >= 1 and report["iam"]["groups"] >= 1 and report["iam"]["memberships"] >= 1

    assert dst.get_user("alice").id == "alice"
    assert [u.id for u in dst.list_group_members("forecasters").results] == ["alice"]
    assert [p.id for p in dst.list_group_policies("forecasters").results] == ["ReadEverything"]
    assert [p.id for p in dst.list_user_policies("alice").results] == ["ReadEverything"]
    copied = dst.get_policy("ReadEverything")
    original = src.get_policy("ReadEverything")
    assert [s.to_dict() for s in copied.statement] == [s.to_dict() for s in original.statement]
    # Users arrive without keys: a secret never leaves lakeFS.
    assert dst.list_user_credentials("alice").results == []

    # A second run finds everything there and creates nothing twice.
    again = json.loads(silt(*args).out)
    assert again["iam"]["users"] == 0 and again["iam"]["groups"] == 0 and again["iam"]["attachments"] == 0
