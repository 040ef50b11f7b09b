"""The state of a `silt bisect` session, kept locally between commands as lakectl keeps its own:
``~/.lakectl.bisect.json`` (the same file and fields, so either tool continues the other's
session).

The candidates are the commits from the bad one back to the good one (the good one left out),
newest first, as the REST API's log lists them. The commit under test is the middle one; marking
it good keeps the newer half (the change came after it), marking it bad keeps it and the older
half. One candidate left is the first bad commit.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

GOOD = "good"
BAD = "bad"


def state_file() -> Path:
    return Path.home() / ".lakectl.bisect.json"


@dataclass
class Bisect:
    repository: str
    bad_commit: str = ""
    good_commit: str = ""
    commits: list[dict[str, Any]] = field(default_factory=list)
    created: str = ""

    @property
    def current(self) -> dict[str, Any] | None:
        """The commit to test next; None when there is nothing left to decide."""
        if len(self.commits) <= 1:
            return None
        return self.commits[len(self.commits) >> 1]

    @property
    def found(self) -> dict[str, Any] | None:
        """The first bad commit, once one candidate is left."""
        return self.commits[0] if len(self.commits) == 1 else None

    def select(self, verdict: str) -> None:
        """Mark the commit under test good or bad; nothing changes once the search is over."""
        if verdict not in (GOOD, BAD):
            raise ValueError(f"a bisect verdict is {GOOD!r} or {BAD!r}, not {verdict!r}")
        if len(self.commits) <= 1:
            return
        middle = len(self.commits) >> 1
        self.commits = self.commits[:middle] if verdict == GOOD else self.commits[middle:]

    def status(self) -> list[str]:
        """Where the search stands, as lines for people."""
        lines = [f"Repository: {self.repository}"]
        uri = f"lakefs://{self.repository}"
        if not self.bad_commit and not self.good_commit:
            lines.append("Missing both good and bad commits")
        elif not self.good_commit:
            lines.append(f"Bad commit {uri}/{self.bad_commit}, waiting for good commit")
        elif not self.bad_commit:
            lines.append(f"Good commit {uri}/{self.good_commit}, waiting for bad commit")
        elif not self.commits:
            lines.append("No commits found")
        elif self.found is not None:
            lines.append(f"Found commit {uri}/{self.found['id']} {self.found.get('message', '')}")
        else:
            left = len(self.commits) >> 1  # at most, whichever way the test goes
            steps = int(math.log2(len(self.commits)))
            current = self.current or {}
            lines.append(f"Bisecting: {left} commits left to test after this (roughly {steps} steps)")
            lines.append(f"Current commit {uri}/{current.get('id', '')} {current.get('message', '')}")
        return lines

    # lakectl's field names, so that its file and ours are one.
    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"created": self.created, "repository": self.repository}
        if self.bad_commit:
            data["badCommit"] = self.bad_commit
        if self.good_commit:
            data["goodCommit"] = self.good_commit
        if self.commits:
            data["commits"] = self.commits
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Bisect:
        return cls(
            repository=str(data.get("repository") or ""),
            bad_commit=str(data.get("badCommit") or ""),
            good_commit=str(data.get("goodCommit") or ""),
            commits=list(data.get("commits") or []),
            created=str(data.get("created") or ""),
        )


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load(path: Path | None = None) -> Bisect | None:
    """The saved session; None when there is none."""
    try:
        text = (path or state_file()).read_text()
    except FileNotFoundError:
        return None
    return Bisect.from_json(json.loads(text))


def save(state: Bisect, path: Path | None = None) -> None:
    """Written whole and renamed into place: an interrupted save leaves the previous state."""
    target = path or state_file()
    partial = target.with_name(target.name + ".tmp")
    partial.write_text(json.dumps(state.to_json()))
    os.replace(partial, target)


def remove(path: Path | None = None) -> bool:
    try:
        (path or state_file()).unlink()
    except FileNotFoundError:
        return False
    return True
