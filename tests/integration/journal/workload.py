"""A mixed graveler workload and a complete dump of a repository, for the rebuild tests."""

from __future__ import annotations

import contextlib
import hashlib
import io
import uuid
from typing import Any

from google.protobuf.json_format import MessageToDict

from engine.core.deadline import NO_DEADLINE
from engine.graveler import Graveler
from silt.block.adapter import BlockAdapter
from silt.errors import NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.batch import Position, position
from silt.journal.context import journal_context
from silt.journal.envelope import unwrap
from silt.journal.record import JOURNAL_PREFIX, decode_record
from silt.journal.store import JournaledStore
from silt.kv.store import Store, scan_prefix
from silt.paging import take_page

SHIPPER_KEYS = b"journal_ship/"
# Stands for the services' journal MAC key (graveler.journal.hmac_key).
JOURNAL_KEY = b"journal test key 0123456789abcdef"


class InCalls:
    """A Graveler whose every method, and every method of its components (refs, pulls, ...),
    runs inside a JournalContext, as each gRPC call of graveler does
    (services/graveler/journaling.py): writes outside one are not journaled. A component's
    method runs once the repository is resolved in that context, as the servicer resolves it
    first: the records then name the repository's partition."""

    def __init__(self, graveler: Graveler, repository: str, component: object = None) -> None:
        self._graveler = graveler
        self._repository = repository
        self._component = component

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._graveler if self._component is None else self._component, name)
        if self._component is None and not callable(target):
            return InCalls(self._graveler, self._repository, target)

        def call(*args: Any, **kwargs: Any) -> Any:
            with journal_context(name, "tester", self._repository):
                if self._component is not None:
                    with contextlib.suppress(NotFound):  # a repository being created
                        self._graveler.refs.repository(self._repository)
                return target(*args, **kwargs)

        return call


def put(
    graveler: Any, adapter: BlockAdapter, repo: str, branch: str, key: str, data: bytes = b"", neutral: bool = False
) -> None:
    """Write an object's bytes to the namespace and stage it, as the gateway does (neutral: as
    its `@<branch>/<key>` form does, the key recorded too)."""
    data = data or f"{key} {uuid.uuid4().hex}".encode()
    address = f"data/{uuid.uuid4().hex}"
    namespace = graveler.refs.get_repository(repo).record.storage_namespace
    adapter.put(namespace, address, io.BytesIO(data), len(data))
    entry = pb.Entry(physical_address=address, size=len(data), etag=hashlib.md5(data).hexdigest())
    graveler.stage_entry(repo, branch, key, entry, neutral=neutral)


# A file written through a ref-neutral address on a branch that is then deleted: its record stays.
NEUTRAL_KEY = "db/t/data/00000-scratch.parquet"


# A pre-commit hook that passes: its run is repository metadata the rebuild must bring back.
AUDIT_ACTION = b"""name: audit
on:
  pre-commit:
    branches: ["feature"]
hooks:
  - id: audit_log
    type: lua
    properties:
      script: print("committing to " .. action.branch_id)
"""


def mixed_workload(graveler: Any, adapter: BlockAdapter, repo: str) -> None:
    """Writes, deletes, commits, merges, reverts, resets, tags, branch deletes, a compaction,
    pull requests, settings, an action run and a ref-neutral key."""
    for i in range(20):
        put(graveler, adapter, repo, "main", f"data/{i:03d}")
    graveler.commit(repo, "main", "first")
    graveler.create_branch(repo, "dev", "main")
    for i in range(5):
        put(graveler, adapter, repo, "dev", f"dev/{i}")
    graveler.delete_entry(repo, "dev", "data/001")
    graveler.commit(repo, "dev", "dev work")
    graveler.merge(repo, "dev", "main", message="merge dev")
    put(graveler, adapter, repo, "dev", "dev/regret")
    regret = graveler.commit(repo, "dev", "a commit to revert")
    graveler.revert(repo, "dev", regret.id)
    graveler.create_tag(repo, "v1", "main")
    graveler.create_branch(repo, "scratch", "main")
    put(graveler, adapter, repo, "scratch", "tmp/x")
    put(graveler, adapter, repo, "scratch", NEUTRAL_KEY, neutral=True)
    graveler.create_tag(repo, "gone", "main")
    graveler.delete_tag(repo, "gone")
    graveler.delete_branch(repo, "scratch")
    put(graveler, adapter, repo, "dev", "dev/reset-me")
    graveler.reset_branch(repo, "dev", key="dev/reset-me")
    graveler.create_branch(repo, "feature", "main")
    put(graveler, adapter, repo, "feature", "feature/a")
    put(graveler, adapter, repo, "feature", "_lakefs_actions/audit.yaml", AUDIT_ACTION)
    graveler.commit(repo, "feature", "feature work")  # runs the hook: an action run to rebuild
    handle = graveler.refs.repository(repo)
    engine = getattr(graveler, "_graveler", graveler)  # InCalls wraps only methods of components
    runs, _, _ = engine.actions.runs.list_page(handle, "feature", "", "", 10, NO_DEADLINE)
    assert [(r.event_type, r.failed) for r in runs] == [("pre-commit", False)]
    pull = graveler.pulls.create(handle, "add feature", "please", "feature", "dev", "alice")
    graveler.pulls.comment(handle, pull.id, "bob", "looks good")
    other = graveler.pulls.create(handle, "second", "", "feature", "main", "alice")
    graveler.pulls.merge(handle, other.id, "fail", "", {}, "", NO_DEADLINE)
    graveler.retention.set_rules(handle, pb.GCRules(default_retention_days=7))
    graveler.protection.set(handle, [pb.BranchProtectionRule(pattern="main", required_approvals=0)], "", NO_DEADLINE)
    graveler.repo_metadata.update(repo, {"team": "data"}, [], NO_DEADLINE)
    put(graveler, adapter, repo, "dev", "dev/uncommitted")
    graveler.delete_entry(repo, "dev", "dev/0")
    for i in range(2, 12):  # data/001 went with the merge of dev
        graveler.delete_entry(repo, "dev", f"data/{i:03d}")
    graveler.compact(repo, "dev")
    put(graveler, adapter, repo, "dev", "after/compaction")


def raw(graveler: Graveler) -> Store:
    """The store under graveler's journaled one: journal rows visible, writes unjournaled."""
    kv = graveler.refs.kv
    assert isinstance(kv, JournaledStore)
    return kv.raw


def _partition_of(graveler: Graveler, repo: str) -> bytes:
    record = graveler.refs.get_repository(repo).record
    return f"{record.name}-{record.unique_id}".encode()


def _tokens_of(branch: pb.Branch) -> set[str]:
    return {token for token in (branch.staging_token, *branch.sealed_tokens) if token}


def live_tokens(kv: Store, graveler: Graveler, repo: str) -> set[str]:
    """The staging tokens repo's branch records name now."""
    tokens: set[str] = set()
    for entry in scan_prefix(kv, _partition_of(graveler, repo), b"branches/"):
        branch = pb.Branch()
        branch.ParseFromString(unwrap(entry.value)[1])
        tokens |= _tokens_of(branch)
    return tokens


def tokens_ever_named(kv: Store, graveler: Graveler, repo: str) -> set[str]:
    """The tokens the branch records name now and those named by branch values in the
    repository partition's journal rows: before any shipping, every token the repository had."""
    tokens = live_tokens(kv, graveler, repo)
    for entry in scan_prefix(kv, _partition_of(graveler, repo), JOURNAL_PREFIX):
        for change in decode_record(entry.value).changes:
            if change.kind == "branch" and change.value:
                branch = pb.Branch()
                branch.ParseFromString(unwrap(change.value)[1])
                tokens |= _tokens_of(branch)
    return tokens


def repository_partitions(graveler: Graveler, repo: str, tokens: set[str]) -> list[bytes]:
    """Every partition repo's journal rows can be in: the shared one, its own, its tokens'."""
    return [b"graveler", _partition_of(graveler, repo), *sorted(token.encode() for token in tokens)]


def journal_positions(kv: Store, repo: str, partitions: list[bytes]) -> set[Position]:
    """The positions of repo's journal rows in partitions (the shared partition holds others')."""
    found = set()
    for partition in partitions:
        for entry in scan_prefix(kv, partition, JOURNAL_PREFIX):
            record = decode_record(entry.value)
            if record.repository == repo:
                found.add(position(record))
    return found


def raw_dump(kv: Store, graveler: Graveler, repo: str) -> dict[str, Any]:
    """Every stored row of the repository that graveler reads: its record, its partition, and
    the staging tokens its branches name (envelopes included)."""
    record = graveler.refs.get_repository(repo).record
    partition = f"{record.name}-{record.unique_id}".encode()
    rows: dict[bytes, dict[bytes, bytes]] = {b"graveler": {}}
    rows[b"graveler"][b"repos/" + repo.encode()] = kv.get(b"graveler", b"repos/" + repo.encode()).value
    rows[partition] = _partition(kv, partition)
    handle = graveler.refs.repository(repo)
    for entry in scan_prefix(kv, partition, b"branches/"):
        branch = graveler.refs.get_branch(handle, entry.key[len(b"branches/") :].decode()).branch
        for token in (branch.staging_token, *branch.sealed_tokens):
            rows[token.encode()] = _partition(kv, token.encode())
    return {partition.decode(): sorted(values.items()) for partition, values in rows.items()}


def _partition(kv: Store, partition: bytes) -> dict[bytes, bytes]:
    return {
        entry.key: entry.value
        for entry in kv.scan(partition)
        if not entry.key.startswith(JOURNAL_PREFIX) and not entry.key.startswith(SHIPPER_KEYS)
    }


def api_dump(graveler: Graveler, adapter: BlockAdapter, repo: str) -> dict[str, Any]:
    """What a client sees: branches, tags, history, every object's bytes on every ref,
    pull requests with comments, settings."""
    handle = graveler.refs.repository(repo)
    record = handle.record
    branches, _ = take_page(graveler.refs.list_branches(handle), 1000)
    tags, _ = take_page(graveler.refs.list_tags(handle), 1000)
    refs = [branch.name for branch in branches] + [tag.id for tag in tags]
    pulls, _, _ = graveler.pulls.list_page(
        handle, pb.PullRequestStatus.PULL_REQUEST_STATUS_UNSPECIFIED, "", 1000, NO_DEADLINE
    )
    return {
        "repository": MessageToDict(record),
        "branches": [MessageToDict(branch) for branch in branches],
        "tags": [MessageToDict(tag) for tag in tags],
        "log": {ref: [c.id for c in graveler.log(repo, ref, amount=1000).commits] for ref in refs},
        "objects": {ref: _objects(graveler, adapter, repo, record.storage_namespace, ref) for ref in refs},
        "pulls": [MessageToDict(pull) for pull in pulls],
        "comments": {
            pull.id: [MessageToDict(c) for c in graveler.pulls.comments(handle, pull.id, "", 1000)[0]] for pull in pulls
        },
        "gc_rules": MessageToDict(graveler.retention.get_rules(handle) or pb.GCRules()),
        "protection": MessageToDict(graveler.protection.get(handle)[0]),
    }


def _objects(graveler: Graveler, adapter: BlockAdapter, repo: str, namespace: str, ref: str) -> dict[str, str]:
    found = {}
    page = graveler.entries.list(graveler.refs.repository(repo), ref, "", "", "", 10_000, NO_DEADLINE)
    for key, entry in page.items:
        assert entry is not None  # no delimiter: no common prefixes
        with adapter.get(namespace, entry.physical_address) as stream:
            found[key.decode()] = hashlib.sha256(stream.read()).hexdigest()
    return found
