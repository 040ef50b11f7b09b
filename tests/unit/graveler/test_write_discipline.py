"""No KV key is written both by compare-and-set and by plain writes (docs/design/kv.md,
"Consistency on Cassandra: statements").

On Cassandra ``set_if`` and a conditional ``apply`` are lightweight transactions (Paxos; the
cell's timestamp is the ballot) while ``set``, ``delete`` and an unconditional ``apply`` are
plain writes; Cassandra does not order the two kinds on one cell, so one may silently lose.
Every graveler manager's operations run here over a store that records, per (partition, key),
which kinds wrote or deleted it, as the driver underneath the journal sees them; a key touched
by both kinds fails the test, so a new plain ``set`` or ``delete`` of a key some other path
writes by ``set_if`` (or the reverse) fails it. The auth model's test:
tests/unit/auth/test_write_discipline.py.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE, Deadline
from engine.core.entries import Condition as WriteCondition
from engine.core.refs import RepoHandle
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import FailedPrecondition
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.record import JOURNAL_PREFIX
from silt.kv.forwarding import ForwardingStore
from silt.kv.mem import MemStore
from silt.kv.store import AllOf, Condition, Predicate, Store, Timestamp

PLAIN, LWT = "plain", "lwt"
Touch = tuple[str, str]  # (PLAIN or LWT, "write" or "delete")


class RecordingStore(ForwardingStore):
    """inner, noting for each (partition, key) how it was written and deleted."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.touches: dict[tuple[bytes, bytes], set[Touch]] = defaultdict(set)

    def _note(self, partition: bytes, keys: Sequence[bytes], kind: str, what: str) -> None:
        for key in keys:
            self.touches[(bytes(partition), bytes(key))].add((kind, what))

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        self.inner.set(partition, key, value)
        self._note(partition, [key], PLAIN, "write")

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        # Noted whether or not it applied: a refused LWT is still a Paxos round on the cell.
        self._note(partition, [key], LWT, "write")
        self.inner.set_if(partition, key, value, predicate)

    def delete(self, partition: bytes, key: bytes) -> None:
        self.inner.delete(partition, key)
        self._note(partition, [key], PLAIN, "delete")

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        # A conditional batch is one Paxos round: every row of it takes the ballot's timestamp.
        kind = PLAIN if condition is None else LWT
        if condition is not None:
            self._note(partition, [k for k, _ in puts], kind, "write")
            self._note(partition, deletes, kind, "delete")
        self.inner.apply(partition, puts, deletes, condition, timestamp)
        if condition is None:
            self._note(partition, [k for k, _ in puts], kind, "write")
            self._note(partition, deletes, kind, "delete")

    def mixed(self) -> list[str]:
        """The keys touched by both plain writes and LWTs, with how.

        Journal rows are left out: each is written once, in the same batch as the mutation it
        records (so by an LWT when that mutation is a compare-and-set), never read by a
        condition, and deleted by the shipper at a write time after its own."""
        found = []
        for (partition, key), touches in sorted(self.touches.items()):
            if key.startswith(JOURNAL_PREFIX):
                continue
            if len({kind for kind, _ in touches}) > 1:
                found.append(f"{partition!r} {key!r}: {sorted(touches)}")
        return found


def _stage(graveler: Graveler, repository: str, branch: str, key: str) -> None:
    graveler.stage_entry(repository, branch, key, pb.Entry(physical_address=f"data/{key}", size=1, etag="e"))


def _stage_if(
    graveler: Graveler, repository: str, branch: str, key: str, condition: WriteCondition, address: str = ""
) -> None:
    entry = pb.Entry(physical_address=address or f"data/{key}", size=1, etag="e")
    graveler.stage_entry(repository, branch, key, entry, condition=condition)


def test_graveler_managers_never_mix_plain_writes_and_lwts_on_a_key(tmp_path: Path) -> None:
    recorded = RecordingStore(MemStore())
    graveler = open_graveler(recorded, LocalAdapter(tmp_path / "data"))
    deadline = Deadline.after(60)

    def repo(name: str) -> RepoHandle:
        return graveler.refs.repository(name)

    try:
        # Repositories, their metadata labels, namespace claims.
        graveler.lifecycle.create_repository("repo", "local://repo", "", False)
        graveler.repo_metadata.update("repo", {"team": "lake", "tier": "gold"}, [], NO_DEADLINE)
        graveler.repo_metadata.update("repo", {"tier": "silver"}, ["team"], NO_DEADLINE)

        # Branches, staging, commits, tags, compaction, reset.
        graveler.create_branch("repo", "feature", "main")
        graveler.create_branch("repo", "doomed", "main")
        _stage(graveler, "repo", "feature", "a.csv")
        _stage(graveler, "repo", "feature", "b.csv")
        graveler.delete_entry("repo", "feature", "b.csv")
        graveler.commit("repo", "feature", "first", committer="alice")
        _stage(graveler, "repo", "feature", "c.csv")
        graveler.compact("repo", "feature")
        graveler.reset_branch("repo", "feature", key="c.csv")
        # Ref-neutral keys: recorded (created, then an identical write over bytes that are gone
        # replaces the record), read, and deleted with the repository below.
        neutral = pb.Entry(physical_address="data/neutral", size=1, etag="n")
        graveler.stage_entry("repo", "feature", "db/t/f.parquet", neutral, neutral=True)
        again = pb.Entry(physical_address="data/neutral-again", size=1, etag="n")
        graveler.stage_entry("repo", "doomed", "db/t/f.parquet", again, neutral=True)
        graveler.record_neutral_entries("repo", "feature", [("db/t/m.avro", neutral)])
        # Conditional staging writes (S3's If-None-Match / If-Match, expiry's conditional
        # deletes) next to plain ones of the same keys; keys and prefixes reset, a partial commit
        # dropping what it committed: staged values stay plain, their guards compare-and-set.
        entries, handle = graveler.entries, graveler.refs.repository("repo")
        for key in ("e.csv", "f/1.csv", "f/2.csv", "g/1.csv"):
            _stage_if(graveler, "repo", "feature", key, WriteCondition(if_absent=True))
        _stage(graveler, "repo", "feature", "e.csv")
        _stage_if(graveler, "repo", "feature", "e.csv", WriteCondition(if_match_etag="e"))
        with pytest.raises(FailedPrecondition):  # another write's entry: its own would be a success
            _stage_if(graveler, "repo", "feature", "e.csv", WriteCondition(if_absent=True), "data/other-e.csv")
        entries.delete_if(handle, "feature", "e.csv", WriteCondition(if_match_etag="*"), deadline)
        graveler.reset_branch("repo", "feature", key="e.csv")
        graveler.reset_branch("repo", "feature", prefix="f/")
        graveler.commit("repo", "feature", "g only", committer="alice", prefixes=["g/"])
        _stage_if(graveler, "repo", "feature", "e.csv", WriteCondition(if_absent=True))
        # Several keys as one compare-and-set (their guards in one conditional batch, their
        # values in one plain write), beside single conditional and blind writes of the same keys.
        many = [(key, pb.Entry(physical_address=f"data/m-{key}", size=1, etag="m")) for key in ("e.csv", "h.csv")]
        with pytest.raises(FailedPrecondition):
            graveler.stage_entries_if("repo", "feature", [(k, e, WriteCondition(if_absent=True)) for k, e in many])
        graveler.stage_entries_if(
            "repo",
            "feature",
            [
                (many[0][0], many[0][1], WriteCondition(if_match_etag="e")),
                (many[1][0], many[1][1], WriteCondition(if_absent=True)),
            ],
        )
        _stage(graveler, "repo", "feature", "h.csv")
        _stage_if(graveler, "repo", "feature", "e.csv", WriteCondition(if_match_etag="m"))
        graveler.commit("repo", "feature", "the rest", committer="alice")
        graveler.create_tag("repo", "v1", "feature")
        graveler.create_tag("repo", "v2", "feature")
        graveler.delete_tag("repo", "v2")
        graveler.delete_branch("repo", "doomed")

        # Branch protection: set, replaced under an etag.
        protection = graveler.protection
        _, etag = protection.set(repo("repo"), [pb.BranchProtectionRule(pattern="rel-*")], "", NO_DEADLINE)
        protection.set(repo("repo"), [pb.BranchProtectionRule(pattern="main", required_approvals=1)], etag, deadline)

        # Retention rules: set, set keeping last-access rules, deleted, set again.
        retention = graveler.retention
        retention.set_rules(repo("repo"), pb.GCRules(default_retention_days=7))
        retention.set_rules(repo("repo"), pb.GCRules(default_retention_days=3), keep_last_access_rules=True)
        retention.delete_rules(repo("repo"))
        retention.set_rules(repo("repo"), pb.GCRules(default_retention_days=5))
        retention.delete_rules(repo("repo"))
        last_access = pb.LastAccessRule(branch="main", prefixes=["logs/"], days=30)
        retention.set_rules(repo("repo"), pb.GCRules(default_retention_days=1, last_access_rules=[last_access]))
        retention.set_rules(repo("repo"), pb.GCRules(default_retention_days=2), keep_last_access_rules=True)
        retention.prepare(repo("repo"), deadline, lakefs_formats=True)
        retention.prepare_uncommitted(repo("repo"), deadline)
        # A background export (lakeFS's async prepare): its record created, beaten, completed.
        task = graveler.gc_tasks.start(repo("repo"))
        waited_until = time.monotonic() + 30
        while not graveler.gc_tasks.status(repo("repo"), task.id).completed:
            assert time.monotonic() < waited_until, "the background GC export did not complete"
            time.sleep(0.05)
        assert not graveler.gc_tasks.status(repo("repo"), task.id).error
        graveler.last_access.prepare(repo("repo"), "main", deadline)

        # Pull requests: created, updated, commented, reviewed, merged; another closed.
        pulls, unspecified = graveler.pulls, pb.PULL_REQUEST_STATUS_UNSPECIFIED
        pull = pulls.create(repo("repo"), "Add a", "", "feature", "main", "alice")
        pulls.update(repo("repo"), pull.id, "Add a.csv", "the first file", unspecified, NO_DEADLINE)
        pulls.comment(repo("repo"), pull.id, "bob", "looks fine")
        pulls.review(repo("repo"), pull.id, "bob", pb.REVIEW_VERDICT_APPROVE, "", deadline)
        pulls.merge(repo("repo"), pull.id, "fail", "", {}, "bob", deadline)
        _stage(graveler, "repo", "feature", "d.csv")
        graveler.commit("repo", "feature", "second", committer="alice")
        other = pulls.create(repo("repo"), "Add d", "", "feature", "main", "alice")
        pulls.comment(repo("repo"), other.id, "bob", "not now")
        pulls.update(repo("repo"), other.id, None, None, pb.PULL_REQUEST_STATUS_CLOSED, NO_DEADLINE)
        pulls.update(repo("repo"), other.id, None, None, pb.PULL_REQUEST_STATUS_OPEN, NO_DEADLINE)
        pulls.update(repo("repo"), other.id, None, None, pb.PULL_REQUEST_STATUS_CLOSED, NO_DEADLINE)

        # Dump, delete (the records, the claim and every key of the partitions, cleaned) and
        # restore into a bare repository on the same namespace: pull requests, comments,
        # protection rules, tags and branches written again; then changes on the copy.
        lifecycle = graveler.lifecycle
        dumped = lifecycle.dump_refs(repo("repo"))
        lifecycle.delete_repository("repo")
        lifecycle.clean_deleted_repositories()
        lifecycle.create_repository("copy", "local://repo", "", True)
        lifecycle.restore_refs(repo("copy"), dumped.location)
        protection.set(repo("copy"), [], "", deadline)
        restored_pull = pulls.list_page(repo("copy"), unspecified, "", 10, NO_DEADLINE)[0][0]
        pulls.update(repo("copy"), restored_pull.id, "restored", None, unspecified, NO_DEADLINE)

        lifecycle.delete_repository("copy")
        lifecycle.clean_deleted_repositories()
    finally:
        graveler.close()
    assert recorded.touches, "nothing was recorded"
    mixed = recorded.mixed()
    assert not mixed, "\n".join(mixed)
