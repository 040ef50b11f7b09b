"""A unified diff of two texts' first lines, in the sandbox's child: difflib's matching is
quadratic in the number of lines at worst, so both sides are cut to MAX_LINES lines of at most
MAX_LINE_CHARS characters first, which keeps the worst case within the job's deadline."""

from __future__ import annotations

import difflib
from typing import Any

MAX_BYTES = 512 * 1024
MAX_LINES = 5_000
MAX_LINE_CHARS = 2_000
CONTEXT = 3
# Lines of the answer (context, added and removed) at most: the UI shows them all.
MAX_OUTPUT_LINES = 5_000


def _lines(data: bytes | None) -> tuple[list[str], bool]:
    """The text's first lines, and whether they are all of it."""
    if data is None:
        return [], True
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    cut = len(lines) > MAX_LINES
    return [line[:MAX_LINE_CHARS] for line in lines[:MAX_LINES]], not cut


def diff(left: bytes | None, right: bytes | None, left_complete: bool, right_complete: bool) -> dict[str, Any]:
    """{counts: {added, removed}, hunks: [{left_start, right_start, lines: [{op, text, left,
    right}]}], sample: {left, right, limit_bytes, limit_lines}}; op is " ", "+" or "-"."""
    old, old_whole = _lines(left)
    new, new_whole = _lines(right)
    matcher = difflib.SequenceMatcher(None, old, new)
    added = removed = shown = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    hunks = []
    for group in matcher.get_grouped_opcodes(CONTEXT):
        if shown >= MAX_OUTPUT_LINES:
            break
        lines: list[dict[str, Any]] = []
        for kind, i1, i2, j1, j2 in group:
            if kind == "equal":
                lines += [{"op": " ", "text": old[i], "left": i + 1, "right": j1 + i - i1 + 1} for i in range(i1, i2)]
                continue
            lines += [{"op": "-", "text": old[i], "left": i + 1, "right": None} for i in range(i1, i2)]
            lines += [{"op": "+", "text": new[j], "left": None, "right": j + 1} for j in range(j1, j2)]
        lines = lines[: MAX_OUTPUT_LINES - shown]
        shown += len(lines)
        hunks.append({"left_start": group[0][1] + 1, "right_start": group[0][3] + 1, "lines": lines})

    def side(data: bytes | None, count: int, whole: bool, complete: bool) -> dict[str, Any] | None:
        if data is None:
            return None
        return {"lines": count, "bytes_read": len(data), "complete": whole and complete}

    return {
        "counts": {"added": added, "removed": removed},
        "hunks": hunks,
        "truncated": shown >= MAX_OUTPUT_LINES,
        "sample": {
            "left": side(left, len(old), old_whole, left_complete),
            "right": side(right, len(new), new_whole, right_complete),
            "limit_bytes": MAX_BYTES,
            "limit_lines": MAX_LINES,
        },
    }
