"""The journal across crashes, with real processes: graveler killed -9 in the middle of a write
workload, the shipper (`silt admin journal ship`) killed -9 in the middle of shipping, and a
shipping process killed -9 at chosen step boundaries of its round. After recovery every
acknowledged write is in the journal exactly once, no journal row is left in KV, and a rebuild
from the namespace alone (`silt admin rebuild`, into a new KV file) shows what the original KV
shows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from engine.core.deadline import NO_DEADLINE
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.journal.batch import decode_batch, position
from silt.journal.bucket import JournalBucket
from silt.journal.record import JOURNAL_PREFIX
from silt.kv.store import Store, open_store, scan_prefix
from silt.launcher import Stack
from silt.paging import take_page
from tests.e2e.conftest import Silt, entry, graveler_stub, stage_tree
from tests.integration.journal.workload import journal_positions, repository_partitions, tokens_ever_named
from tests.support.wait import wait_until

SERVICES = ["auth", "graveler"]


# One stack for the module: each test has repositories of its own (the shipper, the rebuild and
# the checks all take one repository), and a graveler killed by one test is restarted by the
# launcher, as it would be in production, before the test goes on.
@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data = tmp_path_factory.mktemp("journal-crash") / "silt"
    with Stack(data, ports=dict.fromkeys(SERVICES, 0), services=SERVICES, on_event=lambda _: None) as s:
        yield s


@pytest.fixture
def silt(stack: Stack, tmp_path: Path) -> Silt:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("SILT_", "AWS_"))}
    env.update(stack.env_for_clients())
    env["SILT_CONFIG"] = str(stack.config_path)
    # `silt admin journal ship` and `rebuild` sign and verify with the key the services derive
    # from it, as an operator's shell on the install would have it.
    env["SILT_AUTH_ENCRYPT_SECRET_KEY"] = (stack.data_dir / "secret.key").read_text().strip()
    return Silt(env, tmp_path)


def kv_at(path: Path) -> Store:
    return open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(path))))


def view(stack: Stack, kv: Store, repo: str) -> dict[str, object]:
    """What graveler serves of repo from kv: branches, staged and committed listings, history."""
    assert stack.config is not None
    graveler = open_graveler(kv, LocalAdapter(stack.config.blockstore.local.path))
    try:
        branches, _ = take_page(graveler.refs.list_branches(graveler.refs.repository(repo)), 100)
        return {
            "branches": sorted((b.name, b.commit_id) for b in branches),
            "main": listing(graveler, repo, "main"),
            "main@": listing(graveler, repo, "main@"),
            "log": [c.id for c in graveler.log(repo, "main", amount=100).commits],
        }
    finally:
        graveler.close()


def listing(graveler: Graveler, repo: str, ref: str) -> list[tuple[str, str]]:
    page = graveler.entries.list(graveler.refs.repository(repo), ref, "", "", "", 100_000, NO_DEADLINE)
    return [(key.decode(), entry.etag if entry else "") for key, entry in page.items]


def journal_rows(stack: Stack, kv: Store, repo: str) -> int:
    """Unshipped journal rows of repo's partition and of its branches' staging tokens."""
    assert stack.config is not None
    graveler = open_graveler(kv, LocalAdapter(stack.config.blockstore.local.path))
    try:
        partitions = [graveler.refs.get_repository(repo).partition]
        branches, _ = take_page(graveler.refs.list_branches(graveler.refs.repository(repo)), 100)
        for branch in branches:
            partitions += [token.encode() for token in (branch.staging_token, *branch.sealed_tokens)]
    finally:
        graveler.close()
    return sum(1 for partition in partitions for _ in scan_prefix(kv, partition, JOURNAL_PREFIX))


def rebuild(silt: Silt, stack: Stack, repo: str, target: Path) -> None:
    rebuilt = Silt({**silt.env, "SILT_DATABASE_LOCAL_PATH": str(target)}, silt.cwd)
    out = rebuilt.proc("admin", "rebuild", "--namespace", f"local://{repo}", "--json").json()
    assert out["ok"] and out["repository"] == repo


def test_graveler_killed_mid_workload(stack: Stack, silt: Silt, tmp_path: Path) -> None:
    repo = f"crash-{uuid.uuid4().hex[:8]}"
    stub = graveler_stub(stack)
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"), timeout=30)
    acknowledged: set[str] = set()
    failed: set[str] = set()
    stop = threading.Event()

    def writer(number: int) -> None:
        for i in range(100_000):
            if stop.is_set():
                return
            key = f"w{number}/{i:06d}"
            request = api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry(key, "v1"))
            try:
                stub.StageEntry(request, timeout=10)
                acknowledged.add(key)
            except grpc.RpcError:
                failed.add(key)  # outcome unknown: it may or may not have happened

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(acknowledged) >= 300, 60, "300 acknowledged writes")
        restarts = stack.restarts("graveler")
        stack.kill("graveler", signal.SIGKILL)
        wait_until(lambda: stack.restarts("graveler") > restarts, 60, "graveler restarted")
        stack.wait_ready("graveler", timeout=60)
        seen = len(acknowledged)
        wait_until(lambda: len(acknowledged) >= seen + 300, 60, "300 more writes after the restart")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert failed, "the kill interrupted no write: the scenario did not happen"

    # Shipped before any commit, while every write is still a staged row with its record.
    silt.proc("admin", "journal", "ship", "--repository", repo)
    assert stack.config is not None
    bucket = JournalBucket(LocalAdapter(stack.config.blockstore.local.path), f"local://{repo}")
    writes: dict[tuple[str, int], set[str]] = {}  # by position: a record shipped twice counts once
    for key in bucket.batches():
        for record in decode_batch(bucket.read(key)):
            if record.event_type == "object_write":
                staged = {c.key[len(b"key/") :].decode() for c in record.changes if c.kind == "staged"}
                writes[(record.writer_id, record.sequence)] = staged
    journaled = Counter(key for keys in writes.values() for key in keys)
    assert {key: journaled[key] for key in acknowledged if journaled[key] != 1} == {}
    assert set(journaled) <= acknowledged | failed  # nothing journaled that no one asked for

    stub.Commit(api.CommitRequest(repository=repo, branch="main", message="after the crash"), timeout=60)
    stage_tree(stack, repo, "main", ["after/commit"])
    silt.proc("admin", "journal", "ship", "--repository", repo)
    original = kv_at(Path(stack.config.database.local.path))
    try:
        assert journal_rows(stack, original, repo) == 0
        before = view(stack, original, repo)
    finally:
        original.close()
    target = tmp_path / "rebuilt.db"
    rebuild(silt, stack, repo, target)
    rebuilt = kv_at(target)
    try:
        after = view(stack, rebuilt, repo)
    finally:
        rebuilt.close()

    assert after == before
    visible = {key for key, _ in before["main@"]}  # type: ignore[attr-defined]
    # Every acknowledged write is there; a write whose call failed may or may not have happened,
    # and rebuild shows it exactly when the original KV does (after == before).
    assert acknowledged <= visible and visible <= acknowledged | failed


def test_shipper_killed_mid_shipping(stack: Stack, silt: Silt, tmp_path: Path) -> None:
    repo = f"ship-{uuid.uuid4().hex[:8]}"
    stub = graveler_stub(stack)
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"), timeout=30)
    stage_tree(stack, repo, "main", [f"a/{i:05d}" for i in range(1500)])
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message="first"), timeout=60)
    stage_tree(stack, repo, "main", [f"b/{i:05d}" for i in range(1500)])
    assert stack.config is not None
    bucket = JournalBucket(LocalAdapter(stack.config.blockstore.local.path), f"local://{repo}")

    shipper = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "admin",
            "journal",
            "ship",
            "--repository",
            repo,
            "--batch-records",
            "20",
            "--lease-seconds",
            "3",
        ],
        env=silt.process_env(),
        cwd=silt.cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: len(bucket.batches()) >= 5 or shipper.poll() is not None, 120, "batches being shipped")
        assert shipper.poll() is None, "the shipper finished before the kill: the scenario did not happen"
        shipper.send_signal(signal.SIGKILL)
    finally:
        shipper.wait(30)
    original = kv_at(Path(stack.config.database.local.path))
    try:
        assert journal_rows(stack, original, repo) > 0  # shipping was cut short

        def shipped_again() -> bool:
            # Refused while the dead shipper's lease runs; then this shipper takes over.
            result = silt.proc("admin", "journal", "ship", "--repository", repo, "--json").json()
            return not result["repositories"][0]["skipped"]

        wait_until(shipped_again, 60, "a shipper taking over once the dead one's lease ran out", interval=1.0)
        assert journal_rows(stack, original, repo) == 0
        before = view(stack, original, repo)
    finally:
        original.close()
    target = tmp_path / "rebuilt.db"
    rebuild(silt, stack, repo, target)
    rebuilt = kv_at(target)
    try:
        assert view(stack, rebuilt, repo) == before
    finally:
        rebuilt.close()
    assert len(before["main"]) == 3000 and len(before["main@"]) == 1500  # type: ignore[arg-type]


# A shipping process that stops dead at the n-th boundary of the named step of its round: the
# real Shipper on the stack's KV file and block store, paused there until the test kills it.
PAUSING_SHIPPER = """
import sys, threading
from pathlib import Path
from silt.block import open_adapter
from silt.config import load_config
from silt.journal.mac import journal_key
from silt.journal.shipper import Shipper
from silt.kv.store import open_store

repo, step, nth, marker = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
seen = 0

def pause(name):
    global seen
    if name == step:
        seen += 1
        if seen == nth:
            marker.write_text(name)
            threading.Event().wait()

config = load_config()
kv = open_store(config.database)
adapter = open_adapter(config.blockstore)
Shipper(kv, adapter, lease_seconds=2, batch_records=10, step=pause, hmac_key=journal_key(config)).ship(repo)
"""


def commits_and_dropped_tokens(stack: Stack, repo: str) -> None:
    """Writes on main and on a branch, commits, a branch deletion: three tokens dropped (their
    journal rows waiting for the shipper), and main's current token holding writes."""
    stub = graveler_stub(stack)
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"), timeout=30)
    stage_tree(stack, repo, "main", [f"a/{i:02d}" for i in range(15)])
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message="first"), timeout=60)
    stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"), timeout=30)
    stage_tree(stack, repo, "dev", [f"d/{i:02d}" for i in range(15)])
    stub.Commit(api.CommitRequest(repository=repo, branch="dev", message="on dev"), timeout=60)
    stage_tree(stack, repo, "dev", ["d/uncommitted"])
    stub.DeleteBranch(api.DeleteBranchRequest(repository=repo, name="dev"), timeout=30)
    stage_tree(stack, repo, "main", [f"b/{i:02d}" for i in range(15)])
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message="second"), timeout=60)
    stage_tree(stack, repo, "main", [f"c/{i:02d}" for i in range(5)])


@pytest.mark.parametrize(
    ("step", "nth"),
    [
        pytest.param("batch written", 1, id="a-batch-written-its-rows-not-deleted"),
        pytest.param("partition shipped", 2, id="the-repository-partition-shipped"),
        pytest.param("rows deleted", 6, id="amid-the-staging-tokens"),
        pytest.param("tokens saved", 1, id="the-round-done-its-lease-held"),
    ],
)
def test_a_shipper_killed_at_a_step_strands_nothing(
    stack: Stack, silt: Silt, tmp_path: Path, step: str, nth: int
) -> None:
    repo = f"kill-{uuid.uuid4().hex[:8]}"
    commits_and_dropped_tokens(stack, repo)
    assert stack.config is not None
    kv_path = Path(stack.config.database.local.path)
    original = kv_at(kv_path)
    graveler = open_graveler(original, LocalAdapter(stack.config.blockstore.local.path))
    try:
        partitions = repository_partitions(graveler, repo, tokens_ever_named(original, graveler, repo))
        written = journal_positions(original, repo, partitions)
    finally:
        graveler.close()
        original.close()
    assert len(partitions) >= 2 + 5  # graveler's, the repository's, main's 3 tokens and dev's 2

    marker = tmp_path / f"paused-{repo}"
    shipper = subprocess.Popen(
        [sys.executable, "-c", PAUSING_SHIPPER, repo, step, str(nth), str(marker)],
        env=silt.process_env(),
        cwd=silt.cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: marker.exists() or shipper.poll() is not None, 120, f"the shipper reaching {step!r}")
        assert shipper.poll() is None, f"the shipper ended before {step!r} #{nth}: {shipper.stderr.read()!r}"  # type: ignore[union-attr]
        shipper.send_signal(signal.SIGKILL)
    finally:
        shipper.wait(30)
        shipper.stderr.close()  # type: ignore[union-attr]
    assert shipper.returncode == -signal.SIGKILL

    def shipped_again() -> bool:
        # Refused while the dead shipper's lease runs; then this shipper takes over.
        result = silt.proc("admin", "journal", "ship", "--repository", repo, "--json").json()
        return not result["repositories"][0]["skipped"]

    wait_until(shipped_again, 60, "a shipper taking over once the dead one's lease ran out", interval=0.5)
    original = kv_at(kv_path)
    try:
        assert journal_positions(original, repo, partitions) == set()
        before = view(stack, original, repo)
    finally:
        original.close()
    bucket = JournalBucket(LocalAdapter(stack.config.blockstore.local.path), f"local://{repo}")
    assert {position(r) for key in bucket.batches() for r in decode_batch(bucket.read(key))} == written

    target = tmp_path / f"rebuilt-{repo}.db"
    rebuild(silt, stack, repo, target)
    rebuilt = kv_at(target)
    try:
        assert view(stack, rebuilt, repo) == before
    finally:
        rebuilt.close()
    assert len(before["main"]) == 35 and len(before["main@"]) == 30  # type: ignore[arg-type]
