"""`make bench-actions`: what hooks add to a commit, one JSON object per line.

One graveler in this process on the `local` KV driver and the local blockstore; each sample
stages one object and commits it on `main`, timing the commit. Three repositories, measured
interleaved round by round so that the shared machine's noise falls on all three alike:

* `disabled`: actions switched off (`actions.enabled: false`) — commits as before actions;
* `no_files`: actions on, no action file (what every repository without hooks pays);
* `webhook`: one pre-commit webhook to a local HTTP server answering 200 at once.

Figures: median and p99 of each, and the two added latencies (no_files - disabled, webhook -
no_files), as medians. The target for no_files is "within noise" of disabled.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.report import emit, p99
from engine.actions.manager import ActionsOptions
from engine.core.deadline import NO_DEADLINE
from engine.graveler import Graveler, GravelerOptions
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store


@contextmanager
def webhook_server() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The body goes in its own write after the headers: with Nagle on, it would wait for the
        # client's delayed ACK (40 ms), which measures this server, not the webhook.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _engine(workdir: Path, enabled: bool) -> Graveler:
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / f"kv-{enabled}.db"))))
    options = GravelerOptions(actions=ActionsOptions(enabled=enabled))
    return open_graveler(store, LocalAdapter(workdir / f"data-{enabled}"), options)


def _commit_once(g: Graveler, repo: str, n: int) -> float:
    entry = pb.Entry(physical_address=f"data/{n:012d}", size=10, etag=f"{n:032x}")
    g.stage_entry(repo, "main", f"files/{n:08d}", entry, deadline=NO_DEADLINE)
    started = time.perf_counter()
    g.commit(repo, "main", f"commit {n}", committer="bench")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=300, help="commits per repository")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, webhook_server() as port:
        workdir = Path(tmp)
        off, on = _engine(workdir, False), _engine(workdir, True)
        try:
            for g, name in ((off, "disabled"), (on, "no_files"), (on, "webhook")):
                g.lifecycle.create_repository(_repo(name), f"local://{_repo(name)}", "main", False)
            action = (
                "name: bench\non:\n  pre-commit:\nhooks:\n  - id: hook\n    type: webhook\n"
                f"    properties:\n      url: http://127.0.0.1:{port}/\n"
            ).encode()
            on.stage_entry(
                _repo("webhook"),
                "main",
                "_lakefs_actions/bench.yaml",
                _upload(on, _repo("webhook"), action),
                deadline=NO_DEADLINE,
            )
            on.commit(_repo("webhook"), "main", "add the action", committer="bench")
            samples: dict[str, list[float]] = {"disabled": [], "no_files": [], "webhook": []}
            for n in range(args.commits + 20):
                for g, name in ((off, "disabled"), (on, "no_files"), (on, "webhook")):
                    took = _commit_once(g, _repo(name), n)
                    if n >= 20:  # warm-up: caches, connections
                        samples[name].append(took)
            for name, values in samples.items():
                emit(f"actions_commit_{name}_median", statistics.median(values) * 1000, "ms", None)
                emit(f"actions_commit_{name}_p99", p99(values) * 1000, "ms", None)
            median = {name: statistics.median(values) for name, values in samples.items()}
            emit("actions_added_no_files_median", (median["no_files"] - median["disabled"]) * 1000, "ms", None)
            emit("actions_added_webhook_median", (median["webhook"] - median["no_files"]) * 1000, "ms", None)
            emit(
                "actions_added_webhook_p99",
                (p99(samples["webhook"]) - p99(samples["no_files"])) * 1000,
                "ms",
                None,
            )
        finally:
            off.close()
            on.close()


def _repo(kind: str) -> str:
    return "bench-" + kind.replace("_", "-")


def _upload(g: Graveler, repo: str, data: bytes) -> pb.Entry:
    """The action file's bytes in the repository's namespace, as the gateway would write them."""
    import io

    namespace = g.refs.repository(repo).namespace
    address = "data/bench-action"
    g.committed.adapter.put(namespace, address, io.BytesIO(data), len(data))
    return pb.Entry(physical_address=address, size=len(data), etag="bench-action")


if __name__ == "__main__":
    main()
