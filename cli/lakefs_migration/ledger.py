"""The migration's ledger: a file of JSON lines, one per step done, so that a migration killed at
any point resumes where it stopped and records no commit twice.

The first line names the migration (source endpoint and repository, target repository). Then:
{"created": TARGET_COMMIT_ID} once the target repository exists (its initial commit),
{"recording": SOURCE_ID} just before a commit is recorded in the target, and
{"mapped": SOURCE_ID, "to": TARGET_ID, "objects": N, "bytes": B} once it is. A "recording" with
no "mapped" after it is a commit whose outcome is unknown (killed during the call): the resume
finds it on the working branch, or records it again. Each line is flushed and synced before the
step it records goes on, so the ledger never claims more than the target holds.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from silt.client_base import EXIT_USAGE, ClientError

VERSION = 1


@dataclass
class Ledger:
    path: Path
    header: dict[str, Any]
    mapped: dict[str, str] = field(default_factory=dict)  # source commit id -> target commit id
    objects: int = 0
    bytes: int = 0
    created: str | None = None  # the target's initial commit, once this migration created it
    unsure: str | None = None  # a "recording" with no outcome
    _file: TextIO | None = None

    @classmethod
    def open(cls, path: Path, header: dict[str, Any]) -> Ledger:
        header = {"migration": VERSION, **header}
        ledger = cls(path, header)
        if path.exists():
            _drop_cut_line(path)
            ledger._replay(path)
        ledger._file = path.open("a", encoding="utf-8")
        if not path.stat().st_size:
            ledger._write(header)
        return ledger

    def _replay(self, path: Path) -> None:
        lines = path.read_text(encoding="utf-8").splitlines()
        if not lines:
            return
        first = json.loads(lines[0])
        if first != self.header:
            raise ClientError(
                f"{path} is the ledger of another migration ({first}); give another --ledger, or this one's"
                " source and target",
                EXIT_USAGE,
            )
        for number, line in enumerate(lines[1:], start=2):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise ClientError(f"{path}:{number} is not JSON: the ledger is damaged", EXIT_USAGE) from None
            if "created" in record:
                self.created = record["created"]
            elif "recording" in record:
                self.unsure = record["recording"]
            elif "mapped" in record:
                self.mapped[record["mapped"]] = record["to"]
                self.objects += record.get("objects", 0)
                self.bytes += record.get("bytes", 0)
                self.unsure = None

    def _write(self, record: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def note_created(self, initial_commit: str) -> None:
        self.created = initial_commit
        self._write({"created": initial_commit})

    def recording(self, source_id: str) -> None:
        self.unsure = source_id
        self._write({"recording": source_id})

    def map(self, source_id: str, target_id: str, objects: int = 0, size: int = 0) -> None:
        self.mapped[source_id] = target_id
        self.objects += objects
        self.bytes += size
        self.unsure = None
        self._write({"mapped": source_id, "to": target_id, "objects": objects, "bytes": size})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def write_mapping(self, path: Path) -> None:
        """The id map on its own: source commit id, tab, target commit id, a line each."""
        path.write_text("".join(f"{source}\t{target}\n" for source, target in self.mapped.items()), encoding="utf-8")


def _drop_cut_line(path: Path) -> None:
    """A last line without its newline was cut short by a kill. It goes, and the next record
    starts a line of its own; what it said is found again: a cut "mapped" leaves its "recording"
    without an outcome, which the resume settles from the target's working branch."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as ledger:
            ledger.truncate(data.rfind(b"\n") + 1)
