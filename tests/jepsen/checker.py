"""What a run's history must satisfy, checked in pure Python.

* Linearizability of each key as a register (read, write, delete; PUT If-None-Match: * and
  If-Match as compare-and-set): a search in the manner of Wing & Gong / Lowe, as Knossos does,
  over which operations have taken effect, memoized on (taken, register value), a configuration
  covered by one that took fewer unknown operations left out (see linearizable). An acknowledged
  operation took effect exactly once between its invocation and its completion; an unknown one
  at most once, at any time after its invocation; a failed one never. The search is bounded
  (MAX_CONFIGURATIONS): past it a key is reported as too large to decide, not as a violation.
* No resurrection: a read after an acknowledged DELETE that began after the write it shows
  had completed.
* Every final read (after the faults healed) answers: the key's bytes, or NoSuchKey.
* Every commit holds, for each key, what the last write acknowledged before the commit was
  invoked wrote (or something written by an operation not finished before it).

Each violation comes with the shortest slice of the key's history found to show it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from tests.jepsen.history import CAS, CREATE, DELETE, MULTIPART, MUTATIONS, READ, WRITE, Op, Outcome

MAX_CONFIGURATIONS = 200_000
# How many sets of unknown operations taken each configuration's value and acknowledged
# operations keep to compare with (see linearizable).
COVERS_KEPT = 32
# Searches spent narrowing a violation's slice (each on a slice no longer than the history).
NARROW_CHECKS = 400
# A violation's slice is printed with at most this many of its last operations.
SHOWN_OPS = 30
FINAL = "final"  # the process name of the reads made after every fault healed


class Verdict(StrEnum):
    LINEARIZABLE = "linearizable"
    VIOLATION = "violation"
    TOO_LARGE = "too large to decide"


@dataclass
class Violation:
    kind: str  # "not linearizable", "resurrected", "unreadable", "commit misses a write", ...
    key: str
    message: str
    slice: list[Op] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"{self.kind}: {self.key}: {self.message}"]
        start = min((op.invoke_ns for op in self.slice), default=0)
        shown = sorted(self.slice, key=lambda o: o.invoke_ns)
        if len(shown) > SHOWN_OPS:
            lines.append(f"    ... {len(shown) - SHOWN_OPS} earlier operations (writes of the slice) left out here")
            shown = shown[-SHOWN_OPS:]
        for op in shown:
            end = "      ?" if op.complete_ns is None or op.outcome is Outcome.UNKNOWN else _ms(op.complete_ns - start)
            lines.append(f"    [{_ms(op.invoke_ns - start)} .. {end}] #{op.index} {op.process:>8} {op.describe()}")
        return "\n".join(lines)


def _ms(ns: int) -> str:
    return f"{ns / 1e6:7.0f}ms"


# --- the register -----------------------------------------------------------------------------

_ABSENT = None
_ILLEGAL = object()
# The register's value at the start of a slice cut out of a longer history: whatever it was.
# Any read matches it (and fixes it); conditions on it go either way. A slice that fails from
# ANY fails from every value, so it shows a violation of the whole history.
ANY = "<any>"
UNOBSERVED = "<a value nobody read>"


def step(op: Op, state: str | None) -> object:
    """The register's value after op took effect on state, or _ILLEGAL if op cannot take effect
    there (a read that saw something else, a condition answered otherwise)."""
    if state == ANY and (op.kind == READ or op.precondition_failed):
        return op.value if op.kind == READ else state
    if state == ANY and op.kind in (CREATE, CAS):
        return op.value
    if op.kind == READ:
        return state if state == op.value else _ILLEGAL
    if op.kind == DELETE:
        return _ABSENT
    if op.kind == CREATE:
        if op.precondition_failed:
            return state if state is not None else _ILLEGAL
        return op.value if state is None else _ILLEGAL
    if op.kind == CAS:
        if op.precondition_failed:
            return state if state != op.expected else _ILLEGAL
        return op.value if state == op.expected else _ILLEGAL
    return op.value  # write, multipart


def _relevant(ops: Iterable[Op]) -> list[Op]:
    """The operations that constrain the search: acknowledged ones, and unknown mutations
    (an unknown read says nothing; a failed operation did nothing)."""
    out = []
    for op in ops:
        if op.outcome is Outcome.OK or (op.outcome is Outcome.UNKNOWN and op.kind in MUTATIONS):
            out.append(op)
    return sorted(out, key=lambda o: o.invoke_ns)


def _completes(op: Op) -> float:
    if op.outcome is Outcome.OK and op.complete_ns is not None:
        return float(op.complete_ns)
    return math.inf


def linearizable(ops: Iterable[Op], limit: int = MAX_CONFIGURATIONS, initial: str | None = _ABSENT) -> Verdict:
    """Whether some order of the operations, each within its own interval, is a legal run of
    the register starting at initial (absent; ANY: whatever value)."""
    history = _relevant(ops)
    n = len(history)
    invokes = [op.invoke_ns for op in history]
    completes = [_completes(op) for op in history]
    required = [i for i in sorted(range(n), key=lambda i: completes[i]) if completes[i] != math.inf]
    # Values no operation reads or expects are one value to every operation: the register
    # holds "one of them" (UNOBSERVED). Unknown blind writes of such values are then
    # interchangeable, and so are unknown deletes: taking the earliest begun of a class first
    # loses no order (a later one could stand in for it wherever it went), and turns 2**k
    # subsets of k unknown writes into k + 1.
    observed = {op.value for op in history if op.kind == READ} | {op.expected for op in history if op.kind == CAS}
    unobserved = {op.value for op in history if op.value is not None and op.kind != READ and op.value not in observed}
    before_in_class = [-1] * n
    last_of_class: dict[str, int] = {}
    for i, op in enumerate(history):
        if op.outcome is not Outcome.UNKNOWN:
            continue
        kind = "delete" if op.kind == DELETE else "blind" if op.kind in (WRITE, MULTIPART) else ""
        if kind and (kind == "delete" or op.value in unobserved):
            before_in_class[i] = last_of_class.get(kind, -1)
            last_of_class[kind] = i
    all_required = unknown = 0
    for i in required:
        all_required |= 1 << i
    blind = [False] * n
    for i, op in enumerate(history):
        if op.outcome is Outcome.UNKNOWN:
            unknown |= 1 << i
            blind[i] = op.kind in (WRITE, MULTIPART, DELETE)
    # A configuration is the register's value, the acknowledged operations taken, and the
    # unknown ones taken. Of two with the same value and the same acknowledged ones taken, the
    # one that took a subset of the other's unknown operations can do all the other can: an
    # unknown operation may take effect later or never, so having it still to take only adds
    # choices (in a class of interchangeable ones, its earliest untaken stands in for it). So a
    # configuration is skipped when one seen had taken a subset of its unknown operations.
    # For the same reason, a blind unknown operation (a write or delete, whose effect does not
    # depend on the value) is never taken right after another: the second alone leaves the
    # same value with the first still to take. Without these, each subset of the unknown
    # writes taken is searched on its own: 2**k of them.
    # Each (acknowledged taken, value) keeps the first COVERS_KEPT sets of unknown operations
    # seen with it (the search meets those with fewer first): comparing with every one would
    # cost each configuration as many comparisons as configurations seen, and leaving some out
    # only searches more.
    seen: set[tuple[int, object]] = set()
    covers: dict[tuple[int, object], list[int]] = {}
    stack: list[tuple[int, object, bool]] = [(0, initial, False)]
    while stack:
        taken, state, after_blind = stack.pop()
        if taken & all_required == all_required:
            return Verdict.LINEARIZABLE
        if (taken, state) in seen:
            continue
        taken_unknown = taken & unknown
        subsets = covers.setdefault((taken & ~unknown, state), [])
        if any(prior & ~taken_unknown == 0 for prior in subsets):
            continue
        seen.add((taken, state))
        if len(subsets) < COVERS_KEPT:
            subsets.append(taken_unknown)
        if len(seen) > limit:
            return Verdict.TOO_LARGE
        # The next to take effect began before every remaining acknowledged operation ended.
        horizon = next(completes[i] for i in required if not taken >> i & 1)
        # Pushed last, popped first: acknowledged operations before unknown ones, so that the
        # configurations with fewer unknown operations taken are searched first.
        unknown_steps: list[tuple[int, object, bool]] = []
        acknowledged_steps: list[tuple[int, object, bool]] = []
        for i in range(n):
            if invokes[i] > horizon:  # (one that began as another ended may precede it)
                break
            if taken >> i & 1:
                continue
            if blind[i] and after_blind:
                continue
            if before_in_class[i] >= 0 and not taken >> before_in_class[i] & 1:
                continue  # an earlier one of its class first
            after = step(history[i], state)  # type: ignore[arg-type]
            if after is not _ILLEGAL:
                steps = unknown_steps if unknown >> i & 1 else acknowledged_steps
                steps.append((taken | 1 << i, UNOBSERVED if after in unobserved else after, blind[i]))
        stack += unknown_steps
        stack += acknowledged_steps
    return Verdict.VIOLATION


def _observer(op: Op) -> bool:
    """An operation that changed nothing: a read, or a write refused by its condition."""
    return op.kind == READ or op.precondition_failed


def _cuts(history: list[Op]) -> list[int]:
    """Prefix lengths at which every acknowledged operation invoked before the cut has completed
    before the next one is invoked: no later operation can take effect before them."""
    cuts, ended = [], -math.inf
    for i, op in enumerate(history):
        if i and ended < op.invoke_ns:
            cuts.append(i)
        if op.outcome is Outcome.OK:
            ended = max(ended, _completes(op))
    return [*cuts, len(history)]


def shortest_slice(ops: list[Op], fails: Callable[[list[Op], str | None], bool]) -> tuple[list[Op], bool]:
    """A short slice of ops that still fails, and whose failure implies the whole history's;
    also whether it starts from any value (True) or from the key's absence.

    The shortest failing prefix ending where nothing acknowledged is in flight; then the latest
    such point to start from (with the unknown writes begun before it, which may take effect
    later), from any value; then without the observers (reads, refused conditions) it fails
    without. Leaving out a write could explain a read away, so writes in the slice stay."""
    history = _relevant(ops)
    cuts = _cuts(history)
    lo, hi = -1, len(cuts) - 1  # history[:cuts[hi]] fails (the whole history does)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(history[: cuts[mid]], _ABSENT):
            hi = mid
        else:
            lo = mid
    end = cuts[hi]

    def suffix(start: int) -> list[Op]:
        pending = [op for op in history[:start] if op.outcome is Outcome.UNKNOWN]
        return pending + history[start:end]

    starts = [0] + [c for c in cuts if c < end]
    good, bad = 0, len(starts)  # suffix(starts[good]) fails from ANY when good > 0
    while bad - good > 1:
        mid = (good + bad) // 2
        if fails(suffix(starts[mid]), ANY):
            good = mid
        else:
            bad = mid
    initial = ANY if good > 0 else _ABSENT
    found = suffix(starts[good])
    # Then leave out runs of observers, halving the run's length (as delta debugging does).
    chunk, budget = max(1, len(found) // 2), NARROW_CHECKS
    while chunk >= 1 and budget > 0:
        i = 0
        while i < len(found) and budget > 0:
            if not all(_observer(op) for op in found[i : i + chunk]):
                i += chunk
                continue
            trial = found[:i] + found[i + chunk :]
            budget -= 1
            if fails(trial, initial):
                found = trial
            else:
                i += chunk
        chunk //= 2
    return found, initial == ANY


def check_key(key: str, ops: list[Op]) -> tuple[Verdict, list[Violation]]:
    verdict = linearizable(ops)
    if verdict is not Verdict.VIOLATION:
        return verdict, []
    found, from_any = shortest_slice(ops, lambda s, initial: linearizable(s, initial=initial) is Verdict.VIOLATION)
    last = max(found, key=lambda o: o.invoke_ns)
    if last.process == FINAL and last.kind == READ and last.value is None:
        kind, message = "lost", "the final read found nothing where an acknowledged write must be"
    else:
        kind, message = "not linearizable", "no order of these operations is a legal history of one register"
    if from_any:
        message += " (starting from whatever the key held before the first)"
    return verdict, [Violation(kind, key, message, found)]


# --- resurrection, readability -----------------------------------------------------------------


def resurrections(key: str, ops: list[Op]) -> list[Violation]:
    writers = {op.value: op for op in ops if op.kind in MUTATIONS and op.kind != DELETE and op.value is not None}
    deletes = [op for op in ops if op.kind == DELETE and op.outcome is Outcome.OK]
    out = []
    for read in ops:
        if read.kind != READ or read.outcome is not Outcome.OK or read.value is None:
            continue
        writer = writers.get(read.value)
        if writer is None or writer.outcome is not Outcome.OK or writer.complete_ns is None:
            continue
        for delete in deletes:
            assert delete.complete_ns is not None
            if writer.complete_ns < delete.invoke_ns and delete.complete_ns < read.invoke_ns:
                later = [
                    op
                    for op in ops
                    if op.kind in MUTATIONS and op.effective and op.invoke_ns > delete.invoke_ns and op is not writer
                ]
                if any(op.value == read.value for op in later):
                    continue
                message = f"{read.value!r} was read after an acknowledged DELETE that began after it was written"
                out.append(Violation("resurrected", key, message, [writer, delete, read]))
                break
    return out


def unreadable(key: str, ops: list[Op]) -> list[Violation]:
    """Final reads (everything healed) that did not answer with the bytes or NoSuchKey; shown
    with the operations that wrote the entry found instead (result["entry"]: its value)."""
    out = []
    for op in ops:
        if op.process != FINAL or op.kind != READ or op.outcome is Outcome.OK:
            continue
        entry = op.result.get("entry")
        writers = [w for w in ops if w.kind in MUTATIONS and entry is not None and w.value == entry]
        message = f"a final read failed ({op.error})"
        out.append(Violation("unreadable", key, message, [*writers, op]))
    return out


# --- commits ------------------------------------------------------------------------------------


def commit_misses(
    commit: Op, contents: dict[str, str | None], ops_by_key: dict[str, list[Op]], moment_ns: int
) -> list[Violation]:
    """Keys whose value in the commit is older than a write acknowledged before moment_ns (the
    commit's invocation): the value must come from an operation that no acknowledged one, begun
    after it ended and ended before moment_ns, replaced."""
    out = []
    for key, ops in ops_by_key.items():
        held = contents.get(key)
        done = [
            op
            for op in ops
            if op.kind in MUTATIONS
            and op.outcome is Outcome.OK
            and op.effective
            and op.complete_ns is not None
            and op.complete_ns < moment_ns
        ]
        if not done:
            continue
        producers: list[tuple[float, Op | None]] = [
            (_completes(op), op)
            for op in ops
            if op.kind in MUTATIONS and op.effective and (op.value == held if op.kind != DELETE else held is None)
        ]
        if held is None:
            producers.append((-math.inf, None))  # the key's initial absence
        latest = max(done, key=lambda o: o.complete_ns or 0)

        # A producer is replaced when an acknowledged operation began after it ended.
        if all(any(op.invoke_ns > ended for op in done) for ended, _ in producers):
            # With the operation that wrote what the commit holds, if any (a write refused, or
            # failed, whose value is there all the same).
            writers = [op for op in ops if op.kind in MUTATIONS and held is not None and op.value == held]
            shown = [latest, commit, *writers[-1:]]
            message = f"the commit holds {held!r}, but {latest.describe()} was acknowledged before it began"
            out.append(Violation(f"{commit.kind} misses a write", key, message, shown))
    return out


def body_of(value: str, size: int) -> bytes:
    """The bytes written for a value: the value, then filler derived from it, size bytes long
    (a read that returns other bytes under the right name is caught too)."""
    seed = hashlib.sha256(value.encode()).hexdigest().encode()
    head = value.encode() + b"\n"
    filler = (seed * (size // len(seed) + 1))[: max(0, size - len(head))]
    return head + filler


def value_of(body: bytes, size: int) -> str:
    """The value whose bytes body is; 'corrupt:<name>' if body is not exactly those bytes."""
    value = body.split(b"\n", 1)[0].decode(errors="replace")
    return value if body == body_of(value, size) else f"corrupt:{value}"
