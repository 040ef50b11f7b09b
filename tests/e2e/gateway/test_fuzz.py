"""Fuzzing the gateway process with mutated S3 requests over raw sockets.

An example is a *recipe*: one S3 operation whose semantic parts (keys, query values, ranges,
headers, XML bodies, aws-chunked payloads) hypothesis draws and which is then signed, so that
it reaches the operation's code and not only the authentication check; then raw mutations of
the signed bytes (request line, headers, signature and credential fields, chunk framing, any
byte). Every answer must parse as HTTP and be below 500 (501 NotImplemented as an S3 XML
error; 503 only as one, with graveler or auth stopped), a refusal must be an S3 XML error,
answers must arrive within the gateway's configured head and body timeouts plus a margin,
and the gateway must stay alive, under an RSS bound, and serve a normal signed GET afterwards.

Recipes are JSON: a failure is written to fuzz_corpus/ and every run replays the corpus first,
re-signed (a raw capture would only replay as RequestTimeTooSkewed after 15 minutes). Each
corpus file also keeps the raw request that failed, for reading.

SILT_FUZZ_EXAMPLES and SILT_FUZZ_SECONDS bound the search (the defaults keep the module near
half a minute; its nightly variant searches 1,000 examples). The search starts from a fixed
seed, printed; SILT_FUZZ_SEED=<n> searches elsewhere or repeats a printed run. The harness is
tests/support/fuzz/.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.fuzz.search import corpus_files, run_recipe, search, stopped
from tests.support.fuzz.target import (
    BODY_IDLE_TIMEOUT_S,
    BUCKET,
    HEAD_TIMEOUT_S,
    OBJECT,
    FuzzTarget,
    check_process,
    check_serves_a_normal_get,
)
from tests.support.gateway_stack import gateway_stack
from tests.support.wait import wait_until

pytestmark = pytest.mark.fuzz

# `make test`'s search: 300 examples draw each of the 20 operations about 15 times, a third of
# them intact, so every operation's code is reached as well as the refusals of mutated bytes;
# the nightly variant searches 1,000 (about 40 s on a 2-core machine). SILT_FUZZ_EXAMPLES and
# SILT_FUZZ_SECONDS, when set, bound both.
EXAMPLES = int(os.environ.get("SILT_FUZZ_EXAMPLES", "300"))
NIGHTLY_EXAMPLES = int(os.environ.get("SILT_FUZZ_EXAMPLES", "1000"))
# A bound on the search's time too (for a loaded machine); raise both to search longer.
SECONDS = float(os.environ.get("SILT_FUZZ_SECONDS", "20"))
NIGHTLY_SECONDS = float(os.environ.get("SILT_FUZZ_SECONDS", "45"))
# With a service down: 40 recipes from a fixed seed, 503s among them, within the ceiling the
# search always had (with auth down each answer waits on it: the ceiling ends that search).
DEPENDENCY_DOWN_EXAMPLES = max(40, EXAMPLES // 10)
DEPENDENCY_DOWN_SECONDS = NIGHTLY_SECONDS / 4


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzTarget]:
    s3_overrides = {
        "header_timeout_seconds": HEAD_TIMEOUT_S,
        "body_idle_timeout_seconds": BODY_IDLE_TIMEOUT_S,
        # The recipes sign with SigV2 too: its parsers are fuzzed where it is enabled.
        "sigv2_enabled": True,
    }
    # Readiness (a periodic check) follows a stopped dependency and its return within a second.
    telemetry = {"health_check_interval_seconds": 0.5}
    overrides = {"gateways": {"s3": s3_overrides}, "telemetry": telemetry}
    with gateway_stack(tmp_path_factory.mktemp("fuzz-stack"), overrides=overrides) as gw:
        s3 = gw.client()
        s3.create_bucket(Bucket=BUCKET)
        url = urlsplit(gw.endpoint)
        assert url.hostname is not None and url.port is not None
        yield FuzzTarget(gw, url.hostname, url.port)


@pytest.fixture
def seeded(target: FuzzTarget) -> FuzzTarget:
    """The objects the recipes name exist before each run (an earlier example may have deleted them)."""
    s3 = target.gw.client()
    for key in ("main/obj", "main/dir/a", "main/dir/b"):
        s3.put_object(Bucket=BUCKET, Key=key, Body=OBJECT)
    return target


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.stem)
def test_corpus_replays(seeded: FuzzTarget, path: Path) -> None:
    """Every request that once failed, first: re-signed now, it must meet every property."""
    recipe = json.loads(path.read_text())["recipe"]
    with stopped(seeded, recipe.get("down")):
        run_recipe(seeded, recipe, dependency_down=bool(recipe.get("down")))
    check_serves_a_normal_get(seeded)


@pytest.mark.parametrize(
    ("examples", "seconds"),
    [
        pytest.param(EXAMPLES, SECONDS, id="make-test"),
        pytest.param(NIGHTLY_EXAMPLES, NIGHTLY_SECONDS, id="nightly", marks=pytest.mark.nightly),
    ],
)
def test_fuzz_the_gateway(seeded: FuzzTarget, examples: int, seconds: float) -> None:
    rss_before = check_process(seeded)
    started = time.monotonic()
    statuses = search(seeded, examples, seconds)
    rss_after = check_process(seeded)
    print(
        f"{sum(statuses.values())} examples in {time.monotonic() - started:.0f} s; "
        f"statuses {sorted(statuses.items())}; "
        f"gateway RSS {rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB"
    )
    # The search reached the operations, not only the refusals of malformed requests.
    assert any(200 <= status < 300 for status in statuses), statuses
    check_serves_a_normal_get(seeded)


@pytest.mark.parametrize("service", ["graveler", "auth"])
def test_fuzz_with_a_dependency_down(seeded: FuzzTarget, service: str) -> None:
    """With graveler or auth stopped, valid and mutated requests get 4xx or 503 S3 errors, in time."""
    with stopped(seeded, service):
        statuses = search(seeded, DEPENDENCY_DOWN_EXAMPLES, DEPENDENCY_DOWN_SECONDS, down=service)
        ready = {
            "op": "service",
            "method": "GET",
            "bucket": BUCKET,
            "key": "/_silt/health/ready",
            "query": [],
            "headers": [],
            "style": "path",
            "sign": "v4",
            "user": "admin",
            "mutations": [],
            "down": service,
        }
        wait_until(lambda: run_recipe(seeded, ready, dependency_down=True) == [503], 10, f"not ready without {service}")
    print(f"{service} down: statuses {sorted(statuses.items())}")
    # The outage was seen: some requests needed the stopped service.
    assert 503 in statuses, statuses
    check_serves_a_normal_get(seeded)
