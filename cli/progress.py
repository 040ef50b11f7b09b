"""Progress of `silt fs upload|download`: bytes, rate and time left, per file and in total.

On a terminal, rich draws live bars (one per file in flight, and a total when there are
several files). Anywhere else (a log, CI, a pipe) a plain line every few seconds says the
same, so a long transfer is never silent; the last line comes when everything is done.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from cli.common import human_size

# rich draws the bars on a terminal only: imported there (a tenth of a second of CPU that a
# script's, a pipe's or CI's transfers never need).
if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

INTERVAL_ENV = "SILT_PROGRESS_INTERVAL_SECONDS"
DEFAULT_INTERVAL_SECONDS = 5.0


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_SECONDS)))
    except ValueError:
        return DEFAULT_INTERVAL_SECONDS


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class TransferProgress:
    """Counts bytes of many concurrent transfers (boto3 reports from its own threads).

    verb: "uploading" or "downloading"; files: (name, size) of every file to transfer.
    """

    def __init__(self, verb: str, files: list[tuple[str, int]], quiet: bool, stream: IO[str] | None = None) -> None:
        self._verb = verb
        self._sizes = dict(files)
        self._total = sum(self._sizes.values())
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._lock = threading.Lock()
        self._done_bytes = 0
        self._done_files = 0
        self._started = time.monotonic()
        self._last_line = self._started
        self._interval = _interval()
        self._rich: Progress | None = None
        self._total_task: TaskID | None = None
        self._tasks: dict[str, TaskID] = {}
        if not quiet and self._stream.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(binary_units=True),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self._stream),
            )

    def __enter__(self) -> TransferProgress:
        if self._rich is not None:
            self._rich.start()
            if len(self._sizes) > 1:
                self._total_task = self._rich.add_task(f"{self._verb} {len(self._sizes)} files", total=self._total)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif not self._quiet and exc_type is None:
            self._line(final=True)

    def file(self, name: str) -> Callable[[int], Any]:
        """The callback for one file's transfer: called with each chunk's byte count."""
        if self._rich is not None:
            with self._lock:
                self._tasks[name] = self._rich.add_task(name, total=self._sizes.get(name, 0))

        def advance(amount: int) -> None:
            self._advance(name, amount)

        return advance

    def finished(self, name: str) -> None:
        with self._lock:
            self._done_files += 1
            task = self._tasks.pop(name, None)
        if self._rich is not None and task is not None:
            self._rich.remove_task(task)  # finished files make room; the total stays

    def _advance(self, name: str, amount: int) -> None:
        with self._lock:
            self._done_bytes += amount
            task = self._tasks.get(name)
            due = self._rich is None and time.monotonic() - self._last_line >= self._interval
            if due:
                self._last_line = time.monotonic()
        if self._rich is not None:
            if task is not None:
                self._rich.update(task, advance=amount)
            if self._total_task is not None:
                self._rich.update(self._total_task, advance=amount)
        elif due and not self._quiet:
            self._line(final=False)

    def _line(self, final: bool) -> None:
        with self._lock:
            done, files = self._done_bytes, self._done_files
        elapsed = max(time.monotonic() - self._started, 1e-6)
        rate = done / elapsed
        percent = 100.0 * done / self._total if self._total else 100.0
        parts = [
            f"silt: {self._verb} {human_size(done)} of {human_size(self._total)} ({percent:.0f}%)",
            f"{files}/{len(self._sizes)} files",
            f"{human_size(int(rate))}/s",
        ]
        if final:
            parts.append(f"done in {_duration(elapsed)}")
        elif rate > 0:
            parts.append(f"ETA {_duration((self._total - done) / rate)}")
        print(", ".join(parts), file=self._stream, flush=True)
