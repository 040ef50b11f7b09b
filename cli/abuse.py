"""`silt abuse` (lakectl's abuse): load on a running server through the REST API, for capacity
and soak tests. Each subcommand does --amount operations, --parallelism at a time, and prints a
summary: how many succeeded and failed (by HTTP status or error type), the rate, and latency
percentiles. Ctrl-C stops early and still prints the summary.

What differs from lakectl: writes upload a few real bytes (Silt's REST API refuses to link an
address with no object behind it), and `link-same-object` uploads one object through a presigned
URL and links that one address again and again, rather than a new, empty address each time.
"""

from __future__ import annotations

import random
import secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from cli.common import json_option, output, rest
from cli.rest import ApiError, RestClient, exit_of_status, segment
from silt.client_base import EXIT_FAILURE, EXIT_UNAVAILABLE, EXIT_USAGE, ClientError, parse_uri

# lakectl's defaults.
DEFAULT_AMOUNT = 1_000_000
DEFAULT_PARALLELISM = 100
MAX_PARALLELISM = 1000
_PERCENTILES = (50, 90, 99)


@dataclass
class Summary:
    """What a load run did: latencies of the successes, failures counted by kind."""

    name: str
    latencies: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    interrupted: bool = False

    def as_json(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        done = len(ordered)
        percentiles = {f"p{p}": round(_percentile(ordered, p) * 1000, 3) for p in _PERCENTILES}
        return {
            "operation": self.name,
            "completed": done,
            "failed": sum(self.failures.values()),
            "failures": dict(self.failures),
            "seconds": round(self.seconds, 3),
            "per_second": round((done + sum(self.failures.values())) / self.seconds, 1) if self.seconds else 0.0,
            "latency_ms": {**percentiles, "max": round(ordered[-1] * 1000, 3) if ordered else 0.0},
            "interrupted": self.interrupted,
        }


def _percentile(ordered: list[float], p: int) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def failure_kind(exc: Exception) -> str:
    """How a failure is counted: the HTTP status of an API error, else the error's type."""
    if isinstance(exc, ApiError):
        return f"HTTP {exc.status}"
    return type(exc).__name__


def run_load(name: str, items: Iterator[str], parallelism: int, work: Callable[[str], None]) -> Summary:
    """work(item) for every item, parallelism at a time (threads pulling from one iterator)."""
    summary = Summary(name)
    lock = threading.Lock()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            with lock:
                item = next(items, None)
            if item is None:
                return
            started = time.perf_counter()
            try:
                work(item)
            except Exception as exc:  # counted, not raised: a load run reports its failures
                with lock:
                    summary.failures[failure_kind(exc)] += 1
                continue
            took = time.perf_counter() - started
            with lock:
                summary.latencies.append(took)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(parallelism)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        stop.set()
        summary.interrupted = True
        for thread in threads:
            thread.join()
    summary.seconds = time.perf_counter() - started
    return summary


def _report(summary: Summary) -> None:
    data = summary.as_json()

    def human() -> None:
        latency = data["latency_ms"]
        click.echo(
            f"{data['operation']}: {data['completed']} completed, {data['failed']} failed"
            f" in {data['seconds']:.1f} s ({data['per_second']}/s)" + (" (interrupted)" if data["interrupted"] else "")
        )
        click.echo(
            "latency ms: " + ", ".join(f"{k} {v}" for k, v in latency.items()),
        )
        for kind, count in sorted(data["failures"].items()):
            click.echo(f"  {kind}: {count}")

    output(data, human)
    if data["failed"]:
        raise click.exceptions.Exit(EXIT_FAILURE)


def _read_keys(name: str) -> list[str]:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text()
    except OSError as exc:
        raise ClientError(f"cannot read keys from {name}: {exc}", EXIT_USAGE) from None
    keys = [line.strip() for line in text.splitlines() if line.strip()]
    if not keys:
        raise ClientError(f"no keys in {name}", EXIT_USAGE)
    return keys


def _repo_path(repo: str) -> str:
    return f"/repositories/{segment(repo)}"


amount_option = click.option(
    "--amount", type=click.IntRange(1), default=DEFAULT_AMOUNT, show_default=True, help="Operations to do."
)
parallelism_option = click.option(
    "--parallelism",
    type=click.IntRange(1, MAX_PARALLELISM),
    default=DEFAULT_PARALLELISM,
    show_default=True,
    help="Operations at a time.",
)


@click.group("abuse")
def abuse() -> None:
    """Load on a running server through the REST API (lakectl's abuse)."""


@abuse.command("random-read")
@json_option
@click.argument("uri", metavar="lakefs://REPO/REF")
@click.option("--from-file", required=True, metavar="FILE", help='Keys to read, one a line ("-": stdin).')
@amount_option
@parallelism_option
def random_read(uri: str, from_file: str, amount: int, parallelism: int) -> None:
    """Stat randomly chosen keys of a file on a ref."""
    repo, ref, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    keys = _read_keys(from_file)
    click.echo(f"Source ref: lakefs://{repo}/{ref}\nread a total of {len(keys)} keys from key file", err=True)
    path = f"{_repo_path(repo)}/refs/{segment(ref)}/objects/stat"
    items = (random.choice(keys) for _ in range(amount))
    _report(run_load("read", items, parallelism, lambda key: api.get(path, {"path": key})))


@abuse.command("random-delete")
@json_option
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option("--from-file", required=True, metavar="FILE", help='Keys to delete, one a line ("-": stdin).')
@amount_option
@parallelism_option
def random_delete(uri: str, from_file: str, amount: int, parallelism: int) -> None:
    """Delete randomly chosen keys of a file from a branch."""
    repo, branch, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    keys = _read_keys(from_file)
    click.echo(f"Source branch: lakefs://{repo}/{branch}\nread a total of {len(keys)} keys from key file", err=True)
    path = f"{_repo_path(repo)}/branches/{segment(branch)}/objects"
    items = (random.choice(keys) for _ in range(amount))
    _report(run_load("delete", items, parallelism, lambda key: api.delete(path, {"path": key})))


@abuse.command("random-write")
@json_option
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option("--prefix", default="abuse/", show_default=True, help="Where the objects are written.")
@amount_option
@parallelism_option
def random_write(uri: str, prefix: str, amount: int, parallelism: int) -> None:
    """Upload small objects PREFIXfile-N to a branch."""
    repo, branch, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    click.echo(f"Source branch: lakefs://{repo}/{branch}", err=True)
    api.get(_repo_path(repo))  # a missing repository fails once, not once per write
    path = f"{_repo_path(repo)}/branches/{segment(branch)}/objects"

    def write(key: str) -> None:
        api.send_bytes("POST", path, secrets.token_bytes(16), {"path": key})

    items = (f"{prefix}file-{i}" for i in range(amount))
    _report(run_load("stage object", items, parallelism, write))


@abuse.command("list")
@json_option
@click.argument("uri", metavar="lakefs://REPO/REF")
@click.option("--prefix", default="abuse/", show_default=True, help="What to list under.")
@amount_option
@parallelism_option
def list_(uri: str, prefix: str, amount: int, parallelism: int) -> None:
    """List the first page under a prefix of a ref, again and again."""
    repo, ref, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    click.echo(f"Source ref: lakefs://{repo}/{ref}", err=True)
    path = f"{_repo_path(repo)}/refs/{segment(ref)}/objects/ls"
    items = (prefix for _ in range(amount))
    _report(run_load("list", items, parallelism, lambda p: api.get(path, {"prefix": p, "amount": 1000})))


@abuse.command("commit")
@json_option
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option("--amount", type=click.IntRange(1), default=DEFAULT_PARALLELISM, show_default=True, help="Commits.")
@click.option("--gap", default="2s", show_default=True, help="Time between commits (500ms, 2s, 1m).")
def commit(uri: str, amount: int, gap: str) -> None:
    """Commit to a branch, one after another (empty commits allowed)."""
    repo, branch, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    click.echo(f"Source branch: lakefs://{repo}/{branch}", err=True)
    api.get(_repo_path(repo))
    pause = parse_duration(gap)
    path = f"{_repo_path(repo)}/branches/{segment(branch)}/commits"

    def one(n: str) -> None:
        try:
            api.post(path, {"message": n, "allow_empty": True})
        finally:
            time.sleep(pause)

    _report(run_load("commit", (str(i + 1) for i in range(amount)), 1, one))


def parse_duration(text: str) -> float:
    """Seconds of a duration as Go writes it: 500ms, 2s, 1m, 1h (a bare number: seconds)."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    stripped = text.strip()
    for unit in ("ms", "s", "m", "h"):
        if stripped.endswith(unit):
            number = stripped[: -len(unit)]
            break
    else:
        unit, number = "s", stripped
    try:
        value = float(number)
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected a duration such as 500ms, 2s or 1m") from None
    if value < 0:
        raise click.BadParameter(f"{text!r}: a duration is not negative")
    return value * units[unit]


def _branches_with_prefix(api: RestClient, repo: str, prefix: str) -> list[str]:
    return [
        b["id"]
        for b in api.pages(f"{_repo_path(repo)}/branches", {"prefix": prefix})
        if str(b["id"]).startswith(prefix)
    ]


def _remove_branches(api: RestClient, repo: str, prefix: str, parallelism: int) -> Summary:
    names = _branches_with_prefix(api, repo, prefix)
    click.echo(f"deleting {len(names)} branches with prefix {prefix!r}", err=True)
    return run_load(
        "delete branch",
        iter(names),
        parallelism,
        lambda name: api.delete(f"{_repo_path(repo)}/branches/{segment(name)}"),
    )


@abuse.command("create-branches")
@json_option
@click.argument("uri", metavar="lakefs://REPO/REF")
@click.option("--branch-prefix", default="abuse-", show_default=True, help="Names of the branches made.")
@click.option("--clean-only", is_flag=True, help="Only delete the branches of earlier runs.")
@amount_option
@parallelism_option
def create_branches(uri: str, branch_prefix: str, clean_only: bool, amount: int, parallelism: int) -> None:
    """Delete the branches of earlier runs, then create many branches from a ref quickly."""
    repo, ref, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    if not branch_prefix:
        raise ClientError("--branch-prefix must not be empty: the cleanup deletes every branch it names", EXIT_USAGE)
    click.echo(f"Source ref: lakefs://{repo}/{ref}", err=True)
    cleaned = _remove_branches(api, repo, branch_prefix, parallelism)
    if clean_only:
        _report(cleaned)
        return
    path = f"{_repo_path(repo)}/branches"
    items = (f"{branch_prefix}{i}" for i in range(amount))

    def create(name: str) -> None:
        api.post(path, {"name": name, "source": ref})

    _report(run_load("create branch", items, parallelism, create))


@abuse.command("link-same-object")
@json_option
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option("--key", default="linked-object", show_default=True, help="The key linked again and again.")
@amount_option
@parallelism_option
def link_same_object(uri: str, key: str, amount: int, parallelism: int) -> None:
    """Link one uploaded address at one key, in parallel (lakeFS's linkPhysicalAddress racing on one key)."""
    repo, branch, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    click.echo(f"Source ref: lakefs://{repo}/{branch}\nObject key: {key}", err=True)
    staging = f"{_repo_path(repo)}/branches/{segment(branch)}/staging/backing"
    location = api.get(staging, {"path": key, "presign": "true"})
    if not location.get("presigned_url"):
        raise ClientError("link-same-object uploads through a presigned URL: this server's store gives none")
    data = secrets.token_bytes(16)
    etag = _put_presigned(str(location["presigned_url"]), data, api.connection.ca_file)
    body = {"staging": {"physical_address": location["physical_address"]}, "checksum": etag, "size_bytes": len(data)}
    items = (key for _ in range(amount))
    _report(run_load("get-and-link", items, parallelism, lambda k: api.put(staging, body, {"path": k})))


def _put_presigned(url: str, data: bytes, ca_file: str | None) -> str:
    """PUT bytes to a presigned URL; the ETag the store answers."""
    import ssl
    import urllib.error
    import urllib.request

    from silt.block.rules import signed_upload_headers

    headers = {"Content-Type": "application/octet-stream", **signed_upload_headers(url)}
    request = urllib.request.Request(url, data=data, method="PUT", headers=headers)
    context = ssl.create_default_context(cafile=ca_file or None) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as answer:
            etag = str(answer.headers.get("ETag") or "").strip().strip('"')
    except urllib.error.HTTPError as exc:
        raise ClientError(f"the presigned upload failed: HTTP {exc.code}", exit_of_status(exc.code)) from None
    except OSError as exc:
        raise ClientError(f"the presigned upload failed: {exc}", EXIT_UNAVAILABLE) from None
    if not etag:
        raise ClientError("the store answered the presigned upload without an ETag")
    return etag


@abuse.command("merge")
@json_option
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option("--amount", type=click.IntRange(1), default=1000, show_default=True, help="Merges to do.")
@parallelism_option
def merge(uri: str, amount: int, parallelism: int) -> None:
    """Merge non-conflicting changes into a branch in parallel: each a new branch with one object
    of its own, committed and merged; the branches are deleted at the end."""
    repo, branch, _ = parse_uri(uri)
    api = rest()  # click's context is this thread's alone: the workers use this client
    prefix = f"merge-{secrets.token_hex(6)}"
    click.echo(f"Source branch: lakefs://{repo}/{branch}\nBranch prefix: {prefix}", err=True)
    api.get(_repo_path(repo))
    base = _repo_path(repo)

    def merge_one(name: str) -> None:
        api.post(f"{base}/branches", {"name": name, "source": branch})
        path = f"object-{name}"
        api.send_bytes("POST", f"{base}/branches/{segment(name)}/objects", secrets.token_bytes(16), {"path": path})
        api.post(f"{base}/branches/{segment(name)}/commits", {"message": f"commit {name}"})
        api.post(f"{base}/refs/{segment(name)}/merge/{segment(branch)}", {"message": f"merge {name}"})

    try:
        summary = run_load("merge", (f"{prefix}-{i + 1:04d}" for i in range(amount)), parallelism, merge_one)
    finally:
        _remove_branches(api, repo, prefix, parallelism)
    _report(summary)
