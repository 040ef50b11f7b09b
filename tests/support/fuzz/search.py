"""Running recipes against the target, the corpus of failures, and the seeded search."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis.control import currently_in_test_context

from tests.support.fuzz.strategies import recipes
from tests.support.fuzz.target import FuzzTarget, check_process, check_reply, check_serves_a_normal_get, exchange
from tests.support.fuzz.wire import build
from tests.support.wait import wait_until

# Every run searches the same examples unless SILT_FUZZ_SEED says otherwise (printed either
# way), so a failure seen once is seen again by whoever reruns it; new seeds search further.
DEFAULT_SEED = 20261123
CORPUS = Path(__file__).resolve().parents[2] / "e2e" / "gateway" / "fuzz_corpus"

# --- running one recipe --------------------------------------------------------------------


def say(text: str) -> None:
    """Shown with a failing example (hypothesis' note), or printed in a corpus replay."""
    if currently_in_test_context():
        note(text)
    else:
        print(text)


def run_recipe(target: FuzzTarget, recipe: dict[str, Any], dependency_down: bool = False) -> list[int]:
    """Send the recipe's request and check the answer and the process; the statuses answered."""
    wire = build(target, recipe)
    data = wire.render()
    say(f"request ({len(data)} bytes): {data[:2000]!r}")
    reply = exchange(target, data, head_request=wire.method == b"HEAD", split_at=recipe.get("split_at"))
    say(f"reply after {reply.elapsed:.2f} s: {reply.data[:2000]!r}")
    try:
        statuses = check_reply(reply, head_request=wire.method == b"HEAD", dependency_down=dependency_down)
        check_process(target)
    except AssertionError as exc:
        _FAILURES.append((recipe, data, str(exc).splitlines()[0][:300]))
        raise
    return statuses


# (recipe, bytes sent, what was wrong) of each failing example of the current search.
_FAILURES: list[tuple[dict[str, Any], bytes, str]] = []


def save_to_corpus(recipe: dict[str, Any], data: bytes, failure: str) -> Path:
    CORPUS.mkdir(exist_ok=True)
    text = json.dumps(recipe, sort_keys=True, ensure_ascii=True)
    path = CORPUS / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    raw = data[:4096].decode("latin-1") + ("…" if len(data) > 4096 else "")
    # "cause" is for whoever fixes it: what was wrong, and where it was fixed.
    saved = {"cause": "", "failure": failure, "found": time.strftime("%Y-%m-%d"), "recipe": recipe, "raw": raw}
    path.write_text(json.dumps(saved, indent=1, ensure_ascii=True) + "\n")
    return path


def corpus_files() -> list[Path]:
    """The corpus's recipes. It is part of the repository: a missing one is a broken checkout (or
    a path that went stale when the tests moved), never a reason to replay nothing."""
    files = sorted(CORPUS.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"the fuzz corpus is missing or empty: {CORPUS}")
    return files


def gateway_ready(target: FuzzTarget) -> bool:
    try:
        with urllib.request.urlopen(f"{target.gw.endpoint}/_silt/health/ready", timeout=5) as reply:
            return bool(reply.status == 200)
    except urllib.error.HTTPError:
        return False


@contextlib.contextmanager
def stopped(target: FuzzTarget, service: str | None) -> Iterator[None]:
    """service (graveler or auth) down for the block; None: nothing stopped."""
    if service is None:
        yield
        return
    stack = target.gw.stack
    stack.kill(service)
    try:
        yield
    finally:
        # The fixture's stack runs without the launcher's monitor (restart=False): start it by hand.
        stack._spawn(stack._services[service])
        stack.wait_ready(service)

        # The gateway redials with a backoff of up to a second: it serves again soon after.
        def serves() -> bool:
            check_serves_a_normal_get(target)
            return True

        wait_until(
            serves,
            10,
            f"the gateway serving again after {service} came back",
            interval=0.2,
            ignoring=(ClientError,),
        )
        # Readiness comes from a periodic check: wait for it too, so that a later example
        # asking /_silt/health/ready with everything up gets 200.
        wait_until(lambda: gateway_ready(target), 10, f"readiness after {service} came back")


def _fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=False,
        print_blob=True,
        database=None,  # the corpus is the memory of failures, in the repository
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


ROUND = 200  # examples per hypothesis run


def search(target: FuzzTarget, examples: int, seconds: float, down: str | None = None) -> dict[int, int]:
    """Run hypothesis searches of ROUND examples until `examples` were sent or `seconds`
    passed; how often each status was answered first. A failure's shrunk recipe goes into
    the corpus."""
    run_seed = int(os.environ.get("SILT_FUZZ_SEED") or DEFAULT_SEED)
    print(f"fuzz seed: SILT_FUZZ_SEED={run_seed} ({examples} examples{f', {down} down' if down else ''})")
    statuses: dict[int, int] = {}
    stop_at = time.monotonic() + seconds

    def fuzz(recipe: dict[str, Any]) -> None:
        # The time budget holds inside a round too: with a service down each request may wait
        # seconds for it. Once a failure was seen every example runs, so that shrinking and
        # hypothesis's replay of the failing one see the same behaviour.
        if not _FAILURES and time.monotonic() > stop_at:
            return
        if down is not None:
            recipe["down"] = down
            if recipe.get("upload") == "$FRESH":  # creating one needs the stopped services
                recipe["upload"] = "0" * 32
        note(f"recipe: {json.dumps(recipe)[:4000]}")
        for status in run_recipe(target, recipe, dependency_down=down is not None)[:1]:
            statuses[status] = statuses.get(status, 0) + 1

    done = 0
    for round_seed in itertools.count(run_seed):
        if done >= examples or time.monotonic() > stop_at:
            break
        size = min(ROUND, examples - done)
        # With a service down, mostly well-formed requests: they are the ones that need it.
        run = seed(round_seed)(_fuzz_settings(size)(given(recipe=recipes(intact=1 if down is None else 4))(fuzz)))
        _FAILURES.clear()
        try:
            run()
        except BaseException:
            if _FAILURES:
                # Hypothesis replays the shrunk example last: that one goes into the corpus.
                print(f"kept in the corpus: {save_to_corpus(*_FAILURES[-1])} (seed {run_seed})")
            raise
        done += size
    return statuses
